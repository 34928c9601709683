//! Unit tests of the controller.

use std::collections::BTreeMap;

use apimachinery::labels::LabelSelector;
use kube::api::Patch;
use serde_json::json;

use super::config::{Config, NODE_ANNOTATION, NodeSelection};
use super::ippool::IpPool;
use super::jobs::{build_patch, contained};
use crate::stage::PatchType;

#[test]
fn annotation_selectors_use_the_label_selector_grammar() {
    let a: BTreeMap<String, String> = [(NODE_ANNOTATION.to_string(), "fake".to_string())].into();
    let matches = |s: &str| {
        LabelSelector::parse(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .matches(&a)
    };
    assert!(matches("kwok.x-k8s.io/node=fake"));
    assert!(matches("kwok.x-k8s.io/node==fake"));
    assert!(!matches("kwok.x-k8s.io/node=real"));
    assert!(matches("kwok.x-k8s.io/node"));
    assert!(!matches("!kwok.x-k8s.io/node"));
    assert!(matches("other!=x"));
    assert!(matches(
        "kwok.x-k8s.io/node in (real, fake),other notin (x)"
    ));
    assert!(!matches("kwok.x-k8s.io/node notin (fake)"));
    assert!(!matches("kwok.x-k8s.io/node in (real),x"));
    let default = Config::default();
    let NodeSelection::Selectors { annotation, .. } = &default.nodes else {
        panic!("the default selects by annotation")
    };
    assert!(annotation.matches(&a));
}

#[test]
fn ip_pool_is_sequential_and_reuses_released_addresses() {
    let mut pool = IpPool::default();
    assert_eq!(pool.allocate("10.0.0.0/24"), "10.0.0.1");
    assert_eq!(pool.allocate("10.0.0.0/24"), "10.0.0.2");
    pool.release("10.0.0.0/24", "10.0.0.1");
    assert_eq!(pool.allocate("10.0.0.0/24"), "10.0.0.1");
    assert_eq!(pool.allocate("10.0.0.0/24"), "10.0.0.3");
    assert_eq!(pool.allocate("10.1.0.1/16"), "10.1.0.2");
}

#[test]
fn no_op_patches_are_recognised() {
    let node = json!({"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "False"}, {"type": "DiskPressure", "status": "False"}]}});
    let same = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    assert!(contained(&same, &node, true));
    assert!(
        !contained(&same, &node, false),
        "a merge patch replaces the list"
    );
    let flip = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    assert!(!contained(&flip, &node, true));
    assert!(contained(&json!({"status": {"podIP": null}}), &node, true));
    assert!(!contained(&json!({"status": {"phase": null}}), &node, true));
}

#[test]
fn patches_are_wrapped_under_their_root() {
    let p = build_patch(
        json!({"phase": "Running"}),
        Some("status"),
        PatchType::Strategic,
    )
    .unwrap();
    assert!(matches!(p, Patch::Strategic(v) if v == json!({"status": {"phase": "Running"}})));
    let p = build_patch(
        json!([{"op": "replace", "path": "/phase", "value": "Failed"}]),
        Some("status"),
        PatchType::Json,
    )
    .unwrap();
    let Patch::Json(ops) = p else {
        panic!("not a json patch")
    };
    assert_eq!(
        serde_json::to_value(ops).unwrap(),
        json!([{"op": "replace", "path": "/status/phase", "value": "Failed"}])
    );
    assert!(build_patch(json!({"a": 1}), None, PatchType::Json).is_err());
}
