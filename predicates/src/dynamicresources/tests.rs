//! The allocator and the plugin's refusals, each named after the
//! kube-scheduler behaviour it mirrors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::api::{DeviceClass, ResourceClaim, ResourceSlice};
use super::*;
use crate::filters::{PreFilter, Reason};
use crate::nodeinfo::{NodeInfo, PodInfo};

fn node(name: &str) -> NodeInfo {
    let n: Node = serde_json::from_value(json!({"metadata": {"name": name,
        "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}))
    .unwrap();
    NodeInfo::new(Arc::new(n))
}

/// A slice of `count` GPUs (`gpu-<i>`, model `model`) local to `node`.
fn gpus(node: &str, model: &str, count: usize) -> Arc<ResourceSlice> {
    let devices: Vec<Value> = (0..count)
        .map(|i| {
            json!({"name": format!("gpu-{i}"),
            "attributes": {"model": {"string": model}, "index": {"int": i}},
            "capacity": {"memory": {"value": "40Gi"}}})
        })
        .collect();
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": format!("{node}-gpu")},
            "spec": {"driver": "gpu.example.com", "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": devices}}))
        .unwrap(),
    )
}

fn with_gpus(name: &str, model: &str, count: usize) -> NodeInfo {
    let mut n = node(name);
    n.slices.push(gpus(name, model, count));
    n
}

fn class(name: &str, expression: &str) -> (String, Arc<DeviceClass>) {
    (
        name.to_string(),
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": expression}}]}}))
            .unwrap(),
        ),
    )
}

fn claim(name: &str, requests: Value) -> Arc<ResourceClaim> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": requests}}}))
        .unwrap(),
    )
}

fn objects(claims: &[Arc<ResourceClaim>]) -> DraObjects {
    let mut o = DraObjects {
        classes: [class("gpu", "device.driver == 'gpu.example.com'")]
            .into_iter()
            .collect(),
        ..DraObjects::default()
    };
    for c in claims {
        o.insert_claim(c.clone());
    }
    o
}

fn pod(name: &str, claims: &[&str]) -> PodInfo {
    let refs: Vec<Value> = claims
        .iter()
        .map(|c| json!({"name": c, "resourceClaimName": c}))
        .collect();
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c", "image": "i"}], "resourceClaims": refs}}))
    .unwrap();
    PodInfo::new(Arc::new(p))
}

fn one_gpu(class: &str) -> Value {
    json!([{"name": "gpu", "exactly": {"deviceClassName": class}}])
}

#[test]
fn exact_count_takes_free_devices_of_the_class() {
    let o = objects(&[claim(
        "two",
        json!([{"name": "gpu",
        "exactly": {"deviceClassName": "gpu", "count": 2}}]),
    )]);
    let p = pod("p", &["two"]);
    let allocs = o.allocate(&p.pod, &with_gpus("n1", "a100", 2)).unwrap();
    assert_eq!(allocs.len(), 1);
    let (key, a) = &allocs[0];
    assert_eq!(key, "default/two");
    let devices: Vec<&str> = a
        .devices
        .results
        .iter()
        .map(|r| r.device.as_str())
        .collect();
    assert_eq!(devices, ["gpu-0", "gpu-1"]);
    assert_eq!(a.devices.results[0].pool, "n1");
    assert_eq!(
        a.node_selector,
        Some(allocator::node_name_selector("n1")),
        "node-local devices pin the claim to the node"
    );
    assert_eq!(
        o.allocate(&p.pod, &with_gpus("n2", "a100", 1)),
        Err(ClaimRefusal::CannotAllocate)
    );
    assert_eq!(
        o.allocate(&p.pod, &node("n3")),
        Err(ClaimRefusal::CannotAllocate)
    );
}

#[test]
fn allocated_devices_are_not_offered_again() {
    let mut taken = (*claim("taken", one_gpu("gpu"))).clone();
    taken.status.allocation = Some(api::AllocationResult {
        devices: api::DeviceAllocationResult {
            results: vec![api::DeviceRequestAllocationResult {
                request: "gpu".into(),
                driver: "gpu.example.com".into(),
                pool: "n1".into(),
                device: "gpu-0".into(),
            }],
        },
        node_selector: Some(allocator::node_name_selector("n1")),
    });
    let o = objects(&[Arc::new(taken), claim("mine", one_gpu("gpu"))]);
    let n = with_gpus("n1", "a100", 2);
    let allocs = o.allocate(&pod("p", &["mine"]).pod, &n).unwrap();
    assert_eq!(allocs[0].1.devices.results[0].device, "gpu-1");
    // The allocated claim itself fits only where its devices are.
    assert_eq!(o.allocate(&pod("q", &["taken"]).pod, &n), Ok(vec![]));
    assert_eq!(
        o.allocate(&pod("q", &["taken"]).pod, &with_gpus("n2", "a100", 2)),
        Err(ClaimRefusal::NotAvailableOnNode)
    );
}

#[test]
fn class_and_request_selectors_both_hold() {
    let o = objects(&[claim(
        "h100",
        json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu",
        "selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].model == 'h100'"}}]}}]),
    )]);
    let p = pod("p", &["h100"]);
    assert_eq!(
        o.allocate(&p.pod, &with_gpus("n1", "a100", 4)),
        Err(ClaimRefusal::CannotAllocate)
    );
    assert!(o.allocate(&p.pod, &with_gpus("n2", "h100", 1)).is_ok());
}

#[test]
fn all_mode_takes_every_matching_device_and_fails_when_one_is_taken() {
    let o = objects(&[claim(
        "all",
        json!([{"name": "gpu",
        "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}]),
    )]);
    let p = pod("p", &["all"]);
    let allocs = o.allocate(&p.pod, &with_gpus("n1", "a100", 3)).unwrap();
    assert_eq!(allocs[0].1.devices.results.len(), 3);
    assert_eq!(
        o.allocate(&p.pod, &node("empty")),
        Err(ClaimRefusal::CannotAllocate),
        "no matching device"
    );
}

#[test]
fn first_available_tries_alternatives_in_order() {
    let o = objects(&[claim(
        "either",
        json!([{"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu", "count": 4},
        {"name": "small", "deviceClassName": "gpu", "count": 1}]}]),
    )]);
    let allocs = o
        .allocate(&pod("p", &["either"]).pod, &with_gpus("n1", "a100", 2))
        .unwrap();
    assert_eq!(allocs[0].1.devices.results.len(), 1);
    assert_eq!(allocs[0].1.devices.results[0].request, "gpu/small");
}

#[test]
fn two_claims_of_one_pod_take_distinct_devices() {
    let o = objects(&[claim("a", one_gpu("gpu")), claim("b", one_gpu("gpu"))]);
    let p = pod("p", &["a", "b"]);
    let allocs = o.allocate(&p.pod, &with_gpus("n1", "a100", 2)).unwrap();
    assert_ne!(
        allocs[0].1.devices.results[0].device,
        allocs[1].1.devices.results[0].device
    );
    assert_eq!(
        o.allocate(&p.pod, &with_gpus("n2", "a100", 1)),
        Err(ClaimRefusal::CannotAllocate)
    );
}

#[test]
fn match_attribute_constrains_the_devices_of_a_claim() {
    let mut n = node("n1");
    let mixed: ResourceSlice = serde_json::from_value(json!({"metadata": {"name": "s"},
        "spec": {"driver": "gpu.example.com", "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": "a", "attributes": {"numa": {"int": 0}}},
                {"name": "b", "attributes": {"numa": {"int": 1}}},
                {"name": "c", "attributes": {"numa": {"int": 1}}}]}}))
    .unwrap();
    n.slices.push(Arc::new(mixed));
    let c: ResourceClaim = serde_json::from_value(json!({"metadata": {"name": "pair", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}}],
            "constraints": [{"matchAttribute": "gpu.example.com/numa"}]}}}))
    .unwrap();
    let o = objects(&[Arc::new(c)]);
    let allocs = o.allocate(&pod("p", &["pair"]).pod, &n).unwrap();
    let devices: Vec<&str> = allocs[0]
        .1
        .devices
        .results
        .iter()
        .map(|r| r.device.as_str())
        .collect();
    assert_eq!(devices, ["b", "c"], "backtracked past a");
}

#[test]
fn an_incomplete_pool_offers_nothing_and_only_the_newest_generation_counts() {
    let slice = |name: &str, generation: i64, count: i64, devices: Value| -> Arc<ResourceSlice> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name},
                "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                    "pool": {"name": "p", "generation": generation, "resourceSliceCount": count},
                    "devices": devices}}))
            .unwrap(),
        )
    };
    let o = objects(&[claim("one", one_gpu("gpu"))]);
    let p = pod("p", &["one"]);
    let mut n = node("n1");
    n.slices.push(slice("s1", 1, 2, json!([{"name": "gpu-0"}])));
    assert_eq!(o.allocate(&p.pod, &n), Err(ClaimRefusal::CannotAllocate));
    n.slices.push(slice("s2", 1, 2, json!([{"name": "gpu-1"}])));
    assert!(o.allocate(&p.pod, &n).is_ok(), "complete");
    let mut n = node("n1");
    n.slices
        .push(slice("old", 1, 1, json!([{"name": "gpu-0"}])));
    n.slices.push(slice("new", 2, 1, json!([])));
    assert_eq!(
        o.allocate(&p.pod, &n),
        Err(ClaimRefusal::CannotAllocate),
        "generation 1 is outdated"
    );
}

#[test]
fn missing_claims_and_classes_hold_for_every_node_in_kube_schedulers_words() {
    let o = objects(&[claim("odd", one_gpu("tpu"))]);
    let n = with_gpus("n1", "a100", 1);
    let missing = o.allocate(&pod("p", &["nope"]).pod, &n).unwrap_err();
    assert_eq!(
        missing.to_string(),
        r#"could not find ResourceClaim "default/nope""#
    );
    assert!(missing.every_node());
    let class = o.allocate(&pod("p", &["odd"]).pod, &n).unwrap_err();
    assert_eq!(
        class.to_string(),
        "request gpu: device class tpu does not exist"
    );
    assert!(class.every_node());
    let template: Pod = serde_json::from_value(json!({
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {"containers": [], "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]}}))
    .unwrap();
    assert_eq!(
        o.allocate(&template, &n).unwrap_err().to_string(),
        r#"pod "default/t": ResourceClaim not created yet"#
    );
}

#[test]
fn a_selector_that_fails_is_a_plugin_error() {
    let mut o = objects(&[claim(
        "one",
        json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu",
        "selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].vendor == 'x'"}}]}}]),
    )]);
    let e = o
        .allocate(&pod("p", &["one"]).pod, &with_gpus("n1", "a100", 1))
        .unwrap_err();
    assert!(e.is_error());
    assert_eq!(
        e.to_string(),
        "claim default/one: selector #0: CEL runtime error: no such key: vendor"
    );
    o.classes.extend([class(
        "gpu",
        "device.attributes['x.example.com'].model == 'a'",
    )]);
    let e = o
        .allocate(&pod("p", &["one"]).pod, &with_gpus("n1", "a100", 1))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "class gpu: selector #0: CEL runtime error: no such key: model"
    );
}

#[test]
fn the_filter_reports_claims_after_the_other_plugins() {
    let o = objects(&[claim("one", one_gpu("gpu"))]);
    let p = pod("p", &["one"]);
    let nodes = [node("plain"), with_gpus("gpu", "a100", 1)];
    let pre = PreFilter::new(&p, &nodes).with_dra(&o);
    assert_eq!(
        pre.filter(&nodes[0]),
        Err(vec![Reason::Dra(ClaimRefusal::CannotAllocate)])
    );
    assert_eq!(pre.filter(&nodes[1]), Ok(()));
    let err = crate::find_node_with(
        &p,
        &nodes,
        crate::Objects {
            dra: Some(&o),
            ..Default::default()
        },
    );
    assert_eq!(err.ok(), Some(1));
    let none = [node("a"), node("b")];
    let e = crate::find_node_with(
        &p,
        &none,
        crate::Objects {
            dra: Some(&o),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(
        e.message,
        "0/2 nodes are available: 2 cannot allocate all claims."
    );
}
