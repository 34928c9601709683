//! Soft taints (docs/reference/ca-rules.md §1.3): `DeletionCandidateOfClusterAutoscaler`
//! (`PreferNoSchedule`) is added to unneeded nodes and removed from nodes
//! that are no longer unneeded, at most `--max-bulk-soft-taint-count`
//! changes and `--max-bulk-soft-taint-time` per loop (0 turns them off).

use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Node;

use super::unneeded::Planner;
use crate::clusterstate::ClusterStateRegistry;
use crate::context::AutoscalingContext;
use crate::taints;

/// Brings the soft taints in line with the planner's unneeded list.
pub async fn update_soft_taints(
    ctx: &AutoscalingContext,
    registry: &ClusterStateRegistry,
    planner: &Planner,
    nodes: &[Arc<Node>],
    now: SystemTime,
) {
    let budget = ctx.flags.max_bulk_soft_taint_count;
    if budget == 0 {
        return;
    }
    let started = tokio::time::Instant::now();
    let mut changes = 0;
    for n in nodes {
        if changes >= budget || started.elapsed() > ctx.flags.max_bulk_soft_taint_time {
            break;
        }
        let name = n.metadata.name.clone().unwrap_or_default();
        if registry.node_group(&name).is_none() || taints::has_to_be_deleted(n) {
            continue;
        }
        let unneeded = planner.unneeded.contains_key(&name);
        let tainted = taints::has_taint(n, taints::DELETION_CANDIDATE);
        let result = if unneeded && !tainted {
            taints::add(
                &ctx.client,
                &name,
                taints::DELETION_CANDIDATE,
                "PreferNoSchedule",
                now,
                false,
            )
            .await
            .map(|_| true)
        } else if !unneeded && tainted {
            taints::remove(&ctx.client, &name, taints::DELETION_CANDIDATE, false).await
        } else {
            continue;
        };
        changes += 1;
        if let Err(e) = result {
            tracing::warn!("soft taint on node {name}: {e}");
        }
    }
}
