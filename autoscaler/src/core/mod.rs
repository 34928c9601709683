//! The main loop (`RunOnce`, docs/reference/ca-rules.md §4.0, upstream's `StaticAutoscaler`),
//! a short sequence of named steps:
//!
//! 1. refresh the provider and the cluster state ([`crate::clusterstate`]);
//!    report what it noticed and the cluster metrics;
//! 2. housekeeping ([`housekeeping`]): stale taints, unregistered and
//!    failed instances, wrong group sizes;
//! 3. the template nodes ([`crate::processors::nodeinfosprovider`]) and
//!    the snapshot with template nodes for upcoming nodes
//!    ([`crate::simulator`]);
//! 4. scale-up: the pending pods through the pod-list processors
//!    ([`crate::processors::pods`]), the scale-up itself
//!    ([`crate::scaleup::orchestrator`], with the node-group list
//!    processors), then the scale-up status processors
//!    ([`crate::processors::status`]: the pods' events);
//!    With `--enable-graceful-degradation` ([`degradation`]), a loop whose
//!    check of which pods fit did not reach them all runs degraded;
//! 5. scale-down ([`crate::scaledown::orchestrator`]), every fourth loop
//!    only while degraded;
//! 6. `--enforce-node-group-min-size` ([`crate::scaleup::minsize`]);
//! 7. the status ConfigMap and the decision record of the loop.

pub mod degradation;
pub mod housekeeping;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use predicates::{NodeInfo, PodInfo};

use crate::cache::ClusterCache;
use crate::capacitybuffer::{BufferController, BufferPodInjection};
use crate::cloudprovider::{self, CloudError, CloudProvider, NodeGroupOptions, NodeLister};
use crate::clusterstate::{self, Backoff, ClusterStateRegistry};
use crate::config::{Flags, Validated};
use crate::context::AutoscalingContext;
use crate::debuggingsnapshot::DebuggingSnapshotter;
use crate::decisions::Decisions;
use crate::events::{EventReason, EventRecorder, EventType, ObjectRef};
use crate::metrics::Metrics;
use crate::processors::pods::{CurrentlyDrainedNodes, PodListContext};
use crate::processors::provreq::{ProvReqProcessing, Settings as ProvReqSettings};
use crate::processors::{Processors, customresources};
use crate::provisioningrequest::client::ProvReqClient;
use crate::provisioningrequest::orchestrator::{Turns, scale_up_with_requests};
use crate::resourcequotas::QuotaController;
use crate::scaledown::actuation::{self, Actuator, DeletionError};
use crate::scaledown::orchestrator::ScaleDown;
use crate::scaleup::orchestrator::{ScaleUpInputs, ScaleUpOutcome, scale_up};
use crate::scaleup::salvo::{self, Salvo, SalvoEnd};
use crate::scaleup::{ScaleUpStatus, minsize, old_enough, pending_pods};
use crate::simulator::drainability::DrainRules;
use crate::simulator::{Snapshot, node_from_template};
use crate::status::StatusWriter;
use crate::taints::TaintConfig;

pub use housekeeping::FAKE_NODE_REASON;

/// Why a loop failed (the `errors_total{type}` label and the health check).
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// The provider's refresh failed.
    #[error("cloud provider refresh failed: {0}")]
    CloudProvider(CloudError),
    /// A scale-down could not start.
    #[error("scale-down failed: {0}")]
    ScaleDown(DeletionError),
    /// The loop's snapshot could not be built.
    #[error("failed to initialize ClusterSnapshot: {0}")]
    Snapshot(SnapshotError),
}

/// Why the loop's snapshot could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// With `--enable-csi-node-aware-scheduling`, a node has no CSINode
    /// (upstream fails the whole loop).
    #[error("couldn't obtain csi node: csi nodes {0} not found")]
    MissingCsiNode(String),
}

impl LoopError {
    /// The error type label.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::CloudProvider(e) => e.kind().as_str(),
            Self::ScaleDown(_) => "cloudProviderError",
            Self::Snapshot(_) => "internalError",
        }
    }
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
    ctx: AutoscalingContext,
    registry: ClusterStateRegistry,
    scale_down: ScaleDown,
    status: StatusWriter,
    processors: Processors,
    sizes: housekeeping::SizeFixer,
    /// With `--enable-provisioning-requests`: the requests' processing,
    /// and whose turn scale-up is.
    provreqs: Option<(Arc<ProvReqProcessing>, Turns)>,
    /// `--capacity-buffer-controller-enabled`.
    buffer_controller: Option<BufferController>,
    /// `--capacity-buffer-pod-injection-enabled`.
    buffer_injection: Option<Arc<BufferPodInjection>>,
    /// `--capacity-quotas-enabled`.
    quota_controller: Option<QuotaController>,
    cleaned_up: bool,
    /// `--enable-graceful-degradation`'s state across loops.
    degradation: degradation::GracefulDegradation,
    /// Set by a loop that left every pending pod for being very new: when
    /// the wait ends (`scaleup::new_pods`).
    pods_new_until: Option<SystemTime>,
    /// The last loop's decisions (shared with the decision log's reader).
    pub decisions: crate::decisions::LastDecisions,
    /// Loop liveness.
    pub liveness: Arc<Mutex<Liveness>>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// `--debugging-snapshot-enabled`: what `/snapshotz` answers with.
    pub snapshotter: Option<Arc<DebuggingSnapshotter>>,
    /// Where every loop's decisions go as well, in loop order (a what-if
    /// keeps them all; `/decisions` serves the last one only).
    decision_log: Option<tokio::sync::mpsc::UnboundedSender<Arc<Decisions>>>,
}

/// What a loop's scale-ups start from: the template nodes, the nodes, the
/// loop's time.
#[derive(Clone, Copy)]
struct LoopState<'a> {
    templates: &'a BTreeMap<String, NodeInfo>,
    nodes: &'a [Arc<Node>],
    now: SystemTime,
}

/// The taints the flags name: startup (and ignored) taints, startup
/// prefixes, status taints.
fn taint_config(f: &Flags) -> TaintConfig {
    TaintConfig {
        startup: f
            .startup_taint
            .iter()
            .chain(&f.ignore_taint)
            .cloned()
            .collect(),
        startup_prefixes: f.startup_taint_prefix.clone(),
        status: f.status_taint.clone(),
    }
}

/// The node lister a provider reads from the cache.
pub fn node_lister(cache: &Arc<ClusterCache>) -> NodeLister {
    let cache = cache.clone();
    Arc::new(move || cache.read().nodes.values().cloned().collect())
}

impl Autoscaler {
    /// An autoscaler on a started cache and a built provider, reporting to
    /// `metrics` (which the metrics server may already serve).
    pub fn new(
        client: Client,
        clock: simclock::Clock,
        flags: Flags,
        validated: Validated,
        cache: Arc<ClusterCache>,
        provider: Arc<dyn CloudProvider>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let f = &flags;
        let taints = taint_config(f);
        let node_facts = Arc::new(clusterstate::NodeFactsMemo::new(taints.clone()));
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
                facts: node_facts.clone(),
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
                dynamic_delay_after_taint: f.dynamic_node_delete_delay_after_taint_enabled,
                batcher_interval: f.node_deletion_batcher_interval,
                max_pod_eviction_time: f.max_pod_eviction_time,
                max_graceful_termination_sec: validated.max_graceful_termination_sec,
                drain_priorities: validated.drain_priorities.clone(),
                ds_eviction_empty: f.daemonset_eviction_for_empty_nodes,
                ds_eviction_occupied: f.daemonset_eviction_for_occupied_nodes,
                deletion_delay_timeout: f.node_deletion_delay_timeout,
                drain: DrainRules::from_flags(f),
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
        metrics.set_resource_limits(&validated);
        let mut processors = Processors::default();
        let provreqs = f.enable_provisioning_requests.then(|| {
            let p = ProvReqProcessing::new(
                ProvReqClient::new(client.clone(), cache.clone()),
                ProvReqSettings::from_flags(f),
                clock.clone(),
            );
            for processor in p.pod_list_processors(events.clone()) {
                processors.pod_list.add(processor);
            }
            (p, Turns::default())
        });
        let buffer_controller = f.capacity_buffer_controller_enabled.then(|| {
            BufferController::new(
                client.clone(),
                cache.clone(),
                clock.clone(),
                f.capacity_buffer_pod_dry_run_enabled,
            )
        });
        let buffer_injection = f.capacity_buffer_pod_injection_enabled.then(|| {
            let injection = Arc::new(BufferPodInjection::new(client.clone(), clock.clone()));
            processors.add_buffer_injection(injection.clone());
            injection
        });
        if f.enable_proactive_scaleup {
            processors.add_proactive_scale_up(cache.clone(), f.pod_injection_limit);
        }
        let track_removal_latency = f.node_removal_latency_tracking_enabled;
        let skip_eval_since = f.max_node_skip_eval_time_tracker_enabled.then_some(now);
        let snapshotter = f
            .debugging_snapshot_enabled
            .then(DebuggingSnapshotter::enabled);
        let quota_controller = f
            .capacity_quotas_enabled
            .then(|| QuotaController::new(client.clone(), clock.clone()));
        let degradation = degradation::GracefulDegradation::new(f.enable_graceful_degradation);
        Self {
            ctx: AutoscalingContext {
                client,
                clock,
                flags,
                validated,
                provider,
                cache,
                events,
                metrics: metrics.clone(),
                group_defaults,
                taints,
                node_facts,
                quotas: Default::default(),
            },
            registry,
            scale_down: ScaleDown::new(actuator, track_removal_latency, skip_eval_since),
            status,
            processors,
            sizes: housekeeping::SizeFixer::default(),
            provreqs,
            buffer_controller,
            buffer_injection,
            quota_controller,
            cleaned_up: false,
            degradation,
            pods_new_until: None,
            decisions: Arc::new(Mutex::new(Arc::default())),
            liveness: Arc::new(Mutex::new(Liveness {
                started: now,
                last_activity: now,
                last_success: None,
            })),
            metrics,
            snapshotter,
            decision_log: None,
        }
    }

    /// The provider.
    pub fn provider(&self) -> &Arc<dyn CloudProvider> {
        &self.ctx.provider
    }

    /// Writes the startup status (`Initializing`).
    pub async fn write_initial_status(&self) {
        self.status
            .write(&StatusWriter::initializing(self.ctx.clock.now(), None))
            .await;
    }

    /// Runs loops every `--scan-interval` until the task is dropped; with
    /// `--frequent-loops-enabled`, a newly unschedulable pod, a pod bound
    /// while nodes are upcoming ([`crate::cache`]) or a loop that acted
    /// starts the next one at once.
    pub async fn run(self) {
        self.run_until(std::future::pending()).await;
    }

    /// Every loop's decisions from now on, in loop order.
    pub fn decision_log(&mut self) -> tokio::sync::mpsc::UnboundedReceiver<Arc<Decisions>> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.decision_log = Some(tx);
        rx
    }

    /// One loop and no more (`--once`): waits for the cache, writes the
    /// initial status, runs one iteration; its decision record.
    pub async fn run_one_loop(mut self) -> Result<Decisions, LoopError> {
        self.ctx.cache.wait_ready().await;
        self.write_initial_status().await;
        self.run_once().await?;
        Ok(self
            .decisions
            .lock()
            .map(|d| (**d).clone())
            .unwrap_or_default())
    }

    /// Like [`Self::run`], until `stop` resolves; then shuts down
    /// gracefully ([`Self::shutdown`]).
    pub async fn run_until(mut self, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        tokio::select! {
            _ = &mut stop => return,
            _ = self.ctx.cache.wait_ready() => {}
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
            let frequent = self.ctx.flags.frequent_loops_enabled;
            if frequent && acted {
                tracing::info!("Autoscaler loop triggered immediately after a scale up");
                continue;
            }
            let wait = self.next_loop_in(frequent);
            let sleep = tokio::time::sleep(wait);
            // In this order when several are ready at once (a pod that
            // appeared as the timer fired starts this loop, not one more
            // after it): the same loops from one run to the next.
            tokio::select! {
                biased;
                _ = &mut stop => break,
                _ = self.ctx.cache.unschedulable_pod(), if frequent => {
                    tracing::info!("Autoscaler loop triggered by unschedulable pod appearing");
                }
                _ = self.ctx.cache.pod_bound(), if frequent => {
                    tracing::info!("Autoscaler loop triggered by a pod bound while nodes are upcoming");
                }
                _ = sleep => if frequent {
                    tracing::info!(
                        "Autoscaler loop triggered by a {} timer",
                        simclock::format_go_duration(wait)
                    );
                },
            }
        }
        self.shutdown().await;
    }

    /// How long to wait for the next loop: `--scan-interval`; with
    /// `--frequent-loops-enabled`, no longer than until the pods the last
    /// loop found too new stop being new. (Upstream waits for another pod
    /// or the timer, up to 10 s more for the same decision; starting at
    /// once is the point of the flag.)
    fn next_loop_in(&mut self, frequent: bool) -> std::time::Duration {
        let interval = self.ctx.flags.scan_interval;
        match self.pods_new_until.take() {
            Some(at) if frequent => at
                .duration_since(self.ctx.clock.now())
                .unwrap_or_default()
                .min(interval),
            _ => interval,
        }
    }

    /// On graceful shutdown: delete the status ConfigMap and clean up the provider.
    pub async fn shutdown(&self) {
        if self.ctx.flags.write_status_configmap {
            self.status.delete().await;
            if let Err(e) = self.ctx.provider.cleanup().await {
                tracing::warn!("cloud provider cleanup: {e}");
            }
        }
    }

    /// One iteration. Returns whether it acted (scaled up or started a
    /// deletion).
    pub async fn run_once(&mut self) -> Result<bool, LoopError> {
        if let Some(s) = &self.snapshotter {
            s.start_data_collection(self.ctx.clock.now());
        }
        let result = self.run_loop().await;
        if let Some(s) = &self.snapshotter {
            s.flush(self.ctx.clock.now());
        }
        result
    }

    /// The loop's steps.
    async fn run_loop(&mut self) -> Result<bool, LoopError> {
        tracing::debug!("Starting main loop");
        let now = self.ctx.clock.now();
        let started = std::time::Instant::now();
        if let Ok(mut l) = self.liveness.lock() {
            l.last_activity = now;
        }
        self.metrics.activity("main", now);
        let mut decisions = Decisions {
            time: simclock::format_rfc3339(now),
            ..Decisions::default()
        };
        if let Some((p, _)) = &self.provreqs {
            p.refresh().await;
        }
        if let Some(c) = &self.buffer_controller {
            c.reconcile().await;
        }
        if let Some(i) = &self.buffer_injection {
            i.prepare().await;
        }
        if !self.cleaned_up {
            housekeeping::clean_up_taints(&self.ctx).await;
            self.cleaned_up = true;
        }
        let nodes: Vec<Arc<Node>> = self.ctx.cache.read().nodes.values().cloned().collect();
        self.ctx.node_facts.forget_gone(&nodes);
        if let Some(c) = &self.quota_controller {
            let valid = c.reconcile(&nodes).await;
            if let Ok(mut q) = self.ctx.quotas.write() {
                *q = valid;
            }
        }
        if let Some(message) = self.no_nodes_to_start_from(&nodes) {
            self.status
                .write(&StatusWriter::initializing(now, Some(message)))
                .await;
            return Ok(false);
        }
        let t = std::time::Instant::now();
        if let Err(e) = self.ctx.provider.refresh().await {
            let e = LoopError::CloudProvider(e);
            Metrics::inc(&self.metrics.errors, &[("type", e.kind())], 1);
            return Err(e);
        }
        self.metrics.observe("cloudProviderRefresh", t.elapsed());
        let t = std::time::Instant::now();
        let unready = self.resource_unready_nodes(&nodes);
        self.registry.set_resource_unready(unready);
        let notices = self.registry.update(&*self.ctx.provider, &nodes, now);
        self.metrics.observe("updateClusterState", t.elapsed());
        let timed_out: Vec<_> = notices
            .iter()
            .filter_map(|n| n.timed_out())
            .filter_map(|(id, increase)| Some((self.registry.group(id)?.group.clone(), increase)))
            .collect();
        let provider = &*self.ctx.provider;
        let dra_drivers = |id: &str| cloudprovider::group_dra_drivers(provider, id);
        clusterstate::report_notices(notices, &self.ctx.events, &self.metrics, &dra_drivers);
        clusterstate::revert_timed_out_scale_ups(&self.ctx.events, timed_out).await;
        clusterstate::update_cluster_metrics(&self.ctx, &self.registry, &nodes, now);

        self.metrics.activity("autoscaling", now);
        let result = self.iterate(&nodes, now, &mut decisions).await;
        if let Err(e) = &result {
            Metrics::inc(&self.metrics.errors, &[("type", e.kind())], 1);
        }
        let summary = self.scale_down.summary();
        let status = self.status.running(&self.registry, &summary, now);
        self.status.write(&status).await;
        let decisions = Arc::new(decisions);
        if let Some(log) = &self.decision_log {
            // A receiver gone is a reader that stopped listening.
            let _ = log.send(decisions.clone());
        }
        if let Ok(mut d) = self.decisions.lock() {
            *d = decisions;
        }
        if result.is_ok() {
            if let Ok(mut l) = self.liveness.lock() {
                l.last_success = Some(self.ctx.clock.now());
            }
            self.metrics.activity("mainSuccessful", now);
        }
        self.metrics.observe("main", started.elapsed());
        result
    }

    /// Without `--scale-up-from-zero`, a cluster with no (ready) nodes is
    /// not autoscaled: the status says why.
    fn no_nodes_to_start_from(&self, nodes: &[Arc<Node>]) -> Option<&'static str> {
        if self.ctx.flags.scale_up_from_zero {
            return None;
        }
        if nodes.is_empty() {
            return Some("Cluster has no nodes.");
        }
        let ready = nodes
            .iter()
            .filter(|n| self.ctx.node_facts.of(n).ready)
            .count();
        (ready == 0).then_some("Cluster has no ready nodes.")
    }

    /// The steps after the cluster state is known.
    async fn iterate(
        &mut self,
        nodes: &[Arc<Node>],
        now: SystemTime,
        decisions: &mut Decisions,
    ) -> Result<bool, LoopError> {
        housekeeping::remove_long_unregistered(&self.ctx, &self.registry).await;
        if !self.registry.is_healthy() {
            self.ctx.events.status(
                EventType::Warning,
                EventReason::ClusterUnhealthy,
                "Cluster is unhealthy".into(),
            );
            self.scale_down.forget_unneeded();
            decisions.scale_up = Some(ScaleUpStatus::ClusterUnhealthy);
            return Ok(false);
        }
        housekeeping::delete_failed_instances(&self.ctx, &self.registry).await;
        if self.sizes.fix_incorrect_sizes(&self.registry, now).await {
            return Ok(false);
        }
        let templates = self
            .processors
            .template_nodes
            .build(&self.ctx, &self.registry, nodes, now);
        let (mut snapshot, unbound) = self.snapshot(&templates).map_err(LoopError::Snapshot)?;
        if let Some(s) = &self.snapshotter {
            s.set_template_nodes(&templates);
            s.set_cluster_nodes(snapshot.nodes());
        }
        self.report_unschedulable(&unbound);

        let t = std::time::Instant::now();
        self.metrics.activity("scaleUp", now);
        let (pods, skipped) = self.pods_to_help(&unbound, &mut snapshot, now).await;
        if let Some(change) = self.degradation.record(skipped, &self.metrics) {
            let (type_, reason, message) = change.event();
            self.ctx.events.status(type_, reason, message.into());
        }
        let on = LoopState {
            templates: &templates,
            nodes,
            now,
        };
        let up = if self.degradation.skips_scale_up() {
            ScaleUpOutcome::stopped(ScaleUpStatus::InCooldown)
        } else if self.ctx.flags.salvo_scale_up && !pods.is_empty() {
            self.scale_up_salvo(pods, on, &mut snapshot).await
        } else {
            self.single_scale_up(pods, on, &mut snapshot).await
        };
        self.metrics.observe("scaleUp", t.elapsed());
        let scaled_groups: Vec<String> = up.scaled.iter().map(|i| i.group.clone()).collect();
        let too_new = up.pods_new_until.is_some();
        self.pods_new_until = up.pods_new_until;
        self.ctx
            .cache
            .set_nodes_upcoming(!self.registry.upcoming().is_empty());
        let cooldown = self.scale_down.cooldown();
        cooldown.record_scale_up(too_new, &scaled_groups, now);
        if up.status == ScaleUpStatus::Successful && scaled_groups.is_empty() {
            // A check-capacity request found its room: upstream counts it
            // as a scale-up for the scale-down cooldown.
            cooldown.record_capacity_found(now);
        }
        decisions.record_scale_up(up);
        let processed = self
            .provreqs
            .as_ref()
            .is_some_and(|(p, _)| p.take_processed());
        let acted_up = !scaled_groups.is_empty() || processed;

        let acted_down =
            if self.ctx.flags.scale_down_enabled && !self.degradation.skips_scale_down() {
                let t = std::time::Instant::now();
                self.metrics.activity("scaleDown", now);
                let r = self
                    .scale_down
                    .run(
                        &self.ctx,
                        &self.registry,
                        &mut snapshot,
                        nodes,
                        now,
                        decisions,
                    )
                    .await;
                self.metrics.observe("scaleDown", t.elapsed());
                r.map_err(LoopError::ScaleDown)?
            } else {
                false
            };
        let enforced = self.ctx.flags.enforce_node_group_min_size
            && minsize::enforce_min_sizes(
                &self.ctx,
                &mut self.registry,
                &templates,
                nodes.len(),
                now,
            )
            .await;
        Ok(acted_up || acted_down || enforced)
    }

    /// One scale-up for `pods` (through the ProvisioningRequests'
    /// orchestrator when they are on), then the scale-up status processors.
    async fn single_scale_up(
        &mut self,
        pods: Vec<PodInfo>,
        on: LoopState<'_>,
        snapshot: &mut Snapshot,
    ) -> ScaleUpOutcome {
        let inputs = ScaleUpInputs {
            pods,
            templates: on.templates,
            nodes: on.nodes,
            node_group_list: &self.processors.node_group_list,
            now: on.now,
            all_or_nothing: false,
        };
        let up = match self.provreqs.as_mut() {
            Some((p, turns)) => {
                let (ctx, registry) = (&self.ctx, &mut self.registry);
                scale_up_with_requests(ctx, registry, snapshot, inputs, p, turns).await
            }
            None => scale_up(&self.ctx, &mut self.registry, snapshot, inputs).await,
        };
        for p in &self.processors.scale_up_status {
            p.process(&self.ctx, &up);
        }
        up
    }

    /// `--salvo-scale-up` ([`salvo`](crate::scaleup::salvo)): scale-ups
    /// until the pods are helped or the budget is spent; one outcome for
    /// the loop.
    async fn scale_up_salvo(
        &mut self,
        pods: Vec<PodInfo>,
        on: LoopState<'_>,
        snapshot: &mut Snapshot,
    ) -> ScaleUpOutcome {
        let mut salvo = Salvo::start(pods, self.ctx.flags.salvo_scale_up_budget);
        let mut outcomes = Vec::new();
        loop {
            tracing::debug!(
                "Scale up salvo: iteration {}, pods left: {}",
                salvo.iteration,
                salvo.pods().len()
            );
            let up = self.single_scale_up(salvo.pods(), on, snapshot).await;
            let next = salvo.after(&up, snapshot, on.templates);
            outcomes.push(up);
            if let Err(end) = next {
                match end {
                    SalvoEnd::SnapshotUpdate(_) => tracing::warn!("{end}"),
                    _ => tracing::info!("{end}"),
                }
                break;
            }
        }
        tracing::info!(
            "Finished scale up salvo after {} iterations, unschedulable pods left: {}",
            salvo.iteration,
            salvo.pods().len()
        );
        salvo::merge(outcomes).unwrap_or_else(|| ScaleUpOutcome::stopped(ScaleUpStatus::NotNeeded))
    }

    /// The nodes the custom-resources processors find unready although
    /// Ready: DRA devices not published (always), CSI drivers not
    /// registered (`--enable-csi-node-aware-scheduling`). Upstream's chain
    /// runs after the GPU rule, so a node unready for its GPUs is not
    /// judged again.
    fn resource_unready_nodes(
        &mut self,
        nodes: &[Arc<Node>],
    ) -> std::collections::BTreeSet<String> {
        let gpu_label = self.ctx.provider.gpu_label();
        let ready: Vec<&Arc<Node>> = nodes
            .iter()
            .filter(|n| {
                let facts = self.ctx.node_facts.of(n);
                facts.ready && !crate::gpu::unready(n, facts.gpu_allocatable, &gpu_label)
            })
            .collect();
        let state = self.ctx.cache.read();
        let mut unready = customresources::dra_unready_nodes(
            &*self.ctx.provider,
            &ready,
            (&state.dra, &self.processors.template_nodes),
            &mut self.processors.dra_comparator,
            &self.metrics,
        );
        if self.ctx.flags.enable_csi_node_aware_scheduling {
            let ready: Vec<Arc<Node>> = ready
                .into_iter()
                .filter(|n| !unready.contains(n.metadata.name.as_deref().unwrap_or("")))
                .cloned()
                .collect();
            let live = &state.csi_nodes;
            unready.extend(customresources::csi_unready_nodes(
                &*self.ctx.provider,
                &ready,
                live,
            ));
        }
        unready
    }

    /// The snapshot: nodes with their pods, nominated pods on their
    /// nominated node, upcoming nodes as template copies; and the pods
    /// without a node.
    fn snapshot(
        &self,
        templates: &BTreeMap<String, NodeInfo>,
    ) -> Result<(Snapshot, Vec<PodInfo>), SnapshotError> {
        let cutoff = self.ctx.flags.expendable_pods_priority_cutoff;
        let (infos, unbound, volumes, dra) = {
            let mut state = self.ctx.cache.write();
            let infos = state.node_infos(cutoff);
            let unbound: Vec<PodInfo> = state.unbound.values().cloned().collect();
            (infos, unbound, state.volume_objects(), state.dra_objects())
        };
        if self.ctx.flags.enable_csi_node_aware_scheduling
            && let Some(n) = infos.iter().find(|n| n.csi.is_none())
        {
            return Err(SnapshotError::MissingCsiNode(n.name().to_string()));
        }
        let mut snapshot = Snapshot::new(infos)
            .with_plugins(self.ctx.validated.filter_plugins)
            .with_volumes(volumes)
            .with_dra(dra);
        for info in &unbound {
            if let Some(nominated) = info
                .pod
                .status
                .as_ref()
                .and_then(|s| s.nominated_node_name.as_deref())
                && let Some(i) = snapshot.index_of(nominated)
                && !crate::cache::is_expendable(&info.pod, cutoff)
            {
                snapshot.add_pod(i, info.clone());
            }
        }
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
        Ok((snapshot, unbound))
    }

    /// The pods scale-up should help (upstream's `unschedulablePodsToHelp`):
    /// the pending pods through the pod-list processors, then those older
    /// than `--new-pod-scale-up-delay`.
    /// With them, how many pending pods the check of which fit on existing
    /// nodes did not reach in `--pending-pods-batching-timeout`.
    async fn pods_to_help(
        &self,
        unbound: &[PodInfo],
        snapshot: &mut Snapshot,
        now: SystemTime,
    ) -> (Vec<PodInfo>, usize) {
        let f = &self.ctx.flags;
        let pending = pending_pods(unbound.iter(), &f.bypassed_scheduler_names);
        let draining = self.scale_down.draining();
        let mut ctx = PodListContext {
            snapshot,
            expendable_cutoff: f.expendable_pods_priority_cutoff,
            draining_pods: CurrentlyDrainedNodes::read_pods(&self.ctx, &draining).await,
            metrics: &self.metrics,
            schedulable: Vec::new(),
            batching_timeout: f
                .enable_graceful_degradation
                .then_some(f.pending_pods_batching_timeout),
            skipped: 0,
        };
        let pods = self.processors.pod_list.process(&mut ctx, pending);
        if let Some(s) = &self.snapshotter {
            s.set_unscheduled_pods_can_be_scheduled(&ctx.schedulable);
        }
        if let Some((p, _)) = &self.provreqs {
            p.flush().await;
        }
        let pods = pods
            .into_iter()
            .filter(|p| old_enough(&p.pod, f.new_pod_scale_up_delay, now))
            .collect();
        (pods, ctx.skipped)
    }

    fn report_unschedulable(&self, unbound: &[PodInfo]) {
        let unschedulable = unbound
            .iter()
            .filter(|p| crate::cache::is_unschedulable(&p.pod))
            .count();
        let gauge = &self.metrics.unschedulable_pods_count;
        Metrics::set(gauge, &[("type", "unschedulable")], unschedulable as f64);
        Metrics::set(gauge, &[("type", "scheduler_unprocessed")], 0.0);
    }
}
