//! Custom resources a new node must have before it counts as ready
//! (upstream's `processors/customresources`): GPUs are in [`crate::gpu`];
//! here the CSI drivers (`csi_processor.go`, with
//! `--enable-csi-node-aware-scheduling`). A Ready node of a group whose
//! provider template lists CSI drivers (Cluster API's `csi-driver`
//! annotation) is unready, reason
//! `cluster-autoscaler.kubernetes.io/resource-not-ready`, while its CSINode
//! lacks one of those drivers; a node with no CSINode yet is left ready, as
//! upstream does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use predicates::CsiNode;

use crate::cloudprovider::CloudProvider;

/// The nodes whose CSI drivers are not all registered yet.
pub fn csi_unready_nodes(
    provider: &dyn CloudProvider,
    nodes: &[Arc<Node>],
    live: &BTreeMap<String, Arc<CsiNode>>,
) -> BTreeSet<String> {
    let mut templates: BTreeMap<String, Option<CsiNode>> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or("");
        let Some(have) = live.get(name) else {
            tracing::trace!(
                "No CSI node found for node {name}, Skipping CSI readiness check and keeping node in ready list."
            );
            continue;
        };
        let group = match provider.node_group_for_node(node) {
            Ok(Some(g)) => g,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(
                    "Failed to get node group for node {name}, Skipping CSI readiness check and keeping node in ready list. Error: {e}"
                );
                continue;
            }
        };
        let id = group.id();
        let want = templates.entry(id.clone()).or_insert_with(|| {
            group
                .template_node_info()
                .map_err(|e| {
                    tracing::warn!(
                        "Failed to get template node info for node group {id} with error: {e}"
                    )
                })
                .ok()
                .and_then(|t| t.csi)
        });
        let Some(want) = want else {
            continue;
        };
        if want.drivers.keys().any(|d| !have.drivers.contains_key(d)) {
            out.insert(name.to_string());
        }
    }
    out
}
