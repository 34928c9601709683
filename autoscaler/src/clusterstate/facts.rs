//! What a loop reads from every node several times (its readiness in CA's
//! sense, its capacity, its GPU resource), read once per version of the
//! node and kept across loops.
//!
//! A loop walks the nodes for the registry, the cluster metrics, the
//! resource limits and the scale-down candidates; each walk used to parse
//! the same conditions, taints and quantities again. A node changes far
//! less often than the loop runs (a kubelet's status report every few
//! minutes), so [`NodeFactsMemo`] keeps each node's [`NodeFacts`] until the
//! node object is replaced.

use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Node;

use super::nodes::{node_capacity, node_ready};
use crate::cache::node_memo::NodeVersionMemo;
use crate::taints::{self, TaintConfig};

/// What the loop reads from one version of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeFacts {
    /// Ready in CA's sense ([`node_ready`]).
    pub ready: bool,
    /// Whole cores and memory bytes, as the resource limits count them
    /// ([`node_capacity`]).
    pub capacity: (i64, i64),
    /// A virtual-kubelet node (`type: virtual-kubelet`), which the resource
    /// limits leave out.
    pub virtual_kubelet: bool,
    /// The first vendor GPU resource the node has allocatable
    /// ([`crate::gpu::allocatable_resource`]).
    pub gpu_allocatable: Option<&'static str>,
}

impl NodeFacts {
    /// Reads the facts from the node.
    pub fn read(node: &Node, taints: &TaintConfig) -> Self {
        Self {
            ready: node_ready(node, taints),
            capacity: node_capacity(node),
            virtual_kubelet: node
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("type"))
                .is_some_and(|t| t == "virtual-kubelet"),
            gpu_allocatable: crate::gpu::allocatable_resource(node),
        }
    }
}

/// The facts of every node seen, each read once per version of the node.
#[derive(Debug)]
pub struct NodeFactsMemo {
    taints: TaintConfig,
    known: NodeVersionMemo<NodeFacts>,
}

impl NodeFactsMemo {
    /// A memo whose readiness reads the given startup and status taints.
    pub fn new(taints: TaintConfig) -> Self {
        Self {
            taints,
            known: NodeVersionMemo::default(),
        }
    }

    /// The node's facts.
    pub fn of(&self, node: &Arc<Node>) -> NodeFacts {
        self.known
            .get_or_read(node, || NodeFacts::read(node, &self.taints))
    }

    /// Forgets the nodes that are no longer in the cluster, once the memo
    /// holds many more names than there are nodes.
    pub fn forget_gone(&self, nodes: &[Arc<Node>]) {
        self.known.forget_gone(|| nodes.to_vec());
    }
}

/// The cluster's cores and memory as the resource limits count them
/// (`--cores-total`, `--memory-total`): nodes being deleted and
/// virtual-kubelet nodes are left out.
pub fn cluster_resources(
    nodes: &[Arc<Node>],
    facts: &NodeFactsMemo,
    now: SystemTime,
) -> (i64, i64) {
    nodes
        .iter()
        .filter(|n| !taints::being_deleted(n, now))
        .map(|n| facts.of(n))
        .filter(|f| !f.virtual_kubelet)
        .map(|f| f.capacity)
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn node(rv: &str, ready: &str, cpu: &str) -> Arc<Node> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "n1", "resourceVersion": rv},
                "status": {
                    "capacity": {"cpu": cpu, "memory": "1Gi"},
                    "conditions": [{"type": "Ready", "status": ready}]
                }
            }))
            .unwrap(),
        )
    }

    #[test]
    fn a_new_version_of_a_node_is_read_again() {
        let memo = NodeFactsMemo::new(TaintConfig::default());
        let first = node("1", "True", "2");
        assert_eq!(memo.of(&first).capacity, (2, 1 << 30));
        assert!(memo.of(&first).ready);
        let second = node("2", "False", "4");
        let facts = memo.of(&second);
        assert!(!facts.ready);
        assert_eq!(facts.capacity, (4, 1 << 30));
        // The same resourceVersion in another object (built in memory) is
        // read again too.
        let copy = node("2", "True", "8");
        assert!(memo.of(&copy).ready);
        assert_eq!(memo.of(&copy).capacity.0, 8);
    }
}
