//! Embedded resources (`x-kubernetes-embedded-resource`) as apiextensions'
//! pkg/apiserver/schema/objectmeta validates them: `apiVersion` and `kind`
//! required and well-formed. (Their `metadata` is not checked here.)

use serde_json::Value;

use super::causes::{self, Bad, child, index, key};
use super::node::Schema;
use crate::error::Cause;

const DNS1035_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";

/// Checks every embedded resource in `x` (at `path`, `""` for the root).
pub(crate) fn validate(path: &str, x: &Value, s: &Schema) -> Vec<Cause> {
    let mut errs = Vec::new();
    match x {
        Value::Object(map) => {
            if s.embedded_resource {
                errs.extend(resource(path, map));
            }
            for (k, v) in map {
                if let Some(prop) = s.properties.get(k) {
                    errs.extend(validate(&child(path, k), v, prop));
                } else if let Some(a) = s.additional_properties.as_ref().and_then(|a| a.schema()) {
                    errs.extend(validate(&key(path, k), v, a));
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &s.items {
                for (i, v) in items.iter().enumerate() {
                    errs.extend(validate(&index(path, i), v, item_schema));
                }
            }
        }
        _ => {}
    }
    errs
}

/// apimachinery's `IsDNS1035Label` messages for `s`.
fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let b = s.as_bytes();
    let ok = b.first().is_some_and(u8::is_ascii_lowercase)
        && b.last()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
    if !ok {
        errs.push(format!(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '{DNS1035_FMT}')"
        ));
    }
    errs
}

fn resource(path: &str, map: &serde_json::Map<String, Value>) -> Vec<Cause> {
    let mut errs = Vec::new();
    let api_version = child(path, "apiVersion");
    let kind = child(path, "kind");
    if !map.contains_key("apiVersion") {
        errs.push(causes::required(&api_version, ""));
    }
    if !map.contains_key("kind") {
        errs.push(causes::required(&kind, ""));
    }
    for (k, v) in map {
        match (k.as_str(), v.as_str()) {
            ("apiVersion" | "kind", None) => {
                errs.push(causes::invalid(
                    &child(path, k),
                    &Bad::of(v),
                    "must be a string",
                ));
            }
            ("apiVersion" | "kind", Some("")) => {
                errs.push(causes::invalid(
                    &child(path, k),
                    &Bad::str(""),
                    "must not be empty",
                ));
            }
            ("apiVersion", Some(gv)) if gv != "/" && gv.matches('/').count() > 1 => {
                let detail = format!("unexpected GroupVersion string: {gv}");
                errs.push(causes::invalid(&api_version, &Bad::str(gv), &detail));
            }
            ("kind", Some(name)) => {
                let problems = dns1035_label(&name.to_lowercase());
                if !problems.is_empty() {
                    let detail = format!(
                        "may have mixed case, but should otherwise match: {}",
                        problems.join(",")
                    );
                    errs.push(causes::invalid(&kind, &Bad::str(name), &detail));
                }
            }
            _ => {}
        }
    }
    errs
}
