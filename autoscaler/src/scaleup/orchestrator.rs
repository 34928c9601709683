//! The scale-up step of the loop (upstream's `core/scaleup/orchestrator`):
//! gathers the pending pods (with those of nodes being drained), stops at
//! `--max-nodes-total` or while the pods are too new, plans, executes, and
//! tells each pod what happened (`TriggeredScaleUp`, `NotTriggerScaleUp`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use predicates::{NodeInfo, PodInfo};

use super::{
    Balancing, Candidate, Limits, Plan, PlanInputs, ScaleUpInfo, ScaleUpStatus, executor, new_pods,
};
use crate::clusterstate::{self, ClusterStateRegistry};
use crate::context::AutoscalingContext;
use crate::events::{EventReason, EventType, ObjectRef};
use crate::expander::priority;
use crate::metrics::Metrics;
use crate::simulator::Snapshot;
use crate::simulator::drainability::{is_daemonset_pod, is_mirror_pod};

/// What the scale-up step did, for the decision record and the cooldown.
#[derive(Debug, Clone)]
pub struct ScaleUpOutcome {
    /// How it ended.
    pub status: ScaleUpStatus,
    /// Per pending pod: node group -> `chosen`, or why not.
    pub pods: BTreeMap<String, BTreeMap<String, String>>,
    /// The options the expander chose among: group -> node count.
    pub options: BTreeMap<String, usize>,
    /// The increases that succeeded.
    pub scaled: Vec<ScaleUpInfo>,
    /// When every pending pod was very new (upstream's "Unschedulable pods
    /// are very new, waiting one iteration for more", [`new_pods`]): when
    /// the wait ends.
    pub pods_new_until: Option<SystemTime>,
}

impl ScaleUpOutcome {
    fn stopped(status: ScaleUpStatus) -> Self {
        Self {
            status,
            pods: BTreeMap::new(),
            options: BTreeMap::new(),
            scaled: Vec::new(),
            pods_new_until: None,
        }
    }
}

/// What the loop hands the scale-up step.
pub struct ScaleUpInputs<'a> {
    /// Pods without a node (compact, [`crate::cache::compact`]).
    pub unbound: &'a [PodInfo],
    /// Template nodes per group.
    pub templates: &'a BTreeMap<String, NodeInfo>,
    /// Every node.
    pub nodes: &'a [Arc<Node>],
    /// Nodes whose drain is in progress: their pods need a place too.
    pub draining: &'a [String],
    /// The loop's time.
    pub now: SystemTime,
}

/// Runs one scale-up on the snapshot (pods that fit somewhere are placed
/// in it for the rest of the loop).
pub async fn scale_up(
    ctx: &AutoscalingContext,
    registry: &mut ClusterStateRegistry,
    snapshot: &mut Snapshot,
    inputs: &ScaleUpInputs<'_>,
) -> ScaleUpOutcome {
    let f = &ctx.flags;
    let now = inputs.now;
    let mut pending = super::pending_pods(
        inputs.unbound.iter(),
        f.expendable_pods_priority_cutoff,
        &f.bypassed_scheduler_names,
    );
    pending.extend(pods_of_draining_nodes(ctx, inputs.draining).await);
    let t = std::time::Instant::now();
    let pending = super::filter_out_schedulable(snapshot, pending);
    ctx.metrics.observe("filterOutSchedulable", t.elapsed());
    snapshot.commit();
    let pending: Vec<PodInfo> = pending
        .into_iter()
        .filter(|p| !is_daemonset_pod(&p.pod))
        .filter(|p| super::old_enough(&p.pod, f.new_pod_scale_up_delay, now))
        .collect();
    if pending.is_empty() {
        tracing::debug!("No unschedulable pods");
        return ScaleUpOutcome::stopped(ScaleUpStatus::NotNeeded);
    }
    let ready_nodes = inputs
        .nodes
        .iter()
        .filter(|n| {
            clusterstate::node_ready(n, &ctx.taints)
                && n.spec.as_ref().and_then(|s| s.unschedulable) != Some(true)
        })
        .count();
    if f.max_nodes_total > 0 && ready_nodes >= f.max_nodes_total {
        ctx.events.status(
            EventType::Warning,
            EventReason::MaxNodesTotalReached,
            format!("Max total nodes in cluster reached: {}", f.max_nodes_total),
        );
        for p in &pending {
            ctx.events.record(
                &ObjectRef::pod(&p.pod),
                EventType::Normal,
                EventReason::NotTriggerScaleUp,
                "pod didn't trigger scale-up: max total nodes in cluster reached".into(),
            );
        }
        return ScaleUpOutcome::stopped(ScaleUpStatus::LimitedByMaxNodesTotal);
    }
    let new_until = f
        .bypassed_scheduler_names
        .is_empty()
        .then(|| new_pods::very_new_until(&pending, now, f.frequent_loops_enabled))
        .flatten();
    if new_until.is_some() {
        tracing::debug!("Unschedulable pods are very new, waiting one iteration for more");
        return ScaleUpOutcome {
            pods_new_until: new_until,
            ..ScaleUpOutcome::stopped(ScaleUpStatus::InCooldown)
        };
    }
    let (candidates, skipped) = candidates(ctx, registry, inputs.templates, now);
    let (cores, memory) = clusterstate::cluster_resources(inputs.nodes, now);
    let limits = Limits {
        max_nodes_total: f.max_nodes_total,
        nodes_now: snapshot.nodes().len(),
        cores: (ctx.validated.cores_total.max, cores),
        memory: (
            ctx.validated.memory_total.max.saturating_mul(1 << 30),
            memory,
        ),
        max_nodes_per_scaleup: f.max_nodes_per_scaleup,
    };
    let balancing = Balancing {
        enabled: f.balance_similar_node_groups,
        ignore_labels: f.balancing_ignore_label.clone(),
        labels: f.balancing_label.clone(),
        memory_ratio: f.memory_difference_ratio,
        allocatable_ratio: f.max_allocatable_difference_ratio,
        free_ratio: f.max_free_difference_ratio,
    };
    let priorities = priority::load(ctx).await;
    let mut notices = Vec::new();
    let t = std::time::Instant::now();
    let mut limit_hits = Vec::new();
    let plan = super::plan(
        snapshot,
        &PlanInputs {
            pods: &pending,
            candidates: &candidates,
            skipped: &skipped,
            limits: &limits,
            expanders: &ctx.validated.expanders,
            priorities: priorities.as_ref(),
            balancing: &balancing,
            max_binpacking_time: f.max_binpacking_time,
            max_group_binpacking_time: f.max_nodegroup_binpacking_duration,
        },
        &mut notices,
        &mut limit_hits,
    );
    ctx.metrics.observe("scaleUp:estimate", t.elapsed());
    for hit in limit_hits {
        for resource in hit.resources {
            Metrics::inc(
                &ctx.metrics.skipped_scale_events,
                &[("direction", "up"), ("reason", resource.skipped_reason())],
                1,
            );
        }
    }
    priority::report_notices(ctx, notices);
    let by_key: HashMap<&str, &Pod> = pending.iter().map(|p| (p.key.as_str(), &*p.pod)).collect();
    match plan {
        Plan::NoOptions { reasons, groups } => {
            for (key, rs) in reasons {
                let text: Vec<String> = rs.iter().map(|(r, n)| format!("{n} {r}")).collect();
                if let Some(p) = by_key.get(key.as_str()) {
                    ctx.events.record(
                        &ObjectRef::pod(p),
                        EventType::Normal,
                        EventReason::NotTriggerScaleUp,
                        format!("pod didn't trigger scale-up: {}", text.join(", ")),
                    );
                }
            }
            ScaleUpOutcome {
                pods: groups,
                ..ScaleUpOutcome::stopped(ScaleUpStatus::NoOptionsAvailable)
            }
        }
        Plan::ScaleUp {
            infos,
            option,
            considered,
            groups: verdicts,
        } => {
            let options = considered
                .iter()
                .map(|o| (o.group.clone(), o.node_count))
                .collect();
            if infos.is_empty() {
                return ScaleUpOutcome {
                    pods: verdicts,
                    options,
                    ..ScaleUpOutcome::stopped(ScaleUpStatus::NoOptionsAvailable)
                };
            }
            let executed = executor::execute(ctx, registry, &infos, now).await;
            if !executed.done.is_empty() {
                let text: Vec<String> = executed
                    .done
                    .iter()
                    .map(|i| format!("{{{} {}->{} (max: {})}}", i.group, i.current, i.new, i.max))
                    .collect();
                tracing::info!(
                    "Final scale-up plan: [{}], for {} pods",
                    text.join(" "),
                    option.pods.len()
                );
                let message = format!("pod triggered scale-up: [{}]", text.join(" "));
                for key in &option.pods {
                    if let Some(p) = by_key.get(key.as_str()) {
                        ctx.events.record(
                            &ObjectRef::pod(p),
                            EventType::Normal,
                            EventReason::TriggeredScaleUp,
                            message.clone(),
                        );
                    }
                }
            }
            ScaleUpOutcome {
                status: if executed.failed {
                    ScaleUpStatus::Error
                } else {
                    ScaleUpStatus::Successful
                },
                pods: verdicts,
                options,
                scaled: executed.done,
                pods_new_until: None,
            }
        }
    }
}

/// The node groups that can take part, and why the others cannot.
fn candidates(
    ctx: &AutoscalingContext,
    registry: &ClusterStateRegistry,
    templates: &BTreeMap<String, NodeInfo>,
    now: SystemTime,
) -> (Vec<Candidate>, BTreeMap<String, String>) {
    let mut skipped = BTreeMap::new();
    let mut candidates = Vec::new();
    for g in ctx.provider.node_groups() {
        let id = g.id();
        if let Err(reason) = registry.group_ready_for_scale_up(&id, now) {
            skipped.insert(id, reason.to_string());
            continue;
        }
        let (Ok(target), Some(template)) = (g.target_size(), templates.get(&id)) else {
            skipped.insert(id, "not ready for scale-up".into());
            continue;
        };
        candidates.push(Candidate {
            id,
            template: template.clone(),
            target,
            max: g.max_size(),
        });
    }
    (candidates, skipped)
}

/// The pods of nodes being drained, unbound, so that scale-up finds them a
/// place. The cache keeps bound pods compact, so the full ones are read.
async fn pods_of_draining_nodes(ctx: &AutoscalingContext, draining: &[String]) -> Vec<PodInfo> {
    let mut out = Vec::new();
    for node in draining {
        let lp = kube::api::ListParams::default().fields(&format!("spec.nodeName={node}"));
        let pods = match Api::<Pod>::all(ctx.client.clone()).list(&lp).await {
            Ok(l) => l.items,
            Err(e) => {
                tracing::warn!("listing the pods of draining node {node}: {e}");
                continue;
            }
        };
        for mut p in pods {
            if p.metadata.deletion_timestamp.is_none()
                && crate::cache::is_active(&p)
                && !is_daemonset_pod(&p)
                && !is_mirror_pod(&p)
            {
                if let Some(s) = p.spec.as_mut() {
                    s.node_name = None;
                }
                out.push(crate::cache::compact(PodInfo::new(Arc::new(p))));
            }
        }
    }
    out
}
