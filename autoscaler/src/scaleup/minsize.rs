//! `--enforce-node-group-min-size` (docs/reference/ca-rules.md §4.7, upstream's
//! `ScaleUpToNodeGroupMinSize`): every healthy, not backed-off group with a
//! template whose target is below its min size is raised to min, within
//! `--max-nodes-total`, through the one [`executor`](super::executor).

use std::collections::BTreeMap;
use std::time::SystemTime;

use predicates::NodeInfo;

use super::executor;
use super::types::ScaleUpInfo;
use crate::clusterstate::ClusterStateRegistry;
use crate::context::AutoscalingContext;

/// Raises the groups below their min size; returns whether any grew.
pub async fn enforce_min_sizes(
    ctx: &AutoscalingContext,
    registry: &mut ClusterStateRegistry,
    templates: &BTreeMap<String, NodeInfo>,
    nodes_now: usize,
    now: SystemTime,
) -> bool {
    let mut acted = false;
    let mut total = nodes_now;
    for g in ctx.provider.node_groups() {
        let id = g.id();
        let Ok(target) = g.target_size() else {
            continue;
        };
        let min = g.min_size();
        if target >= min
            || registry.group_ready_for_scale_up(&id, now).is_err()
            || !templates.contains_key(&id)
        {
            continue;
        }
        let mut delta = min - target;
        if ctx.flags.max_nodes_total > 0 {
            delta = delta.min(ctx.flags.max_nodes_total.saturating_sub(total));
        }
        if delta == 0 {
            continue;
        }
        let info = ScaleUpInfo {
            group: id,
            current: target,
            new: target + delta,
            max: g.max_size(),
        };
        let executed = executor::execute(ctx, registry, &[info], templates, now, false).await;
        if !executed.done.is_empty() {
            total += delta;
            acted = true;
        }
    }
    acted
}
