//! Housekeeping before scale-up and scale-down (upstream's
//! `static_autoscaler.go`): taints left by an earlier run, instances that
//! never registered or failed to be created, and node groups whose target
//! stays above what registers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Node;
use serde_json::json;

use crate::cloudprovider::NodeGroup;
use crate::clusterstate::ClusterStateRegistry;
use crate::context::AutoscalingContext;
use crate::events::{EventReason, EventType, ObjectRef};
use crate::taints;

/// Annotation on fake nodes handed to `delete_nodes` for instances.
pub const FAKE_NODE_REASON: &str = "k8s.io/cluster-autoscaler/fake-node-reason";

/// A fake node standing for an instance without a Node, with the reason.
fn fake_node(id: &str, reason: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": id, "annotations": {FAKE_NODE_REASON: reason}},
        "spec": {"providerID": id},
    }))
    .unwrap_or_default()
}

/// Removes, once per process, the ToBeDeleted taints left by an earlier
/// run (and soft taints when soft tainting is off).
pub async fn clean_up_taints(ctx: &AutoscalingContext) {
    let nodes: Vec<Arc<Node>> = ctx.cache.read().nodes.values().cloned().collect();
    for node in nodes {
        if !matches!(ctx.provider.node_group_for_node(&node), Ok(Some(_))) {
            continue;
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        let uid = node.metadata.uid.clone().unwrap_or_default();
        let mut keys = vec![taints::TO_BE_DELETED];
        // Soft taints go when soft tainting is off; with a candidate
        // TTL only those older than it.
        let ttl = ctx.flags.node_deletion_candidate_ttl;
        let young = taints::taint_time(&node, taints::DELETION_CANDIDATE)
            .is_some_and(|t| !ttl.is_zero() && t + ttl > ctx.clock.now());
        if ctx.flags.max_bulk_soft_taint_count == 0 && !young {
            keys.push(taints::DELETION_CANDIDATE);
        }
        for key in keys {
            if !taints::has_taint(&node, key) {
                continue;
            }
            let cordon = key == taints::TO_BE_DELETED && ctx.flags.cordon_node_before_terminating;
            match taints::remove(&ctx.client, &name, key, cordon).await {
                Ok(_) => ctx.events.record(
                    &ObjectRef::node(&name, &uid),
                    EventType::Normal,
                    EventReason::ClusterAutoscalerCleanup,
                    format!("removed {key} taint from node {name}"),
                ),
                Err(e) => ctx.events.record(
                    &ObjectRef::node(&name, &uid),
                    EventType::Warning,
                    EventReason::ClusterAutoscalerCleanup,
                    format!("failed to clean {key} on node {name}: {e}"),
                ),
            }
        }
    }
}

/// Deletes instances that never registered within the group's
/// provision time (docs/reference/ca-rules.md §3.7, upstream's
/// `removeOldUnregisteredNodes`). The min size holds, counted on the
/// group's target: a group at its min keeps them ("min size reached,
/// skipping removal"), one above it loses as many as it can spare. With
/// `--force-delete-unregistered-nodes` the min size is not checked and the
/// provider is asked to force the deletion ([`force_delete`]). A failure
/// stops the removal for this loop, as upstream.
pub async fn remove_long_unregistered(ctx: &AutoscalingContext, registry: &ClusterStateRegistry) {
    let groups: Vec<(Arc<dyn NodeGroup>, usize, Vec<String>)> = registry
        .groups()
        .values()
        .filter(|g| !g.long_unregistered.is_empty())
        .map(|g| (g.group.clone(), g.target, g.long_unregistered.clone()))
        .collect();
    let force = ctx.flags.force_delete_unregistered_nodes;
    for (group, target, mut ids) in groups {
        let gid = group.id();
        for id in &ids {
            tracing::info!("Marking unregistered node {id} for removal");
        }
        tracing::info!(
            "Removing {} unregistered nodes for node group {gid}",
            ids.len()
        );
        if !force {
            let spare = target.saturating_sub(group.min_size());
            if spare == 0 {
                tracing::warn!(
                    "Node group {gid} min size reached, skipping removal of {} unregistered nodes",
                    ids.len()
                );
                continue;
            }
            if ids.len() > spare {
                tracing::warn!(
                    "Capping node group {gid} unregistered node removal to {spare} nodes, removing all {} would exceed min size constaint",
                    ids.len()
                );
                ids.truncate(spare);
            }
        }
        let fakes: Vec<Node> = ids.iter().map(|id| fake_node(id, "unregistered")).collect();
        let deleted = if force {
            force_delete(&*group, fakes).await
        } else {
            group.delete_nodes(fakes).await
        };
        match deleted {
            Ok(()) => {
                for id in &ids {
                    ctx.metrics.old_unregistered_removed.inc();
                    ctx.events.status(
                        EventType::Normal,
                        EventReason::DeleteUnregistered,
                        format!("Removed unregistered node {id}"),
                    );
                }
                tracing::info!("Some unregistered nodes were removed");
            }
            Err(e) => {
                tracing::warn!(
                    "Failed to remove {} unregistered nodes from node group {gid}: {e}",
                    ids.len()
                );
                for id in &ids {
                    ctx.events.status(
                        EventType::Warning,
                        EventReason::DeleteUnregisteredFailed,
                        format!("Failed to remove node {id}: {e}"),
                    );
                }
                return;
            }
        }
    }
}

/// `ForceDeleteNodes`, or `DeleteNodes` where the provider has none.
pub async fn force_delete(
    group: &dyn NodeGroup,
    nodes: Vec<Node>,
) -> Result<(), crate::cloudprovider::CloudError> {
    match group.force_delete_nodes(nodes.clone()).await {
        Err(crate::cloudprovider::CloudError::NotImplemented) => group.delete_nodes(nodes).await,
        other => other,
    }
}

/// Deletes the instances that failed to be created (docs/reference/ca-rules.md §3.7,
/// upstream's `deleteCreatedNodesWithErrors`), a group's all at once,
/// handing the provider fake nodes named after them; forced with
/// `--force-delete-failed-nodes` ([`force_delete`]). The min size is not
/// checked here (the provider may). Returns whether any were removed.
pub async fn delete_failed_instances(
    ctx: &AutoscalingContext,
    registry: &ClusterStateRegistry,
) -> bool {
    let mut removed = false;
    for g in registry.groups().values().filter(|g| !g.failed.is_empty()) {
        let gid = g.group.id();
        tracing::info!(
            "Deleting {} from {gid} node group because of create errors",
            g.failed.len()
        );
        let fakes: Vec<Node> = g
            .failed
            .iter()
            .map(|id| fake_node(id, "create-error"))
            .collect();
        let deleted = if ctx.flags.force_delete_failed_nodes {
            force_delete(&*g.group, fakes).await
        } else {
            g.group.delete_nodes(fakes).await
        };
        match deleted {
            Ok(()) => removed = true,
            Err(e) => tracing::warn!("Error while trying to delete nodes from {gid}: {e}"),
        }
    }
    if removed {
        tracing::info!(
            "Some nodes that failed to create were removed, recalculating cluster state."
        );
    }
    removed
}

/// Groups whose registered nodes stay below target: since when, for the
/// target and count seen then.
#[derive(Debug, Default)]
pub struct SizeFixer {
    mismatch: HashMap<String, (usize, usize, SystemTime)>,
}

impl SizeFixer {
    /// Lowers the target of a group whose registered nodes stayed below
    /// target for longer than its provision time (and that is not scaling up).
    pub async fn fix_incorrect_sizes(
        &mut self,
        registry: &ClusterStateRegistry,
        now: SystemTime,
    ) -> bool {
        let mut fixed = false;
        let groups: Vec<_> = registry
            .groups()
            .iter()
            .map(|(id, g)| (id.clone(), g.clone()))
            .collect();
        for (id, g) in groups {
            let registered = g.counts.registered + g.counts.unregistered;
            if registered >= g.target || registry.is_scaling_up(&id) {
                self.mismatch.remove(&id);
                continue;
            }
            let entry = self
                .mismatch
                .entry(id.clone())
                .or_insert((g.target, registered, now));
            if (entry.0, entry.1) != (g.target, registered) {
                *entry = (g.target, registered, now);
                continue;
            }
            if entry.2 + g.provision_time <= now {
                let delta =
                    i64::try_from(registered).unwrap_or(0) - i64::try_from(g.target).unwrap_or(0);
                match g.group.decrease_target_size(delta).await {
                    Ok(()) => fixed = true,
                    Err(e) => tracing::warn!("fixing the size of node group {id}: {e}"),
                }
                self.mismatch.remove(&id);
            }
        }
        fixed
    }
}
