//! What the registry reads from one node: its readiness in CA's sense, and
//! its capacity as the cluster-wide resource limits count it.

use k8s_openapi::api::core::v1::Node;

use crate::taints::TaintConfig;

/// Where a registered node stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// Ready.
    Ready,
    /// Not ready, younger than the group's max node startup time.
    NotStarted,
    /// Not ready.
    Unready,
    /// Its instance is going away.
    BeingDeleted,
}

/// Whether a node is ready in CA's sense (docs/reference/ca-rules.md §0.2 and §1.4):
/// Ready=True, no DiskPressure or NetworkUnavailable, none of the matching
/// taints, and no startup taint.
pub fn node_ready(node: &Node, taints: &TaintConfig) -> bool {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    let status = |t: &str| {
        conditions
            .and_then(|c| c.iter().find(|c| c.type_ == t))
            .map(|c| c.status.as_str())
    };
    status("Ready") == Some("True")
        && status("DiskPressure") != Some("True")
        && status("NetworkUnavailable") != Some("True")
        && !node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|ts| {
                ts.iter().any(|t| {
                    matches!(
                        t.key.as_str(),
                        "node.kubernetes.io/not-ready"
                            | "node.kubernetes.io/disk-pressure"
                            | "node.kubernetes.io/network-unavailable"
                    ) || taints.is_startup_taint(&t.key)
                })
            })
}

/// A node's capacity as the cluster-wide resource limits count it: whole
/// cores (rounded up) and memory bytes.
pub fn node_capacity(node: &Node) -> (i64, i64) {
    let capacity = node.status.as_ref().and_then(|s| s.capacity.as_ref());
    let read = |name: &str, parse: fn(&str) -> Option<i64>| {
        capacity
            .and_then(|c| c.get(name))
            .and_then(|q| parse(&q.0))
            .unwrap_or(0)
    };
    let milli_cpu = read("cpu", predicates::quantity::parse_milli);
    (
        (milli_cpu + 999) / 1000,
        read("memory", predicates::quantity::parse_value),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn readiness_follows_conditions_and_taints() {
        let cfg = TaintConfig::default();
        let node = |conds: serde_json::Value, taints: serde_json::Value| -> Node {
            serde_json::from_value(serde_json::json!({"metadata": {"name": "n"}, "spec": {"taints": taints}, "status": {"conditions": conds}})).unwrap()
        };
        let ready = serde_json::json!([{"type": "Ready", "status": "True"}]);
        assert!(node_ready(
            &node(ready.clone(), serde_json::json!([])),
            &cfg
        ));
        assert!(!node_ready(
            &node(
                serde_json::json!([{"type": "Ready", "status": "False"}]),
                serde_json::json!([])
            ),
            &cfg
        ));
        assert!(
            !node_ready(&node(serde_json::json!([]), serde_json::json!([])), &cfg),
            "no Ready condition"
        );
        assert!(!node_ready(
            &node(
                serde_json::json!([{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "True"}]),
                serde_json::json!([])
            ),
            &cfg
        ));
        assert!(!node_ready(
            &node(
                ready.clone(),
                serde_json::json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}])
            ),
            &cfg
        ));
        assert!(!node_ready(
            &node(
                ready.clone(),
                serde_json::json!([{"key": "startup-taint.cluster-autoscaler.kubernetes.io/cni", "effect": "NoSchedule"}])
            ),
            &cfg
        ));
        assert!(node_ready(
            &node(
                ready,
                serde_json::json!([{"key": "status-taint.cluster-autoscaler.kubernetes.io/x", "effect": "NoSchedule"}])
            ),
            &cfg
        ));
    }
}
