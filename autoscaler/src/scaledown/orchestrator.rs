//! The scale-down step of the loop: reports the deletions that ended,
//! updates the unneeded list on the snapshot, the metrics and the soft
//! taints, then, outside cooldown, selects the nodes to delete and hands
//! them to the actuator.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Node;

use super::actuation::{Actuator, DeletionError, Outcome, ToDelete};
use super::cooldown::Cooldown;
use super::latencytracker::LatencyTracker;
use super::nodeevaltracker::MaxNodeSkipEvalTime;
use super::selection::{DeletionBudget, select};
use super::unneeded::{Planner, PlannerSettings};
use super::unremovable::UnremovableReason;
use super::{eligibility, softtaint};
use crate::clusterstate::{self, ClusterStateRegistry, NodeFactsMemo};
use crate::context::AutoscalingContext;
use crate::decisions::Decisions;
use crate::metrics::Metrics;
use crate::simulator::Snapshot;
use crate::simulator::drainability::{Context, DrainRules};
use crate::status::ScaleDownSummary;

/// The scale-down state kept across loops.
pub struct ScaleDown {
    planner: Planner,
    actuator: Actuator,
    cooldown: Cooldown,
    /// `--node-removal-latency-tracking-enabled`.
    latency: Option<LatencyTracker>,
}

/// The autoscaler's drains end with it: dropped (its task aborted) or
/// shut down, it leaves no deletion running behind it, as a process that
/// exits leaves none.
impl Drop for ScaleDown {
    fn drop(&mut self) {
        self.actuator.abort_deletions();
    }
}

impl ScaleDown {
    /// Scale-down with its actuator; `skip_eval_since`: with
    /// `--max-node-skip-eval-time-tracker-enabled`, the time it starts
    /// counting from.
    pub fn new(
        actuator: Actuator,
        track_removal_latency: bool,
        skip_eval_since: Option<SystemTime>,
    ) -> Self {
        Self {
            planner: Planner::with_skip_eval_tracker(skip_eval_since.map(MaxNodeSkipEvalTime::new)),
            actuator,
            cooldown: Cooldown::default(),
            latency: track_removal_latency.then(LatencyTracker::default),
        }
    }

    /// The cluster is unhealthy: every unneeded timer restarts.
    pub fn forget_unneeded(&mut self) {
        self.planner.clear();
    }

    /// The nodes being drained now (scale-up finds their pods a place).
    pub fn draining(&self) -> Vec<String> {
        self.actuator.draining()
    }

    /// The cooldown, which scale-up feeds.
    pub fn cooldown(&mut self) -> &mut Cooldown {
        &mut self.cooldown
    }

    /// What the status ConfigMap says of scale-down.
    pub fn summary(&self) -> ScaleDownSummary {
        let mut candidates = BTreeMap::new();
        for u in self.planner.unneeded.values() {
            *candidates.entry(u.group.clone()).or_insert(0) += 1;
        }
        ScaleDownSummary {
            candidates,
            probed: self.planner.last_update,
        }
    }

    /// One loop's scale-down; returns whether deletions started.
    pub async fn run(
        &mut self,
        ctx: &AutoscalingContext,
        registry: &ClusterStateRegistry,
        snapshot: &mut Snapshot,
        nodes: &[Arc<Node>],
        now: SystemTime,
        decisions: &mut Decisions,
    ) -> Result<bool, DeletionError> {
        let f = &ctx.flags;
        self.report_finished(ctx, now);
        self.actuator.retry_untaints().await;
        let in_progress = self.actuator.in_progress();
        let groups = eligibility::group_sizes(ctx, registry, &in_progress);
        let candidates =
            eligibility::candidates(ctx, registry, &self.cooldown, nodes, &in_progress, now);
        for name in in_progress.keys() {
            if let Some(i) = snapshot.index_of(name) {
                snapshot.disable(i);
            }
        }
        snapshot.commit();
        {
            let state = ctx.cache.read();
            let mut budgets = state.budgets();
            let fixed = budgets.clone();
            let drain = Context {
                now,
                rules: DrainRules::from_flags(f),
                budgets: &fixed,
                controllers: &*state,
            };
            let settings = PlannerSettings {
                ignore_mirror_pods: f.ignore_mirror_pods_utilization,
                unready_enabled: f.scale_down_unready_enabled,
                recheck_timeout: f.unremovable_node_recheck_timeout,
                simulation_timeout: f.scale_down_simulation_timeout,
                candidate_ttl: f.node_deletion_candidate_ttl,
                max_parallelism: f.max_scale_down_parallelism,
                unneeded_time: f.scale_down_unneeded_time,
            };
            self.planner
                .update(snapshot, &candidates, &mut budgets, &drain, &settings, now);
        }
        if let Some(longest) = self.planner.max_skip_eval {
            ctx.metrics
                .max_node_skip_eval_duration
                .set(longest.as_secs_f64());
        }
        self.report_unneeded(ctx, decisions);
        self.track_latency(ctx, now);
        if let Some(t) = self.latency.as_mut() {
            t.kept(self.planner.reasons.iter().map(|(n, r)| (n, r.reason())));
        }
        softtaint::update_soft_taints(ctx, registry, &self.planner, nodes, now).await;
        let cooldown = self.cooldown.in_cooldown(f, now);
        ctx.metrics
            .scale_down_in_cooldown
            .set(if cooldown { 1.0 } else { 0.0 });
        if cooldown {
            return Ok(false);
        }
        let drains_in_progress = in_progress.values().filter(|d| d.drain).count();
        let budget = DeletionBudget {
            total: f
                .max_scale_down_parallelism
                .saturating_sub(in_progress.len()),
            drain: f.max_drain_parallelism.saturating_sub(drains_in_progress),
        };
        let min_cores = ctx.validated.cores_total.min;
        let min_memory = ctx.validated.memory_total.min.saturating_mul(1 << 30);
        // The cluster's resources, counted when a node is first selected.
        let mut totals: Option<ClusterTotals> = None;
        let selection = select(&self.planner, &groups, budget, now, |name| {
            let t = totals.get_or_insert_with(|| ClusterTotals::of(nodes, &ctx.node_facts, now));
            let (c, m) = t.per_node.get(name).copied().unwrap_or((0, 0));
            if t.cores - c < min_cores || t.memory - m < min_memory {
                return false;
            }
            t.cores -= c;
            t.memory -= m;
            true
        });
        for (name, r) in &selection.kept {
            decisions.unremovable.insert(name.clone(), r.clone());
        }
        if let Some(t) = self.latency.as_mut() {
            t.kept(selection.kept.iter().map(|(n, r)| (n, r.reason())));
        }
        let groups_by_id = ctx.node_groups_by_id();
        let mut to_delete = Vec::new();
        for (name, drain) in selection
            .empty
            .iter()
            .map(|n| (n, false))
            .chain(selection.drain.iter().map(|n| (n, true)))
        {
            let Some(u) = self.planner.unneeded.get(name) else {
                continue;
            };
            let Some(group) = groups_by_id.get(&u.group) else {
                continue;
            };
            to_delete.push(ToDelete {
                name: name.clone(),
                group: group.clone(),
                drain,
                ready: u.ready,
                utilization: u.utilization.to_string(),
                pods: u
                    .pods_to_move
                    .iter()
                    .map(|p| p.metadata.name.clone().unwrap_or_default())
                    .collect(),
            });
        }
        if to_delete.is_empty() {
            return Ok(false);
        }
        decisions.scaled_down = to_delete.iter().map(|d| d.name.clone()).collect();
        let groups_deleting: Vec<String> = to_delete.iter().map(|d| d.group.id()).collect();
        let names: Vec<String> = to_delete.iter().map(|d| d.name.clone()).collect();
        match self.actuator.start(to_delete).await {
            Ok(()) => {
                self.cooldown.deletions_started(&groups_deleting, now);
                if let Some(t) = self.latency.as_mut() {
                    t.deleted(&names, now, &ctx.metrics);
                }
                Ok(true)
            }
            Err(e) => {
                self.cooldown.deletions_failed_to_start(now);
                Err(e)
            }
        }
    }

    /// The deletions that ended since the last loop, and the evictions.
    fn report_finished(&mut self, ctx: &AutoscalingContext, now: SystemTime) {
        for done in self.actuator.take_finished() {
            tracing::debug!(
                "deletion of node {} in group {}: {:?}",
                done.node,
                done.group,
                done.outcome
            );
            match done.outcome {
                Outcome::Removed(reason) => {
                    let provider = &*ctx.provider;
                    let drivers = crate::cloudprovider::group_dra_drivers(provider, &done.group);
                    let reason = [("reason", reason)];
                    Metrics::inc_scale(&ctx.metrics.scaled_down_nodes, &reason, &drivers, 1);
                }
                Outcome::CloudDeleteFailed(_) => {
                    self.cooldown.cloud_deletion_failed(&done.group, now);
                }
                Outcome::Failed(_) => {}
            }
        }
        let (ok, failed) = self.actuator.take_eviction_counts();
        let evicted = &ctx.metrics.evicted_pods;
        Metrics::inc(evicted, &[("eviction_result", "succeeded")], ok);
        Metrics::inc(evicted, &[("eviction_result", "failed")], failed);
    }

    /// The unneeded nodes with their removal thresholds, to the latency
    /// tracker.
    fn track_latency(&mut self, ctx: &AutoscalingContext, now: SystemTime) {
        let Some(tracker) = self.latency.as_mut() else {
            return;
        };
        let groups = ctx.node_groups_by_id();
        let unneeded: HashMap<String, std::time::Duration> = self
            .planner
            .unneeded
            .iter()
            .map(|(name, u)| {
                let options = groups.get(&u.group).map(|g| ctx.options_for(&**g));
                let threshold = options.map_or(std::time::Duration::ZERO, |o| {
                    if u.ready {
                        o.scale_down_unneeded_time
                    } else {
                        o.scale_down_unready_time
                    }
                });
                (name.clone(), threshold)
            })
            .collect();
        tracker.update(&unneeded, now, &ctx.metrics);
    }

    /// The unneeded and unremovable nodes in the metrics and the record.
    fn report_unneeded(&self, ctx: &AutoscalingContext, decisions: &mut Decisions) {
        let m = &ctx.metrics;
        m.unneeded_nodes_count
            .set(self.planner.unneeded.len() as f64);
        let mut by_reason: BTreeMap<UnremovableReason, usize> =
            UnremovableReason::ALL.iter().map(|r| (*r, 0)).collect();
        for r in self.planner.reasons.values() {
            *by_reason.entry(r.reason()).or_default() += 1;
        }
        for (reason, n) in by_reason {
            Metrics::set(
                &m.unremovable_nodes_count,
                &[("reason", reason.metric_label())],
                n as f64,
            );
        }
        // The planner's maps are in name order: each is built in one pass
        // and merged in one pass.
        let mut unneeded: BTreeMap<String, String> = self
            .planner
            .unneeded
            .iter()
            .map(|(name, u)| {
                let since = simclock::format_rfc3339(u.since);
                let text = format!("since {since} utilization {}", u.utilization);
                (name.clone(), text)
            })
            .collect();
        decisions.unneeded.append(&mut unneeded);
        decisions
            .unremovable
            .set_planner(self.planner.reasons.clone());
    }
}

/// The cluster's cores and memory left for the cluster-wide limits, and
/// each node's share.
struct ClusterTotals {
    cores: i64,
    memory: i64,
    per_node: HashMap<String, (i64, i64)>,
}

impl ClusterTotals {
    fn of(nodes: &[Arc<Node>], facts: &NodeFactsMemo, now: SystemTime) -> Self {
        let (cores, memory) = clusterstate::cluster_resources(nodes, facts, now);
        let per_node = nodes
            .iter()
            .map(|n| {
                let name = n.metadata.name.clone().unwrap_or_default();
                (name, facts.of(n).capacity)
            })
            .collect();
        Self {
            cores,
            memory,
            per_node,
        }
    }
}
