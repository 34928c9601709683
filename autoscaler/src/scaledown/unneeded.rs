//! The scale-down planner (docs/compat.md §3.2–§3.4, upstream's
//! `core/scaledown/planner` and `unneeded`): which candidates are unneeded,
//! since when, and why the others are not.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use predicates::PodInfo;

use super::unremovable::{Unremovable, UnremovableReason};
use super::utilization::{Utilization, utilization};
use crate::simulator::Snapshot;
use crate::simulator::drainability::{self, Budget, Context, is_daemonset_pod, is_mirror_pod};

/// What the planner knows about an unneeded node.
#[derive(Debug, Clone)]
pub struct UnneededNode {
    /// Since when it has been unneeded.
    pub since: SystemTime,
    /// Its group.
    pub group: String,
    /// Pods that would move (empty: an empty node).
    pub pods_to_move: Vec<Arc<Pod>>,
    /// DaemonSet pods on it.
    pub daemonset_pods: Vec<Arc<Pod>>,
    /// Utilization.
    pub utilization: Utilization,
    /// Ready when last seen.
    pub ready: bool,
    /// Its pods exceed a budget alone (evicted one by one).
    pub risky: bool,
    /// `safe-to-evict: on-completion` pods on it: the node waits for them
    /// to complete, untainted.
    pub on_completion: usize,
}

/// One candidate as the planner sees it.
#[derive(Debug, Clone)]
pub struct CandidateNode {
    /// Name.
    pub name: String,
    /// Group id (`None`: not autoscaled).
    pub group: Option<String>,
    /// Ready in CA's sense.
    pub ready: bool,
    /// ToBeDeleted taint younger than 5 minutes.
    pub being_deleted: bool,
    /// The scale-down-disabled annotation.
    pub disabled: bool,
    /// Utilization threshold for this node's group.
    pub threshold: f64,
    /// GPU resource name for GPU nodes.
    pub gpu_resource: Option<String>,
    /// Ignore DaemonSet pods in utilization (group option).
    pub ignore_daemonsets: bool,
    /// When its `DeletionCandidateOfClusterAutoscaler` taint was set.
    pub soft_tainted_at: Option<SystemTime>,
}

/// Planner settings.
#[derive(Debug, Clone)]
pub struct PlannerSettings {
    /// `--ignore-mirror-pods-utilization`.
    pub ignore_mirror_pods: bool,
    /// `--scale-down-unready-enabled`.
    pub unready_enabled: bool,
    /// `--unremovable-node-recheck-timeout`.
    pub recheck_timeout: Duration,
    /// `--scale-down-simulation-timeout`.
    pub simulation_timeout: Duration,
    /// `--node-deletion-candidate-ttl`: a soft taint younger than this
    /// restores the node's unneeded time (0: off).
    pub candidate_ttl: Duration,
}

/// Unneeded tracking across loops.
#[derive(Debug, Default)]
pub struct Planner {
    /// Unneeded nodes with the time they became so.
    pub unneeded: BTreeMap<String, UnneededNode>,
    unremovable_until: HashMap<String, SystemTime>,
    /// Why each evaluated node is not unneeded (this loop).
    pub reasons: BTreeMap<String, Unremovable>,
    /// When the list was last computed.
    pub last_update: Option<SystemTime>,
}

impl Planner {
    /// Forgets the unneeded list (cluster unhealthy): every timer restarts.
    pub fn clear(&mut self) {
        self.unneeded.clear();
    }

    /// Recomputes the unneeded list (docs/compat.md §3.2–§3.4). Removable
    /// nodes' pods stay placed in the snapshot, and the budgets are charged,
    /// so later candidates see what is left.
    pub fn update(
        &mut self,
        snapshot: &mut Snapshot,
        candidates: &[CandidateNode],
        budgets: &mut [Budget],
        drain: &Context<'_>,
        settings: &PlannerSettings,
        now: SystemTime,
    ) {
        self.reasons.clear();
        self.last_update = Some(now);
        let started = std::time::Instant::now();
        // Empty nodes first, then nodes unneeded in the previous loop.
        let mut order: Vec<&CandidateNode> = candidates.iter().collect();
        let is_empty = |c: &CandidateNode| {
            snapshot
                .index_of(&c.name)
                .map(|i| {
                    snapshot
                        .node(i)
                        .pods
                        .iter()
                        .all(|p| is_daemonset_pod(&p.pod) || is_mirror_pod(&p.pod))
                })
                .unwrap_or(false)
        };
        order.sort_by_key(|c| (!is_empty(c), !self.unneeded.contains_key(&c.name)));
        let mut next: BTreeMap<String, UnneededNode> = BTreeMap::new();
        for c in order {
            if let Err(reason) = self.check(snapshot, c, budgets, drain, settings, now, &mut next) {
                self.reasons.insert(c.name.clone(), reason);
            }
            if started.elapsed() > settings.simulation_timeout {
                tracing::warn!(
                    "scale-down simulation timeout reached; remaining nodes are skipped"
                );
                break;
            }
        }
        self.unneeded = next;
        self.unremovable_until.retain(|_, t| *t > now);
    }

    #[allow(clippy::too_many_arguments)]
    fn check(
        &mut self,
        snapshot: &mut Snapshot,
        c: &CandidateNode,
        budgets: &mut [Budget],
        drain: &Context<'_>,
        settings: &PlannerSettings,
        now: SystemTime,
        next: &mut BTreeMap<String, UnneededNode>,
    ) -> Result<(), Unremovable> {
        if self
            .unremovable_until
            .get(&c.name)
            .is_some_and(|t| *t > now)
        {
            return Err(Unremovable::Because(UnremovableReason::RecentlyUnremovable));
        }
        if c.being_deleted {
            return Err(Unremovable::Because(
                UnremovableReason::CurrentlyBeingDeleted,
            ));
        }
        if c.disabled {
            return Err(Unremovable::Because(
                UnremovableReason::ScaleDownDisabledAnnotation,
            ));
        }
        let Some(group) = c.group.clone() else {
            return Err(Unremovable::Because(UnremovableReason::NotAutoscaled));
        };
        let Some(index) = snapshot.index_of(&c.name) else {
            return Err(Unremovable::UnexpectedError(format!(
                "node {} is not in the snapshot",
                c.name
            )));
        };
        let util = utilization(
            snapshot.node(index),
            c.ignore_daemonsets,
            settings.ignore_mirror_pods,
            c.gpu_resource.as_deref(),
            now,
        )
        .map_err(|e| Unremovable::UnexpectedError(e.to_string()))?;
        if !settings.unready_enabled && !c.ready {
            return Err(Unremovable::Because(
                UnremovableReason::ScaleDownUnreadyDisabled,
            ));
        }
        if util.utilization > c.threshold {
            return Err(Unremovable::Because(UnremovableReason::NotUnderutilized));
        }
        // Removal simulation.
        let pods: Vec<Arc<Pod>> = snapshot
            .node(index)
            .pods
            .iter()
            .map(|p| p.pod.clone())
            .collect();
        let ctx = Context { budgets, ..*drain };
        let moved = match drainability::pods_to_move(&pods, &ctx) {
            Ok(d) => d,
            Err(b) => {
                self.unremovable_until
                    .insert(c.name.clone(), now + settings.recheck_timeout);
                return Err(Unremovable::BlockedByPod {
                    pod: predicates::nodeinfo::pod_key(&b.pod),
                    reason: b.reason,
                });
            }
        };
        snapshot.fork();
        snapshot.disable(index);
        for pod in &moved.pods_to_move {
            let key = predicates::nodeinfo::pod_key(pod);
            let info = snapshot
                .remove_pod(index, &key)
                .unwrap_or_else(|| PodInfo::new(pod.clone()));
            let mut moving = (*info.pod).clone();
            if let Some(spec) = moving.spec.as_mut() {
                spec.node_name = None;
            }
            // Same scheduling facts (the cached pod is compact), unbound.
            let moving = info.with_pod(moving);
            match snapshot.find_fit(&moving, 0, |i| i != index) {
                Some(dest) => snapshot.add_pod(dest, moving),
                None => {
                    snapshot.revert();
                    self.unremovable_until
                        .insert(c.name.clone(), now + settings.recheck_timeout);
                    return Err(Unremovable::Because(UnremovableReason::NoPlaceToMovePods));
                }
            }
        }
        snapshot.commit();
        let risky = drainability::charge_budgets(budgets, &moved.pods_to_move);
        let restored = c.soft_tainted_at.filter(|t| {
            !settings.candidate_ttl.is_zero() && *t + settings.candidate_ttl > now && *t <= now
        });
        let since = self
            .unneeded
            .get(&c.name)
            .map_or(restored.unwrap_or(now), |u| u.since);
        next.insert(
            c.name.clone(),
            UnneededNode {
                since,
                group,
                pods_to_move: moved.pods_to_move,
                daemonset_pods: moved.daemonset_pods,
                utilization: util,
                ready: c.ready,
                risky,
                on_completion: moved.on_completion.len(),
            },
        );
        Ok(())
    }
}
