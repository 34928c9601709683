#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::PodTemplate;
use serde_json::json;

use super::conditions::{self, ConditionType, Verdict};
use super::pods::{PodsError, pods_for};
use super::types::*;

fn now() -> SystemTime {
    SystemTime::from("2026-01-01T00:00:00Z".parse::<jiff::Timestamp>().unwrap())
}

fn request(
    class: &str,
    sets: &[(&str, i32)],
    parameters: serde_json::Value,
) -> ProvisioningRequest {
    let sets: Vec<_> = sets
        .iter()
        .map(|(t, n)| json!({"podTemplateRef": {"name": t}, "count": n}))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": "batch", "namespace": "team", "uid": "u-1", "generation": 2,
            "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"provisioningClassName": class, "podSets": sets, "parameters": parameters},
    }))
    .unwrap()
}

fn template(name: &str, resources: serde_json::Value) -> Arc<PodTemplate> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "team"},
            "template": {"metadata": {"labels": {"app": "batch"}},
                "spec": {"containers": [{"name": "c", "image": "i", "resources": resources}]}},
        }))
        .unwrap(),
    )
}

const CHECK: &str = "check-capacity.autoscaling.x-k8s.io";
const ATOMIC: &str = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";

#[test]
fn the_classes_served_follow_the_processor_instance() {
    let check = request(CHECK, &[("t", 1)], json!({}));
    let atomic = request(ATOMIC, &[("t", 1)], json!({}));
    let other = request("queued-provisioning.gke.io", &[("t", 1)], json!({}));
    let named = request(CHECK, &[("t", 1)], json!({"processorInstance": "a"}));
    let prefixed = request(&format!("a{CHECK}"), &[("t", 1)], json!({}));
    let of = |pr: &ProvisioningRequest, i: &str| ProvisioningClass::of(pr, i);
    assert_eq!(of(&check, ""), Some(ProvisioningClass::CheckCapacity));
    assert_eq!(
        of(&atomic, ""),
        Some(ProvisioningClass::BestEffortAtomicScaleUp)
    );
    assert_eq!(of(&other, ""), None);
    assert_eq!(of(&named, ""), None, "a named instance is another's");
    assert_eq!(of(&named, "a"), Some(ProvisioningClass::CheckCapacity));
    assert_eq!(of(&named, "b"), None);
    assert_eq!(of(&check, "a"), None);
    assert_eq!(
        of(&atomic, "a"),
        None,
        "an instance serves check-capacity only"
    );
    assert_eq!(of(&prefixed, "a"), Some(ProvisioningClass::CheckCapacity));
}

#[test]
fn a_verdict_replaces_the_condition_of_its_type_in_place() {
    let mut pr = request(CHECK, &[("t", 1)], json!({}));
    Verdict::Accepted.apply(&mut pr, now());
    Verdict::CapacityNotFound.apply(&mut pr, now());
    Verdict::CapacityFound.apply(&mut pr, now() + Duration::from_secs(60));
    let c = pr.conditions();
    assert_eq!(c.len(), 2);
    assert_eq!(
        (
            c[1].type_.as_str(),
            c[1].status.as_str(),
            c[1].reason.as_str()
        ),
        ("Provisioned", "True", "CapacityIsFound")
    );
    assert_eq!(c[1].message, "Capacity is found in the cluster");
    assert_eq!(c[1].observed_generation, Some(2));
    assert_eq!(
        conditions::transition_time(&c[1]),
        now() + Duration::from_secs(60)
    );
    assert!(conditions::should_capacity_be_booked(&pr, ""));
    Verdict::BookingExpired.apply(&mut pr, now());
    assert!(!conditions::should_capacity_be_booked(&pr, ""));
    assert!(conditions::is_true(&pr, ConditionType::BookingExpired));
}

#[test]
fn each_verdict_renders_upstreams_condition() {
    let rendered: Vec<(String, bool, String, String)> = [
        Verdict::Accepted,
        Verdict::CapacityNotFoundNoRetry,
        Verdict::FailedToBookCapacity("boom".into()),
        Verdict::Expired,
    ]
    .iter()
    .map(|v| {
        let (t, s, r, m) = v.parts();
        (t.to_string(), s, r.to_string(), m)
    })
    .collect();
    assert_eq!(
        rendered,
        [
            (
                "Accepted".into(),
                true,
                "Accepted".into(),
                "ProvisioningRequest is accepted by ClusterAutoscaler".into()
            ),
            (
                "Failed".into(),
                true,
                "CapacityIsNotFound".into(),
                "CA could not find requested capacity".into()
            ),
            (
                "Failed".into(),
                true,
                "FailedToBookCapacity".into(),
                "Couldn't create pods, err: boom".into()
            ),
            (
                "Failed".into(),
                true,
                "Expired".into(),
                "ProvisioningRequest is expired".into()
            ),
        ]
    );
}

#[test]
fn the_pods_of_a_request_are_its_templates_counted_owned_and_annotated() {
    let req = WithTemplates {
        pr: request(ATOMIC, &[("small", 2), ("big", 1)], json!({})),
        templates: vec![
            template("small", json!({"requests": {"cpu": "1"}})),
            template("big", json!({"limits": {"cpu": "3", "memory": "1Gi"}})),
        ],
    };
    let pods = pods_for(&req).unwrap();
    let names: Vec<&str> = pods.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(
        names,
        ["team/batch-0-0", "team/batch-0-1", "team/batch-1-0"]
    );
    let big = &pods[2];
    assert_eq!(big.requests.milli_cpu, 3000, "limits default the requests");
    let meta = &big.pod.metadata;
    assert_eq!(meta.uid.as_deref(), Some("team/batch-1-0"));
    let a = meta.annotations.as_ref().unwrap();
    assert_eq!(a[CONSUME_ANNOTATION], "batch");
    assert_eq!(a[CLASS_ANNOTATION], ATOMIC);
    let owner = &meta.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("ProvisioningRequest", "batch", "u-1")
    );
    assert_eq!(meta.labels.as_ref().unwrap()["app"], "batch");
}

#[test]
fn a_missing_template_is_named_in_upstreams_words() {
    let req = WithTemplates {
        pr: request(CHECK, &[("small", 2), ("gone", 1)], json!({})),
        templates: vec![template("small", json!({}))],
    };
    let err = pods_for(&req).unwrap_err();
    assert_eq!(
        err,
        PodsError::MissingTemplates {
            referenced: 2,
            missing: vec!["gone".into()]
        }
    );
    assert_eq!(
        err.to_string(),
        "missing pod templates, 2 pod templates were referenced, 1 templates were missing: gone"
    );
}

#[test]
fn consumers_are_known_by_either_annotation() {
    let pod = |key: &str| -> k8s_openapi::api::core::v1::Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "annotations": {key: "batch"}}}))
            .unwrap()
    };
    assert_eq!(consumed_request(&pod(CONSUME_ANNOTATION)), Some("batch"));
    assert_eq!(
        consumed_request(&pod(DEPRECATED_CONSUME_ANNOTATION)),
        Some("batch")
    );
    assert_eq!(consumed_request(&pod("other")), None);
}
