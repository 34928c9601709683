//! `x-kubernetes-list-type: set` and `map` uniqueness (apiextensions'
//! pkg/apiserver/schema/listtype): the second appearance of an element
//! (sets) or of a key (maps) is a `Duplicate value`.

use serde_json::{Map, Value};

use super::causes::{self, Bad, child, index, key};
use super::gofmt::go_json;
use super::node::Schema;
use crate::error::Cause;

/// Checks the lists of object `obj` (at `path`) against `s`.
pub(crate) fn validate(path: &str, s: &Schema, obj: &Map<String, Value>) -> Vec<Cause> {
    let mut errs = Vec::new();
    if let Some(a) = s.additional_properties.as_ref().and_then(|a| a.schema()) {
        for (k, v) in obj {
            errs.extend(value(&key(path, k), a, v));
        }
    }
    for (k, v) in obj {
        if let Some(prop) = s.properties.get(k) {
            errs.extend(value(&child(path, k), prop, v));
        }
    }
    errs
}

fn value(path: &str, s: &Schema, v: &Value) -> Vec<Cause> {
    match v {
        Value::Array(items) => array(path, s, items),
        Value::Object(map) => validate(path, s, map),
        _ => Vec::new(),
    }
}

fn array(path: &str, s: &Schema, items: &[Value]) -> Vec<Cause> {
    let mut errs = Vec::new();
    match s.list_type.as_deref() {
        Some("set") => {
            for i in second_appearances(items) {
                errs.push(causes::duplicate(&index(path, i), &Bad::of(&items[i])));
            }
        }
        Some("map") => errs.extend(map_list(path, s, items)),
        _ => {}
    }
    if let Some(item_schema) = &s.items {
        for (i, item) in items.iter().enumerate() {
            errs.extend(value(&index(path, i), item_schema, item));
        }
    }
    errs
}

/// A value as a set compares it: scalars by Go value (an int64 `1` is not
/// a float64 `1.0`), objects and lists by their JSON.
fn identity(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_f64() => format!("f:{}", go_json(v)),
        _ => go_json(v),
    }
}

/// The indices where an element appears for the second time.
fn second_appearances(items: &[Value]) -> Vec<usize> {
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let count = seen.entry(identity(item)).or_insert(0);
        *count += 1;
        if *count == 2 {
            out.push(i);
        }
    }
    out
}

fn map_list(path: &str, s: &Schema, items: &[Value]) -> Vec<Cause> {
    for (i, item) in items.iter().enumerate() {
        if !item.is_null() && !item.is_object() {
            let detail = "must be an object for an array of list-type map";
            return vec![causes::invalid(&index(path, i), &Bad::of(item), detail)];
        }
    }
    // The key of each element: its map-key fields (a missing key field,
    // or a null element, is "unspecified").
    let keys: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut key = Map::new();
            if let Some(obj) = item.as_object() {
                for k in &s.list_map_keys {
                    if let Some(v) = obj.get(k) {
                        key.insert(k.clone(), v.clone());
                    }
                }
            }
            Value::Object(key)
        })
        .collect();
    let ids: Vec<Value> = if s.list_map_keys.len() == 1 {
        // One key: compared as a scalar (an int64 1 is not a float64 1.0).
        keys.iter()
            .map(|k| {
                k.as_object()
                    .and_then(|m| m.values().next())
                    .map_or(Value::Null, |v| Value::String(identity(v)))
            })
            .collect()
    } else {
        keys.clone()
    };
    second_appearances(&ids)
        .into_iter()
        .map(|i| causes::duplicate(&index(path, i), &Bad::Json(keys[i].clone())))
        .collect()
}
