//! Unit tests of CRD validation rules, each naming the kube-apiserver
//! behaviour it mirrors.

mod compile;
mod fixtures;
mod library;
mod runtime;

use serde_json::{Value, json};

use super::Rules;
use crate::error::Cause;

/// The path of a v1 CRD's first version schema.
const PATH: &str = "spec.versions[0].schema.openAPIV3Schema";

/// A resource schema whose `spec` is `spec`.
fn resource(spec: Value) -> Value {
    crate::crd::testing::resource(spec)
}

/// The rules of a resource whose `spec` is `spec`.
fn spec_rules(spec: Value) -> Rules {
    match Rules::compile(&resource(spec), PATH) {
        Ok(rules) => rules,
        Err(causes) => panic!("compile failed: {causes:#?}"),
    }
}

/// The compile errors of a resource whose `spec` is `spec`.
fn spec_errors(spec: Value) -> Vec<Cause> {
    match Rules::compile(&resource(spec), PATH) {
        Ok(_) => panic!("compiled"),
        Err(causes) => causes,
    }
}

/// An object of the resource with `spec`.
fn object(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "thing"}, "spec": spec})
}

/// (field, message) of each cause.
fn shown(causes: &[Cause]) -> Vec<(String, String)> {
    causes
        .iter()
        .map(|c| (c.field.clone(), c.message.clone()))
        .collect()
}

/// A spec with one property `x` of `schema` and rule `rule` on it.
fn on_x(schema: Value, rule: &str) -> Rules {
    let mut x = schema;
    x["x-kubernetes-validations"] = json!([{"rule": rule}]);
    spec_rules(json!({"type": "object", "properties": {"x": x}}))
}

/// Whether rule `rule` on property `x` of `schema` passes for `value`.
fn passes(schema: Value, rule: &str, value: Value) -> bool {
    let causes = on_x(schema, rule).validate(&object(json!({"x": value})), None);
    assert!(
        causes.iter().all(|c| c.message.contains("failed rule")),
        "{rule}: {causes:#?}"
    );
    causes.is_empty()
}

/// The causes of rule `rule` on property `x` of `schema` for `value`.
fn causes_of(schema: Value, rule: &str, value: Value) -> Vec<(String, String)> {
    shown(&on_x(schema, rule).validate(&object(json!({"x": value})), None))
}
