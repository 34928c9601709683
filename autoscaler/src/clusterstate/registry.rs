//! The cluster state registry (upstream's `ClusterStateRegistry`): node
//! counts per group and cluster-wide, unregistered instances, scale-up
//! requests in flight, backoff and health, recomputed by
//! [`ClusterStateRegistry::update`] at the start of every loop.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Node;

use super::backoff::{Backoff, BackoffRecord};
use super::facts::NodeFactsMemo;
use super::nodes::Readiness;
use super::notices::Notice;
use crate::cache::LoopHasher;
use crate::cloudprovider::{
    CloudError, CloudProvider, InstanceErrorInfo, InstanceState, NodeGroup, NodeGroupOptions,
};
use crate::taints;

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
    /// Healthy (docs/reference/ca-rules.md §4.6).
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

/// Health thresholds and timing defaults.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--max-total-unready-percentage`.
    pub max_total_unready_percentage: f64,
    /// `--ok-total-unready-count`.
    pub ok_total_unready_count: usize,
    /// Each node's readiness and GPU resource, with the startup and
    /// status taints readiness reads.
    pub facts: Arc<NodeFactsMemo>,
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
    readiness: HashMap<String, Readiness, LoopHasher>,
    node_groups: HashMap<String, String, LoopHasher>,
    total: NodeCounts,
    healthy: bool,
    /// Nodes whose custom resources are not ready yet beyond GPUs (CSI
    /// drivers: [`crate::processors::customresources`]), for the next update.
    resource_unready: std::collections::BTreeSet<String>,
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
            readiness: HashMap::default(),
            node_groups: HashMap::default(),
            total: NodeCounts::default(),
            healthy: true,
            resource_unready: Default::default(),
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

    /// The nodes the next [`Self::update`] counts unready for a custom
    /// resource not ready yet (reason `resource-not-ready`), beyond GPUs.
    pub fn set_resource_unready(&mut self, nodes: std::collections::BTreeSet<String>) {
        self.resource_unready = nodes;
    }

    /// Recomputes everything from the nodes and the provider: the groups,
    /// each node's readiness, the instances without a node and their
    /// creation errors, the scale-ups in flight, then health.
    pub fn update(
        &mut self,
        provider: &dyn CloudProvider,
        nodes: &[Arc<Node>],
        now: SystemTime,
    ) -> Vec<Notice> {
        let mut notices = Vec::new();
        self.backoff.remove_stale(now);
        self.total = NodeCounts::default();
        let mut groups = self.read_groups(provider);
        let provider_ids = self.count_nodes(provider, nodes, &mut groups, now);
        self.count_instances(&mut groups, &provider_ids, now, &mut notices);
        self.update_scale_ups(&mut groups, now, &mut notices);
        self.update_health(&mut groups);
        self.groups = groups;
        notices
    }

    /// Every node group of the provider, with its target size and max
    /// node provision time, and nothing counted yet.
    fn read_groups(&self, provider: &dyn CloudProvider) -> BTreeMap<String, GroupState> {
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
        groups
    }

    /// Counts every registered node by readiness, cluster-wide and in its
    /// group, and remembers its group. Returns the nodes' provider IDs.
    fn count_nodes<'n>(
        &mut self,
        provider: &dyn CloudProvider,
        nodes: &'n [Arc<Node>],
        groups: &mut BTreeMap<String, GroupState>,
        now: SystemTime,
    ) -> HashSet<&'n str, LoopHasher> {
        let gpu_label = provider.gpu_label();
        let mut provider_ids: HashSet<&str, LoopHasher> = HashSet::default();
        // The maps are rebuilt with the last loop's keys: most nodes stay.
        let mut last_readiness = std::mem::replace(&mut self.readiness, sized(nodes.len()));
        let mut last_groups = std::mem::replace(&mut self.node_groups, sized(nodes.len()));
        for node in nodes {
            let name = node.metadata.name.as_deref().unwrap_or("");
            if let Some(p) = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()) {
                provider_ids.insert(p);
            }
            let gone = match provider.has_instance(node) {
                Ok(has) => !has,
                Err(CloudError::NotImplemented) => taints::has_to_be_deleted(node),
                Err(_) => false,
            };
            let facts = self.settings.facts.of(node);
            let resource_missing = crate::gpu::unready(node, facts.gpu_allocatable, &gpu_label)
                || self.resource_unready.contains(name);
            let readiness = self.readiness_of(node, facts.ready, gone, resource_missing, now);
            let key = last_readiness
                .remove_entry(name)
                .map_or_else(|| name.to_string(), |(k, _)| k);
            self.readiness.insert(key, readiness);
            self.total.add(readiness);
            let resource_unready = resource_missing && readiness == Readiness::Unready;
            self.total.resource_unready += usize::from(resource_unready);
            if let Ok(Some(id)) = provider.node_group_id(node) {
                if let Some(state) = groups.get_mut(&id) {
                    state.counts.add(readiness);
                    state.counts.resource_unready += usize::from(resource_unready);
                }
                let key = last_groups
                    .remove_entry(name)
                    .map_or_else(|| name.to_string(), |(k, _)| k);
                self.node_groups.insert(key, id);
            }
        }
        provider_ids
    }

    /// Where a registered node stands: being deleted when its instance is
    /// gone, ready, else not started while younger than the max node
    /// startup time, else unready.
    fn readiness_of(
        &self,
        node: &Node,
        ready: bool,
        gone: bool,
        resource_missing: bool,
        now: SystemTime,
    ) -> Readiness {
        if gone {
            Readiness::BeingDeleted
        } else if ready && !resource_missing {
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
        }
    }

    /// Instances without a node (unregistered, and long unregistered past
    /// the group's provision time) and instances that failed to be created.
    fn count_instances(
        &mut self,
        groups: &mut BTreeMap<String, GroupState>,
        provider_ids: &HashSet<&str, LoopHasher>,
        now: SystemTime,
        notices: &mut Vec<Notice>,
    ) {
        let mut still_unregistered = HashMap::new();
        let mut reported = HashMap::new();
        let registered = |id: &str| provider_ids.contains(id);
        for (id, state) in groups.iter_mut() {
            let Ok(instances) = state.group.instances_besides(&registered) else {
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
                    || provider_ids.contains(inst.id.as_str())
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
            self.creation_errors(id, errors, now, &mut reported, notices);
        }
        self.first_seen_unregistered = still_unregistered;
        self.reported_errors = reported;
    }

    /// A group's creation errors by class and code: those not reported in
    /// an earlier update fail the group's scale-up in flight (backoff, a
    /// smaller request, a notice). `reported` gets the counts seen now.
    fn creation_errors(
        &mut self,
        id: &str,
        errors: BTreeMap<(String, String), Vec<InstanceErrorInfo>>,
        now: SystemTime,
        reported: &mut HashMap<String, usize>,
        notices: &mut Vec<Notice>,
    ) {
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
                    group: id.to_string(),
                    count,
                    error,
                    messages,
                });
            }
            reported.insert(key, errs.len());
        }
    }

    /// Scale-up requests: done, timed out (backed off, a notice), or still
    /// waiting; and each group's upcoming nodes.
    fn update_scale_ups(
        &mut self,
        groups: &mut BTreeMap<String, GroupState>,
        now: SystemTime,
        notices: &mut Vec<Notice>,
    ) {
        for (id, state) in groups.iter_mut() {
            let c = state.counts;
            let registered_or_given_up = c.ready + c.unready + c.long_unregistered;
            let upcoming = state.target.saturating_sub(registered_or_given_up);
            let backed_off = self.backoff.backed_off(id, now).is_some();
            // Nodes that never registered are not a finished scale-up: at
            // its deadline it times out. (Upstream's instances are seen
            // unregistered a little after the increase, so its deadline
            // comes first; in virtual time the two can be the same instant.)
            let never_registered = c.long_unregistered > 0;
            match self.scale_ups.get(id).cloned() {
                Some(r) if upcoming == 0 && !(never_registered && r.expected_by <= now) => {
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
                // As upstream's GetUpcomingNodes since 1.36: the nodes the
                // target promises that are not registered or still starting
                // (a startup taint, say) are upcoming only while a scale-up
                // request waits for them and the group is not backed off.
                // Otherwise (a request timed out or given up, a node deleted
                // behind the target's back) they would stand in the snapshot
                // for capacity that is not coming, and pending pods would
                // look schedulable: no other group would be scaled up.
                Some(_) if !backed_off => state.upcoming = upcoming,
                _ => {}
            }
        }
    }

    /// Each group's health and the cluster's (docs/reference/ca-rules.md §4.6).
    fn update_health(&mut self, groups: &mut BTreeMap<String, GroupState>) {
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

/// A map for `n` nodes, sized at once (the loop fills it with every node).
fn sized<V>(n: usize) -> HashMap<String, V, LoopHasher> {
    HashMap::with_capacity_and_hasher(n, LoopHasher::default())
}
