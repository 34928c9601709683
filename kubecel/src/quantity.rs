//! Kubernetes resource quantities as apimachinery's `resource.Quantity`
//! parses and compares them, for the CEL quantity library: exact decimal
//! values, plus the `int64Amount` the parser's fast path keeps, which is what
//! decides `isInteger()`/`asInteger()` (`"1000m"` and `"1.0"` are not
//! integers there, `"1Ei"` neither).

use std::cmp::Ordering;

use cel::objects::Opaque;

/// `resource.ErrFormatWrong`.
pub const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
/// `resource.ErrNumeric`.
const NUMERIC: &str = "unable to parse numeric part of quantity";
/// `resource.ErrSuffix`.
const SUFFIX: &str = "unable to parse quantity's suffix";

/// A parsed quantity: `mantissa × 10^exp`, exactly.
#[derive(Debug, Clone)]
pub struct Quantity {
    mantissa: i128,
    exp: i32,
    /// Go's `int64Amount` (value, scale) when the value has one.
    int64: Option<(i64, i32)>,
}

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        crate::library::QUANTITY_TYPE_NAME
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        match (
            align(self, other),
            self.mantissa.signum(),
            other.mantissa.signum(),
        ) {
            (Some((a, b)), _, _) => a.cmp(&b),
            (None, sa, sb) if sa != sb => sa.cmp(&sb),
            // Too far apart to align exactly: the larger magnitude wins.
            (None, _, _) => self.approximate().total_cmp(&other.approximate()),
        }
    }
}

/// Both mantissas at the smaller exponent, if that does not overflow.
fn align(a: &Quantity, b: &Quantity) -> Option<(i128, i128)> {
    let scale = |q: &Quantity, exp: i32| -> Option<i128> {
        let shift = u32::try_from(q.exp.checked_sub(exp)?).ok()?;
        q.mantissa.checked_mul(10i128.checked_pow(shift)?)
    };
    let exp = a.exp.min(b.exp);
    Some((scale(a, exp)?, scale(b, exp)?))
}

impl Quantity {
    /// An integer quantity (`resource.NewQuantity(i, DecimalExponent)`).
    pub fn from_int(value: i64) -> Quantity {
        Quantity {
            mantissa: i128::from(value),
            exp: 0,
            int64: Some((value, 0)),
        }
    }

    /// `isInteger()`: whether `asInteger()` succeeds.
    pub fn as_integer(&self) -> Option<i64> {
        let (value, scale) = self.int64?;
        match scale {
            0 => Some(value),
            s if s < 0 => None,
            s => value.checked_mul(10i64.checked_pow(u32::try_from(s).ok()?)?),
        }
    }

    /// `asApproximateFloat()`.
    pub fn approximate(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let mantissa = self.mantissa as f64;
        mantissa * 10f64.powi(self.exp)
    }

    /// `sign()`.
    pub fn sign(&self) -> i64 {
        i64::try_from(self.mantissa.signum()).unwrap_or(0)
    }

    /// `add()`, or `sub()` with `negate`.
    pub fn add(&self, other: &Quantity, negate: bool) -> Option<Quantity> {
        let (a, b) = align(self, other)?;
        let b = if negate { b.checked_neg()? } else { b };
        let int64 = match (self.int64, other.int64) {
            (Some(x), Some((v, s))) => {
                let y = if negate {
                    (v.checked_neg()?, s)
                } else {
                    (v, s)
                };
                int64_add(x, y)
            }
            _ => None,
        };
        Some(Quantity {
            mantissa: a.checked_add(b)?,
            exp: self.exp.min(other.exp),
            int64,
        })
    }
}

/// Go's `int64Amount.Add`: at the smaller scale, `None` on overflow.
fn int64_add((av, as_): (i64, i32), (bv, bs): (i64, i32)) -> Option<(i64, i32)> {
    if bv == 0 {
        return Some((av, as_));
    }
    if av == 0 {
        return Some((bv, bs));
    }
    let up = |v: i64, by: i32| v.checked_mul(10i64.checked_pow(u32::try_from(by).ok()?)?);
    match as_.cmp(&bs) {
        Ordering::Equal => Some((av.checked_add(bv)?, as_)),
        Ordering::Greater => Some((up(av, as_ - bs)?.checked_add(bv)?, bs)),
        Ordering::Less => Some((av.checked_add(up(bv, bs - as_)?)?, as_)),
    }
}

/// The parts of a quantity string: sign, digits before and after the point,
/// suffix (apimachinery's `parseQuantityString`).
struct Parts<'a> {
    negative: bool,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

fn split(s: &str) -> Result<Parts<'_>, &'static str> {
    let (negative, unsigned) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let digits = |t: &str| t.bytes().take_while(u8::is_ascii_digit).count();
    let int_len = digits(unsigned);
    let num = unsigned[..int_len].trim_start_matches('0');
    let mut rest = &unsigned[int_len..];
    let mut denom = "";
    if let Some(after) = rest.strip_prefix('.') {
        let d = digits(after);
        denom = &after[..d];
        rest = &after[d..];
    }
    if int_len == 0 && denom.is_empty() {
        // No digit at all ("Mi", "+"): not a number.
        return Err(FORMAT_WRONG);
    }
    // Suffix: letters, then an optional sign and digits (an exponent).
    let letters = rest
        .bytes()
        .take_while(|b| b"eEinumkKMGTP".contains(b))
        .count();
    let mut tail = &rest[letters..];
    if let Some(t) = tail.strip_prefix(['-', '+']) {
        tail = t;
    }
    if tail.bytes().any(|b| !b.is_ascii_digit()) {
        return Err(FORMAT_WRONG);
    }
    Ok(Parts {
        negative,
        num: if num.is_empty() { "0" } else { num },
        denom,
        suffix: rest,
    })
}

/// What a suffix means: (base 10 or 2, exponent).
fn interpret(suffix: &str) -> Option<(u32, i32)> {
    let decimal = |e| Some((10, e));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => Some((2, 10)),
        "Mi" => Some((2, 20)),
        "Gi" => Some((2, 30)),
        "Ti" => Some((2, 40)),
        "Pi" => Some((2, 50)),
        "Ei" => Some((2, 60)),
        s if s.starts_with(['e', 'E']) && s.len() > 1 => decimal(s[1..].parse().ok()?),
        _ => None,
    }
}

/// `resource.ParseQuantity`.
pub fn parse(s: &str) -> Result<Quantity, &'static str> {
    if s.is_empty() {
        return Err(FORMAT_WRONG);
    }
    let parts = split(s)?;
    let (base, exponent) = interpret(parts.suffix).ok_or(SUFFIX)?;
    let digits: i128 = format!("{}{}", parts.num, parts.denom)
        .parse()
        .map_err(|_| NUMERIC)?;
    let denom_len = i32::try_from(parts.denom.len()).map_err(|_| NUMERIC)?;
    let (mantissa, exp) = if base == 2 {
        let factor = 1i128 << exponent;
        (digits.checked_mul(factor).ok_or(NUMERIC)?, -denom_len)
    } else {
        (digits, exponent.saturating_sub(denom_len))
    };
    let mantissa = if parts.negative { -mantissa } else { mantissa };
    let mut quantity = Quantity {
        mantissa,
        exp,
        int64: fast_path(&parts, base, exponent),
    };
    if quantity.int64.is_none() && quantity.exp < -9 {
        round_up_to_nano(&mut quantity);
    }
    Ok(quantity)
}

/// The `int64Amount` of ParseQuantity's fast path, if it takes it.
fn fast_path(parts: &Parts<'_>, base: u32, exponent: i32) -> Option<(i64, i32)> {
    let len = |t: &str| i32::try_from(t.len()).unwrap_or(i32::MAX);
    let (precision, scale, factor) = if base == 2 {
        if !parts.denom.is_empty() {
            return None;
        }
        #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
        let bits = (exponent as f32 * 3.0 / 10.0) as i32;
        (
            14i32.saturating_sub(len(parts.num)).saturating_sub(bits),
            0,
            1i64 << exponent,
        )
    } else {
        (
            18i32
                .saturating_sub(len(parts.num))
                .saturating_sub(len(parts.denom)),
            exponent.saturating_sub(len(parts.denom)),
            1,
        )
    };
    if precision < 0 || scale < -9 {
        return None;
    }
    let value: i64 = format!("{}{}", parts.num, parts.denom).parse().ok()?;
    let value = value.checked_mul(factor)?;
    Some((if parts.negative { -value } else { value }, scale))
}

/// The slow path rounds a value finer than nano units away from zero.
fn round_up_to_nano(q: &mut Quantity) {
    let Ok(shift) = u32::try_from((-9i32).saturating_sub(q.exp)) else {
        return;
    };
    let Some(div) = 10i128.checked_pow(shift) else {
        q.mantissa = q.mantissa.signum();
        q.exp = -9;
        return;
    };
    let magnitude = q.mantissa.abs();
    let rounded = magnitude / div + i128::from(magnitude % div != 0);
    q.mantissa = rounded * q.mantissa.signum();
    q.exp = -9;
}
