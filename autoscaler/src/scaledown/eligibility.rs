//! Scale-down candidates (docs/reference/ca-rules.md §3.2–§3.3, upstream's
//! `core/scaledown/eligibility`): autoscaled nodes of groups above their
//! min size and outside their per-group delay, with the group's
//! thresholds; and every group's facts for choosing deletions. A node's
//! utilization is computed in [`utilization`](mod@super::utilization).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Node;

use super::actuation::InProgress;
use super::cooldown::Cooldown;
use super::selection::GroupSize;
use super::unneeded::CandidateNode;
use crate::cache::LoopHasher;
use crate::cloudprovider::NodeGroupOptions;
use crate::clusterstate::ClusterStateRegistry;
use crate::context::AutoscalingContext;
use crate::taints;

/// `cluster-autoscaler.kubernetes.io/scale-down-disabled`.
pub const SCALE_DOWN_DISABLED: &str = "cluster-autoscaler.kubernetes.io/scale-down-disabled";

/// Every node group's facts for choosing deletions, by id.
pub fn group_sizes(
    ctx: &AutoscalingContext,
    registry: &ClusterStateRegistry,
    in_progress: &BTreeMap<String, InProgress>,
) -> BTreeMap<String, GroupSize> {
    registry
        .groups()
        .iter()
        .map(|(id, g)| {
            let o = ctx.options_for(&*g.group);
            let size = GroupSize {
                target: g.target,
                min: g.group.min_size(),
                deleting: in_progress.values().filter(|d| &d.group == id).count(),
                unneeded_time: o.scale_down_unneeded_time,
                unready_time: o.scale_down_unready_time,
            };
            (id.clone(), size)
        })
        .collect()
}

/// The nodes the planner checks: autoscaled, not being deleted by us, in
/// a group above its min size and outside its per-group delay.
pub fn candidates(
    ctx: &AutoscalingContext,
    registry: &ClusterStateRegistry,
    cooldown: &Cooldown,
    nodes: &[Arc<Node>],
    in_progress: &BTreeMap<String, InProgress>,
    now: SystemTime,
) -> Vec<CandidateNode> {
    let gpu_label = ctx.provider.gpu_label();
    // Each group is read once: `None` when its nodes are not candidates
    // (at its min size, or in its scale-down delay).
    let mut groups: HashMap<&str, Option<NodeGroupOptions>, LoopHasher> = HashMap::default();
    let mut out = Vec::new();
    for n in nodes {
        let name = n.metadata.name.as_deref().unwrap_or_default();
        if in_progress.contains_key(name) {
            continue;
        }
        let Some(group) = registry.node_group(name) else {
            continue;
        };
        let options = groups.entry(group).or_insert_with(|| {
            let g = registry.group(group)?;
            let open =
                g.target > g.group.min_size() && !cooldown.group_in_delay(&ctx.flags, group, now);
            open.then(|| ctx.options_for(&*g.group))
        });
        let Some(o) = options else {
            continue;
        };
        let allocatable = ctx.node_facts.of(n).gpu_allocatable;
        let gpu = crate::gpu::node_resource(n, allocatable, &gpu_label).map(str::to_string);
        out.push(CandidateNode {
            name: name.to_string(),
            group: Some(group.to_string()),
            ready: registry.is_ready(name),
            being_deleted: taints::being_deleted(n, now),
            disabled: n
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(SCALE_DOWN_DISABLED))
                .map(String::as_str)
                == Some("true"),
            threshold: if gpu.is_some() {
                o.scale_down_gpu_utilization_threshold
            } else {
                o.scale_down_utilization_threshold
            },
            gpu_resource: gpu,
            ignore_daemonsets: o.ignore_daemonsets_utilization,
            soft_tainted_at: taints::taint_time(n, taints::DELETION_CANDIDATE),
            atomic: o.zero_or_max_node_scaling,
        });
    }
    out
}
