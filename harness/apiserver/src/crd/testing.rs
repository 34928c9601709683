//! What the schema and rule tests share: upstream CA 1.37's CRDs (the
//! fixtures in `tests/fixtures`), objects of them, and a root schema.
#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

/// One of the fixture CRDs (`capacitybuffers`, `capacityquotas`,
/// `provisioningrequests`).
pub fn crd(name: &str) -> Value {
    let text = match name {
        "capacitybuffers" => include_str!("../../tests/fixtures/crd-capacitybuffers.json"),
        "capacityquotas" => include_str!("../../tests/fixtures/crd-capacityquotas.json"),
        _ => include_str!("../../tests/fixtures/crd-provisioningrequests.json"),
    };
    serde_json::from_str(text).unwrap()
}

/// A root schema (apiVersion, kind, metadata) whose `spec` is `spec`.
pub fn resource(spec: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
        }
    })
}

/// A v1beta1 CapacityBuffer named `name` with `spec`.
pub fn buffer(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityBuffer",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    })
}
