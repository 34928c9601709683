//! Dynamic resource allocation in the embedded cluster, in virtual time:
//! the scheduler allocates ResourceClaims from ResourceSlices as
//! kube-scheduler's DynamicResources plugin does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use harness::cluster::{Cluster, NodeTemplate};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};

const MINUTE: Duration = Duration::from_secs(60);

fn class() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}})
}

fn slice(node: &str, gpus: usize) -> Value {
    let devices: Vec<Value> = (0..gpus)
        .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"model": {"string": "a100"}}}))
        .collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpu")},
        "spec": {"driver": "gpu.example.com", "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}})
}

fn claim(name: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}})
}

fn pod(name: &str, claim: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "nginx",
                "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}})
}

fn scheduled(p: &Pod) -> Option<(String, String)> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .map(|c| (c.status.clone(), c.message.clone().unwrap_or_default()))
}

#[tokio::test(start_paused = true)]
async fn a_claim_is_allocated_on_the_node_with_the_device_and_a_second_waits() {
    let cluster = Cluster::builder()
        .nodes(2, &NodeTemplate::new("node", "4", "16Gi"))
        .objects([class(), slice("node-0", 1), claim("first"), claim("second")])
        .start()
        .await
        .unwrap();
    cluster.wait_nodes_ready(2, MINUTE).await.unwrap();
    cluster.create(pod("a", "first")).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let a = cluster
        .wait_until("pod a is bound", MINUTE, |_| {
            let pods = pods.clone();
            async move {
                let p = pods.get("a").await.map_err(|e| e.to_string())?;
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .ok_or_else(|| format!("{:?}", scheduled(&p)))
            }
        })
        .await
        .unwrap();
    assert_eq!(a, "node-0");
    let claims: Api<DynamicObject> = Api::namespaced_with(
        cluster.client(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceClaim"),
            "resourceclaims",
        ),
    );
    let first = claims.get("first").await.unwrap();
    let status = &first.data["status"];
    assert_eq!(
        status["allocation"]["devices"]["results"],
        json!([{"request": "gpu", "driver": "gpu.example.com", "pool": "node-0", "device": "gpu-0"}])
    );
    assert_eq!(
        status["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"],
        json!(["node-0"])
    );
    assert_eq!(status["reservedFor"][0]["name"], "a");
    assert_eq!(status["reservedFor"][0]["resource"], "pods");

    cluster.create(pod("b", "second")).await.unwrap();
    let message = cluster
        .wait_until("pod b is unschedulable", MINUTE, |_| {
            let pods = pods.clone();
            async move {
                let p = pods.get("b").await.map_err(|e| e.to_string())?;
                match scheduled(&p) {
                    Some((s, m)) if s == "False" => Ok(m),
                    other => Err(format!("{other:?}")),
                }
            }
        })
        .await
        .unwrap();
    assert_eq!(
        message,
        "0/2 nodes are available: 2 cannot allocate all claims. \
         preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    // A second device on node-1: b goes there.
    cluster.create(slice("node-1", 1)).await.unwrap();
    let b = cluster
        .wait_until("pod b is bound", 2 * MINUTE, |_| {
            let pods = pods.clone();
            async move {
                let p = pods.get("b").await.map_err(|e| e.to_string())?;
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .ok_or_else(|| format!("{:?}", scheduled(&p)))
            }
        })
        .await
        .unwrap();
    assert_eq!(b, "node-1");
}

#[tokio::test(start_paused = true)]
async fn a_missing_claim_and_a_failing_selector_are_reported_as_kube_scheduler_does() {
    let failing = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "odd", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu",
            "selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].vendor == 'x'"}}]}}]}}});
    let cluster = Cluster::builder()
        .nodes(1, &NodeTemplate::new("node", "4", "16Gi"))
        .objects([
            class(),
            slice("node-0", 1),
            failing,
            pod("lost", "nope"),
            pod("odd", "odd"),
        ])
        .start()
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    for (name, want) in [
        (
            "lost",
            "0/1 nodes are available: could not find ResourceClaim \"default/nope\". \
             preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        ),
        (
            "odd",
            "running \"DynamicResources\" filter plugin: claim default/odd: selector #0: \
             CEL runtime error: no such key: vendor",
        ),
    ] {
        let message = cluster
            .wait_until("the pod is unschedulable", MINUTE, |_| {
                let pods = pods.clone();
                async move {
                    let p = pods.get(name).await.map_err(|e| e.to_string())?;
                    match scheduled(&p) {
                        Some((s, m)) if s == "False" => Ok(m),
                        other => Err(format!("{other:?}")),
                    }
                }
            })
            .await
            .unwrap();
        assert_eq!(message, want, "{name}");
    }
}

#[tokio::test(start_paused = true)]
async fn kwoks_fake_driver_publishes_a_nodes_devices_and_pods_use_them() {
    let gpu_node = NodeTemplate {
        annotations: [(
            kwok::DRA_DEVICES_ANNOTATION.to_string(),
            r#"[{"driver": "gpu.example.com", "name": "gpu", "count": 2,
                 "attributes": {"model": {"string": "a100"}}}]"#
                .to_string(),
        )]
        .into_iter()
        .collect(),
        ..NodeTemplate::new("gpu", "4", "16Gi")
    };
    let cluster = Cluster::builder()
        .nodes(1, &NodeTemplate::new("plain", "4", "16Gi"))
        .nodes(1, &gpu_node)
        .objects([class(), claim("one"), claim("two"), claim("three")])
        .start()
        .await
        .unwrap();
    cluster.wait_nodes_ready(2, MINUTE).await.unwrap();
    for (p, c) in [("a", "one"), ("b", "two"), ("c", "three")] {
        cluster.create(pod(p, c)).await.unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let placed = cluster
        .wait_until("two pods bound, one unschedulable", MINUTE, |_| {
            let pods = pods.clone();
            async move {
                let mut out = Vec::new();
                for name in ["a", "b", "c"] {
                    let p = pods.get(name).await.map_err(|e| e.to_string())?;
                    let status = scheduled_status(&p);
                    match (p.spec.and_then(|s| s.node_name), status) {
                        (Some(n), _) => out.push(n),
                        (None, Some(s)) if s == "False" => out.push("-".into()),
                        _ => return Err(format!("{name} not decided")),
                    }
                }
                Ok(out)
            }
        })
        .await
        .unwrap();
    let mut sorted = placed.clone();
    sorted.sort();
    assert_eq!(sorted, ["-", "gpu-0", "gpu-0"], "{placed:?}");
    let slices: Api<DynamicObject> = Api::all_with(
        cluster.client(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceSlice"),
            "resourceslices",
        ),
    );
    let s = slices.get("gpu-0-gpu.example.com").await.unwrap();
    assert_eq!(s.data["spec"]["nodeName"], "gpu-0");
    assert_eq!(s.metadata.owner_references.unwrap()[0].name, "gpu-0");
}

fn scheduled_status(p: &Pod) -> Option<String> {
    scheduled(p).map(|(s, _)| s)
}
