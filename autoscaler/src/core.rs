//! The main loop (`RunOnce`, ca-compat §4.0): cluster state, snapshot,
//! unregistered-node cleanup, health, upcoming nodes, scale-up, scale-down,
//! `--enforce-node-group-min-size`, then the status ConfigMap and the
//! decision record of the loop.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::{Api, Client};
use predicates::{NodeInfo, PodInfo};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::actuation::{self, Actuator, DrainFlags, ToDelete};
use crate::cache::ClusterCache;
use crate::cloudprovider::{CloudError, CloudProvider, NodeGroup, NodeGroupOptions, NodeLister};
use crate::clusterstate::{self, Backoff, ClusterStateRegistry, Notice, Readiness};
use crate::config::{ExpanderName, Flags, Validated};
use crate::expander::{Priorities, PriorityNotice};
use crate::metrics::{self, Metrics};
use crate::scaledown::{self, CandidateNode, DeletionBudget, GroupSize, Planner, PlannerSettings};
use crate::scaleup::{self, Balancing, Candidate, Limits, Plan, PlanInputs};
use crate::simulator::drainability::Context;
use crate::simulator::{Snapshot, node_from_template};
use crate::status::{EventRecorder, ObjectRef, ScaleDownSummary, StatusWriter};
use crate::taints::{self, TaintConfig};

/// The ConfigMap of the priority expander.
pub const PRIORITY_CONFIG_MAP: &str = "cluster-autoscaler-priority-expander";
/// Annotation on fake nodes handed to `delete_nodes` for instances.
pub const FAKE_NODE_REASON: &str = "k8s.io/cluster-autoscaler/fake-node-reason";

/// Why a loop failed (the `errors_total{type}` label and the health check).
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// The provider's refresh failed.
    #[error("cloud provider refresh failed: {0}")]
    CloudProvider(CloudError),
    /// A scale-down could not start.
    #[error("scale-down failed: {0}")]
    ScaleDown(String),
}

impl LoopError {
    /// The error type label.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::CloudProvider(e) => e.kind().as_str(),
            Self::ScaleDown(_) => "cloudProviderError",
        }
    }
}

/// What one loop decided, as structured data (served at `/decisions`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Decisions {
    /// Loop time (RFC 3339).
    pub time: String,
    /// Scale-up result: `NotNeeded`, `Successful`, `NoOptionsAvailable`,
    /// `Error`, `InCooldown`, `LimitedByMaxNodesTotal`, `ClusterUnhealthy`.
    pub scale_up: String,
    /// Per pending pod: group id → why not (or `chosen`).
    pub pods: BTreeMap<String, BTreeMap<String, String>>,
    /// Options the expander chose among: group → node count.
    pub options: BTreeMap<String, usize>,
    /// Groups and sizes of the executed scale-up.
    pub scaled_up: BTreeMap<String, String>,
    /// Unneeded nodes: name → since (RFC 3339) and utilization.
    pub unneeded: BTreeMap<String, String>,
    /// Nodes that stay: name → reason (`BlockedByPod: ns/pod NotReplicated`...).
    pub unremovable: BTreeMap<String, String>,
    /// Nodes whose deletion started this loop.
    pub scaled_down: Vec<String>,
}

/// When the loop last started and last succeeded (for `/health-check`).
#[derive(Debug, Clone, Copy)]
pub struct Liveness {
    /// Process start.
    pub started: SystemTime,
    /// Last loop start.
    pub last_activity: SystemTime,
    /// Last successful loop end.
    pub last_success: Option<SystemTime>,
}

/// The autoscaler.
pub struct Autoscaler {
    client: Client,
    clock: simclock::Clock,
    flags: Flags,
    validated: Validated,
    provider: Arc<dyn CloudProvider>,
    cache: Arc<ClusterCache>,
    registry: ClusterStateRegistry,
    planner: Planner,
    actuator: Actuator,
    status: StatusWriter,
    events: EventRecorder,
    group_defaults: NodeGroupOptions,
    taints: TaintConfig,
    templates: HashMap<String, (NodeInfo, SystemTime)>,
    last_scale_up: Option<SystemTime>,
    last_scale_down_failure: Option<SystemTime>,
    last_deletion: Option<SystemTime>,
    cleaned_up: bool,
    size_mismatch: HashMap<String, (usize, usize, SystemTime)>,
    /// Per group: last scale-up, last deletion start, last failed cloud
    /// deletion (for `--scale-down-delay-type-local`).
    group_activity: HashMap<String, GroupActivity>,
    /// This loop found every pending pod too new (scale-down waits too).
    pods_too_new: bool,
    /// The last loop's decisions.
    pub decisions: Arc<Mutex<Decisions>>,
    /// Loop liveness.
    pub liveness: Arc<Mutex<Liveness>>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
}

/// When a group last changed, for the per-group scale-down delays.
#[derive(Debug, Clone, Copy, Default)]
struct GroupActivity {
    scale_up: Option<SystemTime>,
    deletion: Option<SystemTime>,
    delete_failure: Option<SystemTime>,
}

/// The node lister a provider reads from the cache.
pub fn node_lister(cache: &Arc<ClusterCache>) -> NodeLister {
    let cache = cache.clone();
    Arc::new(move || cache.read().nodes.values().cloned().collect())
}

impl Autoscaler {
    /// An autoscaler on a started cache and a built provider.
    pub fn new(
        client: Client,
        clock: simclock::Clock,
        flags: Flags,
        validated: Validated,
        cache: Arc<ClusterCache>,
        provider: Arc<dyn CloudProvider>,
    ) -> Self {
        let f = &flags;
        let taints = TaintConfig {
            startup: f
                .startup_taint
                .iter()
                .chain(&f.ignore_taint)
                .cloned()
                .collect(),
            startup_prefixes: f.startup_taint_prefix.clone(),
            status: f.status_taint.clone(),
        };
        let group_defaults = NodeGroupOptions {
            scale_down_utilization_threshold: f.scale_down_utilization_threshold,
            scale_down_gpu_utilization_threshold: f.scale_down_gpu_utilization_threshold,
            scale_down_unneeded_time: f.scale_down_unneeded_time,
            scale_down_unready_time: f.scale_down_unready_time,
            max_node_provision_time: f.max_node_provision_time,
            max_node_startup_time: f.max_node_startup_time,
            ignore_daemonsets_utilization: f.ignore_daemonsets_utilization,
            zero_or_max_node_scaling: false,
        };
        let registry = ClusterStateRegistry::new(
            clusterstate::Settings {
                max_total_unready_percentage: f.max_total_unready_percentage,
                ok_total_unready_count: f.ok_total_unready_count,
                taints: taints.clone(),
                group_defaults: group_defaults.clone(),
            },
            Backoff::new(
                f.initial_node_group_backoff_duration,
                f.max_node_group_backoff_duration,
                f.node_group_backoff_reset_timeout,
            ),
        );
        let status_cm = ObjectRef::config_map(&f.namespace, &f.status_config_map_name);
        let events = EventRecorder::new(
            client.clone(),
            clock.clone(),
            f.record_duplicated_events,
            status_cm,
            f.write_status_configmap,
        );
        let actuator = Actuator::new(
            client.clone(),
            clock.clone(),
            actuation::Settings {
                cordon: f.cordon_node_before_terminating,
                delay_after_taint: f.node_delete_delay_after_taint,
                max_pod_eviction_time: f.max_pod_eviction_time,
                max_graceful_termination_sec: validated.max_graceful_termination_sec,
                drain_priorities: validated.drain_priorities.clone(),
                ds_eviction_empty: f.daemonset_eviction_for_empty_nodes,
                ds_eviction_occupied: f.daemonset_eviction_for_occupied_nodes,
                deletion_delay_timeout: f.node_deletion_delay_timeout,
                drain: DrainFlags {
                    skip_system_pods: f.skip_nodes_with_system_pods,
                    skip_local_storage: f.skip_nodes_with_local_storage,
                    skip_custom_controller_pods: f.skip_nodes_with_custom_controller_pods,
                    min_replica_count: f.min_replica_count,
                    system_pod_timeout: f.blocking_system_pod_distruption_timeout,
                },
                expendable_cutoff: f.expendable_pods_priority_cutoff,
            },
            events.clone(),
            cache.clone(),
        );
        let status = StatusWriter::new(
            client.clone(),
            &f.namespace,
            &f.status_config_map_name,
            f.write_status_configmap,
        );
        let now = clock.now();
        let metrics = Arc::new(Metrics::new(f.emit_per_nodegroup_metrics));
        let gib = (1i64 << 30) as f64;
        Metrics::set(
            &metrics.cpu_limits_cores,
            &[("direction", "minimum")],
            validated.cores_total.min as f64,
        );
        Metrics::set(
            &metrics.cpu_limits_cores,
            &[("direction", "maximum")],
            validated.cores_total.max as f64,
        );
        Metrics::set(
            &metrics.memory_limits_bytes,
            &[("direction", "minimum")],
            validated.memory_total.min as f64 * gib,
        );
        Metrics::set(
            &metrics.memory_limits_bytes,
            &[("direction", "maximum")],
            validated.memory_total.max as f64 * gib,
        );
        Self {
            client,
            clock,
            flags,
            validated,
            provider,
            cache,
            registry,
            planner: Planner::default(),
            actuator,
            status,
            events,
            group_defaults,
            taints,
            templates: HashMap::new(),
            last_scale_up: None,
            last_scale_down_failure: None,
            last_deletion: None,
            cleaned_up: false,
            size_mismatch: HashMap::new(),
            group_activity: HashMap::new(),
            pods_too_new: false,
            decisions: Arc::new(Mutex::new(Decisions::default())),
            liveness: Arc::new(Mutex::new(Liveness {
                started: now,
                last_activity: now,
                last_success: None,
            })),
            metrics,
        }
    }

    /// The provider.
    pub fn provider(&self) -> &Arc<dyn CloudProvider> {
        &self.provider
    }

    /// Writes the startup status (`Initializing`).
    pub async fn write_initial_status(&self) {
        self.status
            .write(&StatusWriter::initializing(self.clock.now(), None))
            .await;
    }

    /// Runs loops every `--scan-interval` until the task is dropped; with
    /// `--frequent-loops-enabled`, a newly unschedulable pod or a loop that
    /// acted starts the next one at once.
    pub async fn run(self) {
        self.run_until(std::future::pending()).await;
    }

    /// Like [`Self::run`], until `stop` resolves; then shuts down
    /// gracefully ([`Self::shutdown`]).
    pub async fn run_until(mut self, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        tokio::select! {
            _ = &mut stop => return,
            _ = self.cache.wait_ready() => {}
        }
        self.write_initial_status().await;
        loop {
            let acted = tokio::select! {
                _ = &mut stop => break,
                r = self.run_once() => match r {
                    Ok(acted) => acted,
                    Err(e) => {
                        tracing::error!("loop failed ({}): {e}", e.kind());
                        false
                    }
                },
            };
            if self.flags.frequent_loops_enabled && acted {
                continue;
            }
            let sleep = tokio::time::sleep(self.flags.scan_interval);
            let frequent = self.flags.frequent_loops_enabled;
            tokio::select! {
                _ = &mut stop => break,
                _ = sleep => {}
                _ = self.cache.unschedulable_pod(), if frequent => {}
            }
        }
        self.shutdown().await;
    }

    /// On graceful shutdown: delete the status ConfigMap and clean up the provider.
    pub async fn shutdown(&self) {
        if self.flags.write_status_configmap {
            self.status.delete().await;
            if let Err(e) = self.provider.cleanup().await {
                tracing::warn!("cloud provider cleanup: {e}");
            }
        }
    }

    fn options_for(&self, g: &dyn NodeGroup) -> NodeGroupOptions {
        g.get_options(&self.group_defaults)
            .ok()
            .flatten()
            .unwrap_or_else(|| self.group_defaults.clone())
    }

    /// One iteration. Returns whether it acted (scaled up or started a
    /// deletion).
    pub async fn run_once(&mut self) -> Result<bool, LoopError> {
        let now = self.clock.now();
        let started = std::time::Instant::now();
        if let Ok(mut l) = self.liveness.lock() {
            l.last_activity = now;
        }
        self.metrics.activity("main", now);
        let mut decisions = Decisions {
            time: simclock::format_rfc3339(now),
            ..Decisions::default()
        };
        if !self.cleaned_up {
            self.clean_up_taints().await;
            self.cleaned_up = true;
        }
        let nodes: Vec<Arc<Node>> = self.cache.read().nodes.values().cloned().collect();
        if !self.flags.scale_up_from_zero {
            let ready = nodes
                .iter()
                .filter(|n| clusterstate::node_ready(n, &self.taints))
                .count();
            if nodes.is_empty() || ready == 0 {
                let message = if nodes.is_empty() {
                    "Cluster has no nodes."
                } else {
                    "Cluster has no ready nodes."
                };
                self.status
                    .write(&StatusWriter::initializing(now, Some(message)))
                    .await;
                return Ok(false);
            }
        }
        let t = std::time::Instant::now();
        if let Err(e) = self.provider.refresh().await {
            let e = LoopError::CloudProvider(e);
            Metrics::inc(&self.metrics.errors, &[("type", e.kind())], 1);
            return Err(e);
        }
        self.metrics.observe("cloudProviderRefresh", t.elapsed());
        let t = std::time::Instant::now();
        let notices = self.registry.update(&*self.provider, &nodes, now);
        self.metrics.observe("updateClusterState", t.elapsed());
        self.report(notices);
        self.cluster_metrics(&nodes, now);

        self.metrics.activity("autoscaling", now);
        self.pods_too_new = false;
        let result = self.iterate(&nodes, now, &mut decisions).await;
        if let Err(e) = &result {
            Metrics::inc(&self.metrics.errors, &[("type", e.kind())], 1);
        }
        let summary = self.scale_down_summary();
        let status = self.status.running(&self.registry, &summary, now);
        self.status.write(&status).await;
        if let Ok(mut d) = self.decisions.lock() {
            *d = decisions;
        }
        if result.is_ok() {
            if let Ok(mut l) = self.liveness.lock() {
                l.last_success = Some(self.clock.now());
            }
            self.metrics.activity("mainSuccessful", now);
        }
        self.metrics.observe("main", started.elapsed());
        result
    }

    fn cluster_metrics(&self, nodes: &[Arc<Node>], now: SystemTime) {
        let m = &self.metrics;
        let t = &self.registry.total;
        m.safe_to_autoscale
            .set(if self.registry.healthy { 1.0 } else { 0.0 });
        for (state, n) in [
            ("ready", t.ready),
            ("unready", t.unready),
            ("notStarted", t.not_started),
            ("suspended", 0),
            ("longUnregistered", t.long_unregistered),
            ("unregistered", t.unregistered),
        ] {
            Metrics::set(&m.nodes_count, &[("state", state)], n as f64);
        }
        Metrics::set(
            &m.node_groups_count,
            &[("node_group_type", "autoscaled")],
            self.registry.groups.len() as f64,
        );
        Metrics::set(
            &m.node_groups_count,
            &[("node_group_type", "autoprovisioned")],
            0.0,
        );
        let sum_max: usize = self
            .registry
            .groups
            .values()
            .map(|g| g.group.max_size())
            .sum();
        let max = if self.flags.max_nodes_total > 0 {
            self.flags.max_nodes_total.min(sum_max)
        } else {
            sum_max
        };
        m.max_nodes_count.set(max as f64);
        let mut taint_types: BTreeMap<String, usize> = BTreeMap::new();
        for n in nodes {
            for t in n.spec.iter().flat_map(|s| s.taints.iter().flatten()) {
                *taint_types
                    .entry(taints::metric_type(&t.key, &self.taints))
                    .or_default() += 1;
            }
        }
        m.node_taints_count.clear();
        for (t, count) in taint_types {
            Metrics::set(&m.node_taints_count, &[("type", &t)], count as f64);
        }
        let (cores, memory) = self.cluster_resources(nodes, now);
        m.cpu_current_cores.set(cores as f64);
        m.memory_current_bytes.set(memory as f64);
        if self.flags.emit_per_nodegroup_metrics {
            for (id, g) in &self.registry.groups {
                let l = [("node_group", id.as_str())];
                Metrics::set(&m.node_group_min, &l, g.group.min_size() as f64);
                Metrics::set(&m.node_group_max, &l, g.group.max_size() as f64);
                Metrics::set(&m.node_group_target, &l, g.target as f64);
                Metrics::set(
                    &m.node_group_healthiness,
                    &l,
                    if g.healthy { 1.0 } else { 0.0 },
                );
            }
        }
    }

    fn scale_down_summary(&self) -> ScaleDownSummary {
        let mut candidates = BTreeMap::new();
        for u in self.planner.unneeded.values() {
            *candidates.entry(u.group.clone()).or_insert(0) += 1;
        }
        ScaleDownSummary {
            candidates,
            probed: self.planner.last_update,
        }
    }

    fn report(&self, notices: Vec<Notice>) {
        for n in notices {
            match n {
                Notice::ScaleUpTimedOut {
                    group,
                    after,
                    increase,
                } => {
                    Metrics::inc_gpu(&self.metrics.failed_scale_ups, &[("reason", "timeout")], 1);
                    Metrics::inc(
                        &self.metrics.failed_node_creations,
                        &[("reason", "timeout")],
                        increase as u64,
                    );
                    self.events.status(
                        "Warning",
                        "ScaleUpTimedOut",
                        format!(
                            "Nodes added to group {group} failed to register within {}",
                            simclock::format_go_duration(after)
                        ),
                    )
                }
                Notice::ScaleUpFailed {
                    group,
                    count,
                    error,
                    messages,
                } => {
                    let mut sources = messages
                        .iter()
                        .take(3)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ");
                    if messages.len() > 3 {
                        sources.push_str(", ...");
                    }
                    Metrics::inc_gpu(
                        &self.metrics.failed_scale_ups,
                        &[("reason", &error.code)],
                        1,
                    );
                    Metrics::inc(
                        &self.metrics.failed_node_creations,
                        &[("reason", &error.code)],
                        count as u64,
                    );
                    self.events.status(
                        "Warning",
                        "ScaleUpFailed",
                        format!(
                            "Failed adding {count} nodes to group {group} due to {}.{}; source errors: {sources}",
                            error.class, error.code
                        ),
                    )
                }
            }
        }
    }

    async fn iterate(
        &mut self,
        nodes: &[Arc<Node>],
        now: SystemTime,
        decisions: &mut Decisions,
    ) -> Result<bool, LoopError> {
        self.remove_long_unregistered().await;
        if !self.registry.healthy {
            self.events
                .status("Warning", "ClusterUnhealthy", "Cluster is unhealthy".into());
            self.planner.clear();
            decisions.scale_up = "ClusterUnhealthy".into();
            return Ok(false);
        }
        self.delete_failed_instances().await;
        if self.fix_incorrect_sizes(now).await {
            return Ok(false);
        }
        // The snapshot: nodes with their pods, nominated pods on their
        // nominated node, upcoming nodes as template copies.
        let (infos, unbound): (Vec<NodeInfo>, Vec<Arc<Pod>>) = {
            let mut state = self.cache.write();
            let infos = state.node_infos(self.flags.expendable_pods_priority_cutoff);
            (infos, state.unbound.values().cloned().collect())
        };
        let mut snapshot = Snapshot::new(infos);
        for pod in &unbound {
            if let Some(nominated) = pod
                .status
                .as_ref()
                .and_then(|s| s.nominated_node_name.as_deref())
                && let Some(i) = snapshot.index_of(nominated)
                && !crate::cache::is_expendable(pod, self.flags.expendable_pods_priority_cutoff)
            {
                snapshot.add_pod(i, PodInfo::new(pod.clone()));
            }
        }
        let templates = self.templates(nodes, now);
        for (id, count) in self.registry.upcoming() {
            if let Some(t) = templates.get(&id) {
                for i in 0..count {
                    snapshot.add_node(node_from_template(
                        t,
                        &format!("template-node-for-{id}-upcoming-{i}"),
                    ));
                }
            }
        }
        snapshot.commit();

        let unschedulable = unbound
            .iter()
            .filter(|p| crate::cache::is_unschedulable(p))
            .count();
        Metrics::set(
            &self.metrics.unschedulable_pods_count,
            &[("type", "unschedulable")],
            unschedulable as f64,
        );
        Metrics::set(
            &self.metrics.unschedulable_pods_count,
            &[("type", "scheduler_unprocessed")],
            0.0,
        );
        let t = std::time::Instant::now();
        self.metrics.activity("scaleUp", now);
        let acted_up = self
            .scale_up(&mut snapshot, &unbound, &templates, nodes, now, decisions)
            .await;
        self.metrics.observe("scaleUp", t.elapsed());
        let acted_down = if self.flags.scale_down_enabled {
            let t = std::time::Instant::now();
            self.metrics.activity("scaleDown", now);
            let r = self
                .scale_down(&mut snapshot, nodes, now, decisions, acted_up)
                .await;
            self.metrics.observe("scaleDown", t.elapsed());
            r?
        } else {
            false
        };
        let enforced = if self.flags.enforce_node_group_min_size {
            self.enforce_min_sizes(&templates, nodes, now).await
        } else {
            false
        };
        Ok(acted_up || acted_down || enforced)
    }

    /// Removes, once per process, the ToBeDeleted taints left by an earlier
    /// run (and soft taints when soft tainting is off).
    async fn clean_up_taints(&self) {
        let nodes: Vec<Arc<Node>> = self.cache.read().nodes.values().cloned().collect();
        for node in nodes {
            if !matches!(self.provider.node_group_for_node(&node), Ok(Some(_))) {
                continue;
            }
            let name = node.metadata.name.clone().unwrap_or_default();
            let uid = node.metadata.uid.clone().unwrap_or_default();
            let mut keys = vec![taints::TO_BE_DELETED];
            // Soft taints go when soft tainting is off; with a candidate
            // TTL only those older than it.
            let ttl = self.flags.node_deletion_candidate_ttl;
            let young = taints::taint_time(&node, taints::DELETION_CANDIDATE)
                .is_some_and(|t| !ttl.is_zero() && t + ttl > self.clock.now());
            if self.flags.max_bulk_soft_taint_count == 0 && !young {
                keys.push(taints::DELETION_CANDIDATE);
            }
            for key in keys {
                if !taints::has_taint(&node, key) {
                    continue;
                }
                let cordon =
                    key == taints::TO_BE_DELETED && self.flags.cordon_node_before_terminating;
                match taints::remove(&self.client, &name, key, cordon).await {
                    Ok(_) => self.events.record(
                        &ObjectRef::node(&name, &uid),
                        "Normal",
                        "ClusterAutoscalerCleanup",
                        format!("removed {key} taint from node {name}"),
                    ),
                    Err(e) => self.events.record(
                        &ObjectRef::node(&name, &uid),
                        "Warning",
                        "ClusterAutoscalerCleanup",
                        format!("failed to clean {key} on node {name}: {e}"),
                    ),
                }
            }
        }
    }

    /// Deletes instances that never registered within the group's
    /// provision time (ca-compat §3.7), never below min size unless
    /// `--force-delete-unregistered-nodes`.
    async fn remove_long_unregistered(&mut self) {
        let groups: Vec<(Arc<dyn NodeGroup>, usize, Vec<String>)> = self
            .registry
            .groups
            .values()
            .filter(|g| !g.long_unregistered.is_empty())
            .map(|g| (g.group.clone(), g.target, g.long_unregistered.clone()))
            .collect();
        for (group, target, ids) in groups {
            let allowed = if self.flags.force_delete_unregistered_nodes {
                ids.len()
            } else {
                target.saturating_sub(group.min_size()).min(ids.len())
            };
            for id in ids.into_iter().take(allowed) {
                let fake: Node = serde_json::from_value(json!({
                    "metadata": {"name": id, "annotations": {FAKE_NODE_REASON: "unregistered"}},
                    "spec": {"providerID": id},
                }))
                .unwrap_or_default();
                match group.delete_nodes(vec![fake]).await {
                    Ok(()) => {
                        self.metrics.old_unregistered_removed.inc();
                        self.events.status(
                            "Normal",
                            "DeleteUnregistered",
                            format!("Removed unregistered node {id}"),
                        )
                    }
                    Err(e) => self.events.status(
                        "Warning",
                        "DeleteUnregisteredFailed",
                        format!("Failed to remove node {id}: {e}"),
                    ),
                }
            }
        }
    }

    /// Deletes the instances that failed to be created (ca-compat §3.7),
    /// handing the provider fake nodes named after them.
    async fn delete_failed_instances(&self) {
        for g in self.registry.groups.values() {
            for id in &g.failed {
                let fake: Node = serde_json::from_value(json!({
                    "metadata": {"name": id, "annotations": {FAKE_NODE_REASON: "create-error"}},
                    "spec": {"providerID": id},
                }))
                .unwrap_or_default();
                if let Err(e) = g.group.delete_nodes(vec![fake]).await {
                    tracing::warn!(
                        "deleting instance {id} of node group {}, which failed to be created: {e}",
                        g.group.id()
                    );
                }
            }
        }
    }

    /// Lowers the target of a group whose registered nodes stayed below
    /// target for longer than its provision time (and that is not scaling up).
    async fn fix_incorrect_sizes(&mut self, now: SystemTime) -> bool {
        let mut fixed = false;
        let groups: Vec<_> = self
            .registry
            .groups
            .iter()
            .map(|(id, g)| (id.clone(), g.clone()))
            .collect();
        for (id, g) in groups {
            let registered = g.counts.registered + g.counts.unregistered;
            if registered >= g.target || self.registry.scale_ups.contains_key(&id) {
                self.size_mismatch.remove(&id);
                continue;
            }
            let entry = self
                .size_mismatch
                .entry(id.clone())
                .or_insert((g.target, registered, now));
            if (entry.0, entry.1) != (g.target, registered) {
                *entry = (g.target, registered, now);
                continue;
            }
            if entry.2 + g.provision_time <= now {
                let delta =
                    i64::try_from(registered).unwrap_or(0) - i64::try_from(g.target).unwrap_or(0);
                match g.group.decrease_target_size(delta).await {
                    Ok(()) => fixed = true,
                    Err(e) => tracing::warn!("fixing the size of node group {id}: {e}"),
                }
                self.size_mismatch.remove(&id);
            }
        }
        fixed
    }

    /// Template nodes per group (ca-compat §4.9): a good node of the group,
    /// else the cached template, else the provider's.
    fn templates(&mut self, nodes: &[Arc<Node>], now: SystemTime) -> BTreeMap<String, NodeInfo> {
        let mut out = BTreeMap::new();
        let state = self.cache.read();
        let daemonsets: Vec<Arc<DaemonSet>> = state.daemonsets.values().cloned().collect();
        for g in self.provider.node_groups() {
            let id = g.id();
            let good = nodes.iter().find(|n| {
                self.registry
                    .node_groups
                    .get(n.metadata.name.as_deref().unwrap_or(""))
                    == Some(&id)
                    && self
                        .registry
                        .readiness
                        .get(n.metadata.name.as_deref().unwrap_or(""))
                        == Some(&Readiness::Ready)
                    && n.spec.as_ref().and_then(|s| s.unschedulable) != Some(true)
                    && !taints::has_to_be_deleted(n)
            });
            let from_node = good.map(|n| {
                let pods: Vec<PodInfo> = state
                    .pod_infos_on(n.metadata.name.as_deref().unwrap_or(""))
                    .into_iter()
                    .filter(|p| p.pod.metadata.deletion_timestamp.is_none())
                    .filter(|p| {
                        crate::simulator::drainability::is_daemonset_pod(&p.pod)
                            || crate::simulator::drainability::is_mirror_pod(&p.pod)
                    })
                    .collect();
                self.sanitize(&id, (**n).clone(), pods)
            });
            let template = match from_node {
                Some(t) => {
                    self.templates.insert(id.clone(), (t.clone(), now));
                    Some(t)
                }
                None => match self.templates.get(&id) {
                    Some((t, at)) if *at + self.flags.node_info_cache_expire_time > now => {
                        Some(t.clone())
                    }
                    _ => match g.template_node_info() {
                        Ok(t) => {
                            let pods = t
                                .pods
                                .into_iter()
                                .map(|p| PodInfo::new(Arc::new(p)))
                                .collect();
                            Some(self.sanitize(&id, t.node, pods))
                        }
                        Err(CloudError::NotImplemented) => None,
                        Err(e) => {
                            tracing::warn!("template of node group {id}: {e}");
                            None
                        }
                    },
                },
            };
            if let Some(mut t) = template {
                self.add_daemonset_pods(&mut t, &daemonsets);
                out.insert(id, t);
            }
        }
        out
    }

    /// Adds to a template the pods of the DaemonSets that would run on it
    /// but are not there yet (ca-compat §4.9 step 3): all of them with
    /// `--force-ds`, else only `system-node-critical` ones that may preempt.
    fn add_daemonset_pods(&self, template: &mut NodeInfo, daemonsets: &[Arc<DaemonSet>]) {
        let name = template.name().to_string();
        for ds in daemonsets {
            let uid = ds.metadata.uid.clone().unwrap_or_default();
            let present = template.pods.iter().any(|p| {
                p.pod
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == uid)
            });
            let Some(spec) = ds.spec.as_ref().and_then(|s| s.template.spec.clone()) else {
                continue;
            };
            let critical = spec.priority_class_name.as_deref() == Some("system-node-critical")
                && spec
                    .preemption_policy
                    .as_deref()
                    .is_none_or(|p| p == "PreemptLowerPriority");
            if present || !(self.flags.force_ds || critical) {
                continue;
            }
            let meta = ds
                .spec
                .as_ref()
                .and_then(|s| s.template.metadata.clone())
                .unwrap_or_default();
            let ds_name = ds.metadata.name.clone().unwrap_or_default();
            let mut pod = Pod {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some(format!("{ds_name}-{name}")),
                    namespace: ds.metadata.namespace.clone(),
                    labels: meta.labels,
                    annotations: meta.annotations,
                    owner_references: Some(vec![
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                            api_version: "apps/v1".into(),
                            kind: "DaemonSet".into(),
                            name: ds_name,
                            uid,
                            controller: Some(true),
                            block_owner_deletion: None,
                        },
                    ]),
                    ..Default::default()
                },
                spec: Some(spec),
                status: None,
            };
            // The tolerations the DaemonSet controller adds.
            if let Some(spec) = pod.spec.as_mut() {
                let tols = spec.tolerations.get_or_insert_with(Vec::new);
                for key in [
                    "node.kubernetes.io/not-ready",
                    "node.kubernetes.io/unreachable",
                    "node.kubernetes.io/disk-pressure",
                    "node.kubernetes.io/memory-pressure",
                    "node.kubernetes.io/pid-pressure",
                    "node.kubernetes.io/unschedulable",
                ] {
                    tols.push(k8s_openapi::api::core::v1::Toleration {
                        key: Some(key.into()),
                        operator: Some("Exists".into()),
                        ..Default::default()
                    });
                }
            }
            let tolerations = pod
                .spec
                .as_ref()
                .and_then(|s| s.tolerations.clone())
                .unwrap_or_default();
            let taints = template
                .node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default();
            if !predicates::filters::node_affinity_matches(&pod, template)
                || predicates::filters::untolerated_taint(&taints, &tolerations).is_some()
            {
                continue;
            }
            if let Some(spec) = pod.spec.as_mut() {
                spec.node_name = Some(name.clone());
            }
            template.add_pod(PodInfo::new(Arc::new(pod)));
        }
    }

    fn sanitize(&self, group: &str, mut node: Node, pods: Vec<PodInfo>) -> NodeInfo {
        let name = format!("template-node-for-{group}");
        node.metadata.name = Some(name.clone());
        node.metadata.uid = None;
        node.metadata.resource_version = None;
        let labels = node.metadata.labels.get_or_insert_with(Default::default);
        labels.insert("kubernetes.io/hostname".into(), name.clone());
        labels.insert(
            "cluster-autoscaler.kubernetes.io/template-node".into(),
            "true".into(),
        );
        if let Some(spec) = node.spec.as_mut() {
            if let Some(ts) = spec.taints.as_mut() {
                ts.retain(|t| self.taints.keep_on_template(&t.key));
            }
            if self.flags.scale_from_unschedulable {
                spec.unschedulable = None;
            }
        }
        let mut info = NodeInfo::new(Arc::new(node));
        for p in pods {
            let mut pod = (*p.pod).clone();
            if let Some(spec) = pod.spec.as_mut() {
                spec.node_name = Some(name.clone());
            }
            info.add_pod(PodInfo {
                pod: Arc::new(pod),
                ..p
            });
        }
        info
    }

    async fn priorities(&self) -> Option<Priorities> {
        if !self.validated.expanders.contains(&ExpanderName::Priority) {
            return None;
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.flags.namespace);
        let cm = api.get_opt(PRIORITY_CONFIG_MAP).await.ok().flatten()?;
        let object = ObjectRef {
            uid: cm.metadata.uid.clone().unwrap_or_default(),
            ..ObjectRef::config_map(&self.flags.namespace, PRIORITY_CONFIG_MAP)
        };
        let Some(text) = cm.data.as_ref().and_then(|d| d.get("priorities")) else {
            self.events.record(&object, "Warning", "PriorityConfigMapInvalid", "Wrong configmap for priority expander, doesn't contain priorities key. Ignoring update.".into());
            return None;
        };
        match Priorities::parse(text) {
            Ok(p) => Some(p),
            Err(e) => {
                self.events
                    .record(&object, "Warning", "PriorityConfigMapInvalid", e);
                None
            }
        }
    }

    fn cluster_resources(&self, nodes: &[Arc<Node>], now: SystemTime) -> (i64, i64) {
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
            .map(|n| {
                let r = predicates::resources::Resources::from_list(
                    n.status.as_ref().and_then(|s| s.capacity.as_ref()),
                );
                ((r.milli_cpu + 999) / 1000, r.memory)
            })
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }

    #[allow(clippy::too_many_arguments)]
    async fn scale_up(
        &mut self,
        snapshot: &mut Snapshot,
        unbound: &[Arc<Pod>],
        templates: &BTreeMap<String, NodeInfo>,
        nodes: &[Arc<Node>],
        now: SystemTime,
        decisions: &mut Decisions,
    ) -> bool {
        let f = &self.flags;
        let mut pending = scaleup::pending_pods(
            unbound.iter(),
            f.expendable_pods_priority_cutoff,
            &f.bypassed_scheduler_names,
        );
        // Pods of nodes being drained need a place too.
        let draining: Vec<String> = self
            .actuator
            .progress
            .lock()
            .map(|p| {
                p.in_progress
                    .iter()
                    .filter(|(_, (_, d))| *d)
                    .map(|(n, _)| n.clone())
                    .collect()
            })
            .unwrap_or_default();
        // The cache keeps bound pods compact: read the full ones.
        for node in &draining {
            let lp = kube::api::ListParams::default().fields(&format!("spec.nodeName={node}"));
            let pods = match Api::<Pod>::all(self.client.clone()).list(&lp).await {
                Ok(l) => l.items,
                Err(e) => {
                    tracing::warn!("listing the pods of draining node {node}: {e}");
                    continue;
                }
            };
            for mut p in pods {
                if p.metadata.deletion_timestamp.is_none()
                    && crate::cache::is_active(&p)
                    && !crate::simulator::drainability::is_daemonset_pod(&p)
                    && !crate::simulator::drainability::is_mirror_pod(&p)
                {
                    if let Some(s) = p.spec.as_mut() {
                        s.node_name = None;
                    }
                    pending.push(Arc::new(p));
                }
            }
        }
        let t = std::time::Instant::now();
        let pending = scaleup::filter_out_schedulable(snapshot, pending);
        self.metrics.observe("filterOutSchedulable", t.elapsed());
        snapshot.commit();
        let pending: Vec<Arc<Pod>> = pending
            .into_iter()
            .filter(|p| !crate::simulator::drainability::is_daemonset_pod(p))
            .filter(|p| scaleup::old_enough(p, f.new_pod_scale_up_delay, now))
            .collect();
        if pending.is_empty() {
            decisions.scale_up = "NotNeeded".into();
            return false;
        }
        let ready_nodes = nodes
            .iter()
            .filter(|n| {
                clusterstate::node_ready(n, &self.taints)
                    && n.spec.as_ref().and_then(|s| s.unschedulable) != Some(true)
            })
            .count();
        if f.max_nodes_total > 0 && ready_nodes >= f.max_nodes_total {
            self.events.status(
                "Warning",
                "MaxNodesTotalReached",
                format!("Max total nodes in cluster reached: {}", f.max_nodes_total),
            );
            for p in &pending {
                self.events.record(
                    &ObjectRef::pod(p),
                    "Normal",
                    "NotTriggerScaleUp",
                    "pod didn't trigger scale-up: max total nodes in cluster reached".into(),
                );
            }
            decisions.scale_up = "LimitedByMaxNodesTotal".into();
            return false;
        }
        if f.bypassed_scheduler_names.is_empty() {
            let oldest = pending
                .iter()
                .filter_map(|p| {
                    p.metadata
                        .creation_timestamp
                        .as_ref()
                        .map(|t| SystemTime::from(t.0))
                })
                .min();
            if oldest.is_some_and(|t| t + Duration::from_secs(2) > now) {
                decisions.scale_up = "InCooldown".into();
                self.pods_too_new = true;
                return false;
            }
        }
        // Node groups that can take part.
        let mut skipped: BTreeMap<String, String> = BTreeMap::new();
        let mut candidates = Vec::new();
        for g in self.provider.node_groups() {
            let id = g.id();
            if let Err(reason) = self.registry.group_ready_for_scale_up(&id, now) {
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
        let (cores, memory) = self.cluster_resources(nodes, now);
        let limits = Limits {
            max_nodes_total: f.max_nodes_total,
            nodes_now: snapshot.nodes().len(),
            cores: (self.validated.cores_total.max, cores),
            memory: (
                self.validated.memory_total.max.saturating_mul(1 << 30),
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
        let priorities = self.priorities().await;
        let mut notices = Vec::new();
        let t = std::time::Instant::now();
        let mut limit_hits = Vec::new();
        let plan = scaleup::plan(
            snapshot,
            &PlanInputs {
                pods: &pending,
                candidates: &candidates,
                skipped: &skipped,
                limits: &limits,
                expanders: &self.validated.expanders,
                priorities: priorities.as_ref(),
                balancing: &balancing,
                max_binpacking_time: f.max_binpacking_time,
                max_group_binpacking_time: f.max_nodegroup_binpacking_duration,
            },
            &mut notices,
            &mut limit_hits,
        );
        self.metrics.observe("scaleUp:estimate", t.elapsed());
        for hit in limit_hits {
            for (resource, reason) in [
                ("cpu", "CpuResourceLimit"),
                ("memory", "MemoryResourceLimit"),
            ] {
                if hit
                    .split("resources: ")
                    .nth(1)
                    .is_some_and(|r| r.split(", ").any(|x| x == resource))
                {
                    Metrics::inc(
                        &self.metrics.skipped_scale_events,
                        &[("direction", "up"), ("reason", reason)],
                        1,
                    );
                }
            }
        }
        self.report_priority_notices(notices);
        let by_key: HashMap<String, &Arc<Pod>> = pending
            .iter()
            .map(|p| (predicates::nodeinfo::pod_key(p), p))
            .collect();
        match plan {
            Plan::NoOptions { reasons, groups } => {
                decisions.scale_up = "NoOptionsAvailable".into();
                decisions.pods = groups;
                for (key, rs) in reasons {
                    let text: Vec<String> = rs.iter().map(|(r, n)| format!("{n} {r}")).collect();
                    if let Some(p) = by_key.get(&key) {
                        self.events.record(
                            &ObjectRef::pod(p),
                            "Normal",
                            "NotTriggerScaleUp",
                            format!("pod didn't trigger scale-up: {}", text.join(", ")),
                        );
                    }
                }
                false
            }
            Plan::ScaleUp {
                infos,
                option,
                considered,
                groups: verdicts,
            } => {
                decisions.pods = verdicts;
                decisions.options = considered
                    .iter()
                    .map(|o| (o.group.clone(), o.node_count))
                    .collect();
                if infos.is_empty() {
                    decisions.scale_up = "NoOptionsAvailable".into();
                    return false;
                }
                let groups: HashMap<String, Arc<dyn NodeGroup>> = self
                    .provider
                    .node_groups()
                    .into_iter()
                    .map(|g| (g.id(), g))
                    .collect();
                let mut ok = true;
                let mut done = Vec::new();
                for info in &infos {
                    let Some(g) = groups.get(&info.group) else {
                        continue;
                    };
                    self.events.status(
                        "Normal",
                        "ScaledUpGroup",
                        format!(
                            "Scale-up: setting group {} size to {} instead of {} (max: {})",
                            info.group, info.new, info.current, info.max
                        ),
                    );
                    match g.increase_size(info.new - info.current).await {
                        Ok(()) => {
                            self.events.status(
                                "Normal",
                                "ScaledUpGroup",
                                format!(
                                    "Scale-up: group {} size set to {} instead of {} (max: {})",
                                    info.group, info.new, info.current, info.max
                                ),
                            );
                            let provision = self.options_for(&**g).max_node_provision_time;
                            self.registry.register_scale_up(
                                &info.group,
                                info.new - info.current,
                                provision,
                                now,
                            );
                            decisions.scaled_up.insert(
                                info.group.clone(),
                                format!("{}->{}", info.current, info.new),
                            );
                            Metrics::inc_gpu(
                                &self.metrics.scaled_up_nodes,
                                &[],
                                (info.new - info.current) as u64,
                            );
                            done.push(info.clone());
                        }
                        Err(e) => {
                            ok = false;
                            self.events.status(
                                "Warning",
                                "FailedToScaleUpGroup",
                                format!("Scale-up failed for group {}: {e}", info.group),
                            );
                            let (code, message) = match &e {
                                CloudError::Failed { info: Some(i), .. } => {
                                    (i.code.clone(), i.message.clone())
                                }
                                other => ("cloudProviderError".to_string(), other.to_string()),
                            };
                            self.registry
                                .backoff
                                .backoff(&info.group, &code, &message, now);
                            Metrics::inc_gpu(
                                &self.metrics.failed_scale_ups,
                                &[("reason", &code)],
                                1,
                            );
                            tracing::error!(
                                "Failed to scale up: failed to increase node group size: {e}"
                            );
                        }
                    }
                }
                decisions.scale_up = if ok {
                    "Successful".into()
                } else {
                    "Error".into()
                };
                if !done.is_empty() {
                    self.last_scale_up = Some(now);
                    for info in &done {
                        self.group_activity
                            .entry(info.group.clone())
                            .or_default()
                            .scale_up = Some(now);
                    }
                    let text: Vec<String> = done
                        .iter()
                        .map(|i| {
                            format!("{{{} {}->{} (max: {})}}", i.group, i.current, i.new, i.max)
                        })
                        .collect();
                    let message = format!("pod triggered scale-up: [{}]", text.join(" "));
                    for key in &option.pods {
                        if let Some(p) = by_key.get(key) {
                            self.events.record(
                                &ObjectRef::pod(p),
                                "Normal",
                                "TriggeredScaleUp",
                                message.clone(),
                            );
                        }
                    }
                }
                !done.is_empty()
            }
        }
    }

    fn report_priority_notices(&self, notices: Vec<PriorityNotice>) {
        let object = ObjectRef::config_map(&self.flags.namespace, PRIORITY_CONFIG_MAP);
        for n in notices {
            let (reason, message) = match n {
                PriorityNotice::NotMatchedGroup(g) => ("PriorityConfigMapNotMatchedGroup", format!("Priority expander: node group {g} not found in priority expander configuration. The group won't be used.")),
                PriorityNotice::NoGroupMatched => ("PriorityConfigMapNoGroupMatched", "Priority expander: no priorities info found for any of the expansion options. No options filtered.".to_string()),
            };
            self.events.record(&object, "Warning", reason, message);
        }
    }

    /// Scale-down cooldown (ca-compat §3.1). Globally: after a scale-up,
    /// a failed start of deletions, or a deletion, each for its delay flag.
    /// With `--scale-down-delay-type-local` those delays apply per group
    /// (see [`Self::group_in_delay`]) and only the too-new-pods wait is
    /// global.
    fn in_cooldown(&self, now: SystemTime, scaled_up_now: bool) -> bool {
        let f = &self.flags;
        if self.pods_too_new {
            return true;
        }
        if f.scale_down_delay_type_local {
            return false;
        }
        scaled_up_now
            || self
                .last_scale_up
                .is_some_and(|t| t + f.scale_down_delay_after_add > now)
            || self
                .last_scale_down_failure
                .is_some_and(|t| t + f.scale_down_delay_after_failure > now)
            || self
                .last_deletion
                .is_some_and(|t| t + f.scale_down_delay_after_delete > now)
    }

    /// With `--scale-down-delay-type-local`: whether a group's own scale-up,
    /// deletion or failed cloud deletion is within its delay.
    fn group_in_delay(&self, group: &str, now: SystemTime) -> bool {
        let f = &self.flags;
        if !f.scale_down_delay_type_local {
            return false;
        }
        let Some(a) = self.group_activity.get(group) else {
            return false;
        };
        a.scale_up
            .is_some_and(|t| t + f.scale_down_delay_after_add > now)
            || a.deletion
                .is_some_and(|t| t + f.scale_down_delay_after_delete > now)
            || a.delete_failure
                .is_some_and(|t| t + f.scale_down_delay_after_failure > now)
    }

    async fn scale_down(
        &mut self,
        snapshot: &mut Snapshot,
        nodes: &[Arc<Node>],
        now: SystemTime,
        decisions: &mut Decisions,
        scaled_up_now: bool,
    ) -> Result<bool, LoopError> {
        let f = self.flags.clone();
        // Finished deletions.
        let finished = self
            .actuator
            .progress
            .lock()
            .map(|mut p| std::mem::take(&mut p.finished))
            .unwrap_or_default();
        for (node, group, outcome) in finished {
            tracing::info!("deletion of node {node} in group {group}: {outcome:?}");
            match outcome {
                actuation::Outcome::Removed(reason) => {
                    Metrics::inc_gpu(&self.metrics.scaled_down_nodes, &[("reason", reason)], 1);
                }
                actuation::Outcome::CloudDeleteFailed(_) => {
                    self.group_activity.entry(group).or_default().delete_failure = Some(now);
                }
                actuation::Outcome::Failed(_) => {}
            }
        }
        let (ok, failed) = self
            .actuator
            .progress
            .lock()
            .map(|mut p| {
                (
                    std::mem::take(&mut p.evicted_ok),
                    std::mem::take(&mut p.evicted_failed),
                )
            })
            .unwrap_or_default();
        Metrics::inc(
            &self.metrics.evicted_pods,
            &[("eviction_result", "succeeded")],
            ok,
        );
        Metrics::inc(
            &self.metrics.evicted_pods,
            &[("eviction_result", "failed")],
            failed,
        );
        let in_progress = self
            .actuator
            .progress
            .lock()
            .map(|p| p.in_progress.clone())
            .unwrap_or_default();
        let gpu_label = self.provider.gpu_label();
        let mut candidates = Vec::new();
        let mut groups: BTreeMap<String, GroupSize> = BTreeMap::new();
        for (id, g) in &self.registry.groups {
            let o = self.options_for(&*g.group);
            groups.insert(
                id.clone(),
                GroupSize {
                    target: g.target,
                    min: g.group.min_size(),
                    deleting: in_progress.values().filter(|(gid, _)| gid == id).count(),
                    unneeded_time: o.scale_down_unneeded_time,
                    unready_time: o.scale_down_unready_time,
                },
            );
        }
        for n in nodes {
            let name = n.metadata.name.clone().unwrap_or_default();
            if in_progress.contains_key(&name) {
                continue;
            }
            let Some(group) = self.registry.node_groups.get(&name).cloned() else {
                continue;
            };
            let Some(g) = self.registry.groups.get(&group) else {
                continue;
            };
            if g.target <= g.group.min_size() || self.group_in_delay(&group, now) {
                continue;
            }
            let o = self.options_for(&*g.group);
            let gpu = (!gpu_label.is_empty()
                && n.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(&gpu_label)))
            .then(|| "nvidia.com/gpu".to_string());
            candidates.push(CandidateNode {
                name: name.clone(),
                group: Some(group),
                ready: self.registry.readiness.get(&name) == Some(&Readiness::Ready),
                being_deleted: taints::being_deleted(n, now),
                disabled: n
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(scaledown::SCALE_DOWN_DISABLED))
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
        for name in in_progress.keys() {
            if let Some(i) = snapshot.index_of(name) {
                snapshot.disable(i);
            }
        }
        snapshot.commit();
        {
            let state = self.cache.read();
            let mut budgets = state.budgets();
            let fixed = budgets.clone();
            let ctx = Context {
                now,
                skip_nodes_with_system_pods: f.skip_nodes_with_system_pods,
                skip_nodes_with_local_storage: f.skip_nodes_with_local_storage,
                skip_nodes_with_custom_controller_pods: f.skip_nodes_with_custom_controller_pods,
                min_replica_count: f.min_replica_count,
                system_pod_timeout: f.blocking_system_pod_distruption_timeout,
                budgets: &fixed,
                controllers: &*state,
            };
            let settings = PlannerSettings {
                ignore_mirror_pods: f.ignore_mirror_pods_utilization,
                unready_enabled: f.scale_down_unready_enabled,
                recheck_timeout: f.unremovable_node_recheck_timeout,
                simulation_timeout: f.scale_down_simulation_timeout,
                candidate_ttl: f.node_deletion_candidate_ttl,
            };
            self.planner
                .update(snapshot, &candidates, &mut budgets, &ctx, &settings, now);
        }
        self.metrics
            .unneeded_nodes_count
            .set(self.planner.unneeded.len() as f64);
        let mut by_reason: BTreeMap<&str, usize> = metrics::UNREMOVABLE_REASONS
            .iter()
            .map(|r| (*r, 0))
            .collect();
        for r in self.planner.reasons.values() {
            *by_reason.entry(r.as_str()).or_default() += 1;
        }
        for (reason, n) in by_reason {
            Metrics::set(
                &self.metrics.unremovable_nodes_count,
                &[("reason", reason)],
                n as f64,
            );
        }
        for (name, u) in &self.planner.unneeded {
            decisions.unneeded.insert(
                name.clone(),
                format!(
                    "since {} utilization {}",
                    simclock::format_rfc3339(u.since),
                    u.utilization
                ),
            );
        }
        for (name, r) in &self.planner.reasons {
            let text = match r {
                scaledown::Unremovable::BlockedByPod { pod, reason } => {
                    format!("BlockedByPod: {pod} {}", reason.as_str())
                }
                other => other.as_str().to_string(),
            };
            decisions.unremovable.insert(name.clone(), text);
        }
        self.update_soft_taints(nodes, now).await;
        let cooldown = self.in_cooldown(now, scaled_up_now);
        self.metrics
            .scale_down_in_cooldown
            .set(if cooldown { 1.0 } else { 0.0 });
        if cooldown {
            return Ok(false);
        }
        let drains_in_progress = in_progress.values().filter(|(_, d)| *d).count();
        let budget = DeletionBudget {
            total: f
                .max_scale_down_parallelism
                .saturating_sub(in_progress.len()),
            drain: f.max_drain_parallelism.saturating_sub(drains_in_progress),
        };
        let (mut cores, mut memory) = self.cluster_resources(nodes, now);
        let min_cores = self.validated.cores_total.min;
        let min_memory = self.validated.memory_total.min.saturating_mul(1 << 30);
        let node_res: HashMap<String, (i64, i64)> = nodes
            .iter()
            .map(|n| {
                let r = predicates::resources::Resources::from_list(
                    n.status.as_ref().and_then(|s| s.capacity.as_ref()),
                );
                (
                    n.metadata.name.clone().unwrap_or_default(),
                    ((r.milli_cpu + 999) / 1000, r.memory),
                )
            })
            .collect();
        let selection = scaledown::select(&self.planner, &groups, budget, now, |name| {
            let (c, m) = node_res.get(name).copied().unwrap_or((0, 0));
            if cores - c < min_cores || memory - m < min_memory {
                return false;
            }
            cores -= c;
            memory -= m;
            true
        });
        for (name, r) in &selection.kept {
            decisions
                .unremovable
                .insert(name.clone(), r.as_str().to_string());
        }
        let groups_by_id: HashMap<String, Arc<dyn NodeGroup>> = self
            .provider
            .node_groups()
            .into_iter()
            .map(|g| (g.id(), g))
            .collect();
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
        match self.actuator.start(to_delete).await {
            Ok(()) => {
                self.last_deletion = Some(now);
                for g in groups_deleting {
                    self.group_activity.entry(g).or_default().deletion = Some(now);
                }
                Ok(true)
            }
            Err(e) => {
                self.last_scale_down_failure = Some(now);
                Err(LoopError::ScaleDown(e))
            }
        }
    }

    /// Soft taints (ca-compat §1.3): added to unneeded nodes, removed from
    /// nodes that are no longer unneeded, at most
    /// `--max-bulk-soft-taint-count` changes per loop.
    async fn update_soft_taints(&self, nodes: &[Arc<Node>], now: SystemTime) {
        let budget = self.flags.max_bulk_soft_taint_count;
        if budget == 0 {
            return;
        }
        let started = tokio::time::Instant::now();
        let mut changes = 0;
        for n in nodes {
            if changes >= budget || started.elapsed() > self.flags.max_bulk_soft_taint_time {
                break;
            }
            let name = n.metadata.name.clone().unwrap_or_default();
            if !self.registry.node_groups.contains_key(&name) || taints::has_to_be_deleted(n) {
                continue;
            }
            let unneeded = self.planner.unneeded.contains_key(&name);
            let tainted = taints::has_taint(n, taints::DELETION_CANDIDATE);
            let result = if unneeded && !tainted {
                taints::add(
                    &self.client,
                    &name,
                    taints::DELETION_CANDIDATE,
                    "PreferNoSchedule",
                    now,
                    false,
                )
                .await
                .map(|_| true)
            } else if !unneeded && tainted {
                taints::remove(&self.client, &name, taints::DELETION_CANDIDATE, false).await
            } else {
                continue;
            };
            changes += 1;
            if let Err(e) = result {
                tracing::warn!("soft taint on node {name}: {e}");
            }
        }
    }

    /// `--enforce-node-group-min-size` (ca-compat §4.7): raises every
    /// healthy, not backed off group below its min size to min.
    async fn enforce_min_sizes(
        &mut self,
        templates: &BTreeMap<String, NodeInfo>,
        nodes: &[Arc<Node>],
        now: SystemTime,
    ) -> bool {
        let mut acted = false;
        let mut total = nodes.len();
        for g in self.provider.node_groups() {
            let id = g.id();
            let Ok(target) = g.target_size() else {
                continue;
            };
            let min = g.min_size();
            if target >= min
                || self.registry.group_ready_for_scale_up(&id, now).is_err()
                || !templates.contains_key(&id)
            {
                continue;
            }
            let mut delta = min - target;
            if self.flags.max_nodes_total > 0 {
                delta = delta.min(self.flags.max_nodes_total.saturating_sub(total));
            }
            if delta == 0 {
                continue;
            }
            let max = g.max_size();
            self.events.status(
                "Normal",
                "ScaledUpGroup",
                format!(
                    "Scale-up: setting group {id} size to {} instead of {target} (max: {max})",
                    target + delta
                ),
            );
            match g.increase_size(delta).await {
                Ok(()) => {
                    self.events.status(
                        "Normal",
                        "ScaledUpGroup",
                        format!(
                            "Scale-up: group {id} size set to {} instead of {target} (max: {max})",
                            target + delta
                        ),
                    );
                    let provision = self.options_for(&*g).max_node_provision_time;
                    self.registry.register_scale_up(&id, delta, provision, now);
                    total += delta;
                    acted = true;
                }
                Err(e) => {
                    self.events.status(
                        "Warning",
                        "FailedToScaleUpGroup",
                        format!("Scale-up failed for group {id}: {e}"),
                    );
                    self.registry
                        .backoff
                        .backoff(&id, "cloudProviderError", &e.to_string(), now);
                }
            }
        }
        acted
    }
}
