//! JSON values as CEL values, typed by their schema node (apiserver's
//! `UnstructuredToVal`): `integer` as `int`, `number` as `double`,
//! int-or-string as whichever it holds, objects as maps of their exposed
//! fields under their CEL (escaped) names, maps under their raw keys.
//! Strings are borrowed from the JSON, not copied.

use std::collections::HashMap;

use base64::Engine;
use cel::common::types::{
    CelBool, CelBytes, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use cel::common::value::Val;
use serde_json::{Number, Value};

use super::model::{Kind, Node};

/// `value` as a CEL value of `node`'s type.
pub(super) fn to_val<'a>(node: &Node, value: &'a Value) -> Box<dyn Val + 'a> {
    match (node.kind, value) {
        (_, Value::Null) => Box::new(CelNull),
        (Kind::Object, Value::Object(object)) => {
            let mut map: HashMap<CelMapKey<'a>, Box<dyn Val + 'a>> = HashMap::new();
            for (cel, json) in &node.fields {
                if let (Some(v), Some(child)) = (object.get(json), node.properties.get(json)) {
                    map.insert(CelMapKey::from(cel.clone()), to_val(child, v));
                }
            }
            Box::new(CelMap::from(map))
        }
        (Kind::Map, Value::Object(object)) => match node.additional.as_deref() {
            Some(child) => Box::new(CelMap::from(
                object
                    .iter()
                    .map(|(k, v)| (CelMapKey::from(k.as_str()), to_val(child, v)))
                    .collect::<HashMap<_, _>>(),
            )),
            None => untyped(value),
        },
        (Kind::List, Value::Array(items)) => match node.items.as_deref() {
            Some(child) => Box::new(CelList::from(
                items.iter().map(|v| to_val(child, v)).collect::<Vec<_>>(),
            )),
            None => untyped(value),
        },
        (Kind::Int, Value::Number(n)) => integer(n),
        (Kind::Double, Value::Number(n)) => Box::new(CelDouble::from(n.as_f64().unwrap_or(0.0))),
        (Kind::Bytes, Value::String(s)) => {
            match base64::engine::general_purpose::STANDARD.decode(s) {
                Ok(bytes) => Box::new(CelBytes::from(bytes)),
                Err(_) => Box::new(CelString::from(s.as_str())),
            }
        }
        _ => untyped(value),
    }
}

/// A JSON value without schema, or not of its schema's type: by its JSON
/// type (numbers written as integers as `int`, others as `double`, as Go
/// decodes unstructured JSON).
fn untyped(value: &Value) -> Box<dyn Val + '_> {
    match value {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Box::new(CelInt::from(i)),
            None => Box::new(CelDouble::from(n.as_f64().unwrap_or(0.0))),
        },
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(items) => {
            Box::new(CelList::from(items.iter().map(untyped).collect::<Vec<_>>()))
        }
        Value::Object(object) => Box::new(CelMap::from(
            object
                .iter()
                .map(|(k, v)| (CelMapKey::from(k.as_str()), untyped(v)))
                .collect::<HashMap<_, _>>(),
        )),
    }
}

/// The value of an `integer` node: `int` (a whole number written with a
/// fraction, `2.0`, included), `uint` past `int`'s range, else `double`.
fn integer(n: &Number) -> Box<dyn Val + 'static> {
    if let Some(i) = n.as_i64() {
        Box::new(CelInt::from(i))
    } else if let Some(u) = n.as_u64() {
        Box::new(CelUInt::from(u))
    } else {
        let f = n.as_f64().unwrap_or(0.0);
        if f.fract() == 0.0 && f.abs() < 9.0e15 {
            #[allow(clippy::cast_possible_truncation)]
            Box::new(CelInt::from(f as i64))
        } else {
            Box::new(CelDouble::from(f))
        }
    }
}
