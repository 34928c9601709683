//! Where a DaemonSet's pods belong: on which nodes (as the DaemonSet
//! controller's `NodeShouldRunDaemonPod` decides), and which nodes its
//! next sync reads again.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, Pod};

/// The nodes a DaemonSet's next sync reads again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum NodeScope {
    /// Every node.
    All,
    /// These nodes (those gone included: their placement is forgotten).
    Nodes(BTreeSet<String>),
}

impl Default for NodeScope {
    fn default() -> Self {
        NodeScope::Nodes(BTreeSet::new())
    }
}

impl NodeScope {
    /// Adds `node` to the scope.
    pub fn mark(&mut self, node: &str) {
        if let NodeScope::Nodes(nodes) = self {
            nodes.insert(node.to_string());
        }
    }

    /// Adds every node of `other` to the scope.
    pub fn merge(&mut self, other: NodeScope) {
        match other {
            NodeScope::All => *self = NodeScope::All,
            NodeScope::Nodes(nodes) => nodes.iter().for_each(|n| self.mark(n)),
        }
    }
}

/// Where a daemon pod belongs, as the DaemonSet controller's
/// `NodeShouldRunDaemonPod` decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DaemonPlacement {
    /// Node selector/affinity match and every NoSchedule/NoExecute taint is
    /// tolerated: a pod is created if missing.
    Run,
    /// A NoSchedule taint (such as `ToBeDeletedByClusterAutoscaler`) is not
    /// tolerated: no new pod, but a running one stays.
    KeepRunning,
    /// No match, or a NoExecute taint is not tolerated: the pod goes.
    No,
}

pub(super) fn daemon_placement(pod: &Pod, node: &Node) -> DaemonPlacement {
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let tols = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    if !predicates::filters::node_affinity_matches_node(pod, node) {
        return DaemonPlacement::No;
    }
    if predicates::filters::untolerated_taint(taints, tols).is_none() {
        return DaemonPlacement::Run;
    }
    let evicting = taints
        .iter()
        .any(|t| t.effect == "NoExecute" && !predicates::labels::tolerated_by(tols, t));
    if evicting {
        DaemonPlacement::No
    } else {
        DaemonPlacement::KeepRunning
    }
}
