//! A synthetic cluster dump for benchmarks, as `kubectl get -A -o json`
//! writes one: `nodes` nodes in four EKS managed node groups (4 CPU,
//! 16 GiB), a DaemonSet pod on each, and `pods_per_node` more pods per
//! node from Deployments of 50 replicas, each with its ReplicaSet and a
//! PDB per ten. One node in ten is lightly used (its pods request 20m),
//! the rest about two thirds; one pod in 300 more is pending, too big for
//! the room any node has left, so that a run both scales up and scales
//! down.
//!
//! Or a recording of a day of that cluster ([`recording`]): the dump as its
//! starting state, then every hour a ramp of pods (of Deployments scaled
//! up, then down half an hour later) of which the nodes' spare room holds
//! about a third, with what a recorder sees of it: the scale changes, the
//! ReplicaSets following, every pod created and deleted, and the nodes the
//! recorded autoscaler added and removed.

use std::io::Write;

use serde_json::{Value, json};

use crate::recording::FORMAT;

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

/// The hourly ramp of a synthetic recording.
#[derive(Debug, Clone, Copy)]
pub struct Ramp {
    /// Hours recorded.
    pub hours: usize,
    /// Pods each ramp adds.
    pub pods: usize,
}

/// Deployments a ramp scales.
const RAMP_DEPLOYMENTS: usize = 20;

/// A ramp pod's CPU: the spare room of a node holds three or ten, a new
/// node twelve.
const RAMP_CPU_MILLIS: usize = 300;

/// When in each hour the ramp comes up, and when it goes down (seconds).
const RAMP_UP_AT: usize = 300;
const RAMP_DOWN_AT: usize = 2100;

/// When in each hour the recorded autoscaler added its nodes, and removed
/// them (seconds).
const NODES_UP_AT: usize = 360;
const NODES_DOWN_AT: usize = 3000;

/// What a synthetic recording holds.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Lines {
    /// Objects of the starting state.
    pub initial: usize,
    /// Changes after it.
    pub changes: usize,
}

/// Writes a recording of `ramp.hours` hours of the cluster [`cluster`]
/// makes, with the hourly ramp, into `out`.
pub fn recording(
    out: &mut impl Write,
    nodes: usize,
    pods_per_node: usize,
    ramp: Ramp,
) -> std::io::Result<Lines> {
    let mut lines = Lines::default();
    writeln!(
        out,
        "{}",
        json!({"format": FORMAT, "start": "2026-11-30T00:00:00Z"})
    )?;
    let mut initial = match cluster(nodes, pods_per_node) {
        Value::Object(mut list) => match list.remove("items") {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    for k in 0..RAMP_DEPLOYMENTS {
        initial.extend(ramp_workload(k, 0));
    }
    for o in initial {
        writeln!(out, "{}", json!({"at": 0, "type": "initial", "object": o}))?;
        lines.initial += 1;
    }
    let per_deployment = ramp.pods.div_ceil(RAMP_DEPLOYMENTS);
    let per_new_node = 3920usize.saturating_sub(50) / RAMP_CPU_MILLIS;
    // The spare room of ten nodes holds about 37 ramp pods (three on each
    // busy node, ten on a light one); the rest needed the recorded
    // autoscaler's new nodes.
    let new_nodes = ramp.pods.saturating_sub(nodes * 37 / 10) / per_new_node.max(1);
    for h in 0..ramp.hours {
        let mut changes: Vec<(f64, &str, Value)> = Vec::new();
        let t0 = (h * 3600) as f64;
        for k in 0..RAMP_DEPLOYMENTS {
            for (at, replicas) in [(RAMP_UP_AT, per_deployment), (RAMP_DOWN_AT, 0)] {
                let at = t0 + at as f64;
                let [d, rs] = ramp_workload(k, replicas);
                changes.push((at, "modified", d));
                changes.push((at + 0.5, "modified", rs));
            }
            for i in 0..per_deployment {
                let pod = ramp_pod(k, h, i);
                let offset = (k * per_deployment + i) as f64 / 100.0;
                changes.push((t0 + RAMP_UP_AT as f64 + 1.0 + offset, "added", pod.clone()));
                changes.push((t0 + RAMP_DOWN_AT as f64 + 1.0 + offset, "deleted", pod));
            }
        }
        for n in 0..new_nodes {
            let node = node(1_000_000 + h * new_nodes + n);
            let offset = n as f64 / 10.0;
            changes.push((t0 + NODES_UP_AT as f64 + offset, "added", node.clone()));
            changes.push((t0 + NODES_DOWN_AT as f64 + offset, "deleted", node));
        }
        changes.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (at, event, o) in changes {
            writeln!(out, "{}", json!({"at": at, "type": event, "object": o}))?;
            lines.changes += 1;
        }
    }
    writeln!(out, "{}", json!({"at": ramp.hours * 3600, "type": "end"}))?;
    Ok(lines)
}

/// Ramp Deployment `k` at `replicas`, and its ReplicaSet.
fn ramp_workload(k: usize, replicas: usize) -> [Value; 2] {
    let cpu = format!("{RAMP_CPU_MILLIS}m");
    let owned = Owned {
        app: format!("ramp-{k}"),
        uid: format!("ramp-{k}"),
        hash: "r",
    };
    owned.deployment(replicas, &container(&cpu, "256Mi"))
}

/// Pod `i` of ramp Deployment `k` in hour `h`, as the recorder saw it made.
fn ramp_pod(k: usize, h: usize, i: usize) -> Value {
    let app = format!("ramp-{k}");
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{app}-r-{h}-{i}"), "namespace": "apps",
            "labels": {"app": app, "pod-template-hash": "r"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-r"), "uid": format!("rs-ramp-{k}"), "controller": true}]},
        "spec": {"containers": [container(&format!("{RAMP_CPU_MILLIS}m"), "256Mi")]}})
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
    let owned = Owned {
        app: format!("app-{d}"),
        uid: d.to_string(),
        hash: "h",
    };
    let app = owned.app.clone();
    let mut out = owned
        .deployment(REPLICAS, &container(cpu, "128Mi"))
        .to_vec();
    if d % 10 == 5 {
        out.push(
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": app, "namespace": "apps"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": app}}}}),
        );
    }
    out
}

/// The one container of a workload's pods.
fn container(cpu: &str, memory: &str) -> Value {
    json!({"name": "app", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": memory}}})
}

/// A Deployment `app` (uid `d-{uid}`) and its ReplicaSet (`{app}-{hash}`,
/// uid `rs-{uid}`), their pods running `container`.
struct Owned {
    app: String,
    uid: String,
    hash: &'static str,
}

impl Owned {
    fn deployment(&self, replicas: usize, container: &Value) -> [Value; 2] {
        let (app, uid, hash) = (&self.app, &self.uid, self.hash);
        let template =
            json!({"metadata": {"labels": {"app": app}}, "spec": {"containers": [container]}});
        let mut rs_template = template.clone();
        rs_template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
        [
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": app, "namespace": "apps", "uid": format!("d-{uid}")},
                "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}}, "template": template}}),
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": format!("{app}-{hash}"), "namespace": "apps", "uid": format!("rs-{uid}"),
                    "labels": {"app": app, "pod-template-hash": hash},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": app, "uid": format!("d-{uid}"), "controller": true}]},
                "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app, "pod-template-hash": hash}}, "template": rs_template}}),
        ]
    }
}

fn pod(d: usize, i: usize, cpu: &str, node: Option<usize>) -> Value {
    let app = format!("app-{d}");
    let mut spec = json!({"containers": [container(cpu, "128Mi")]});
    let mut meta = json!({"name": format!("{app}-h-{i}"), "namespace": "apps", "labels": {"app": app, "pod-template-hash": "h"}});
    if let Some(n) = node {
        spec["nodeName"] = json!(node_name(n));
        meta["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-h"), "uid": format!("rs-{d}"), "controller": true}]);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_day_replays_as_hourly_scale_steps_and_leaves_the_recorded_nodes_out() {
        let mut out = Vec::new();
        let ramp = Ramp {
            hours: 2,
            pods: 2000,
        };
        let lines = recording(&mut out, 100, 30, ramp).unwrap();
        let text = String::from_utf8(out).unwrap();
        let replay = crate::recording::parse("day.jsonl", &text).unwrap();
        // Each hour: every ramp Deployment scaled up, then down.
        assert_eq!(replay.steps.len(), 2 * 2 * RAMP_DEPLOYMENTS);
        let ups: Vec<u64> = replay
            .steps
            .iter()
            .filter(|s| s.action.ends_with(" to 100"))
            .map(|s| s.at)
            .collect();
        assert_eq!(ups.len(), 2 * RAMP_DEPLOYMENTS, "{:?}", replay.steps);
        assert!(ups.iter().all(|&at| at % 3600 == RAMP_UP_AT as u64));
        // 2,000 pods of which 370 fit the spare room: 135 new nodes an hour.
        assert_eq!(replay.recorded.nodes_added, 2 * 135);
        assert_eq!(replay.recorded.nodes_removed, 2 * 135);
        assert_eq!(replay.recorded.by_controllers["Pod"], 2 * 2 * 2000);
        assert!(replay.recorded.complete);
        assert_eq!(replay.recorded.seconds, 7200.0);
        assert_eq!(lines.changes, text.lines().count() - 2 - lines.initial);
    }
}
