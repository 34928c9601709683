//! The string formats kube-apiserver checks in CRD schemas: apiextensions'
//! supported formats (pkg/apiserver/validation/formats.go, as of 1.36) with
//! kube-openapi's strfmt checks for each. Names are normalized as strfmt
//! does (dashes removed: `date-time` is `datetime`).

use std::net::Ipv6Addr;
use std::sync::LazyLock;

use regex::Regex;

/// The formats CRD schemas keep (others are dropped, not checked).
const SUPPORTED: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "k8sshortname",
    "k8slongname",
];

/// strfmt's name normalization: dashes removed.
pub(crate) fn normalize(format: &str) -> String {
    format.replace('-', "")
}

/// Whether CRD schemas support string format `format`.
pub(crate) fn is_supported(format: &str) -> bool {
    let name = || format.chars().filter(|c| *c != '-');
    !format.is_empty() && SUPPORTED.iter().any(|s| s.chars().eq(name()))
}

/// A constant pattern (all of them compile; `None` would match nothing).
fn re(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

fn matches(re: &Option<Regex>, s: &str) -> bool {
    re.as_ref().is_some_and(|r| r.is_match(s))
}

static HOSTNAME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
    )
});
static UUID: LazyLock<[Option<Regex>; 4]> = LazyLock::new(|| {
    [
        re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"),
        re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$"),
        re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"),
        re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"),
    ]
});
static CREDIT_CARD: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35[0-9]{3})[0-9]{11})$",
    )
});
static ISBN10: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"^(?:[0-9]{9}X|[0-9]{10})$"));
static ISBN13: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"^(?:[0-9]{13})$"));
static HEX_COLOR: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGB_COLOR: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let n = r"[\t\n\x0C\r ]*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])[\t\n\x0C\r ]*";
    re(&format!(r"^rgb\({n},{n},{n}\)$"))
});
static BASE64: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
});
static SSN: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"^[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}$"));
static DATE: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})$"));
static TIME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
});
static SHORT_NAME: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"));
static LONG_NAME: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"));
static DURATION_PART: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"(([0-9]+)\s*([A-Za-zµ]+))"));

/// Whether `s` is a valid `format` (a supported format name).
pub(crate) fn is_valid(format: &str, s: &str) -> bool {
    match normalize(format).as_str() {
        "bsonobjectid" => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => is_request_uri(s),
        "email" => is_email(s),
        "hostname" => {
            matches(&HOSTNAME, s) && s.len() <= 255 && s.split('.').all(|p| p.len() <= 63)
        }
        "ipv4" => parse_ip(s).is_some() && s.contains('.'),
        "ipv6" => s.parse::<Ipv6Addr>().is_ok() && s.contains(':'),
        "cidr" => is_cidr(s),
        "mac" => is_mac(s),
        "uuid" => matches(&UUID[0], s),
        "uuid3" => matches(&UUID[1], s),
        "uuid4" => matches(&UUID[2], s),
        "uuid5" => matches(&UUID[3], s),
        "isbn" => is_isbn(s, 10) || is_isbn(s, 13),
        "isbn10" => is_isbn(s, 10),
        "isbn13" => is_isbn(s, 13),
        "creditcard" => is_credit_card(s),
        "ssn" => s.len() == 11 && matches(&SSN, s),
        "hexcolor" => matches(&HEX_COLOR, s),
        "rgbcolor" => matches(&RGB_COLOR, s),
        "byte" => matches(&BASE64, s),
        "password" => true,
        "date" => is_date(s),
        "duration" => is_duration(s),
        "datetime" => is_date_time(s),
        "k8sshortname" => s.len() <= 63 && matches(&SHORT_NAME, s),
        "k8slongname" => s.len() <= 253 && matches(&LONG_NAME, s),
        _ => true,
    }
}

/// Go's `time.Parse("2006-01-02", s)`: four-digit year, a real calendar day.
fn is_date(s: &str) -> bool {
    let Some(c) = DATE.as_ref().and_then(|r| r.captures(s)) else {
        return false;
    };
    let num = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<u32>().ok());
    let (Some(year), Some(month), Some(day)) = (num(1), num(2), num(3)) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// strfmt's `IsDateTime`: a date, a `t`, then `hh:mm:ss[.frac](z|±hh:mm)`
/// (split on every `t`, the part after the first checked).
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    let Some(c) = TIME.as_ref().and_then(|r| r.captures(parts[1])) else {
        return false;
    };
    let field = |i: usize| c.get(i).map(|m| m.as_str()).unwrap_or_default();
    field(1) <= "23" && field(2) <= "59" && field(3) <= "59"
}

/// Go's `time.ParseDuration` grammar: `[-+]?([0-9]*(\.[0-9]*)?unit)+`, or `0`.
fn is_go_duration(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    if s.is_empty() {
        return false;
    }
    let mut rest = s;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let mut digits = int_len;
        let mut after = &rest[int_len..];
        if let Some(frac) = after.strip_prefix('.') {
            let frac_len = frac.bytes().take_while(u8::is_ascii_digit).count();
            digits += frac_len;
            after = &frac[frac_len..];
        }
        if digits == 0 {
            return false;
        }
        let unit_len = after
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(after.len(), |(i, _)| i);
        let unit = &after[..unit_len];
        if !["ns", "us", "µs", "μs", "ms", "s", "m", "h"].contains(&unit) {
            return false;
        }
        rest = &after[unit_len..];
    }
    true
}

/// strfmt's `ParseDuration`: Go's durations, or any `<n> <unit>` inside
/// the text with a unit strfmt knows (`3 days`, `5 mins`).
fn is_duration(s: &str) -> bool {
    if is_go_duration(s) {
        return true;
    }
    const UNITS: &[&[&str]] = &[
        &["ns", "nano"],
        &["us", "µs", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    let mut ok = false;
    for c in DURATION_PART.iter().flat_map(|r| r.captures_iter(s)) {
        let digits = c.get(2).map(|m| m.as_str()).unwrap_or_default();
        if digits.parse::<i64>().is_err() {
            return false;
        }
        let unit = c
            .get(3)
            .map(|m| m.as_str().to_lowercase())
            .unwrap_or_default();
        for variants in UNITS {
            let last = variants.len() - 1;
            for (i, v) in variants.iter().enumerate() {
                if (i == last && unit.starts_with(v)) || unit == *v {
                    ok = true;
                }
            }
        }
    }
    ok
}

/// Go's sloppy IP parsing (k8s.io/utils/net: leading zeros allowed in IPv4).
fn parse_ip(s: &str) -> Option<()> {
    let parts: Vec<&str> = s.split('.').collect();
    let v4 = parts.len() == 4
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u32>().is_ok_and(|n| n <= 255)
        });
    if v4 || s.parse::<Ipv6Addr>().is_ok() {
        Some(())
    } else {
        None
    }
}

/// Go's `ParseCIDRSloppy`: `ip/prefix`, the prefix within the address size.
fn is_cidr(s: &str) -> bool {
    let Some((ip, mask)) = s.split_once('/') else {
        return false;
    };
    if parse_ip(ip).is_none() || mask.is_empty() || !mask.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let bits = if ip.contains(':') { 128 } else { 32 };
    mask.parse::<u32>().is_ok_and(|n| n <= bits)
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets as `aa:bb..`, `aa-bb..` or `aabb.ccdd..`.
fn is_mac(s: &str) -> bool {
    let b = s.as_bytes();
    let hex2 = |x: &[u8]| x.len() >= 2 && x[0].is_ascii_hexdigit() && x[1].is_ascii_hexdigit();
    if b.len() < 14 {
        return false;
    }
    if b[2] == b':' || b[2] == b'-' {
        let sep = b[2];
        if !(b.len() + 1).is_multiple_of(3) || ![6, 8, 20].contains(&((b.len() + 1) / 3)) {
            return false;
        }
        b.chunks(3)
            .all(|c| hex2(c) && (c.len() == 2 || c[2] == sep))
    } else if b[4] == b'.' {
        if !(b.len() + 1).is_multiple_of(5) || ![6, 8, 20].contains(&(2 * (b.len() + 1) / 5)) {
            return false;
        }
        b.chunks(5)
            .all(|c| hex2(c) && hex2(&c[2..]) && (c.len() == 4 || c[4] == b'.'))
    } else {
        false
    }
}

/// govalidator's `IsISBN` (spaces and dashes ignored, checksum checked).
fn is_isbn(s: &str, version: u32) -> bool {
    let d: String = s
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .collect();
    let b = d.as_bytes();
    let digit = |i: usize| u32::from(b[i] - b'0');
    if version == 10 {
        if !matches(&ISBN10, &d) {
            return false;
        }
        let mut sum: u32 = (0..9).map(|i| (i as u32 + 1) * digit(i)).sum();
        sum += if b[9] == b'X' { 100 } else { 10 * digit(9) };
        sum.is_multiple_of(11)
    } else {
        if !matches(&ISBN13, &d) {
            return false;
        }
        let sum: u32 = (0..12).map(|i| [1, 3][i % 2] * digit(i)).sum();
        digit(12) == (10 - sum % 10) % 10
    }
}

/// govalidator's `IsCreditCard`: digits only, a known issuer, Luhn's checksum.
fn is_credit_card(s: &str) -> bool {
    let digits: Vec<u32> = s.chars().filter_map(|c| c.to_digit(10)).collect();
    let text: String = digits.iter().map(|d| char::from(b'0' + *d as u8)).collect();
    if !matches(&CREDIT_CARD, &text) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, d)| match (i % 2 == 1, d * 2) {
            (true, x) if x >= 10 => x % 10 + 1,
            (true, x) => x,
            (false, _) => *d,
        })
        .sum();
    sum.is_multiple_of(10)
}

/// Go's `net/mail.ParseAddress`, approximately: `local@domain` or
/// `Name <local@domain>`.
fn is_email(s: &str) -> bool {
    let addr = match (s.rfind('<'), s.strip_suffix('>')) {
        (Some(open), Some(inner)) => &inner[open + 1..],
        _ => s.trim(),
    };
    let Some((local, domain)) = addr.rsplit_once('@') else {
        return false;
    };
    let atext = |c: char| c.is_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c);
    let dot_atom =
        |p: &str| !p.is_empty() && p.split('.').all(|a| !a.is_empty() && a.chars().all(atext));
    let quoted = local.len() >= 2 && local.starts_with('"') && local.ends_with('"');
    (dot_atom(local) || quoted) && (dot_atom(domain) || domain.starts_with('['))
}

/// Go's `url.ParseRequestURI`: an absolute URI or an absolute path, no
/// control characters, valid `%` escapes and port.
fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.chars().any(|c| (c as u32) < 0x20 || c as u32 == 0x7f) {
        return false;
    }
    if s == "*" {
        return true;
    }
    let escapes_ok = {
        let b = s.as_bytes();
        b.iter().enumerate().all(|(i, &c)| {
            c != b'%'
                || (i + 2 < b.len() && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit())
        })
    };
    if !escapes_ok {
        return false;
    }
    let rest = s.split_once('?').map_or(s, |(a, _)| a);
    let scheme_end = rest.find(':');
    let scheme = scheme_end.map(|i| &rest[..i]);
    let has_scheme = scheme.is_some_and(|sc| {
        sc.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && sc
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    });
    if scheme == Some("") {
        return false; // "missing protocol scheme"
    }
    if !has_scheme {
        return rest.starts_with('/');
    }
    let after = &rest[scheme_end.unwrap_or(0) + 1..];
    let Some(authority) = after.strip_prefix("//") else {
        return true; // opaque (`mailto:x`) or a rooted path
    };
    let host = authority.split('/').next().unwrap_or_default();
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let port = match host.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((_, "")) => "",
            Some((_, after)) => match after.strip_prefix(':') {
                Some(p) => p,
                None => return false,
            },
            None => return false,
        },
        None => host.rsplit_once(':').map_or("", |(_, p)| p),
    };
    port.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strfmt_checks() {
        // kube-openapi strfmt: the formats CRDs support, valid and invalid.
        let cases = [
            ("date-time", "2024-01-02T03:04:05Z", true),
            ("date-time", "2024-01-02T03:04:05.123+01:00", true),
            ("date-time", "2024-01-02 03:04:05", false),
            ("date-time", "2024-02-30T03:04:05Z", false),
            ("date", "2024-02-29", true),
            ("date", "2023-02-29", false),
            ("byte", "aGVsbG8=", true),
            ("byte", "hello!", false),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", true),
            ("uuid", "not-a-uuid", false),
            ("duration", "1h30m", true),
            ("duration", "3 days", true),
            ("duration", "soon", false),
            ("ipv4", "10.0.0.1", true),
            ("ipv4", "10.0.0.256", false),
            ("ipv6", "::1", true),
            ("cidr", "10.0.0.0/8", true),
            ("cidr", "10.0.0.0/33", false),
            ("mac", "00:00:5e:00:53:01", true),
            ("mac", "00:00:5e:00:53", false),
            ("hostname", "example.com", true),
            ("hostname", "-bad", false),
            ("email", "a@example.com", true),
            ("email", "nope", false),
            ("uri", "https://example.com/x", true),
            ("uri", "relative/path", false),
            ("isbn10", "0321751043", true),
            ("isbn13", "978-0321751041", true),
            ("creditcard", "4111 1111 1111 1111", true),
            ("creditcard", "4111 1111 1111 1112", false),
            ("ssn", "123-45-6789", true),
            ("hexcolor", "#fff", true),
            ("rgbcolor", "rgb(255, 0, 10)", true),
            ("k8s-short-name", "my-name", true),
            ("k8s-short-name", "My-Name", false),
            ("k8s-long-name", "a.b-c.d", true),
            ("bsonobjectid", "507f1f77bcf86cd799439011", true),
        ];
        for (format, s, ok) in cases {
            assert!(is_supported(format), "{format}");
            assert_eq!(is_valid(format, s), ok, "{format} {s:?}");
        }
        assert!(!is_supported("int32"));
    }
}
