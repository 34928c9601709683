//! A rule's `fieldPath` (apiextensions' `ValidFieldPath`): a JSON path of
//! `.field` and `['field or key']` steps from the rule's node, checked
//! against the schema and rendered as a field path (`.a['b.c']` on an object
//! is `a.b.c`, on a map `a[b.c]`).

use super::model::Node;

/// The field path `path` designates below `node`, or `None` if it is not a
/// valid path there.
pub(super) fn normalize(path: &str, node: &Node) -> Option<String> {
    let tokens = tokenize(path);
    let mut tokens = tokens.iter().map(String::as_str);
    let mut out = String::new();
    let mut node = node;
    while let Some(token) = tokens.next() {
        let name = match token {
            "[" => {
                let quoted = tokens.next()?;
                let inner = quoted.strip_prefix('\'')?.strip_suffix('\'')?;
                let name = unescape(inner)?;
                if tokens.next()? != "]" {
                    return None;
                }
                name
            }
            "." => tokens.next()?.to_string(),
            _ => return None,
        };
        if !node.properties.is_empty() {
            node = node.properties.get(&name)?;
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&name);
        } else if let Some(additional) = node.additional.as_deref() {
            node = additional;
            out.push_str(&format!("[{name}]"));
        } else {
            return None;
        }
    }
    Some(out)
}

/// Splits a path into `.`, `[`, `]`, quoted strings and names.
fn tokenize(path: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut chars = path.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c == '\'' {
            let mut quoted = String::from(chars.next().unwrap_or('\''));
            let mut escaped = false;
            for c in chars.by_ref() {
                quoted.push(c);
                if c == '\'' && !escaped {
                    break;
                }
                escaped = c == '\\';
            }
            tokens.push(quoted);
        } else if matches!(c, '.' | '[' | ']') {
            tokens.push(c.to_string());
            chars.next();
        } else {
            let mut name = String::new();
            while let Some(&c) = chars.peek() {
                if matches!(c, '.' | '[' | ']') {
                    break;
                }
                name.push(c);
                chars.next();
            }
            tokens.push(name);
        }
    }
    tokens
}

/// Unescapes a single-quoted string's contents.
fn unescape(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            '\'' => '\'',
            '\\' => '\\',
            _ => return None,
        });
    }
    Some(out)
}
