//! The suite's kwok Stages: nodes kept NotReady, pods that take their
//! grace period to terminate. Only our kwok reads Stages from the cluster
//! ([`super::backend::backend_reads_stages`]).

use serde_json::{Value, json};

/// The label that makes kwok keep a node NotReady ([`not_ready_stage`]).
pub const NOT_READY_LABEL: &str = "testbed.conformance/not-ready";

/// A kwok Stage that makes nodes labelled [`NOT_READY_LABEL`] NotReady
/// (before or after they were Ready) and keeps them so.
pub fn not_ready_stage() -> Value {
    json!({
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
        "metadata": {"name": "conformance-node-not-ready"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Node"},
            "selector": {"matchLabels": {NOT_READY_LABEL: "true"}},
            "weight": 10000,
            "steps": [
                // As the node lifecycle controller does for NotReady nodes.
                {"patch": {"root": "spec", "type": "merge", "template":
                    "taints:\n- key: node.kubernetes.io/not-ready\n  effect: NoSchedule\n"}},
                {"patch": {"subresource": "status", "root": "status", "template":
                    "conditions:\n- type: Ready\n  status: \"False\"\n  reason: KubeletNotReady\n  message: made NotReady by the conformance suite\n"}},
            ],
        }
    })
}

/// The label of pods that take their grace period to terminate
/// ([`graceful_termination_stage`]).
pub const GRACEFUL_TERMINATION_LABEL: &str = "testbed.conformance/graceful-termination";

/// A kwok Stage that deletes terminating pods labelled
/// [`GRACEFUL_TERMINATION_LABEL`] only when their grace period is over
/// (at `deletionTimestamp`), as a kubelet does; other pods go at once.
pub fn graceful_termination_stage() -> Value {
    json!({
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
        "metadata": {"name": "conformance-graceful-termination"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchLabels": {GRACEFUL_TERMINATION_LABEL: "true"},
                "matchExpressions": [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}],
            },
            "weight": 10000,
            "delay": {"durationFrom": {"expressionFrom": ".metadata.deletionTimestamp"}},
            "next": {"delete": true},
        }
    })
}
