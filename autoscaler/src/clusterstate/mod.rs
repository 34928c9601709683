//! Cluster state (ca-compat §4.6): the readiness of every node, counted per
//! node group and cluster-wide; instances that never registered; scale-up
//! requests in flight and the upcoming nodes they stand for; per-group
//! exponential backoff after failures; and cluster and group health
//! (`--max-total-unready-percentage`, `--ok-total-unready-count`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Node;

use crate::cloudprovider::{
    CloudError, CloudProvider, InstanceErrorInfo, InstanceState, NodeGroup, NodeGroupOptions,
};
use crate::taints::{self, TaintConfig};

mod metrics;
mod notices;
pub use metrics::update_cluster_metrics;
pub use notices::{Notice, report_notices};

/// Where a registered node stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// Ready.
    Ready,
    /// Not ready, younger than the group's max node startup time.
    NotStarted,
    /// Not ready.
    Unready,
    /// Its instance is going away.
    BeingDeleted,
}

/// Node counts as the status ConfigMap reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeCounts {
    /// All registered nodes.
    pub registered: usize,
    /// Ready.
    pub ready: usize,
    /// Not started.
    pub not_started: usize,
    /// Being deleted.
    pub being_deleted: usize,
    /// Unready.
    pub unready: usize,
    /// Unready because a resource (GPU) is missing.
    pub resource_unready: usize,
    /// Instances not registered (yet).
    pub unregistered: usize,
    /// Instances not registered after max node provision time.
    pub long_unregistered: usize,
}

impl NodeCounts {
    fn add(&mut self, r: Readiness) {
        self.registered += 1;
        match r {
            Readiness::Ready => self.ready += 1,
            Readiness::NotStarted => self.not_started += 1,
            Readiness::Unready => self.unready += 1,
            Readiness::BeingDeleted => self.being_deleted += 1,
        }
    }
}

/// One node group as seen in the last update.
#[derive(Debug, Clone)]
pub struct GroupState {
    /// The group.
    pub group: Arc<dyn NodeGroup>,
    /// Target size.
    pub target: usize,
    /// Counts.
    pub counts: NodeCounts,
    /// Instance ids that have not registered, with the time first seen.
    pub unregistered: Vec<(String, SystemTime)>,
    /// Those past the provision time.
    pub long_unregistered: Vec<String>,
    /// Instances that failed to be created (deleted every loop).
    pub failed: Vec<String>,
    /// Healthy (§4.6).
    pub healthy: bool,
    /// Upcoming nodes (target not yet registered, while scaling up).
    pub upcoming: usize,
    /// Max node provision time for the group.
    pub provision_time: Duration,
}

/// A scale-up in flight.
#[derive(Debug, Clone)]
pub struct ScaleUpRequest {
    /// Nodes asked for.
    pub increase: usize,
    /// When it started.
    pub start: SystemTime,
    /// When the nodes should have registered.
    pub expected_by: SystemTime,
}

/// A backoff record.
#[derive(Debug, Clone)]
pub struct BackoffRecord {
    /// Current window length.
    pub duration: Duration,
    /// Backed off until.
    pub until: SystemTime,
    /// Last failure.
    pub last_failure: SystemTime,
    /// `errorCode`.
    pub code: String,
    /// `errorMessage`.
    pub message: String,
}

/// Exponential backoff per node group (`utils/backoff`).
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    reset: Duration,
    records: BTreeMap<String, BackoffRecord>,
}

impl Backoff {
    /// `--initial-node-group-backoff-duration`, `--max-node-group-backoff-duration`,
    /// `--node-group-backoff-reset-timeout`.
    pub fn new(initial: Duration, max: Duration, reset: Duration) -> Self {
        Self {
            initial,
            max,
            reset,
            records: BTreeMap::new(),
        }
    }

    /// Records a failure: the first backs off for the initial duration; a
    /// failure while backed off restarts the same window; one after the
    /// window doubles it (up to max); records older than the reset timeout
    /// start over.
    pub fn backoff(
        &mut self,
        group: &str,
        code: &str,
        message: &str,
        now: SystemTime,
    ) -> SystemTime {
        let duration = match self.records.get(group) {
            Some(r) if r.last_failure + self.reset > now => {
                if now < r.until {
                    r.duration
                } else {
                    (r.duration * 2).min(self.max)
                }
            }
            _ => self.initial,
        };
        let until = now + duration;
        self.records.insert(
            group.to_string(),
            BackoffRecord {
                duration,
                until,
                last_failure: now,
                code: code.to_string(),
                message: truncate(message, 500),
            },
        );
        until
    }

    /// The record if the group is backed off now.
    pub fn backed_off(&self, group: &str, now: SystemTime) -> Option<&BackoffRecord> {
        self.records.get(group).filter(|r| now < r.until)
    }

    /// Forgets records whose last failure is older than the reset timeout.
    pub fn remove_stale(&mut self, now: SystemTime) {
        let reset = self.reset;
        self.records.retain(|_, r| r.last_failure + reset > now);
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let keep: String = s
        .chars()
        .take(max.saturating_sub("<truncated>".len()))
        .collect();
    format!("{keep}<truncated>")
}

/// Health thresholds and timing defaults.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--max-total-unready-percentage`.
    pub max_total_unready_percentage: f64,
    /// `--ok-total-unready-count`.
    pub ok_total_unready_count: usize,
    /// Startup and status taints.
    pub taints: TaintConfig,
    /// Per-group option defaults (from the flags).
    pub group_defaults: NodeGroupOptions,
}

/// The registry. The loop reads it through its methods and changes it only
/// by [`Self::update`] and the `register_*` methods.
pub struct ClusterStateRegistry {
    settings: Settings,
    backoff: Backoff,
    scale_ups: BTreeMap<String, ScaleUpRequest>,
    first_seen_unregistered: HashMap<String, SystemTime>,
    reported_errors: HashMap<String, usize>,
    groups: BTreeMap<String, GroupState>,
    readiness: HashMap<String, Readiness>,
    node_groups: HashMap<String, String>,
    total: NodeCounts,
    healthy: bool,
}

/// Whether a node is ready in CA's sense (ca-compat §0.2 and §1.4):
/// Ready=True, no DiskPressure or NetworkUnavailable, none of the matching
/// taints, and no startup taint.
pub fn node_ready(node: &Node, taints: &TaintConfig) -> bool {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    let status = |t: &str| {
        conditions
            .and_then(|c| c.iter().find(|c| c.type_ == t))
            .map(|c| c.status.as_str())
    };
    status("Ready") == Some("True")
        && status("DiskPressure") != Some("True")
        && status("NetworkUnavailable") != Some("True")
        && !node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|ts| {
                ts.iter().any(|t| {
                    matches!(
                        t.key.as_str(),
                        "node.kubernetes.io/not-ready"
                            | "node.kubernetes.io/disk-pressure"
                            | "node.kubernetes.io/network-unavailable"
                    ) || taints.is_startup_taint(&t.key)
                })
            })
}

/// A node's capacity as the cluster-wide resource limits count it: whole
/// cores (rounded up) and memory bytes.
pub fn node_capacity(node: &Node) -> (i64, i64) {
    let r = predicates::resources::Resources::from_list(
        node.status.as_ref().and_then(|s| s.capacity.as_ref()),
    );
    ((r.milli_cpu + 999) / 1000, r.memory)
}

/// The cluster's cores and memory as the resource limits count them
/// (`--cores-total`, `--memory-total`): nodes being deleted and
/// virtual-kubelet nodes are left out.
pub fn cluster_resources(nodes: &[Arc<Node>], now: SystemTime) -> (i64, i64) {
    nodes
        .iter()
        .filter(|n| !taints::being_deleted(n, now))
        .filter(|n| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("type"))
                .map(String::as_str)
                != Some("virtual-kubelet")
        })
        .map(|n| node_capacity(n))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

impl ClusterStateRegistry {
    /// An empty registry.
    pub fn new(settings: Settings, backoff: Backoff) -> Self {
        Self {
            settings,
            backoff,
            scale_ups: BTreeMap::new(),
            first_seen_unregistered: HashMap::new(),
            reported_errors: HashMap::new(),
            groups: BTreeMap::new(),
            readiness: HashMap::new(),
            node_groups: HashMap::new(),
            total: NodeCounts::default(),
            healthy: true,
        }
    }

    /// Records a successful increase of a group.
    pub fn register_scale_up(
        &mut self,
        group: &str,
        increase: usize,
        provision_time: Duration,
        now: SystemTime,
    ) {
        let r = self
            .scale_ups
            .entry(group.to_string())
            .or_insert(ScaleUpRequest {
                increase: 0,
                start: now,
                expected_by: now,
            });
        r.increase += increase;
        r.start = now;
        r.expected_by = now + provision_time;
    }

    /// Recomputes everything from the nodes and the provider.
    pub fn update(
        &mut self,
        provider: &dyn CloudProvider,
        nodes: &[Arc<Node>],
        now: SystemTime,
    ) -> Vec<Notice> {
        let mut notices = Vec::new();
        self.backoff.remove_stale(now);
        self.readiness.clear();
        self.node_groups.clear();
        self.total = NodeCounts::default();
        let mut groups: BTreeMap<String, GroupState> = BTreeMap::new();
        for g in provider.node_groups() {
            let options = g
                .get_options(&self.settings.group_defaults)
                .ok()
                .flatten()
                .unwrap_or_else(|| self.settings.group_defaults.clone());
            let provision_time = options.max_node_provision_time;
            groups.insert(
                g.id(),
                GroupState {
                    target: g.target_size().unwrap_or(0),
                    group: g,
                    counts: NodeCounts::default(),
                    unregistered: Vec::new(),
                    long_unregistered: Vec::new(),
                    failed: Vec::new(),
                    healthy: true,
                    upcoming: 0,
                    provision_time,
                },
            );
        }
        let gpu_label = provider.gpu_label();
        let mut provider_ids: HashMap<String, ()> = HashMap::new();
        for node in nodes {
            let name = node.metadata.name.clone().unwrap_or_default();
            if let Some(p) = node.spec.as_ref().and_then(|s| s.provider_id.clone()) {
                provider_ids.insert(p, ());
            }
            let gone = match provider.has_instance(node) {
                Ok(has) => !has,
                Err(CloudError::NotImplemented) => taints::has_to_be_deleted(node),
                Err(_) => false,
            };
            let gpu_missing = crate::gpu::unready(node, &gpu_label);
            let readiness = if gone {
                Readiness::BeingDeleted
            } else if node_ready(node, &self.settings.taints) && !gpu_missing {
                Readiness::Ready
            } else {
                let created = node
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map_or(now, |t| SystemTime::from(t.0));
                if created + self.settings.group_defaults.max_node_startup_time > now {
                    Readiness::NotStarted
                } else {
                    Readiness::Unready
                }
            };
            self.readiness.insert(name.clone(), readiness);
            self.total.add(readiness);
            let resource_unready = gpu_missing && readiness == Readiness::Unready;
            self.total.resource_unready += usize::from(resource_unready);
            if let Ok(Some(g)) = provider.node_group_for_node(node) {
                let id = g.id();
                if let Some(state) = groups.get_mut(&id) {
                    state.counts.add(readiness);
                    state.counts.resource_unready += usize::from(resource_unready);
                }
                self.node_groups.insert(name, id);
            }
        }
        // Instances without a node; creation errors.
        let mut still_unregistered = HashMap::new();
        let mut reported = HashMap::new();
        for (id, state) in groups.iter_mut() {
            let Ok(instances) = state.group.nodes() else {
                continue;
            };
            let mut errors: BTreeMap<(String, String), Vec<InstanceErrorInfo>> = BTreeMap::new();
            for inst in instances {
                if let Some(err) = &inst.error {
                    if inst.state == Some(InstanceState::Creating) {
                        state.failed.push(inst.id.clone());
                        errors
                            .entry((err.class.to_string(), err.code.clone()))
                            .or_default()
                            .push(err.clone());
                    }
                    continue;
                }
                if inst.state == Some(InstanceState::Deleting)
                    || provider_ids.contains_key(&inst.id)
                {
                    continue;
                }
                let since = *self.first_seen_unregistered.get(&inst.id).unwrap_or(&now);
                still_unregistered.insert(inst.id.clone(), since);
                if since + state.provision_time <= now {
                    state.long_unregistered.push(inst.id.clone());
                }
                state.unregistered.push((inst.id, since));
            }
            state.counts.unregistered = state.unregistered.len();
            state.counts.long_unregistered = state.long_unregistered.len();
            self.total.unregistered += state.counts.unregistered;
            self.total.long_unregistered += state.counts.long_unregistered;
            for ((_, code), errs) in errors {
                let key = format!("{id}/{code}");
                let seen = self.reported_errors.get(&key).copied().unwrap_or(0);
                if errs.len() > seen && self.scale_ups.contains_key(id) {
                    let count = errs.len() - seen;
                    let error = errs[0].clone();
                    self.backoff.backoff(id, &error.code, &error.message, now);
                    if let Some(r) = self.scale_ups.get_mut(id) {
                        r.increase = r.increase.saturating_sub(count);
                    }
                    let mut messages: Vec<String> = Vec::new();
                    for e in &errs {
                        if !messages.contains(&e.message) {
                            messages.push(e.message.clone());
                        }
                    }
                    notices.push(Notice::ScaleUpFailed {
                        group: id.clone(),
                        count,
                        error,
                        messages,
                    });
                }
                reported.insert(key, errs.len());
            }
        }
        self.first_seen_unregistered = still_unregistered;
        self.reported_errors = reported;
        // Scale-up requests: done, timed out, or still waiting.
        for (id, state) in groups.iter_mut() {
            let c = state.counts;
            let registered_or_given_up = c.ready + c.unready + c.long_unregistered;
            let upcoming = state.target.saturating_sub(registered_or_given_up);
            let backed_off = self.backoff.backed_off(id, now).is_some();
            match self.scale_ups.get(id).cloned() {
                Some(_) if upcoming == 0 => {
                    self.scale_ups.remove(id);
                }
                Some(r) if r.expected_by <= now => {
                    self.scale_ups.remove(id);
                    let message = format!(
                        "Scale-up timed out for node group {id} after {}",
                        simclock::format_go_duration(
                            now.duration_since(r.start).unwrap_or_default()
                        )
                    );
                    self.backoff.backoff(id, "timeout", &message, now);
                    notices.push(Notice::ScaleUpTimedOut {
                        group: id.clone(),
                        after: state.provision_time,
                        increase: r.increase,
                    });
                }
                Some(_) if !backed_off => state.upcoming = upcoming,
                Some(_) => {}
                // As upstream's GetUpcomingNodes: nodes the target promises
                // that are not registered or still starting (a startup
                // taint, say) are upcoming, with or without a request.
                None => state.upcoming = upcoming,
            }
        }
        // Health.
        let pct = self.settings.max_total_unready_percentage / 100.0;
        let ok = self.settings.ok_total_unready_count;
        for (id, state) in groups.iter_mut() {
            let c = state.counts;
            let pending = self.scale_ups.get(id).map_or(0, |r| r.increase);
            let min_nodes = state
                .target
                .saturating_sub(c.long_unregistered)
                .saturating_sub(pending);
            let registered_live = c.ready + c.unready + c.not_started;
            state.healthy = if registered_live == 0 {
                state.target == 0 || min_nodes == 0
            } else {
                let unjustified = min_nodes.saturating_sub(c.ready);
                !(unjustified > ok && unjustified as f64 > pct * registered_live as f64)
            };
        }
        let unready = self.total.unready;
        self.healthy = !(unready > ok && unready as f64 > pct * self.total.registered as f64);
        self.groups = groups;
        notices
    }

    /// Records a failed increase of a group: it is backed off
    /// (`errorCode` and `errorMessage` are what the status reports).
    pub fn register_failed_scale_up(
        &mut self,
        group: &str,
        code: &str,
        message: &str,
        now: SystemTime,
    ) {
        self.backoff.backoff(group, code, message, now);
    }

    /// Every node group as seen in the last update, by id.
    pub fn groups(&self) -> &BTreeMap<String, GroupState> {
        &self.groups
    }

    /// One node group as seen in the last update.
    pub fn group(&self, id: &str) -> Option<&GroupState> {
        self.groups.get(id)
    }

    /// Whether the cluster is healthy enough to autoscale.
    pub fn is_healthy(&self) -> bool {
        self.healthy
    }

    /// Cluster-wide node counts.
    pub fn totals(&self) -> &NodeCounts {
        &self.total
    }

    /// The node group of an autoscaled node.
    pub fn node_group(&self, node: &str) -> Option<&str> {
        self.node_groups.get(node).map(String::as_str)
    }

    /// Whether a registered node is ready in CA's sense.
    pub fn is_ready(&self, node: &str) -> bool {
        self.readiness.get(node) == Some(&Readiness::Ready)
    }

    /// Whether a scale-up of the group is in flight.
    pub fn is_scaling_up(&self, id: &str) -> bool {
        self.scale_ups.contains_key(id)
    }

    /// The group's backoff, when it is backed off now.
    pub fn backed_off(&self, id: &str, now: SystemTime) -> Option<&BackoffRecord> {
        self.backoff.backed_off(id, now)
    }

    /// Whether a group can be scaled up now: healthy and not backed off.
    pub fn group_ready_for_scale_up(&self, id: &str, now: SystemTime) -> Result<(), &'static str> {
        if self.groups.get(id).is_some_and(|g| !g.healthy) {
            return Err("not ready for scale-up");
        }
        if self.backoff.backed_off(id, now).is_some() {
            return Err("in backoff after failed scale-up");
        }
        Ok(())
    }

    /// Total upcoming nodes per group.
    pub fn upcoming(&self) -> BTreeMap<String, usize> {
        self.groups
            .iter()
            .filter(|(_, g)| g.upcoming > 0)
            .map(|(id, g)| (id.clone(), g.upcoming))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
    }

    const MIN: u64 = 60;

    #[test]
    fn backoff_starts_at_five_minutes_doubles_to_thirty_and_resets_after_three_hours() {
        let mut b = Backoff::new(
            Duration::from_secs(5 * MIN),
            Duration::from_secs(30 * MIN),
            Duration::from_secs(180 * MIN),
        );
        assert_eq!(b.backoff("g", "timeout", "m", t(0)), t(5 * MIN));
        assert!(b.backed_off("g", t(4 * MIN)).is_some());
        assert!(
            b.backed_off("g", t(5 * MIN)).is_none(),
            "over at the end of the window"
        );
        // A failure inside the window keeps the same duration.
        assert_eq!(b.backoff("g", "timeout", "m", t(MIN)), t(6 * MIN));
        // After the window: doubled, 10, 20, then capped at 30.
        assert_eq!(b.backoff("g", "x", "m", t(7 * MIN)), t(17 * MIN));
        assert_eq!(b.backoff("g", "x", "m", t(18 * MIN)), t(38 * MIN));
        assert_eq!(
            b.backoff("g", "x", "m", t(40 * MIN)),
            t(70 * MIN),
            "capped at 30m"
        );
        assert_eq!(b.backoff("g", "x", "m", t(80 * MIN)), t(110 * MIN));
        // Three hours after the last failure it starts over.
        assert_eq!(
            b.backoff("g", "x", "m", t(80 * MIN + 181 * MIN)),
            t(80 * MIN + 186 * MIN)
        );
        b.remove_stale(t(1000 * MIN));
        assert!(b.records.is_empty());
    }

    #[test]
    fn backoff_messages_are_truncated_at_500() {
        let mut b = Backoff::new(
            Duration::from_secs(1),
            Duration::from_secs(2),
            Duration::from_secs(3),
        );
        b.backoff("g", "c", &"x".repeat(600), t(0));
        let m = &b.backed_off("g", t(0)).unwrap().message;
        assert_eq!(m.chars().count(), 500);
        assert!(m.ends_with("<truncated>"));
    }

    #[test]
    fn readiness_follows_conditions_and_taints() {
        let cfg = TaintConfig::default();
        let node = |conds: serde_json::Value, taints: serde_json::Value| -> Node {
            serde_json::from_value(serde_json::json!({"metadata": {"name": "n"}, "spec": {"taints": taints}, "status": {"conditions": conds}})).unwrap()
        };
        let ready = serde_json::json!([{"type": "Ready", "status": "True"}]);
        assert!(node_ready(
            &node(ready.clone(), serde_json::json!([])),
            &cfg
        ));
        assert!(!node_ready(
            &node(
                serde_json::json!([{"type": "Ready", "status": "False"}]),
                serde_json::json!([])
            ),
            &cfg
        ));
        assert!(
            !node_ready(&node(serde_json::json!([]), serde_json::json!([])), &cfg),
            "no Ready condition"
        );
        assert!(!node_ready(
            &node(
                serde_json::json!([{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "True"}]),
                serde_json::json!([])
            ),
            &cfg
        ));
        assert!(!node_ready(
            &node(
                ready.clone(),
                serde_json::json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}])
            ),
            &cfg
        ));
        assert!(!node_ready(
            &node(
                ready.clone(),
                serde_json::json!([{"key": "startup-taint.cluster-autoscaler.kubernetes.io/cni", "effect": "NoSchedule"}])
            ),
            &cfg
        ));
        assert!(node_ready(
            &node(
                ready,
                serde_json::json!([{"key": "status-taint.cluster-autoscaler.kubernetes.io/x", "effect": "NoSchedule"}])
            ),
            &cfg
        ));
    }
}
