//! The scale-down planner (docs/reference/ca-rules.md §3.2–§3.4, upstream's
//! `core/scaledown/planner` and `unneeded`): which candidates are unneeded,
//! since when, and why the others are not.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use predicates::PodInfo;

use super::nodeevaltracker::MaxNodeSkipEvalTime;
use super::unremovable::{Unremovable, UnremovableReason};
use super::utilization::{Utilization, utilization};
use crate::cache::LoopHasher;
use crate::simulator::Snapshot;
use crate::simulator::drainability::{self, Budgets, Context, is_daemonset_pod, is_mirror_pod};
use crate::simulator::scheduling::HintingSimulator;

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
    /// Its group scales to zero or max only (`zeroOrMaxNodeScaling`).
    pub atomic: bool,
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
    /// `--max-scale-down-parallelism`: with `unneeded_time`, how many
    /// unneeded nodes are worth finding ([`Planner::unneeded_limit`]).
    pub max_parallelism: usize,
    /// `--scale-down-unneeded-time` (the groups' default).
    pub unneeded_time: Duration,
}

/// Unneeded tracking across loops.
#[derive(Debug, Default)]
pub struct Planner {
    /// Unneeded nodes with the time they became so.
    pub unneeded: BTreeMap<String, UnneededNode>,
    unremovable_until: HashMap<String, SystemTime, LoopHasher>,
    /// Why each evaluated node is not unneeded (this loop), shared with
    /// the loop's decision record.
    pub reasons: Arc<BTreeMap<String, Unremovable>>,
    /// When the list was last computed.
    pub last_update: Option<SystemTime>,
    /// The shortest time between two updates seen (upstream's
    /// `minUpdateInterval`; starts at the unneeded time).
    min_update_interval: Option<Duration>,
    /// `--max-node-skip-eval-time-tracker-enabled`.
    pub skip_eval: Option<MaxNodeSkipEvalTime>,
    /// The eligible candidates the last update skipped.
    pub skipped: Vec<String>,
    /// The longest time a skipped candidate has gone without evaluation
    /// (with the tracker).
    pub max_skip_eval: Option<Duration>,
    /// The update before the last one.
    last_before: Option<SystemTime>,
    /// Whether each candidate of the last update had only DaemonSet and
    /// mirror pods, with the pod list that was read (a node's pod list is
    /// shared from loop to loop until a pod comes or goes).
    emptiness: HashMap<String, Emptiness, LoopHasher>,
    /// Each moved pod as the simulation places it (unbound), by the pod
    /// object it was made from: the same pods move in update after update.
    unbound: HashMap<usize, Unbound, LoopHasher>,
    /// Counts the updates, to forget the emptiness of nodes that are no
    /// longer candidates and the unbound copies of pods no longer moved.
    pass: u64,
    /// Where each moved pod went (tried first at the next update), and
    /// where the next search for a node starts.
    scheduling: HintingSimulator,
}

/// Whether a node had only DaemonSet and mirror pods, read from this pod
/// list, at this update.
#[derive(Debug)]
struct Emptiness {
    pods: Arc<Vec<PodInfo>>,
    empty: bool,
    pass: u64,
}

/// A pod's unbound copy, made at this update or an earlier one from
/// `source` (held, so that its address names it alone).
#[derive(Debug)]
struct Unbound {
    source: Arc<Pod>,
    copy: PodInfo,
    pass: u64,
}

/// What the cheap checks learn of an eligible candidate.
struct Eligible {
    group: String,
    index: usize,
    util: Utilization,
}

impl Planner {
    /// A planner with `--max-node-skip-eval-time-tracker-enabled`'s tracker
    /// (or without, `None`).
    pub fn with_skip_eval_tracker(skip_eval: Option<MaxNodeSkipEvalTime>) -> Self {
        Self {
            skip_eval,
            ..Self::default()
        }
    }

    /// Forgets the unneeded list (cluster unhealthy): every timer restarts.
    pub fn clear(&mut self) {
        self.unneeded.clear();
    }

    /// Recomputes the unneeded list (docs/reference/ca-rules.md §3.2–§3.4). Removable
    /// nodes' pods stay placed in the snapshot, and the budgets are charged,
    /// so later candidates see what is left.
    pub fn update(
        &mut self,
        snapshot: &mut Snapshot,
        candidates: &[CandidateNode],
        budgets: &mut Budgets,
        drain: &Context<'_>,
        settings: &PlannerSettings,
        now: SystemTime,
    ) {
        self.last_before = self.last_update.replace(now);
        let started = std::time::Instant::now();
        // The reasons are gathered in candidate order, then sorted once.
        let mut reasons: Vec<(String, Unremovable)> = Vec::new();
        // Empty nodes first, then nodes unneeded in the previous loop.
        let mut order: Vec<((bool, bool), &CandidateNode)> = Vec::with_capacity(candidates.len());
        self.pass = self.pass.wrapping_add(1);
        for c in candidates {
            let empty = snapshot
                .index_of(&c.name)
                .is_some_and(|i| self.is_empty(c, &snapshot.node(i).pods));
            order.push(((!empty, !self.unneeded.contains_key(&c.name)), c));
        }
        let pass = self.pass;
        self.emptiness.retain(|_, e| e.pass == pass);
        order.sort_by_key(|(key, _)| *key);
        let order = order.into_iter().map(|(_, c)| c);
        let eligible: Vec<(&CandidateNode, Eligible)> = order
            .filter_map(|c| match self.eligible(snapshot, c, settings, now) {
                Ok(e) => Some((c, e)),
                Err(reason) => {
                    reasons.push((c.name.clone(), reason));
                    None
                }
            })
            .collect();
        let limit = self.unneeded_limit(settings, now);
        let total = eligible.len();
        let (mut removable, mut atomic) = (0, 0);
        let mut next: BTreeMap<String, UnneededNode> = BTreeMap::new();
        self.skipped.clear();
        for (i, (c, e)) in eligible.into_iter().enumerate() {
            if !self.skipped.is_empty() {
                self.skipped.push(c.name.clone());
                continue;
            }
            if started.elapsed() > settings.simulation_timeout {
                tracing::warn!(
                    "{} out of {total} nodes skipped in scale down simulation due to timeout.",
                    total - i
                );
                self.skipped.push(c.name.clone());
                continue;
            }
            if removable - atomic >= limit {
                tracing::debug!(
                    "{} out of {total} nodes skipped in scale down simulation: there are already {removable} unneeded nodes so no point in looking for more. Total atomic scale down nodes: {atomic}",
                    total - i
                );
                self.skipped.push(c.name.clone());
                continue;
            }
            match self.simulate(snapshot, c, e, budgets, drain, settings, now, &mut next) {
                Ok(()) => {
                    removable += 1;
                    atomic += usize::from(c.atomic);
                }
                Err(reason) => {
                    reasons.push((c.name.clone(), reason));
                }
            }
        }
        self.reasons = Arc::new(reasons.into_iter().collect());
        self.unbound.retain(|_, u| u.pass == pass);
        self.scheduling.drop_old_hints();
        if let Some(t) = self.skip_eval.as_mut() {
            self.max_skip_eval = Some(t.update(&self.skipped, now));
        }
        self.unneeded = next;
        self.unremovable_until.retain(|_, t| *t > now);
    }

    /// Whether the candidate has only DaemonSet and mirror pods: read again
    /// only when its pod list is not the one read last time.
    fn is_empty(&mut self, c: &CandidateNode, pods: &Arc<Vec<PodInfo>>) -> bool {
        let pass = self.pass;
        let read = || {
            pods.iter()
                .all(|p| is_daemonset_pod(&p.pod) || is_mirror_pod(&p.pod))
        };
        match self.emptiness.get_mut(&c.name) {
            Some(e) => {
                if !Arc::ptr_eq(&e.pods, pods) {
                    e.empty = read();
                    e.pods = pods.clone();
                }
                e.pass = pass;
                e.empty
            }
            None => {
                let empty = read();
                let e = Emptiness {
                    pods: pods.clone(),
                    empty,
                    pass,
                };
                self.emptiness.insert(c.name.clone(), e);
                empty
            }
        }
    }

    /// The pod without its node (`spec.nodeName`), with the same
    /// scheduling facts: made once per pod object and kept while the pod
    /// is moved at each update.
    fn unbound(&mut self, info: &PodInfo) -> PodInfo {
        let pass = self.pass;
        let address = Arc::as_ptr(&info.pod) as usize;
        if let Some(u) = self.unbound.get_mut(&address)
            && Arc::ptr_eq(&u.source, &info.pod)
        {
            u.pass = pass;
            return u.copy.clone();
        }
        let mut pod = (*info.pod).clone();
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = None;
        }
        let copy = info.with_pod(pod);
        let kept = Unbound {
            source: info.pod.clone(),
            copy: copy.clone(),
            pass,
        };
        self.unbound.insert(address, kept);
        copy
    }

    /// How many unneeded nodes are worth finding in one update (upstream's
    /// `unneededNodesLimit`): those of the last update and twice
    /// `--max-scale-down-parallelism` more, at most what the deletions at
    /// that parallelism can use within the unneeded time at the loop's
    /// pace. Also records the shortest time between updates.
    pub fn unneeded_limit(&mut self, settings: &PlannerSettings, now: SystemTime) -> usize {
        let n = settings.max_parallelism;
        let mut interval = self.min_update_interval.unwrap_or(settings.unneeded_time);
        if let Some(last) = self.last_before
            && let Ok(since) = now.duration_since(last)
        {
            interval = interval.min(since);
        }
        self.min_update_interval = Some(interval);
        let interval = interval.max(Duration::from_nanos(1));
        let unneeded_time = settings.unneeded_time.max(interval);
        let loops =
            usize::try_from(unneeded_time.as_nanos() / interval.as_nanos()).unwrap_or(usize::MAX);
        let upper = n.saturating_mul(loops).saturating_add(n);
        upper.min(self.unneeded.len() + 2 * n)
    }

    /// The cheap checks (upstream's eligibility checker): not recently
    /// unremovable, not being deleted, not disabled, autoscaled, ready (or
    /// unready scale-down on), under its utilization threshold.
    fn eligible(
        &self,
        snapshot: &Snapshot,
        c: &CandidateNode,
        settings: &PlannerSettings,
        now: SystemTime,
    ) -> Result<Eligible, Unremovable> {
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
            snapshot.dra(),
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
        Ok(Eligible { group, index, util })
    }

    /// The removal simulation: the pods that must move find a place on
    /// other nodes, within their budgets.
    #[allow(clippy::too_many_arguments)]
    fn simulate(
        &mut self,
        snapshot: &mut Snapshot,
        c: &CandidateNode,
        e: Eligible,
        budgets: &mut Budgets,
        drain: &Context<'_>,
        settings: &PlannerSettings,
        now: SystemTime,
        next: &mut BTreeMap<String, UnneededNode>,
    ) -> Result<(), Unremovable> {
        let Eligible { group, index, util } = e;
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
            let moving = self.unbound(&info);
            match self
                .scheduling
                .place(snapshot, &moving, &key, |i| i != index)
            {
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
        let risky = budgets.charge(&moved.pods_to_move);
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
