//! kube-openapi's `SchemaValidator` (pkg/validation/validate) as
//! kube-apiserver runs it on custom resources: the same checks in the same
//! order, the same messages, the same de-duplication of messages and the
//! same "match count" that picks which failed `anyOf`/`oneOf` branch is
//! reported; with CRDValidationRatcheting (errors of a field whose value an
//! update left unchanged are dropped). [`to_causes`] is apiextensions'
//! `kubeOpenAPIResultToFieldErrors`.

use serde_json::{Map, Value};

use super::causes::{self, Bad, child};
use super::formats;
use super::gofmt::{go_json, go_num, go_quote, is_json_integer};
use super::node::{Additional, Num, Schema};
use crate::error::Cause;

/// How apiextensions turns a kube-openapi error into a `field.Error`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Code {
    /// `field.Required`.
    Required,
    /// `field.NotSupported` with these allowed values.
    Enum(Vec<Value>),
    /// `field.TooLong`.
    TooLong(i64),
    /// `field.TooMany`.
    TooMany {
        /// How many there are.
        actual: i64,
        /// How many are allowed.
        max: i64,
    },
    /// `field.TypeInvalid` with the message as detail.
    InvalidType,
    /// `field.Invalid` with the message as detail.
    Invalid,
    /// Not a kube-openapi `Validation` error (composite `anyOf`/`oneOf`
    /// errors, range errors): `field.Invalid` at the validated root.
    Other,
}

/// One kube-openapi error.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finding {
    code: Code,
    /// The error's `Name` (the path of the value from the validated root).
    name: String,
    value: Bad,
    message: String,
}

/// A kube-openapi `Result`: errors and the match count.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// The errors, first occurrence of each message only.
    pub findings: Vec<Finding>,
    matches: usize,
}

impl Outcome {
    fn error(f: Finding) -> Outcome {
        Outcome {
            findings: vec![f],
            matches: 0,
        }
    }

    fn matched() -> Outcome {
        Outcome {
            findings: Vec::new(),
            matches: 1,
        }
    }

    /// No errors.
    pub(crate) fn valid(&self) -> bool {
        self.findings.is_empty()
    }

    fn add(&mut self, f: Finding) {
        if !self.findings.iter().any(|x| x.message == f.message) {
            self.findings.push(f);
        }
    }

    fn merge(&mut self, other: Outcome) {
        for f in other.findings {
            self.add(f);
        }
        self.matches += other.matches;
    }
}

fn finding(code: Code, name: &str, value: Bad, message: String) -> Finding {
    Finding {
        code,
        name: name.to_string(),
        value,
        message,
    }
}

fn other(message: String) -> Finding {
    finding(Code::Other, "", Bad::str(""), message)
}

fn invalid_type(name: &str, ty: &str, value: &str) -> Finding {
    let message = format!("{name} in body must be of type {ty}: {}", go_quote(value));
    finding(Code::InvalidType, name, Bad::str(value), message)
}

/// Validates `data` at `path` against `s`. `old` is the value an update
/// replaces, correlated to `data`, when ratcheting.
pub(crate) fn validate(s: &Schema, data: &Value, old: Option<&Value>, path: &str) -> Outcome {
    let mut res = Outcome::default();
    if data.is_null() {
        res.merge(check_type(s, data, path));
        res.merge(check_enum(s, data, path));
        return res;
    }
    if !s.types.is_empty() || !s.checked_format.is_empty() {
        res.merge(check_type(s, data, path));
        res.matches += 1;
    }
    res.merge(check_junctors(s, data, path));
    res.matches += 1;
    match data {
        Value::String(text) => {
            res.merge(check_string(s, text, path));
            res.matches += 1;
            if formats::is_supported(&s.checked_format) {
                if !formats::is_valid(&s.checked_format, text) {
                    res.merge(Outcome::error(invalid_type(path, &s.checked_format, text)));
                }
                res.matches += 1;
            }
        }
        Value::Number(n) => {
            res.merge(check_number(s, Num::of(n), path));
            res.matches += 1;
        }
        Value::Array(items) => {
            res.merge(check_slice(s, items, old, path));
            res.matches += 1;
        }
        _ => {}
    }
    res.merge(check_enum(s, data, path));
    res.matches += 1;
    if let Value::Object(map) = data {
        res.merge(check_object(s, map, old, path));
        res.matches += 1;
    }
    res.matches += 1;
    res
}

/// Validates a value whose old counterpart is `old` (when correlated):
/// its errors are dropped when the update left it unchanged.
pub(crate) fn ratchet(s: &Schema, data: &Value, old: Option<&Value>, path: &str) -> Outcome {
    let mut res = validate(s, data, old, path);
    if let Some(old) = old
        && !res.valid()
        && unchanged(s, data, old)
    {
        res.findings.clear();
    }
    res
}

/// The JSON type and strfmt format kube-openapi infers for a value.
fn type_info(data: &Value) -> (&'static str, &'static str) {
    match data {
        Value::Null => ("null", ""),
        Value::Bool(_) => ("boolean", ""),
        Value::String(_) => ("string", ""),
        Value::Number(n) => match Num::of(n) {
            Num::Int(_) => ("integer", "int64"),
            Num::Float(_) => ("number", "float64"),
        },
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
    }
}

/// kube-openapi's typeValidator.
fn check_type(s: &Schema, data: &Value, path: &str) -> Outcome {
    let has = |t: &str| s.types.iter().any(|x| x == t);
    if data.is_null() {
        if !s.types.is_empty() && !has("null") && !s.nullable {
            return Outcome::error(invalid_type(path, &s.types.join(","), "null"));
        }
        return Outcome::matched();
    }
    let (ty, format) = type_info(data);
    let wanted = s.checked_format.as_str();
    let float_int = match data.as_number().map(Num::of) {
        Some(Num::Float(f)) => is_json_integer(f) && has("integer"),
        _ => false,
    };
    let int_float = ty == "integer" && has("number");
    let text_or_list = data.is_string() || data.is_array();
    let type_fits = has(ty) || float_int || int_float;
    // A format is checked against the value's Go type, except for strings
    // and lists (formatted strings are the format validator's business).
    let format_checked = !text_or_list && !wanted.is_empty();
    if format_checked && !(type_fits || format == wanted) {
        return Outcome::error(invalid_type(path, wanted, format));
    }
    let numeric = has("number") || has("integer");
    let formatted_text = text_or_list && !wanted.is_empty();
    if formatted_text && !numeric {
        return Outcome::matched();
    }
    if !type_fits {
        return Outcome::error(invalid_type(path, &s.types.join(","), ty));
    }
    Outcome::matched()
}

/// kube-openapi's schemaPropsValidator: allOf, anyOf, oneOf, not.
fn check_junctors(s: &Schema, data: &Value, path: &str) -> Outcome {
    let mut main = Outcome::matched();
    if s.any_of.is_empty() && s.one_of.is_empty() && s.all_of.is_empty() && s.not.is_none() {
        return main;
    }
    let quoted = go_quote(path);
    if !s.any_of.is_empty() {
        let mut best: Option<Outcome> = None;
        let mut success: Option<Outcome> = None;
        for sub in &s.any_of {
            let r = validate(sub, data, None, path);
            if r.valid() {
                best = None;
                success = Some(r);
                break;
            }
            if best.as_ref().is_none_or(|b| r.matches > b.matches) {
                best = Some(r);
            }
        }
        if success.is_none() {
            main.add(other(format!(
                "{quoted} must validate at least one schema (anyOf)"
            )));
        }
        if let Some(r) = best.or(success) {
            main.merge(r);
        }
    }
    if !s.one_of.is_empty() {
        let mut best: Option<Outcome> = None;
        let mut success: Option<Outcome> = None;
        let mut validated = 0;
        for sub in &s.one_of {
            let r = validate(sub, data, None, path);
            if r.valid() {
                validated += 1;
                best = None;
                success.get_or_insert(r);
            } else if validated == 0 && best.as_ref().is_none_or(|b| r.matches > b.matches) {
                best = Some(r);
            }
        }
        if validated != 1 {
            let found = match validated {
                0 => "Found none valid".to_string(),
                n => format!("Found {n} valid alternatives"),
            };
            main.add(other(format!(
                "{quoted} must validate one and only one schema (oneOf). {found}"
            )));
            if let Some(b) = best {
                main.merge(b);
            }
        } else if let Some(r) = success {
            main.merge(r);
        }
    }
    if !s.all_of.is_empty() {
        let mut validated = 0;
        for sub in &s.all_of {
            let r = validate(sub, data, None, path);
            if r.valid() {
                validated += 1;
            }
            main.merge(r);
        }
        if validated != s.all_of.len() {
            let none = if validated == 0 {
                ". None validated"
            } else {
                ""
            };
            main.add(other(format!(
                "{quoted} must validate all the schemas (allOf){none}"
            )));
        }
    }
    if let Some(not) = &s.not
        && validate(not, data, None, path).valid()
    {
        main.add(other(format!(
            "{quoted} must not validate the schema (not)"
        )));
    }
    main
}

/// kube-openapi's stringValidator: maxLength, minLength (in runes), pattern.
fn check_string(s: &Schema, text: &str, path: &str) -> Outcome {
    let len = text.chars().count() as i64;
    if let Some(max) = s.max_length
        && len > max
    {
        let message = format!("{path} in body should be at most {max} chars long");
        return Outcome::error(finding(Code::TooLong(max), path, Bad::str(text), message));
    }
    if let Some(min) = s.min_length
        && len < min
    {
        let message = format!("{path} in body should be at least {min} chars long");
        return Outcome::error(finding(Code::Invalid, path, Bad::str(text), message));
    }
    if let Some(p) = &s.pattern {
        let failed = match &p.compiled {
            Ok(re) => (!re.is_match(text)).then(|| p.source.clone()),
            Err(e) => Some(format!("{}, but pattern is invalid: {e}", p.source)),
        };
        if let Some(shown) = failed {
            let message = format!("{path} in body should match '{shown}'");
            return Outcome::error(finding(Code::Invalid, path, Bad::str(text), message));
        }
    }
    Outcome::default()
}

/// The numeric type and format kube-openapi's numberValidator enforces:
/// only for a single `integer` or `number` type.
fn number_type(s: &Schema) -> (&'static str, &str) {
    match s.types.as_slice() {
        [t] if t == "integer" => {
            let f = s.checked_format.as_str();
            ("integer", if f == "int32" || f == "int64" { f } else { "" })
        }
        [t] if t == "number" => {
            let f = s.checked_format.as_str();
            ("number", if f == "float" || f == "double" { f } else { "" })
        }
        _ => ("", ""),
    }
}

/// kube-openapi's `IsValueValidAgainstRange`: can `v` be held by the type
/// and format without loss? Returns the error's text if not.
fn out_of_range(v: Num, ty: &str, format: &str, what: &str, path: &str) -> Option<String> {
    let fits = match (ty, format, v) {
        ("integer", "int32", Num::Int(i)) => i32::try_from(i).is_ok(),
        ("integer", _, Num::Int(_)) => true,
        ("integer", f, Num::Float(x)) => {
            // Go parses the float's decimal digits as an int32 / int64.
            let (lo, past_hi) = if f == "int32" {
                (f64::from(i32::MIN), f64::from(i32::MAX) + 1.0)
            } else {
                (-9_223_372_036_854_775_808.0, 9_223_372_036_854_775_808.0)
            };
            x.is_finite() && x.fract() == 0.0 && x >= lo && x < past_hi
        }
        (_, "float", v) => (v.as_f64() as f32).is_finite(),
        _ => true,
    };
    if fits {
        return None;
    }
    Some(if format.is_empty() {
        format!("{what} value must be of type {ty} (default format) in {path}")
    } else {
        format!("{what} value must be of type {ty} with format {format} in {path}")
    })
}

fn bad_num(v: Num) -> Bad {
    match v {
        Num::Int(i) => Bad::Int(i),
        Num::Float(f) => Bad::Float(f),
    }
}

/// A bound check: the finding for value `v` against `limit`, if any.
type BoundCheck = fn(&str, Num, f64, bool) -> Option<Finding>;

/// kube-openapi's numberValidator: range of the format, multipleOf,
/// minimum, maximum (compared as integers when value and bound allow).
fn check_number(s: &Schema, v: Num, path: &str) -> Outcome {
    let (ty, format) = number_type(s);
    let mut res = Outcome::matched();
    if let Some(e) = out_of_range(v, ty, format, "Checked", path) {
        res.add(other(e));
    }
    let checks: [(Option<f64>, &str, BoundCheck, bool); 3] = [
        (s.multiple_of, "MultipleOf", multiple_of, false),
        (s.minimum, "Minimum boundary", minimum, s.exclusive_minimum),
        (s.maximum, "Maximum boundary", maximum, s.exclusive_maximum),
    ];
    for (limit, what, check, exclusive) in checks {
        let Some(limit) = limit else { continue };
        // A bound the type cannot hold is an error too; value and bound
        // are then compared as float64.
        let value = match out_of_range(Num::Float(limit), ty, format, what, path) {
            Some(e) => {
                res.add(other(e));
                Num::Float(v.as_f64())
            }
            None => v,
        };
        if let Some(f) = check(path, value, limit, exclusive) {
            res.add(f);
        }
    }
    res
}

fn multiple_of(path: &str, v: Num, factor: f64, _exclusive: bool) -> Option<Finding> {
    match v {
        Num::Int(i) => {
            let f = factor as i64;
            if f <= 0 {
                let message =
                    format!("factor MultipleOf declared for {path} must be positive: {f}");
                return Some(finding(Code::Invalid, path, Bad::Int(f), message));
            }
            (i % f != 0).then(|| {
                let message = format!("{path} in body should be a multiple of {f}");
                finding(Code::Invalid, path, Bad::Int(i), message)
            })
        }
        Num::Float(x) => {
            if factor <= 0.0 {
                let shown = go_num(Num::Float(factor));
                let message =
                    format!("factor MultipleOf declared for {path} must be positive: {shown}");
                return Some(finding(Code::Invalid, path, Bad::Float(factor), message));
            }
            let mult = if factor < 1.0 {
                1.0 / factor * x
            } else {
                x / factor
            };
            (!is_json_integer(mult)).then(|| {
                let shown = go_num(Num::Float(factor));
                let message = format!("{path} in body should be a multiple of {shown}");
                finding(Code::Invalid, path, Bad::Float(x), message)
            })
        }
    }
}

fn maximum(path: &str, v: Num, max: f64, exclusive: bool) -> Option<Finding> {
    let (over, shown) = match v {
        Num::Int(i) => {
            let m = max as i64;
            (if exclusive { i >= m } else { i > m }, m.to_string())
        }
        Num::Float(x) => (
            if exclusive { x >= max } else { x > max },
            go_num(Num::Float(max)),
        ),
    };
    let op = if exclusive {
        "less than"
    } else {
        "less than or equal to"
    };
    over.then(|| {
        let message = format!("{path} in body should be {op} {shown}");
        finding(Code::Invalid, path, bad_num(v), message)
    })
}

fn minimum(path: &str, v: Num, min: f64, exclusive: bool) -> Option<Finding> {
    let (under, shown) = match v {
        Num::Int(i) => {
            let m = min as i64;
            (if exclusive { i <= m } else { i < m }, m.to_string())
        }
        Num::Float(x) => (
            if exclusive { x <= min } else { x < min },
            go_num(Num::Float(min)),
        ),
    };
    let op = if exclusive {
        "greater than"
    } else {
        "greater than or equal to"
    };
    under.then(|| {
        let message = format!("{path} in body should be {op} {shown}");
        finding(Code::Invalid, path, bad_num(v), message)
    })
}

/// The old element a `x-kubernetes-list-type: map` list's element replaces
/// (same values of the map keys); other lists do not correlate.
fn correlated_item<'a>(s: &Schema, old: Option<&'a Value>, item: &Value) -> Option<&'a Value> {
    if s.list_type.as_deref() != Some("map") {
        return None;
    }
    let item = item.as_object()?;
    old?.as_array()?.iter().find(|o| {
        o.as_object()
            .is_some_and(|o| s.list_map_keys.iter().all(|k| o.get(k) == item.get(k)))
    })
}

/// kube-openapi's schemaSliceValidator.
fn check_slice(s: &Schema, items: &[Value], old: Option<&Value>, path: &str) -> Outcome {
    let mut res = Outcome::default();
    if let Some(item_schema) = &s.items {
        for (i, item) in items.iter().enumerate() {
            let old_item = correlated_item(s, old, item);
            res.merge(ratchet(
                item_schema,
                item,
                old_item,
                &format!("{path}[{i}]"),
            ));
        }
    }
    let size = items.len() as i64;
    if let Some(min) = s.min_items
        && size < min
    {
        let message = format!("{path} in body should have at least {min} items");
        res.add(finding(Code::Invalid, path, Bad::Int(size), message));
    }
    if let Some(max) = s.max_items
        && size > max
    {
        let message = format!("{path} in body should have at most {max} items");
        res.add(finding(
            Code::TooMany { actual: size, max },
            path,
            Bad::Int(size),
            message,
        ));
    }
    if s.unique_items
        && items
            .iter()
            .enumerate()
            .any(|(i, a)| items[..i].contains(a))
    {
        let message = format!("{path} in body shouldn't contain duplicates");
        res.add(finding(Code::Invalid, path, Bad::str(""), message));
    }
    res.matches += 1;
    res
}

/// Go's conversion of an int64 to a string: the rune it encodes.
fn go_rune_string(i: i64) -> String {
    u32::try_from(i)
        .ok()
        .and_then(char::from_u32)
        .unwrap_or('\u{FFFD}')
        .to_string()
}

/// Whether `data` equals enum value `e` as kube-openapi compares them: `e`'s
/// Go type, `data` converted to it where Go converts (`1.0` is `1`).
fn enum_matches(data: &Value, e: &Value) -> bool {
    match (data, e) {
        (Value::Number(a), Value::Number(b)) => match (Num::of(a), Num::of(b)) {
            (Num::Int(x), Num::Int(y)) => x == y,
            (Num::Int(x), Num::Float(y)) => x as f64 == y,
            (Num::Float(x), Num::Int(y)) => x as i64 == y,
            (Num::Float(x), Num::Float(y)) => x == y,
        },
        (Value::Number(a), Value::String(b)) => match Num::of(a) {
            Num::Int(x) => go_rune_string(x) == *b,
            Num::Float(_) => false,
        },
        (Value::String(_), Value::String(_))
        | (Value::Bool(_), Value::Bool(_))
        | (Value::Array(_), Value::Array(_))
        | (Value::Object(_), Value::Object(_)) => data == e,
        _ => false,
    }
}

/// Go's `%v` of an enum list (only the message's de-duplication sees it).
fn go_list(values: &[Value]) -> String {
    let items: Vec<String> = values
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            Value::Null => "<nil>".into(),
            Value::Number(n) => go_num(Num::of(n)),
            other => go_json(other),
        })
        .collect();
    format!("[{}]", items.join(" "))
}

/// kube-openapi's basicCommonValidator: enum.
fn check_enum(s: &Schema, data: &Value, path: &str) -> Outcome {
    if s.enumeration.is_empty() || s.enumeration.iter().any(|e| enum_matches(data, e)) {
        return Outcome::default();
    }
    let message = format!(
        "{path} in body should be one of {}",
        go_list(&s.enumeration)
    );
    let code = Code::Enum(s.enumeration.clone());
    Outcome::error(finding(code, path, Bad::of(data), message))
}

/// kube-openapi's objectValidator: property counts, additionalProperties,
/// properties, required.
fn check_object(s: &Schema, map: &Map<String, Value>, old: Option<&Value>, path: &str) -> Outcome {
    let mut res = Outcome::default();
    let size = map.len() as i64;
    if let Some(min) = s.min_properties
        && size < min
    {
        let message = format!("{path} in body should have at least {min} properties");
        res.add(finding(Code::Invalid, path, Bad::Int(size), message));
    }
    if let Some(max) = s.max_properties
        && size > max
    {
        let message = format!("{path} in body should have at most {max} properties");
        res.add(finding(
            Code::TooMany { actual: size, max },
            path,
            Bad::Int(size),
            message,
        ));
    }
    let old_map = old.and_then(Value::as_object);
    let additional = map.iter().filter(|(k, _)| !s.properties.contains_key(*k));
    match &s.additional_properties {
        Some(Additional::Allows(false)) => {
            for (k, _) in additional {
                let message = format!("{path}.{k} in body is a forbidden property");
                res.add(finding(Code::Invalid, path, Bad::str(k.as_str()), message));
            }
        }
        Some(Additional::Schema(a)) => {
            for (k, v) in additional {
                let old_v = old_map.and_then(|m| m.get(k));
                res.merge(ratchet(a, v, old_v, &format!("{path}.{k}")));
            }
        }
        _ => {}
    }
    for (name, prop) in &s.properties {
        let Some(v) = map.get(name) else { continue };
        // kind and apiVersion at the root are never ratcheted.
        let type_meta = path.is_empty() && (name == "kind" || name == "apiVersion");
        let old_v = old_map.and_then(|m| m.get(name)).filter(|_| !type_meta);
        res.merge(ratchet(prop, v, old_v, &child(path, name)));
    }
    for k in &s.required {
        if !map.contains_key(k) {
            let name = format!("{path}.{k}");
            let message = format!("{name} in body is required");
            res.add(finding(Code::Required, &name, Bad::str(""), message));
        }
    }
    res
}

/// apiserver's `CorrelatedObject.CachedDeepEqual`: is `new` the same as
/// `old`, comparing objects field by field (only fields with a schema
/// correlate) and map-lists element by element.
pub(crate) fn unchanged(s: &Schema, new: &Value, old: &Value) -> bool {
    match (new, old) {
        (Value::Array(n), Value::Array(o)) => {
            if n.len() != o.len() {
                return false;
            }
            if s.list_type.as_deref() != Some("map") {
                return n == o;
            }
            let Some(items) = &s.items else { return n == o };
            n.iter().all(|item| {
                correlated_item(s, Some(old), item).is_some_and(|o| unchanged(items, item, o))
            })
        }
        (Value::Object(n), Value::Object(o)) => {
            n.len() == o.len()
                && n.iter().all(|(k, v)| match (o.get(k), s.field(k)) {
                    (Some(ov), Some(fs)) => unchanged(fs, v, ov),
                    _ => false,
                })
        }
        _ => new == old,
    }
}

/// apiextensions' `kubeOpenAPIResultToFieldErrors`: the causes for
/// findings of a validator rooted at `prefix` (`None` for the object's
/// root, whose composite errors land on the field `<nil>`).
pub(crate) fn to_causes(findings: &[Finding], prefix: Option<&str>) -> Vec<Cause> {
    let root = prefix.unwrap_or("<nil>");
    findings
        .iter()
        .map(|f| {
            let name = f.name.strip_prefix('.').unwrap_or(&f.name);
            let field = if f.code == Code::Other || f.name.is_empty() || f.name == "." {
                root.to_string()
            } else {
                match prefix {
                    Some(p) => child(p, name),
                    None => name.to_string(),
                }
            };
            match &f.code {
                Code::Required => causes::required(&field, ""),
                Code::Enum(values) => {
                    let supported: Vec<String> = values
                        .iter()
                        .map(|v| v.as_str().map_or_else(|| go_json(v), str::to_string))
                        .collect();
                    causes::not_supported(&field, &f.value, &supported)
                }
                Code::TooLong(max) => causes::too_long(&field, *max),
                Code::TooMany { actual, max } => causes::too_many(&field, *actual, *max),
                Code::InvalidType => causes::type_invalid(&field, &f.value, &f.message),
                Code::Invalid | Code::Other => causes::invalid(&field, &f.value, &f.message),
            }
        })
        .collect()
}
