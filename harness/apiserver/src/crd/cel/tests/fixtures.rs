//! The rules of the Cluster Autoscaler's CRDs (1.37), passing and failing
//! as kube-apiserver reports them.

use serde_json::{Value, json};

use super::shown;
use crate::crd::cel::Rules;
use crate::crd::testing;

fn capacity_buffers() -> Value {
    testing::crd("capacitybuffers")
}

fn capacity_quotas() -> Value {
    testing::crd("capacityquotas")
}

fn provisioning_requests() -> Value {
    testing::crd("provisioningrequests")
}

/// The rules of version `name` of `crd`.
pub(super) fn version_rules(crd: &Value, name: &str) -> Rules {
    let versions = crd["spec"]["versions"].as_array().expect("versions");
    let (i, version) = versions
        .iter()
        .enumerate()
        .find(|(_, v)| v["name"] == name)
        .expect("version");
    let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
    Rules::compile(&version["schema"]["openAPIV3Schema"], &path).expect("rules compile")
}

fn buffer(spec: Value) -> Value {
    testing::buffer("buffer", spec)
}

fn invalid_spec(message: &str) -> Vec<(String, String)> {
    vec![(
        "spec".into(),
        format!("Invalid value: \"object\": {message}"),
    )]
}

/// validation.go: a CapacityBuffer that satisfies both rules is valid.
#[test]
fn capacity_buffer_rules_pass() {
    for version in ["v1alpha1", "v1beta1"] {
        let rules = version_rules(&capacity_buffers(), version);
        assert!(!rules.is_empty());
        for spec in [
            json!({"podTemplateRef": {"name": "t"}, "replicas": 2}),
            json!({"podTemplateRef": {"name": "t"}, "limits": {"cpu": "4"}}),
            json!({"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "d"}}),
            json!({}),
        ] {
            assert_eq!(
                rules.validate(&buffer(spec.clone()), None),
                vec![],
                "{version} {spec}"
            );
        }
    }
}

/// validation.go: a failed rule is `Invalid value: "object": <message>` at
/// the rule's node.
#[test]
fn capacity_buffer_pod_template_needs_replicas_or_limits() {
    let rules = version_rules(&capacity_buffers(), "v1beta1");
    let causes = rules.validate(&buffer(json!({"podTemplateRef": {"name": "t"}})), None);
    assert_eq!(
        shown(&causes),
        invalid_spec("If X is set, replicas or limits must also be set")
    );
    assert_eq!(causes[0].reason, "FieldValueInvalid");
}

/// validation.go: every failed rule of a node is a cause, in rule order.
#[test]
fn capacity_buffer_both_refs_are_refused() {
    let spec = json!({
        "podTemplateRef": {"name": "t"},
        "scalableRef": {"kind": "Deployment", "name": "d"},
    });
    let v1alpha1 = version_rules(&capacity_buffers(), "v1alpha1");
    let mut want = invalid_spec("If X is set, replicas or limits must also be set");
    want.extend(invalid_spec(
        "You must define both PodTemplateRef and ScalableRef",
    ));
    assert_eq!(shown(&v1alpha1.validate(&buffer(spec.clone()), None)), want);
    let v1beta1 = version_rules(&capacity_buffers(), "v1beta1");
    let mut spec = spec;
    spec["replicas"] = json!(1);
    assert_eq!(
        shown(&v1beta1.validate(&buffer(spec), None)),
        invalid_spec("You must define either PodTemplateRef or ScalableRef, but not both")
    );
}

fn quota(resources: Value) -> Value {
    json!({
        "apiVersion": "autoscaling.x-k8s.io/v1alpha1",
        "kind": "CapacityQuota",
        "metadata": {"name": "quota"},
        "spec": {"limits": {"resources": resources}},
    })
}

const NON_NEGATIVE: &str = "All resource quantities must be non-negative integers.";

/// model/schemas.go: a map of int-or-string is `map(string, dyn)`:
/// `type(self[key]) == int` tells integers from strings, `quantity()`
/// parses the strings.
#[test]
fn capacity_quota_accepts_integer_quantities() {
    let rules = version_rules(&capacity_quotas(), "v1alpha1");
    let resources =
        json!({"cpu": "32", "memory": "32Gi", "nodes": 10, "example.com/gpu": "2k", "pods": 0});
    assert_eq!(rules.validate(&quota(resources), None), vec![]);
}

/// library/quantity.go: `isInteger()` is false for milli quantities and
/// fractions, and negative values fail the rule, as integers or strings.
#[test]
fn capacity_quota_refuses_negative_and_fractional_quantities() {
    let rules = version_rules(&capacity_quotas(), "v1alpha1");
    let field = "spec.limits.resources".to_string();
    let want = vec![(field, format!("Invalid value: \"object\": {NON_NEGATIVE}"))];
    for value in [
        json!("500m"),
        json!("1000m"),
        json!("3.67Gi"),
        json!("0.3"),
        json!("-1"),
        json!(-1),
    ] {
        let causes = rules.validate(&quota(json!({"cpu": value})), None);
        assert_eq!(shown(&causes), want, "{value}");
    }
}

/// validation.go: the rule's message, at the map's path.
#[test]
fn capacity_quota_refuses_long_resource_names() {
    let rules = version_rules(&capacity_quotas(), "v1alpha1");
    let name = "a".repeat(64);
    let causes = rules.validate(&quota(json!({name: 1})), None);
    assert_eq!(
        shown(&causes),
        vec![(
            "spec.limits.resources".into(),
            "Invalid value: \"object\": Resource names must be 63 characters or less.".into()
        )]
    );
}

/// validation.go: an evaluation error (here `quantity()` failing to parse)
/// is `<error> evaluating rule: <message>`.
#[test]
fn capacity_quota_unparsable_quantity_is_an_evaluation_error() {
    let rules = version_rules(&capacity_quotas(), "v1alpha1");
    let causes = rules.validate(&quota(json!({"cpu": "lots"})), None);
    assert_eq!(
        shown(&causes),
        vec![(
            "spec.limits.resources".into(),
            format!(
                "Invalid value: \"object\": quantities must match the regular expression \
                 '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' evaluating rule: {NON_NEGATIVE}"
            )
        )]
    );
}

fn request(spec: Value) -> Value {
    json!({
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": "pr", "namespace": "default"},
        "spec": spec,
    })
}

fn request_spec() -> Value {
    json!({
        "provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
        "podSets": [{"count": 2, "podTemplateRef": {"name": "template"}}],
        "parameters": {"ValidUntilSeconds": "3600"},
    })
}

/// validation.go: transition rules (`self == oldSelf`) do not run on create.
#[test]
fn provisioning_request_create_skips_transition_rules() {
    for version in ["v1", "v1beta1"] {
        let rules = version_rules(&provisioning_requests(), version);
        assert_eq!(rules.validate(&request(request_spec()), None), vec![]);
    }
}

/// validation.go: on update, transition rules run where the old value
/// correlates: each immutable field changed is refused, typed by its schema.
#[test]
fn provisioning_request_update_of_immutable_fields_is_refused() {
    let rules = version_rules(&provisioning_requests(), "v1");
    let old = request(request_spec());
    let mut spec = request_spec();
    spec["provisioningClassName"] = json!("best-effort-atomic-scale-up.autoscaling.x-k8s.io");
    spec["podSets"][0]["count"] = json!(3);
    spec["parameters"]["ValidUntilSeconds"] = json!("60");
    let mut causes = shown(&rules.validate(&request(spec), Some(&old)));
    causes.sort();
    assert_eq!(
        causes,
        vec![
            (
                "spec.parameters".into(),
                "Invalid value: \"object\": Value is immutable".into()
            ),
            (
                "spec.podSets".into(),
                "Invalid value: \"array\": Value is immutable".into()
            ),
            (
                "spec.provisioningClassName".into(),
                "Invalid value: \"string\": Value is immutable".into()
            ),
        ]
    );
}

/// validation.go: an update that leaves the immutable fields alone passes,
/// and a field added by the update has no old value to compare with.
#[test]
fn provisioning_request_update_of_status_passes() {
    let rules = version_rules(&provisioning_requests(), "v1");
    let mut old = request(request_spec());
    old["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("parameters");
    let mut new = request(request_spec());
    new["status"] = json!({"conditions": []});
    assert_eq!(rules.validate(&new, Some(&old)), vec![]);
}

/// Not a behaviour: the cost of compiling once and evaluating per object.
#[test]
#[ignore = "timing; run with --ignored --nocapture"]
fn capacity_buffer_evaluation_time() {
    let crd = capacity_buffers();
    let start = std::time::Instant::now();
    let rules = version_rules(&crd, "v1beta1");
    println!("compile: {:?}", start.elapsed());
    let object =
        buffer(json!({"podTemplateRef": {"name": "t"}, "replicas": 2, "limits": {"cpu": "1"}}));
    let n = 10_000u32;
    let start = std::time::Instant::now();
    for _ in 0..n {
        assert!(rules.validate(&object, None).is_empty());
    }
    println!("validate: {:?} per object", start.elapsed() / n);
}
