//! Tests of structural schemas, each naming the upstream behaviour it
//! mirrors. The CRDs are Cluster Autoscaler 1.37's (tests/fixtures).

mod defaulting;
mod parsing;
mod property;
mod pruning;
mod upstream;
mod validation;

use serde_json::{Value, json};

use super::Structural;
use crate::error::Cause;

/// One of the fixture CRDs (`capacitybuffers`, `capacityquotas`,
/// `provisioningrequests`).
pub(super) fn crd(name: &str) -> Value {
    crate::crd::testing::crd(name)
}

/// The `openAPIV3Schema` of `version` of a fixture CRD.
pub(super) fn version_schema(crd: &Value, version: &str) -> Value {
    let versions = crd["spec"]["versions"].as_array().unwrap();
    let v = versions.iter().find(|v| v["name"] == version).unwrap();
    v["schema"]["openAPIV3Schema"].clone()
}

/// CapacityBuffer v1beta1's schema.
pub(super) fn buffers() -> Structural {
    let schema = version_schema(&crd("capacitybuffers"), "v1beta1");
    Structural::parse(&schema, "spec.versions[1].schema.openAPIV3Schema").unwrap()
}

/// A schema that must parse.
pub(super) fn parsed(schema: Value) -> Structural {
    match Structural::parse(&schema, "openAPIV3Schema") {
        Ok(s) => s,
        Err(causes) => panic!("refused: {:#?}", rendered(&causes)),
    }
}

/// A root schema with `spec` as given.
pub(super) fn with_spec(spec: Value) -> Structural {
    parsed(crate::crd::testing::resource(spec))
}

/// A custom resource with `spec` as given.
pub(super) fn object(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec})
}

/// Causes as kube-apiserver's Status message lists them.
pub(super) fn rendered(causes: &[Cause]) -> Vec<String> {
    causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

/// The rendered causes of validating `spec` against a `spec` schema.
pub(super) fn spec_errors(spec_schema: Value, spec: Value) -> Vec<String> {
    rendered(&with_spec(spec_schema).validate(&object(spec)))
}
