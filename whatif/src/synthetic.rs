//! A synthetic cluster dump for benchmarks, as `kubectl get -A -o json`
//! writes one: `nodes` nodes in four EKS managed node groups (4 CPU,
//! 16 GiB), a DaemonSet pod on each, and `pods_per_node` more pods per
//! node from Deployments of 50 replicas, each with its ReplicaSet and a
//! PDB per ten. One node in ten is lightly used (its pods request 20m),
//! the rest about two thirds; one pod in 300 more is pending, too big for
//! the room any node has left, so that a run both scales up and scales
//! down.

use serde_json::{Value, json};

/// Replicas per Deployment.
const REPLICAS: usize = 50;

/// One pending pod per this many pods.
const PENDING_EVERY: usize = 300;

/// A pending pod's CPU: more than a light node has left (3920m less
/// 30 × 20m and the DaemonSet's 50m), less than a new node offers.
const PENDING_CPU: &str = "3300m";

/// The dump: a `List`.
pub fn cluster(nodes: usize, pods_per_node: usize) -> Value {
    let mut items = Vec::with_capacity(nodes * (pods_per_node + 1) + nodes / 10);
    items.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps", "uid": "ns-apps"}}));
    for i in 0..nodes {
        items.push(node(i));
    }
    let ds_pod_spec = json!({"containers": [{"name": "proxy", "image": "proxy", "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]});
    items.push(json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "proxy", "namespace": "kube-system", "uid": "ds-proxy"},
        "spec": {"selector": {"matchLabels": {"app": "proxy"}},
            "template": {"metadata": {"labels": {"app": "proxy"}}, "spec": ds_pod_spec}}}));
    for i in 0..nodes {
        let mut spec = ds_pod_spec.clone();
        spec["nodeName"] = json!(node_name(i));
        items.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("proxy-{i}"), "namespace": "kube-system", "labels": {"app": "proxy"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "proxy", "uid": "ds-proxy", "controller": true}]},
            "spec": spec}));
    }
    let pods = nodes * pods_per_node;
    let deployments = pods.div_ceil(REPLICAS);
    for d in 0..deployments {
        let light = d.is_multiple_of(10);
        let cpu = if light { "20m" } else { "90m" };
        items.extend(workload(d, cpu));
    }
    // Pods bound round-robin within each Deployment's nodes: a light
    // Deployment's pods fill the light nodes.
    let (light_nodes, heavy_nodes): (Vec<usize>, Vec<usize>) =
        (0..nodes).partition(|i| i.is_multiple_of(10));
    let (mut light_i, mut heavy_i) = (0usize, 0usize);
    for p in 0..pods {
        let d = p / REPLICAS;
        let light = d.is_multiple_of(10);
        let node = if light && !light_nodes.is_empty() {
            light_i += 1;
            light_nodes[(light_i - 1) / pods_per_node % light_nodes.len()]
        } else {
            heavy_i += 1;
            heavy_nodes[(heavy_i - 1) / pods_per_node % heavy_nodes.len().max(1)]
        };
        items.push(pod(
            d,
            p % REPLICAS,
            if light { "20m" } else { "90m" },
            Some(node),
        ));
    }
    for p in 0..pods / PENDING_EVERY {
        items.push(pod(deployments + p, 0, PENDING_CPU, None));
    }
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

fn node_name(i: usize) -> String {
    format!("ip-10-{}-{}-{}", i / 65536 % 256, i / 256 % 256, i % 256)
}

fn node(i: usize) -> Value {
    let name = node_name(i);
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("node-{i}"),
            "labels": {"kubernetes.io/hostname": name, "eks.amazonaws.com/nodegroup": format!("group-{}", i % 4),
                "node.kubernetes.io/instance-type": "m5.xlarge", "topology.kubernetes.io/zone": format!("zone-{}", i % 3)}},
        "spec": {"providerID": format!("aws:///zone/i-{i}")},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn workload(d: usize, cpu: &str) -> Vec<Value> {
    let app = format!("app-{d}");
    let template = json!({"metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "app", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}]}});
    let mut rs_template = template.clone();
    rs_template["metadata"]["labels"]["pod-template-hash"] = json!("h");
    let mut out = vec![
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": app, "namespace": "apps", "uid": format!("d-{d}")},
            "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": app}}, "template": template}}),
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": format!("{app}-h"), "namespace": "apps", "uid": format!("rs-{d}"),
                "labels": {"app": app, "pod-template-hash": "h"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": app, "uid": format!("d-{d}"), "controller": true}]},
            "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": app, "pod-template-hash": "h"}}, "template": rs_template}}),
    ];
    if d % 10 == 5 {
        out.push(
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": app, "namespace": "apps"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": app}}}}),
        );
    }
    out
}

fn pod(d: usize, i: usize, cpu: &str, node: Option<usize>) -> Value {
    let app = format!("app-{d}");
    let mut spec = json!({"containers": [{"name": "app", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}]});
    let mut meta = json!({"name": format!("{app}-h-{i}"), "namespace": "apps", "labels": {"app": app, "pod-template-hash": "h"}});
    if let Some(n) = node {
        spec["nodeName"] = json!(node_name(n));
        meta["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-h"), "uid": format!("rs-{d}"), "controller": true}]);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
}
