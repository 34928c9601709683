//! Go's renderings that kube-apiserver's messages are made of: `%v` of a
//! float64, `%q` of a string, `encoding/json` of a value; Go's notion of
//! a float that is "a JSON integer" (go-openapi swag); and Go RE2
//! patterns translated to the `regex` crate's syntax.

use std::fmt::Write;

use serde_json::Value;

use super::node::Num;

/// The shortest decimal digits of `f` (no sign, no leading zeros) and its
/// decimal exponent (`f = 0.d1d2... × 10^(exp+1)`).
fn shortest_digits(f: f64) -> (String, i32) {
    let s = format!("{:e}", f.abs());
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    (digits, exp.parse().unwrap_or(0))
}

/// `digits` with the decimal point after `point` digits (may be <= 0 or
/// past the end), as Go's `%f` with the shortest precision writes it.
fn fixed(digits: &str, point: i32) -> String {
    let len = digits.len() as i32;
    if point <= 0 {
        format!("0.{}{digits}", "0".repeat((-point) as usize))
    } else if point >= len {
        format!("{digits}{}", "0".repeat((point - len) as usize))
    } else {
        let (a, b) = digits.split_at(point as usize);
        format!("{a}.{b}")
    }
}

/// `digits` in Go's `%e` form with the shortest precision (`1.5e+06`).
fn exponent(digits: &str, exp: i32, min_exp_digits: usize) -> String {
    let (first, rest) = digits.split_at(1);
    let mut out = first.to_string();
    if !rest.is_empty() {
        out.push('.');
        out.push_str(rest);
    }
    let sign = if exp < 0 { '-' } else { '+' };
    let _ = write!(out, "e{sign}{:0width$}", exp.abs(), width = min_exp_digits);
    out
}

fn special(f: f64) -> Option<String> {
    if f.is_nan() {
        Some("NaN".into())
    } else if f.is_infinite() {
        Some(if f > 0.0 { "+Inf" } else { "-Inf" }.into())
    } else if f == 0.0 {
        Some(if f.is_sign_negative() { "-0" } else { "0" }.into())
    } else {
        None
    }
}

/// Go's `fmt.Sprintf("%v", f)` of a float64 (`%g` with the shortest
/// precision: `1e+06`, `0.5`, `123456`).
pub(crate) fn go_float(f: f64) -> String {
    if let Some(s) = special(f) {
        return s;
    }
    let (digits, exp) = shortest_digits(f);
    let body = if !(-4..6).contains(&exp) {
        exponent(&digits, exp, 2)
    } else {
        fixed(&digits, exp + 1)
    };
    if f < 0.0 { format!("-{body}") } else { body }
}

/// Go's `encoding/json` rendering of a float64 (`1`, `0.5`, `1e+21`, `1e-7`).
fn go_json_float(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let (digits, exp) = shortest_digits(f);
    let abs = f.abs();
    let body = if !(1e-6..1e21).contains(&abs) {
        exponent(&digits, exp, 1)
    } else {
        fixed(&digits, exp + 1)
    };
    if f < 0.0 { format!("-{body}") } else { body }
}

/// `%v` of a number as Go holds it (int64 or float64).
pub(crate) fn go_num(n: Num) -> String {
    match n {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => go_float(f),
    }
}

/// Go's `strconv.Quote` (what `%q` prints).
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x80 && c.is_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn go_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn go_json_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match Num::of(n) {
            Num::Int(i) => out.push_str(&i.to_string()),
            Num::Float(f) => out.push_str(&go_json_float(f)),
        },
        Value::String(s) => go_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json_into(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // serde_json's map is sorted by key, as Go's encoder sorts maps.
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json_string(k, out);
                out.push(':');
                go_json_into(item, out);
            }
            out.push('}');
        }
    }
}

/// Go's `json.Marshal` of a decoded JSON value (sorted keys, HTML-safe
/// escapes, floats as Go writes them).
pub(crate) fn go_json(v: &Value) -> String {
    let mut out = String::new();
    go_json_into(v, &mut out);
    out
}

/// go-openapi's `swag.IsFloat64AJSONInteger`: finite, within ±2^53, and
/// integral up to a relative error of 1e-9.
pub(crate) fn is_json_integer(f: f64) -> bool {
    const LIMIT: f64 = 9_007_199_254_740_992.0; // 1 << 53
    if !f.is_finite() || !(-LIMIT..=LIMIT).contains(&f) {
        return false;
    }
    if f == f.trunc() {
        return true;
    }
    if f < 0.0 {
        // Go's uint64(f) of a negative float is far from f.
        return false;
    }
    let g = f.trunc();
    let diff = (f - g).abs();
    if g == 0.0 || diff < f64::from_bits(1) {
        return diff < 1e-9 * f64::from_bits(1);
    }
    diff / (f + g).min(f64::MAX) < 1e-9
}

/// The ASCII classes Go's RE2 gives `\d`, `\s`, `\w` (the `regex` crate's
/// are Unicode-wide), as the inside of a bracket class.
fn perl_class(c: char) -> Option<&'static str> {
    match c {
        'd' => Some("0-9"),
        's' => Some("\\t\\n\\x0C\\r "),
        'w' => Some("0-9A-Za-z_"),
        _ => None,
    }
}

/// Translates a Go RE2 pattern to the `regex` crate's syntax: Perl classes
/// and word boundaries are ASCII in Go, `\Q...\E` quotes literally, and
/// `&`, `~` are plain characters inside Go's brackets (set operators in
/// the `regex` crate).
pub(crate) fn go_regex(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e) if perl_class(e).is_some() => {
                    let class = perl_class(e).unwrap_or_default();
                    if in_class {
                        out.push_str(class);
                    } else {
                        let _ = write!(out, "[{class}]");
                    }
                }
                Some(e) if !in_class && perl_class(e.to_ascii_lowercase()).is_some() => {
                    let class = perl_class(e.to_ascii_lowercase()).unwrap_or_default();
                    let _ = write!(out, "[^{class}]");
                }
                Some(e @ ('b' | 'B')) if !in_class => {
                    let _ = write!(out, "(?-u:\\{e})");
                }
                Some('Q') if !in_class => {
                    let mut literal = String::new();
                    while let Some(q) = chars.next() {
                        if q == '\\' && chars.peek() == Some(&'E') {
                            chars.next();
                            break;
                        }
                        literal.push(q);
                    }
                    out.push_str(&regex::escape(&literal));
                }
                Some(e) => {
                    out.push('\\');
                    out.push(e);
                }
                None => out.push('\\'),
            },
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push_str("\\]");
                    chars.next();
                }
            }
            '[' if chars.peek() == Some(&':') => {
                // A POSIX class inside brackets: `[[:alpha:]]`.
                out.push('[');
                for p in chars.by_ref() {
                    out.push(p);
                    if p == ']' {
                        break;
                    }
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '&' | '~' | '[' if in_class => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// Go's `regexp.Compile` error text, approximated from the `regex` crate's
/// (`error parsing regexp: unclosed group: `(a``).
pub(crate) fn regex_error(pattern: &str, err: &regex::Error) -> String {
    let text = err.to_string();
    let detail = text
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .unwrap_or(text.lines().last().unwrap_or_default())
        .trim()
        .to_string();
    format!("error parsing regexp: {detail}: `{pattern}`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_float_matches_fmt_v() {
        // Go: fmt.Sprint(1e6, 0.5, 123456.0, 1e-5, 0.0001, -2.5, 3.0)
        assert_eq!(go_float(1e6), "1e+06");
        assert_eq!(go_float(0.5), "0.5");
        assert_eq!(go_float(123456.0), "123456");
        assert_eq!(go_float(1e-5), "1e-05");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(-2.5), "-2.5");
        assert_eq!(go_float(3.0), "3");
        assert_eq!(go_float(1.23456789e8), "1.23456789e+08");
    }

    #[test]
    fn go_json_matches_encoding_json() {
        let v: Value = serde_json::from_str(r#"{"b":1.0,"a":"<x>","c":[1e21,1e-7,2.5]}"#).unwrap();
        assert_eq!(
            go_json(&v),
            r#"{"a":"\u003cx\u003e","b":1,"c":[1e+21,1e-7,2.5]}"#
        );
    }

    #[test]
    fn json_integer_tolerance() {
        assert!(is_json_integer(3.0));
        assert!(is_json_integer(1.000_000_000_01));
        assert!(!is_json_integer(1.5));
        assert!(!is_json_integer(-1.5));
        assert!(!is_json_integer(1e300));
    }

    #[test]
    fn go_regex_is_ascii_and_literal_where_go_is() {
        let re = regex::Regex::new(&go_regex(r"^\d+$")).unwrap();
        assert!(re.is_match("123"));
        assert!(!re.is_match("١٢٣")); // Arabic-Indic digits: not \d in Go
        let re = regex::Regex::new(&go_regex(r"^[a&&b]+$")).unwrap();
        assert!(re.is_match("a&b"));
        let re = regex::Regex::new(&go_regex(r"^\Q1.5\E$")).unwrap();
        assert!(re.is_match("1.5") && !re.is_match("105"));
        let re = regex::Regex::new(&go_regex(r"^[[:alpha:]\s]+\bx$")).unwrap();
        assert!(re.is_match("ab x"));
    }
}
