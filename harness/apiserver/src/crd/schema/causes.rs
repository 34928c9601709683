//! `field.Error`s as apimachinery renders them (`ErrorBody()`), built as
//! [`Cause`]s, and `field.Path`s as strings.

use serde_json::Value;

use super::gofmt::{go_float, go_json, go_quote};
use super::node::Num;
use crate::error::Cause;

/// A `field.Error`'s bad value, rendered as `ErrorBody()` does: strings
/// quoted, numbers and booleans bare, anything else as JSON.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Bad {
    /// A Go string.
    Str(String),
    /// A Go int64 (or int).
    Int(i64),
    /// A Go float64.
    Float(f64),
    /// A Go bool.
    Bool(bool),
    /// Anything else (maps, slices, nil), rendered as JSON.
    Json(Value),
}

impl Bad {
    /// The bad value a decoded JSON value is.
    pub(crate) fn of(v: &Value) -> Bad {
        match v {
            Value::String(s) => Bad::Str(s.clone()),
            Value::Bool(b) => Bad::Bool(*b),
            Value::Number(n) => match Num::of(n) {
                Num::Int(i) => Bad::Int(i),
                Num::Float(f) => Bad::Float(f),
            },
            other => Bad::Json(other.clone()),
        }
    }

    /// A string bad value.
    pub(crate) fn str(s: impl Into<String>) -> Bad {
        Bad::Str(s.into())
    }

    fn render(&self) -> String {
        match self {
            Bad::Str(s) => go_quote(s),
            Bad::Int(i) => i.to_string(),
            Bad::Float(f) => go_float(*f),
            Bad::Bool(b) => b.to_string(),
            Bad::Json(v) => go_json(v),
        }
    }
}

fn with_detail(body: String, detail: &str) -> String {
    if detail.is_empty() {
        body
    } else {
        format!("{body}: {detail}")
    }
}

fn cause(reason: &'static str, field: &str, message: String) -> Cause {
    Cause {
        reason,
        message,
        field: field.to_string(),
    }
}

/// `field.Required`.
pub(crate) fn required(field: &str, detail: &str) -> Cause {
    cause(
        "FieldValueRequired",
        field,
        with_detail("Required value".into(), detail),
    )
}

/// `field.Invalid`.
pub(crate) fn invalid(field: &str, bad: &Bad, detail: &str) -> Cause {
    let body = format!("Invalid value: {}", bad.render());
    cause("FieldValueInvalid", field, with_detail(body, detail))
}

/// `field.TypeInvalid`.
pub(crate) fn type_invalid(field: &str, bad: &Bad, detail: &str) -> Cause {
    let body = format!("Invalid value: {}", bad.render());
    cause("FieldValueTypeInvalid", field, with_detail(body, detail))
}

/// `field.NotSupported`.
pub(crate) fn not_supported(field: &str, bad: &Bad, supported: &[String]) -> Cause {
    let body = format!("Unsupported value: {}", bad.render());
    let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
    let detail = if quoted.is_empty() {
        String::new()
    } else {
        format!("supported values: {}", quoted.join(", "))
    };
    cause("FieldValueNotSupported", field, with_detail(body, &detail))
}

/// `field.Forbidden`.
pub(crate) fn forbidden(field: &str, detail: &str) -> Cause {
    cause(
        "FieldValueForbidden",
        field,
        with_detail("Forbidden".into(), detail),
    )
}

/// `field.TooLong` (the limit in "bytes", as apimachinery words it).
pub(crate) fn too_long(field: &str, max: i64) -> Cause {
    let detail = match max {
        m if m < 0 => "value is too long".to_string(),
        1 => "may not be more than 1 byte".to_string(),
        m => format!("may not be more than {m} bytes"),
    };
    cause("FieldValueTooLong", field, format!("Too long: {detail}"))
}

/// `field.TooMany`.
pub(crate) fn too_many(field: &str, actual: i64, max: i64) -> Cause {
    let detail = match max {
        m if m < 0 => "has too many items".to_string(),
        1 => "must have at most 1 item".to_string(),
        m => format!("must have at most {m} items"),
    };
    let body = if actual >= 0 {
        format!("Too many: {actual}")
    } else {
        "Too many".to_string()
    };
    cause("FieldValueTooMany", field, with_detail(body, &detail))
}

/// `field.Duplicate`.
pub(crate) fn duplicate(field: &str, bad: &Bad) -> Cause {
    let body = format!("Duplicate value: {}", bad.render());
    cause("FieldValueDuplicate", field, body)
}

/// `path.Child(name)`.
pub(crate) fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// `path.Key(key)`.
pub(crate) fn key(path: &str, key: &str) -> String {
    format!("{path}[{key}]")
}

/// `path.Index(i)`.
pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}
