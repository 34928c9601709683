//! Kubernetes resource quantities (`100m`, `1.5Gi`, `2e3`), parsed the way
//! `resource.Quantity` does, into integers: milli-units for CPU, units for
//! everything else (rounded up, as `Quantity.Value()` does).

/// Parses a quantity into thousandths of a unit (`"100m"` → 100, `"2"` → 2000).
/// `None` for a malformed quantity.
pub fn parse_milli(s: &str) -> Option<i64> {
    scaled(s, 3)
}

/// Parses a quantity into whole units, rounding up (`"1Ki"` → 1024, `"500m"` → 1).
pub fn parse_value(s: &str) -> Option<i64> {
    scaled(s, 0)
}

/// Quantity × 10^exp10, rounded up to an integer.
fn scaled(s: &str, exp10: i32) -> Option<i64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let (negative, s) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    if number.is_empty() || number.matches('.').count() > 1 {
        return None;
    }
    // Multiplier as (binary shift, decimal exponent).
    let (shift, mut exp): (u32, i32) = match suffix {
        "" => (0, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        e if e.starts_with(['e', 'E']) => (0, e[1..].parse().ok()?),
        _ => return None,
    };
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    exp += exp10 - i32::try_from(frac_part.len()).ok()?;
    // value = digits × 2^shift × 10^exp, in i128 to keep precision.
    let mut value: i128 = 0;
    for b in int_part.bytes().chain(frac_part.bytes()) {
        value = value.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
    }
    value = value.checked_mul(1i128.checked_shl(shift)?)?;
    if exp >= 0 {
        value = value.checked_mul(10i128.checked_pow(u32::try_from(exp).ok()?)?)?;
    } else {
        let div = 10i128.checked_pow(u32::try_from(-exp).ok()?)?;
        value = (value + div - 1) / div;
    }
    let value = i64::try_from(value).ok()?;
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_suffixes_kubernetes_accepts() {
        assert_eq!(parse_milli("100m"), Some(100));
        assert_eq!(parse_milli("2"), Some(2000));
        assert_eq!(parse_milli("1.5"), Some(1500));
        assert_eq!(parse_milli("0.0001"), Some(1));
        assert_eq!(parse_value("1Ki"), Some(1024));
        assert_eq!(parse_value("1.5Gi"), Some(1_610_612_736));
        assert_eq!(parse_value("2e3"), Some(2000));
        assert_eq!(parse_value("1M"), Some(1_000_000));
        assert_eq!(parse_value("500m"), Some(1));
        assert_eq!(parse_value("-1"), Some(-1));
        assert_eq!(parse_value("12x"), None);
        assert_eq!(parse_value(""), None);
        assert_eq!(parse_value("1.2.3"), None);
        assert_eq!(parse_milli(".5"), Some(500));
        assert_eq!(parse_value("."), None);
        assert_eq!(
            parse_value("99999999999999999999999999999999999999999"),
            None
        );
    }
}
