//! Scale-down candidates (upstream's `core/scaledown/eligibility` and
//! `simulator/utilization`): autoscaled nodes of groups above their min
//! size and outside their per-group delay, with the group's thresholds; and
//! how a node's utilization is computed (ca-compat §3.3).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Node;
use predicates::NodeInfo;

use super::actuation::InProgress;
use super::cooldown::Cooldown;
use super::{CandidateNode, GroupSize, SCALE_DOWN_DISABLED};
use crate::clusterstate::ClusterStateRegistry;
use crate::context::AutoscalingContext;
use crate::simulator::drainability::{is_daemonset_pod, is_long_terminating, is_mirror_pod};
use crate::taints;

/// A node's utilization cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UtilizationError {
    /// The node has no allocatable CPU or memory.
    #[error("node {node} has no allocatable resources")]
    NoAllocatable {
        /// The node.
        node: String,
    },
}

/// A node's utilization (ca-compat §3.3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Utilization {
    /// CPU fraction.
    pub cpu: f64,
    /// Memory fraction.
    pub memory: f64,
    /// GPU fraction (GPU nodes).
    pub gpu: f64,
    /// `cpu`, `memory` or the GPU resource.
    pub resource: &'static str,
    /// The deciding value.
    pub utilization: f64,
}

impl std::fmt::Display for Utilization {
    /// Go's `%v` of upstream's record: `{cpu mem gpu dra resource util}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{{{} {} {} 0 {} {}}}",
            self.cpu, self.memory, self.gpu, self.resource, self.utilization
        )
    }
}

/// Utilization of a node: requests of its pods over allocatable, per
/// resource; DaemonSet and mirror pods excluded (and their requests taken
/// off allocatable) when the flags say so; long-terminating pods skipped.
pub fn utilization(
    node: &NodeInfo,
    ignore_ds: bool,
    ignore_mirror: bool,
    gpu_resource: Option<&str>,
    now: SystemTime,
) -> Result<Utilization, UtilizationError> {
    let mut used = predicates::resources::Resources::default();
    let mut excluded = predicates::resources::Resources::default();
    for p in &node.pods {
        if is_long_terminating(&p.pod, now) {
            continue;
        }
        if (ignore_ds && is_daemonset_pod(&p.pod)) || (ignore_mirror && is_mirror_pod(&p.pod)) {
            excluded.add(&p.requests);
        } else {
            used.add(&p.requests);
        }
    }
    let frac = |used: i64, alloc: i64, excl: i64| -> Result<f64, UtilizationError> {
        let base = alloc - excl;
        if alloc <= 0 {
            return Err(UtilizationError::NoAllocatable {
                node: node.name().to_string(),
            });
        }
        Ok(if base <= 0 {
            0.0
        } else {
            used as f64 / base as f64
        })
    };
    if let Some(gpu) = gpu_resource {
        let alloc = node.allocatable.scalar.get(gpu).copied().unwrap_or(0);
        let g = if alloc > 0 {
            used.scalar.get(gpu).copied().unwrap_or(0) as f64 / alloc as f64
        } else {
            0.0
        };
        return Ok(Utilization {
            cpu: 0.0,
            memory: 0.0,
            gpu: g,
            resource: "gpu",
            utilization: g,
        });
    }
    let cpu = frac(
        used.milli_cpu,
        node.allocatable.milli_cpu,
        excluded.milli_cpu,
    )?;
    let memory = frac(used.memory, node.allocatable.memory, excluded.memory)?;
    let (resource, utilization) = if cpu > memory {
        ("cpu", cpu)
    } else {
        ("memory", memory)
    };
    Ok(Utilization {
        cpu,
        memory,
        gpu: 0.0,
        resource,
        utilization,
    })
}

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
    let mut out = Vec::new();
    for n in nodes {
        let name = n.metadata.name.clone().unwrap_or_default();
        if in_progress.contains_key(&name) {
            continue;
        }
        let Some(group) = registry.node_group(&name) else {
            continue;
        };
        let Some(g) = registry.group(group) else {
            continue;
        };
        if g.target <= g.group.min_size() || cooldown.group_in_delay(&ctx.flags, group, now) {
            continue;
        }
        let o = ctx.options_for(&*g.group);
        let gpu = crate::gpu::node_resource(n, &gpu_label).map(str::to_string);
        out.push(CandidateNode {
            name: name.clone(),
            group: Some(group.to_string()),
            ready: registry.is_ready(&name),
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
        });
    }
    out
}
