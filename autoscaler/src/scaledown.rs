//! Scale-down (ca-compat §3): which nodes are unneeded (utilization below
//! the threshold and every pod can move elsewhere), for how long, and which
//! of them to delete now within the budgets. The planner is pure
//! computation on the snapshot; [`crate::actuation`] deletes the nodes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use predicates::{NodeInfo, PodInfo};

use crate::simulator::Snapshot;
use crate::simulator::drainability::{
    self, BlockingReason, Budget, Context, is_daemonset_pod, is_long_terminating, is_mirror_pod,
};

/// `cluster-autoscaler.kubernetes.io/scale-down-disabled`.
pub const SCALE_DOWN_DISABLED: &str = "cluster-autoscaler.kubernetes.io/scale-down-disabled";

/// Why a node is not removed (`UnremovableReason`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unremovable {
    /// `ScaleDownDisabledAnnotation`.
    ScaleDownDisabledAnnotation,
    /// `ScaleDownUnreadyDisabled`.
    ScaleDownUnreadyDisabled,
    /// `NotAutoscaled`.
    NotAutoscaled,
    /// `NotUnneededLongEnough`.
    NotUnneededLongEnough,
    /// `NotUnreadyLongEnough`.
    NotUnreadyLongEnough,
    /// `NodeGroupMinSizeReached`.
    NodeGroupMinSizeReached,
    /// `MinimalResourceLimitExceeded`.
    MinimalResourceLimitExceeded,
    /// `CurrentlyBeingDeleted`.
    CurrentlyBeingDeleted,
    /// `NotUnderutilized`.
    NotUnderutilized,
    /// `RecentlyUnremovable`.
    RecentlyUnremovable,
    /// `NoPlaceToMovePods`.
    NoPlaceToMovePods,
    /// `BlockedByPod` with the pod and its reason.
    BlockedByPod {
        /// `namespace/name`.
        pod: String,
        /// The blocking reason.
        reason: BlockingReason,
    },
    /// `UnexpectedError`.
    UnexpectedError(String),
}

impl Unremovable {
    /// Upstream's name (the metric label).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::ScaleDownDisabledAnnotation => "ScaleDownDisabledAnnotation",
            Self::ScaleDownUnreadyDisabled => "ScaleDownUnreadyDisabled",
            Self::NotAutoscaled => "NotAutoscaled",
            Self::NotUnneededLongEnough => "NotUnneededLongEnough",
            Self::NotUnreadyLongEnough => "NotUnreadyLongEnough",
            Self::NodeGroupMinSizeReached => "NodeGroupMinSizeReached",
            Self::MinimalResourceLimitExceeded => "MinimalResourceLimitExceeded",
            Self::CurrentlyBeingDeleted => "CurrentlyBeingDeleted",
            Self::NotUnderutilized => "NotUnderutilized",
            Self::RecentlyUnremovable => "RecentlyUnremovable",
            Self::NoPlaceToMovePods => "NoPlaceToMovePods",
            Self::BlockedByPod { .. } => "BlockedByPod",
            Self::UnexpectedError(_) => "UnexpectedError",
        }
    }
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
) -> Result<Utilization, String> {
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
    let frac = |used: i64, alloc: i64, excl: i64| -> Result<f64, String> {
        let base = alloc - excl;
        if alloc <= 0 {
            return Err(format!("node {} has no allocatable resources", node.name()));
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

    /// Recomputes the unneeded list (ca-compat §3.2–§3.4). Removable
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
            return Err(Unremovable::RecentlyUnremovable);
        }
        if c.being_deleted {
            return Err(Unremovable::CurrentlyBeingDeleted);
        }
        if c.disabled {
            return Err(Unremovable::ScaleDownDisabledAnnotation);
        }
        let Some(group) = c.group.clone() else {
            return Err(Unremovable::NotAutoscaled);
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
        .map_err(Unremovable::UnexpectedError)?;
        if !settings.unready_enabled && !c.ready {
            return Err(Unremovable::ScaleDownUnreadyDisabled);
        }
        if util.utilization > c.threshold {
            return Err(Unremovable::NotUnderutilized);
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
            let moving = PodInfo {
                pod: Arc::new(moving),
                ..info
            };
            match snapshot.find_fit(&moving, 0, |i| i != index) {
                Some(dest) => snapshot.add_pod(dest, moving),
                None => {
                    snapshot.revert();
                    self.unremovable_until
                        .insert(c.name.clone(), now + settings.recheck_timeout);
                    return Err(Unremovable::NoPlaceToMovePods);
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
            },
        );
        Ok(())
    }
}

/// One node group's facts for choosing deletions.
#[derive(Debug, Clone)]
pub struct GroupSize {
    /// Target size.
    pub target: usize,
    /// Min size.
    pub min: usize,
    /// Deletions already in progress in the group.
    pub deleting: usize,
    /// `scaledownunneededtime` and `scaledownunreadytime` for the group.
    pub unneeded_time: Duration,
    /// Unready time.
    pub unready_time: Duration,
}

/// Deletions to start now.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Empty nodes.
    pub empty: Vec<String>,
    /// Nodes to drain.
    pub drain: Vec<String>,
    /// Unneeded nodes not deleted now, with why.
    pub kept: BTreeMap<String, Unremovable>,
}

/// Budgets (`--max-scale-down-parallelism`, `--max-drain-parallelism`)
/// minus deletions in progress.
#[derive(Debug, Clone, Copy)]
pub struct DeletionBudget {
    /// Total nodes that may be deleted in parallel, left.
    pub total: usize,
    /// Nodes needing drain, left.
    pub drain: usize,
}

/// Chooses the unneeded nodes to delete now (ca-compat §3.5). `keep_cores`
/// tells whether removing a node still respects the minimum resource
/// limits (and charges it when it does).
pub fn select(
    planner: &Planner,
    groups: &BTreeMap<String, GroupSize>,
    budget: DeletionBudget,
    now: SystemTime,
    mut keep_limits: impl FnMut(&str) -> bool,
) -> Selection {
    let mut out = Selection::default();
    let mut picked: HashMap<&str, usize> = HashMap::new();
    let mut ordered: Vec<(&String, &UnneededNode)> = planner.unneeded.iter().collect();
    // Empty nodes, then non-risky drains, then risky ones.
    ordered.sort_by_key(|(_, u)| (!u.pods_to_move.is_empty(), u.risky));
    let (mut total, mut drains) = (budget.total, budget.drain.min(budget.total));
    for (name, u) in ordered {
        let Some(g) = groups.get(&u.group) else {
            out.kept.insert(name.clone(), Unremovable::NotAutoscaled);
            continue;
        };
        let threshold = if u.ready {
            g.unneeded_time
        } else {
            g.unready_time
        };
        if threshold.is_zero() || u.since + threshold >= now {
            let reason = if u.ready {
                Unremovable::NotUnneededLongEnough
            } else {
                Unremovable::NotUnreadyLongEnough
            };
            out.kept.insert(name.clone(), reason);
            continue;
        }
        let already = picked.get(u.group.as_str()).copied().unwrap_or(0);
        if g.target.saturating_sub(g.deleting + already) <= g.min {
            out.kept
                .insert(name.clone(), Unremovable::NodeGroupMinSizeReached);
            continue;
        }
        let empty = u.pods_to_move.is_empty();
        if total == 0 || (!empty && drains == 0) {
            continue;
        }
        if !keep_limits(name) {
            out.kept
                .insert(name.clone(), Unremovable::MinimalResourceLimitExceeded);
            continue;
        }
        total -= 1;
        *picked.entry(u.group.as_str()).or_default() += 1;
        if empty {
            out.empty.push(name.clone());
        } else {
            drains -= 1;
            out.drain.push(name.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::simulator::drainability::{ControllerState, Controllers};
    use serde_json::json;

    struct All;
    impl Controllers for All {
        fn lookup(&self, _: &str, _: &str, _: &str) -> ControllerState {
            ControllerState::Found { replicas: Some(3) }
        }
    }

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    fn node(name: &str, cpu: &str, mem: &str) -> NodeInfo {
        NodeInfo::new(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name},
                "status": {"allocatable": {"cpu": cpu, "memory": mem, "pods": "110"}}}))
            .unwrap(),
        ))
    }

    fn pod(name: &str, node: &str, cpu: &str, mem: &str, extra: serde_json::Value) -> PodInfo {
        let mut v = json!({"metadata": {"name": name, "namespace": "default",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}});
        if let (Some(a), Some(b)) = (v.as_object_mut(), extra.as_object()) {
            for (k, val) in b {
                if k == "metadata" {
                    for (mk, mv) in val.as_object().unwrap() {
                        a["metadata"][mk] = mv.clone();
                    }
                } else {
                    a.insert(k.clone(), val.clone());
                }
            }
        }
        PodInfo::new(Arc::new(serde_json::from_value(v).unwrap()))
    }

    #[test]
    fn utilization_is_the_larger_of_cpu_and_memory() {
        let mut n = node("n", "4", "8Gi");
        n.add_pod(pod("a", "n", "1", "4Gi", json!({})));
        let u = utilization(&n, false, false, None, now()).unwrap();
        assert_eq!(
            (u.cpu, u.memory, u.resource, u.utilization),
            (0.25, 0.5, "memory", 0.5)
        );
        assert_eq!(u.to_string(), "{0.25 0.5 0 0 memory 0.5}");
        // DaemonSet pods, when ignored, leave the numerator and allocatable.
        n.add_pod(pod("ds", "n", "2", "0", json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "d", "controller": true}]}})));
        assert_eq!(
            utilization(&n, false, false, None, now()).unwrap().cpu,
            0.75
        );
        assert_eq!(utilization(&n, true, false, None, now()).unwrap().cpu, 0.5);
        assert!(utilization(&node("zero", "0", "0"), false, false, None, now()).is_err());
    }

    fn candidate(name: &str) -> CandidateNode {
        CandidateNode {
            name: name.into(),
            group: Some("g".into()),
            ready: true,
            being_deleted: false,
            disabled: false,
            threshold: 0.5,
            gpu_resource: None,
            ignore_daemonsets: false,
            soft_tainted_at: None,
        }
    }

    fn settings() -> PlannerSettings {
        PlannerSettings {
            ignore_mirror_pods: false,
            unready_enabled: true,
            recheck_timeout: Duration::from_secs(300),
            simulation_timeout: Duration::from_secs(30),
            candidate_ttl: Duration::ZERO,
        }
    }

    fn ctx(c: &All) -> Context<'_> {
        Context {
            now: now(),
            skip_nodes_with_system_pods: true,
            skip_nodes_with_local_storage: true,
            skip_nodes_with_custom_controller_pods: true,
            min_replica_count: 0,
            system_pod_timeout: Duration::from_secs(3600),
            budgets: &[],
            controllers: c,
        }
    }

    #[test]
    fn an_underused_node_whose_pods_fit_elsewhere_is_unneeded_and_keeps_its_time() {
        let mut busy = node("busy", "4", "8Gi");
        busy.add_pod(pod("b", "busy", "3", "1Gi", json!({})));
        let mut light = node("light", "4", "8Gi");
        light.add_pod(pod("l", "light", "500m", "1Gi", json!({})));
        let mut snap = Snapshot::new(vec![busy, light]);
        let mut planner = Planner::default();
        let c = All;
        planner.update(
            &mut snap,
            &[candidate("busy"), candidate("light")],
            &mut [],
            &ctx(&c),
            &settings(),
            now(),
        );
        assert_eq!(planner.reasons["busy"], Unremovable::NotUnderutilized);
        let u = &planner.unneeded["light"];
        assert_eq!(u.pods_to_move.len(), 1);
        assert_eq!(snap.node(0).pods.len(), 2, "the pod is placed on busy");
        // Next loop: the same node keeps its original time.
        let later = now() + Duration::from_secs(60);
        let mut snap2 = Snapshot::new(vec![node("busy", "4", "8Gi"), node("light", "4", "8Gi")]);
        planner.update(
            &mut snap2,
            &[candidate("light")],
            &mut [],
            &ctx(&c),
            &settings(),
            later,
        );
        assert_eq!(planner.unneeded["light"].since, now());
    }

    #[test]
    fn nodes_whose_pods_fit_nowhere_or_are_blocked_stay() {
        let mut a = node("a", "1", "8Gi");
        a.add_pod(pod("pa", "a", "400m", "1Gi", json!({})));
        let mut b = node("b", "1", "8Gi");
        b.add_pod(pod("pb", "b", "400m", "1Gi", json!({"metadata": {"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}}})));
        let mut snap = Snapshot::new(vec![a, b]);
        let mut planner = Planner::default();
        let c = All;
        planner.update(
            &mut snap,
            &[candidate("b"), candidate("a")],
            &mut [],
            &ctx(&c),
            &settings(),
            now(),
        );
        assert_eq!(
            planner.reasons["b"],
            Unremovable::BlockedByPod {
                pod: "default/pb".into(),
                reason: BlockingReason::NotSafeToEvictAnnotation
            }
        );
        assert!(planner.unneeded.contains_key("a"), "a's pod fits on b");
        // With b gone as a destination... a third node that cannot fit anywhere:
        let mut c1 = node("c1", "1", "8Gi");
        c1.add_pod(pod("big", "c1", "900m", "1Gi", json!({})));
        let mut snap = Snapshot::new(vec![c1, node("tiny", "500m", "8Gi")]);
        let full = CandidateNode {
            threshold: 1.0,
            ..candidate("c1")
        };
        planner.update(
            &mut snap,
            std::slice::from_ref(&full),
            &mut [],
            &ctx(&c),
            &settings(),
            now(),
        );
        assert_eq!(planner.reasons["c1"], Unremovable::NoPlaceToMovePods);
        assert_eq!(
            snap.node(0).pods.len(),
            1,
            "the failed simulation is reverted"
        );
        // ...and is not simulated again for 5 minutes.
        planner.update(
            &mut snap,
            &[full],
            &mut [],
            &ctx(&c),
            &settings(),
            now() + Duration::from_secs(60),
        );
        assert_eq!(planner.reasons["c1"], Unremovable::RecentlyUnremovable);
    }

    #[test]
    fn a_young_soft_taint_restores_the_unneeded_time_with_a_ttl() {
        let c = All;
        let tainted = CandidateNode {
            soft_tainted_at: Some(now() - Duration::from_secs(300)),
            ..candidate("n")
        };
        let run = |ttl: u64| {
            let mut planner = Planner::default();
            let mut snap = Snapshot::new(vec![node("n", "4", "8Gi"), node("m", "4", "8Gi")]);
            let s = PlannerSettings {
                candidate_ttl: Duration::from_secs(ttl),
                ..settings()
            };
            planner.update(
                &mut snap,
                std::slice::from_ref(&tainted),
                &mut [],
                &ctx(&c),
                &s,
                now(),
            );
            planner.unneeded["n"].since
        };
        assert_eq!(run(0), now(), "off by default");
        assert_eq!(
            run(600),
            now() - Duration::from_secs(300),
            "restored from the taint"
        );
        assert_eq!(run(120), now(), "older than the TTL");
    }

    #[test]
    fn deletion_waits_ten_minutes_respects_min_size_and_budgets() {
        let mut planner = Planner::default();
        let u = |pods: usize| UnneededNode {
            since: now(),
            group: "g".into(),
            pods_to_move: (0..pods)
                .map(|i| pod(&format!("p{i}"), "x", "1", "1", json!({})).pod)
                .collect(),
            daemonset_pods: Vec::new(),
            utilization: Utilization {
                cpu: 0.0,
                memory: 0.0,
                gpu: 0.0,
                resource: "cpu",
                utilization: 0.0,
            },
            ready: true,
            risky: false,
        };
        for (name, pods) in [("e1", 0), ("e2", 0), ("d1", 1), ("d2", 1)] {
            planner.unneeded.insert(name.into(), u(pods));
        }
        let groups: BTreeMap<String, GroupSize> = [(
            "g".to_string(),
            GroupSize {
                target: 10,
                min: 1,
                deleting: 0,
                unneeded_time: Duration::from_secs(600),
                unready_time: Duration::from_secs(1200),
            },
        )]
        .into();
        let budget = DeletionBudget {
            total: 10,
            drain: 1,
        };
        let early = select(
            &planner,
            &groups,
            budget,
            now() + Duration::from_secs(599),
            |_| true,
        );
        assert!(early.empty.is_empty() && early.drain.is_empty());
        assert_eq!(early.kept["e1"], Unremovable::NotUnneededLongEnough);
        let exactly = select(
            &planner,
            &groups,
            budget,
            now() + Duration::from_secs(600),
            |_| true,
        );
        assert!(exactly.empty.is_empty(), "strictly after the unneeded time");
        let later = select(
            &planner,
            &groups,
            budget,
            now() + Duration::from_secs(601),
            |_| true,
        );
        assert_eq!(later.empty, ["e1", "e2"]);
        assert_eq!(later.drain.len(), 1, "one drain at a time");
        let small: BTreeMap<String, GroupSize> = [(
            "g".to_string(),
            GroupSize {
                target: 3,
                min: 1,
                deleting: 0,
                unneeded_time: Duration::from_secs(600),
                unready_time: Duration::from_secs(1200),
            },
        )]
        .into();
        let capped = select(
            &planner,
            &small,
            budget,
            now() + Duration::from_secs(601),
            |_| true,
        );
        assert_eq!(
            capped.empty.len() + capped.drain.len(),
            2,
            "never below min"
        );
        assert!(
            capped
                .kept
                .values()
                .any(|r| *r == Unremovable::NodeGroupMinSizeReached)
        );
        let limited = select(
            &planner,
            &groups,
            budget,
            now() + Duration::from_secs(601),
            |n| n != "e1",
        );
        assert_eq!(
            limited.kept["e1"],
            Unremovable::MinimalResourceLimitExceeded
        );
    }
}
