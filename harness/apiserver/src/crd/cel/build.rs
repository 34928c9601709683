//! Builds the [`Node`] tree of a schema and compiles its rules, collecting
//! the causes kube-apiserver reports for bad rules when a CRD is written.

use std::collections::BTreeMap;

use serde_json::Value;

use super::model::{Facts, ListType, Node, assemble};
use super::rule::{Context, compile_all};
use crate::error::Cause;

/// Where a schema node is, and what applies to it from above.
struct At<'a> {
    /// Its schema path.
    path: &'a str,
    /// The root of a resource (the schema's root, or an embedded resource).
    resource_root: bool,
    /// The highest list above it whose items don't correlate, if any.
    uncorrelatable: Option<&'a str>,
}

/// The node tree of `schema` at schema path `path`, its rules compiled.
pub(super) fn build(schema: &Value, path: &str, causes: &mut Vec<Cause>) -> Node {
    let at = At {
        path,
        resource_root: true,
        uncorrelatable: None,
    };
    build_node(schema, &at, causes).0
}

fn embedded(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// The node of `schema`, and whether rules at or below it failed their
/// static checks (rules above are then not compiled, as upstream skips CEL
/// compilation under schema errors).
fn build_node(schema: &Value, at: &At<'_>, causes: &mut Vec<Cause>) -> (Node, bool) {
    let facts = Facts::of(schema);
    let mut errors_below = false;
    let mut child =
        |sub: &Value, path: String, uncorrelatable: Option<&str>, causes: &mut Vec<Cause>| {
            let at = At {
                path: &path,
                resource_root: embedded(sub),
                uncorrelatable,
            };
            let (node, errors) = build_node(sub, &at, causes);
            errors_below |= errors;
            node
        };
    let mut properties = BTreeMap::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            let path = format!("{}.properties[{name}]", at.path);
            properties.insert(name.clone(), child(sub, path, at.uncorrelatable, causes));
        }
    }
    let additional = schema
        .get("additionalProperties")
        .filter(|sub| sub.is_object())
        .map(|sub| {
            child(
                sub,
                format!("{}.additionalProperties", at.path),
                at.uncorrelatable,
                causes,
            )
        });
    // Items correlate with old items only in lists of type map.
    let items_uncorrelatable = match facts.list_type {
        ListType::Map(_) => at.uncorrelatable,
        _ => Some(at.uncorrelatable.unwrap_or(at.path)),
    };
    let items = schema
        .get("items")
        .filter(|sub| sub.is_object())
        .map(|sub| {
            child(
                sub,
                format!("{}.items", at.path),
                items_uncorrelatable,
                causes,
            )
        });
    let mut node = assemble(facts, properties, additional, items, at.resource_root);
    let ctx = Context {
        path: at.path,
        uncorrelatable: at.uncorrelatable,
        schema_errors: errors_below,
    };
    let compiled = compile_all(schema, &node, &ctx, causes);
    node.rules = compiled.rules;
    node.has_rules |= !node.rules.is_empty();
    (node, errors_below || compiled.static_errors)
}
