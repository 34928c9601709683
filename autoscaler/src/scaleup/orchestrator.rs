//! The scale-up step of the loop (upstream's `core/scaleup/orchestrator`):
//! given the pods to help (the loop ran the pod-list processors), stops at
//! `--max-nodes-total` or while the pods are too new, plans, executes, and
//! says for each pod whether it triggered the scale-up or why not (the
//! scale-up status processors tell the pods).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Node, Pod};
use predicates::{NodeInfo, PodInfo};

use super::balancing::Balancing;
use super::executor;
use super::limits::{Limits, QuotaLeft, skipped_reason};
use super::new_pods;
use super::plan::{Plan, PlanInputs, ScaleUpPlan, plan};
use super::types::{Candidate, NotTriggered, ScaleUpInfo, ScaleUpStatus, format_increases};
use crate::clusterstate::{self, ClusterStateRegistry};
use crate::context::AutoscalingContext;
use crate::events::{EventReason, EventType};
use crate::expander::priority;
use crate::metrics::Metrics;
use crate::processors::nodegroups::{self, NodeGroupList, NodeGroupListProcessor};
use crate::simulator::Snapshot;

/// What the scale-up step did, for the status processors, the decision
/// record and the cooldown.
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
    /// The pods the increases are for (when any succeeded).
    pub pods_triggered_scale_up: Vec<Arc<Pod>>,
    /// The pods no increase is for, with why.
    pub pods_remain_unschedulable: Vec<(Arc<Pod>, NotTriggered)>,
    /// When every pending pod was very new (upstream's "Unschedulable pods
    /// are very new, waiting one iteration for more", [`new_pods`]): when
    /// the wait ends.
    pub pods_new_until: Option<SystemTime>,
}

impl ScaleUpOutcome {
    /// An outcome with this status and nothing else.
    pub fn stopped(status: ScaleUpStatus) -> Self {
        Self {
            status,
            pods: BTreeMap::new(),
            options: BTreeMap::new(),
            scaled: Vec::new(),
            pods_triggered_scale_up: Vec::new(),
            pods_remain_unschedulable: Vec::new(),
            pods_new_until: None,
        }
    }
}

/// What the loop hands the scale-up step.
pub struct ScaleUpInputs<'a> {
    /// The pods to help: the pod-list processors' output, old enough.
    pub pods: Vec<PodInfo>,
    /// Template nodes per group.
    pub templates: &'a BTreeMap<String, NodeInfo>,
    /// Every node.
    pub nodes: &'a [Arc<Node>],
    /// The node-group list processors.
    pub node_group_list: &'a [Box<dyn NodeGroupListProcessor>],
    /// The loop's time.
    pub now: SystemTime,
    /// All or nothing, in one piece per group (a best-effort-atomic
    /// ProvisioningRequest's pods): no wait for new pods, no partial plan,
    /// atomic increases.
    pub all_or_nothing: bool,
}

/// Runs one scale-up on the snapshot.
pub async fn scale_up(
    ctx: &AutoscalingContext,
    registry: &mut ClusterStateRegistry,
    snapshot: &mut Snapshot,
    inputs: ScaleUpInputs<'_>,
) -> ScaleUpOutcome {
    let now = inputs.now;
    let pending = &inputs.pods;
    if pending.is_empty() {
        tracing::debug!("No unschedulable pods");
        return ScaleUpOutcome::stopped(ScaleUpStatus::NotNeeded);
    }
    // ProvisioningRequest pods force the scale-up (upstream's
    // `ProvisioningRequestScaleUpEnforcer`).
    if !inputs.all_or_nothing
        && let Some(stopped) = stop_before_planning(ctx, pending, inputs.nodes, now)
    {
        return stopped;
    }
    let groups = node_groups(ctx, registry, inputs.templates, now);
    let groups = nodegroups::process_all(inputs.node_group_list, groups, pending);
    let plan = plan_scale_up(ctx, snapshot, &inputs, &groups).await;
    let by_key: HashMap<&str, &Arc<Pod>> =
        pending.iter().map(|p| (p.key.as_str(), &p.pod)).collect();
    let pods_for = |keys: &mut dyn Iterator<Item = &String>| -> Vec<Arc<Pod>> {
        keys.filter_map(|k| by_key.get(k.as_str()).map(|p| Arc::clone(p)))
            .collect()
    };
    let options = plan
        .considered
        .iter()
        .map(|o| (o.group.clone(), o.node_count))
        .collect();
    let (infos, option) = match plan.decision {
        Plan::NoOptions => {
            let remain = plan
                .reasons
                .into_iter()
                .filter_map(|(key, rs)| {
                    let pod = by_key.get(key.as_str())?;
                    Some((Arc::clone(pod), NotTriggered::NoGroupCanHelp(rs)))
                })
                .collect();
            return ScaleUpOutcome {
                pods: plan.verdicts,
                options,
                pods_remain_unschedulable: remain,
                ..ScaleUpOutcome::stopped(ScaleUpStatus::NoOptionsAvailable)
            };
        }
        Plan::ScaleUp { infos, option } => (infos, option),
    };
    if infos.is_empty() {
        return ScaleUpOutcome {
            pods: plan.verdicts,
            options,
            ..ScaleUpOutcome::stopped(ScaleUpStatus::NoOptionsAvailable)
        };
    }
    let executed = executor::execute(
        ctx,
        registry,
        &infos,
        inputs.templates,
        now,
        inputs.all_or_nothing,
    )
    .await;
    let mut triggered = Vec::new();
    if !executed.done.is_empty() {
        tracing::info!(
            "Final scale-up plan: [{}], for {} pods",
            format_increases(&executed.done),
            option.pods.len()
        );
        triggered = pods_for(&mut option.pods.iter());
    }
    ScaleUpOutcome {
        status: if executed.failed {
            ScaleUpStatus::Error
        } else {
            ScaleUpStatus::Successful
        },
        pods: plan.verdicts,
        options,
        scaled: executed.done,
        pods_triggered_scale_up: triggered,
        pods_remain_unschedulable: Vec::new(),
        pods_new_until: None,
    }
}

/// The reasons to stop before planning: `--max-nodes-total` reached by the
/// ready nodes, or every pending pod very new ([`new_pods`]).
fn stop_before_planning(
    ctx: &AutoscalingContext,
    pending: &[PodInfo],
    nodes: &[Arc<Node>],
    now: SystemTime,
) -> Option<ScaleUpOutcome> {
    let f = &ctx.flags;
    let ready_nodes = nodes
        .iter()
        .filter(|n| {
            ctx.node_facts.of(n).ready
                && n.spec.as_ref().and_then(|s| s.unschedulable) != Some(true)
        })
        .count();
    if f.max_nodes_total > 0 && ready_nodes >= f.max_nodes_total {
        ctx.events.status(
            EventType::Warning,
            EventReason::MaxNodesTotalReached,
            format!("Max total nodes in cluster reached: {}", f.max_nodes_total),
        );
        return Some(ScaleUpOutcome {
            pods_remain_unschedulable: pending
                .iter()
                .map(|p| (Arc::clone(&p.pod), NotTriggered::MaxNodesTotalReached))
                .collect(),
            ..ScaleUpOutcome::stopped(ScaleUpStatus::LimitedByMaxNodesTotal)
        });
    }
    let new_until = f
        .bypassed_scheduler_names
        .is_empty()
        .then(|| new_pods::very_new_until(pending, now, skip_burst_wait(f)))
        .flatten();
    if new_until.is_some() {
        tracing::debug!("Unschedulable pods are very new, waiting one iteration for more");
        return Some(ScaleUpOutcome {
            pods_new_until: new_until,
            ..ScaleUpOutcome::stopped(ScaleUpStatus::InCooldown)
        });
    }
    None
}

/// Our `--very-new-pods-wait=false`, with frequent loops: no 2 s wait for a
/// burst of very new pods ([`new_pods`]).
fn skip_burst_wait(f: &crate::config::Flags) -> bool {
    !f.very_new_pods_wait && f.frequent_loops_enabled
}

/// Plans the scale-up within the cluster-wide limits, with the expanders
/// and balancing the flags give; reports the limits hit and what the
/// priority expander noticed.
async fn plan_scale_up(
    ctx: &AutoscalingContext,
    snapshot: &mut Snapshot,
    inputs: &ScaleUpInputs<'_>,
    groups: &NodeGroupList,
) -> ScaleUpPlan {
    let f = &ctx.flags;
    let (pending, nodes, templates) = (&inputs.pods, inputs.nodes, inputs.templates);
    let (now, all_or_nothing) = (inputs.now, inputs.all_or_nothing);
    let (cores, memory) = scale_up_resources(ctx, templates, nodes, now);
    // CapacityQuotas count the snapshot's nodes, upcoming ones included, as
    // upstream's quota tracker counts the loop's node infos.
    // (Only when there are quotas: the list is the loop's every node.)
    let quotas = ctx.capacity_quotas();
    let snapshot_nodes: Vec<Arc<Node>> = if quotas.is_empty() {
        Vec::new()
    } else {
        (0..snapshot.nodes().len())
            .filter(|&i| snapshot.enabled(i))
            .map(|i| snapshot.node(i).node.clone())
            .collect()
    };
    let limits = Limits {
        max_nodes_total: f.max_nodes_total,
        nodes_now: snapshot.nodes().len(),
        cores: (ctx.validated.cores_total.max, cores),
        memory: (
            ctx.validated.memory_total.max.saturating_mul(1 << 30),
            memory,
        ),
        max_nodes_per_scaleup: f.max_nodes_per_scaleup,
        quotas: quotas
            .into_iter()
            .map(|q| {
                let usage = q.usage(&snapshot_nodes);
                QuotaLeft::new(q, &usage)
            })
            .collect(),
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
    let t = std::time::Instant::now();
    let mut plan = plan(
        snapshot,
        &PlanInputs {
            pods: pending,
            candidates: &groups.candidates,
            skipped: &groups.skipped,
            skipped_templates: f
                .scaleup_simulation_for_skipped_node_groups_enabled
                .then_some(templates),
            limits: &limits,
            expanders: &ctx.validated.expanders,
            priorities: priorities.as_ref(),
            balancing: &balancing,
            max_binpacking_time: f.max_binpacking_time,
            max_group_binpacking_time: f.max_nodegroup_binpacking_duration,
            fastpath_binpacking: f.fastpath_binpacking_enabled,
            all_or_nothing,
        },
    );
    ctx.metrics.observe("scaleUp:estimate", t.elapsed());
    if let Some(d) = plan.skipped_simulation {
        ctx.metrics
            .observe("scaleUp:skippedNodeGroupsSimulation", d);
    }
    for hit in &plan.limit_hits {
        for reason in hit.resources().into_iter().filter_map(skipped_reason) {
            Metrics::inc(
                &ctx.metrics.skipped_scale_events,
                &[("direction", "up"), ("reason", reason)],
                1,
            );
        }
    }
    priority::report_notices(ctx, std::mem::take(&mut plan.priority_notices));
    plan
}

/// The cluster's cores and memory as scale-up's limits count them
/// (upstream's `coresMemoryTotal`): each group's target size times its
/// template node, so that nodes asked for and not registered yet count,
/// and the nodes of no autoscaled group as they are.
fn scale_up_resources(
    ctx: &AutoscalingContext,
    templates: &BTreeMap<String, NodeInfo>,
    nodes: &[Arc<Node>],
    now: SystemTime,
) -> (i64, i64) {
    let mut total = (0i64, 0i64);
    for g in ctx.provider.node_groups() {
        let (Ok(target), Some(t)) = (g.target_size(), templates.get(&g.id())) else {
            continue;
        };
        let (cores, memory) = clusterstate::node_capacity(&t.node);
        let target = i64::try_from(target).unwrap_or(i64::MAX);
        total.0 = total.0.saturating_add(cores.saturating_mul(target));
        total.1 = total.1.saturating_add(memory.saturating_mul(target));
    }
    let unmanaged: Vec<Arc<Node>> = nodes
        .iter()
        .filter(|n| !matches!(ctx.provider.node_group_for_node(n), Ok(Some(_))))
        .cloned()
        .collect();
    let (cores, memory) = clusterstate::cluster_resources(&unmanaged, &ctx.node_facts, now);
    (total.0 + cores, total.1 + memory)
}

/// The node groups that can take part (upstream's
/// `filterValidScaleUpNodeGroups`): ready for scale-up (healthy, not backed
/// off), with a target size and a template; the others with why not.
fn node_groups(
    ctx: &AutoscalingContext,
    registry: &ClusterStateRegistry,
    templates: &BTreeMap<String, NodeInfo>,
    now: SystemTime,
) -> NodeGroupList {
    let mut list = NodeGroupList::default();
    for g in ctx.provider.node_groups() {
        let id = g.id();
        if let Err(reason) = registry.group_ready_for_scale_up(&id, now) {
            list.skipped.insert(id, reason.to_string());
            continue;
        }
        let (Ok(target), Some(template)) = (g.target_size(), templates.get(&id)) else {
            list.skipped.insert(id, "not ready for scale-up".into());
            continue;
        };
        list.candidates.push(Candidate {
            id,
            template: template.clone(),
            target,
            max: g.max_size(),
        });
    }
    list
}
