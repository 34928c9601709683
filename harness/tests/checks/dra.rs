//! Dynamic resource allocation in the embedded cluster, in virtual time:
//! the scheduler allocates ResourceClaims from ResourceSlices as
//! kube-scheduler's DynamicResources plugin does.

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
         still not schedulable, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
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
    let message = cluster
        .wait_until("the pod is unschedulable", MINUTE, |_| {
            let pods = pods.clone();
            async move {
                let p = pods.get("odd").await.map_err(|e| e.to_string())?;
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
        "running \"DynamicResources\" filter plugin: claim default/odd: selector #0: \
         CEL runtime error: no such key: vendor"
    );
    // PreEnqueue: a pod whose claim does not exist is not tried at all.
    cluster.advance(MINUTE).await;
    let lost = pods.get("lost").await.unwrap();
    assert_eq!(
        scheduled(&lost),
        None,
        "no condition while its claim is missing"
    );
    cluster.create(claim("nope")).await.unwrap();
    let node = cluster
        .wait_until("pod lost is bound once its claim exists", MINUTE, |_| {
            let pods = pods.clone();
            async move {
                let p = pods.get("lost").await.map_err(|e| e.to_string())?;
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .ok_or_else(|| format!("{:?}", scheduled(&p)))
            }
        })
        .await
        .unwrap();
    assert_eq!(node, "node-0");
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

fn template() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}})
}

fn templated_pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "nginx",
                "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}})
}

fn claims_api(cluster: &Cluster) -> Api<DynamicObject> {
    Api::namespaced_with(
        cluster.client(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceClaim"),
            "resourceclaims",
        ),
    )
}

#[tokio::test(start_paused = true)]
async fn a_template_claim_is_made_for_the_pod_and_released_when_the_pod_goes() {
    let cluster = Cluster::builder()
        .nodes(1, &NodeTemplate::new("node", "4", "16Gi"))
        .objects([class(), slice("node-0", 1), template()])
        .start()
        .await
        .unwrap();
    cluster.wait_nodes_ready(1, MINUTE).await.unwrap();
    cluster.create(templated_pod("a")).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let bound = |name: &'static str| {
        let pods = pods.clone();
        move |_| {
            let pods = pods.clone();
            async move {
                let p = pods.get(name).await.map_err(|e| e.to_string())?;
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .ok_or_else(|| format!("{:?}", scheduled(&p)))
            }
        }
    };
    cluster
        .wait_until("pod a is bound", MINUTE, bound("a"))
        .await
        .unwrap();
    let a = pods.get("a").await.unwrap();
    let statuses = a.status.unwrap().resource_claim_statuses.unwrap();
    let claim_name = statuses[0].resource_claim_name.clone().unwrap();
    assert!(claim_name.starts_with("a-gpu-"), "{claim_name}");
    let claims = claims_api(&cluster);
    let claim = claims.get(&claim_name).await.unwrap();
    assert_eq!(
        claim.metadata.annotations.unwrap()["resource.kubernetes.io/pod-claim-name"],
        "gpu"
    );
    assert_eq!(claim.metadata.owner_references.unwrap()[0].name, "a");
    assert_eq!(claim.data["status"]["reservedFor"][0]["name"], "a");

    // The one device is a's: b waits, and gets it once a is gone.
    cluster.create(templated_pod("b")).await.unwrap();
    cluster.advance(MINUTE).await;
    assert!(
        pods.get("b")
            .await
            .unwrap()
            .spec
            .unwrap()
            .node_name
            .is_none()
    );
    pods.delete("a", &Default::default()).await.unwrap();
    cluster
        .wait_until("pod b is bound", 2 * MINUTE, bound("b"))
        .await
        .unwrap();
    cluster
        .wait_until("a's claim is deleted with it", MINUTE, |_| {
            let claims = claims.clone();
            let claim_name = claim_name.clone();
            async move {
                match claims
                    .get_opt(&claim_name)
                    .await
                    .map_err(|e| e.to_string())?
                {
                    None => Ok(()),
                    Some(c) => Err(format!("still there: {:?}", c.data["status"])),
                }
            }
        })
        .await
        .unwrap();
}

/// Pods sharing a claim, bound in one pass, are bound by tasks of their
/// own on two threads: each PreBind adds its own pod to the claim as
/// stored (kube-scheduler's `bindClaim`), so none is dropped by another's
/// write of the list as the pass saw it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_bound_at_once_are_all_among_a_shared_claims_consumers() {
    const PODS: usize = 8;
    let cluster = Cluster::builder()
        .nodes(1, &NodeTemplate::new("node", "16", "64Gi"))
        .objects([class(), slice("node-0", 1), claim("shared")])
        .start()
        .await
        .unwrap();
    cluster.wait_nodes_ready(1, MINUTE).await.unwrap();
    futures::future::try_join_all(
        (0..PODS).map(|i| cluster.create(pod(&format!("p{i}"), "shared"))),
    )
    .await
    .unwrap();
    let claims = claims_api(&cluster);
    cluster
        .wait_until("every pod among the consumers", MINUTE, |_| {
            let claims = claims.clone();
            async move {
                let c = claims.get("shared").await.map_err(|e| e.to_string())?;
                let consumers = c.data["status"]["reservedFor"]
                    .as_array()
                    .map_or(0, Vec::len);
                if consumers == PODS {
                    Ok(())
                } else {
                    Err(format!("{consumers} consumers: {:?}", c.data["status"]))
                }
            }
        })
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_shared_claim_is_released_only_when_its_last_pod_goes() {
    let cluster = Cluster::builder()
        .nodes(1, &NodeTemplate::new("node", "4", "16Gi"))
        .objects([class(), slice("node-0", 1), claim("shared")])
        .start()
        .await
        .unwrap();
    cluster.wait_nodes_ready(1, MINUTE).await.unwrap();
    cluster.create(pod("a", "shared")).await.unwrap();
    cluster.create(pod("b", "shared")).await.unwrap();
    let claims = claims_api(&cluster);
    let reserved = |n: usize| {
        let claims = claims.clone();
        move |_| {
            let claims = claims.clone();
            async move {
                let c = claims.get("shared").await.map_err(|e| e.to_string())?;
                let r = c.data["status"]["reservedFor"]
                    .as_array()
                    .map_or(0, Vec::len);
                let allocated = !c.data["status"]["allocation"].is_null();
                if r == n && allocated == (n > 0) {
                    Ok(())
                } else {
                    Err(format!("{:?}", c.data["status"]))
                }
            }
        }
    };
    cluster
        .wait_until("both pods share it", MINUTE, reserved(2))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    pods.delete("a", &Default::default()).await.unwrap();
    cluster
        .wait_until("b alone", MINUTE, reserved(1))
        .await
        .unwrap();
    pods.delete("b", &Default::default()).await.unwrap();
    cluster
        .wait_until("deallocated", MINUTE, reserved(0))
        .await
        .unwrap();
}
