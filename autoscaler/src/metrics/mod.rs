//! Prometheus metrics with CA's names, types and labels (docs/reference/ca-rules.md §8.2),
//! under the `cluster_autoscaler_` prefix, and the `/health-check` rule
//! (docs/reference/ca-rules.md §8.3). Counters are registered without `_total`: the encoder adds it.

pub mod reference;

use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime};

use prometheus_client::metrics::TypedMetric;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets_range};
use prometheus_client::registry::{Metric, Registry};

type Labels = Vec<(String, String)>;
type FGauge = Gauge<f64, AtomicU64>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The labels of a scale counter: `extra`, the (empty) GPU labels and
/// `dra_drivers`.
fn scale_labels(extra: &[(&str, &str)], dra_drivers: &str) -> Labels {
    let mut l = labels(extra);
    l.extend(labels(&[
        ("gpu_resource_name", ""),
        ("gpu_name", ""),
        ("dra_drivers", dra_drivers),
    ]));
    l
}

/// The DRA drivers upstream names in the `dra_drivers` label; any other
/// driver is [`CUSTOM_DRA_DRIVER`], to keep the label's values few.
const REPORTED_DRA_DRIVERS: [&str; 4] = [
    "compute-domain.nvidia.com",
    "dra.net",
    "gpu.nvidia.com",
    "tpu.google.com",
];

/// What a driver not in [`REPORTED_DRA_DRIVERS`] is called in the label.
const CUSTOM_DRA_DRIVER: &str = "custom.driver";

/// The `dra_drivers` label of a node template with slices of these
/// drivers (upstream's `GetDriverNamesForMetricsCompacted`): the known
/// drivers by name, any other as `custom.driver`, sorted, each once,
/// joined by commas; no slices, `""`.
pub fn dra_drivers<'a>(drivers: impl IntoIterator<Item = &'a str>) -> String {
    let names: std::collections::BTreeSet<&str> = drivers
        .into_iter()
        .map(|d| {
            if REPORTED_DRA_DRIVERS.contains(&d) {
                d
            } else {
                CUSTOM_DRA_DRIVER
            }
        })
        .collect();
    names.into_iter().collect::<Vec<_>>().join(",")
}

/// The kinds of difference between a ready node's devices and its
/// template's, the `mismatch_type` label of
/// `dra_node_template_resources_mismatch` (upstream's
/// `ResourceMismatchType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceMismatchType {
    /// A group of the template's devices the node does not have.
    Missing,
    /// A group of the node's devices the template does not have.
    Extra,
    /// Alike groups with other attributes or counts.
    Mismatch,
    /// A difference of neither side (never expected).
    Unknown,
}

impl ResourceMismatchType {
    /// All of them, in the order upstream sets them.
    pub const ALL: [Self; 4] = [Self::Missing, Self::Extra, Self::Mismatch, Self::Unknown];

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Extra => "extra",
            Self::Mismatch => "mismatch",
            Self::Unknown => "unknown",
        }
    }

    /// Its name in upstream's discrepancy log (`ResourceDelta{Type="…"`).
    pub fn log_name(self) -> &'static str {
        match self {
            Self::Missing => "Missing",
            Self::Extra => "Extra",
            Self::Mismatch => "Mismatch",
            Self::Unknown => "Unknown",
        }
    }
}

/// Upstream's buckets for `node_removal_latency_seconds`: 1 s × 1.5ⁿ, 19 of them.
fn removal_latency_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        1.0, 1.5, 19,
    ))
}

/// 150 exponential buckets from 0.1 s to 1800 s, as upstream.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets_range(0.1, 1800.0, 150))
}

/// A registered metric as `/metrics` describes it: its name (without the
/// `cluster_autoscaler_` prefix), type and help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// The name, without the prefix.
    pub name: &'static str,
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    /// The help text.
    pub help: &'static str,
}

/// A registry that keeps what it registers described.
struct Registrar {
    registry: Registry,
    described: Vec<Described>,
}

impl Registrar {
    fn register<M: Metric + TypedMetric>(
        &mut self,
        name: &'static str,
        help: &'static str,
        metric: M,
    ) {
        let kind = match M::TYPE {
            prometheus_client::metrics::MetricType::Counter => "counter",
            prometheus_client::metrics::MetricType::Gauge => "gauge",
            prometheus_client::metrics::MetricType::Histogram => "histogram",
            prometheus_client::metrics::MetricType::Info => "info",
            _ => "unknown",
        };
        self.described.push(Described { name, kind, help });
        self.registry.register(name, help, metric);
    }
}

/// Every metric the autoscaler exports.
pub struct Metrics {
    registry: Registry,
    described: Vec<Described>,
    /// `cluster_safe_to_autoscale`.
    pub safe_to_autoscale: FGauge,
    /// `nodes_count{state}`.
    pub nodes_count: Family<Labels, FGauge>,
    /// `node_groups_count{node_group_type}`.
    pub node_groups_count: Family<Labels, FGauge>,
    /// `unschedulable_pods_count{type}`.
    pub unschedulable_pods_count: Family<Labels, FGauge>,
    /// `skipped_pods_count{requestor}`: the pending pods a loop's check
    /// of which fit on existing nodes did not reach (CA 1.37).
    pub skipped_pods_count: Family<Labels, FGauge>,
    /// `max_nodes_count`.
    pub max_nodes_count: FGauge,
    /// `cluster_cpu_current_cores`.
    pub cpu_current_cores: FGauge,
    /// `cpu_limits_cores{direction}`.
    pub cpu_limits_cores: Family<Labels, FGauge>,
    /// `cluster_memory_current_bytes`.
    pub memory_current_bytes: FGauge,
    /// `memory_limits_bytes{direction}`.
    pub memory_limits_bytes: Family<Labels, FGauge>,
    /// `last_activity{activity}`.
    pub last_activity: Family<Labels, FGauge>,
    /// `function_duration_seconds{function}`.
    pub function_duration: Family<Labels, Histogram>,
    /// `errors_total{type}`.
    pub errors: Family<Labels, Counter>,
    /// `scaled_up_nodes_total`.
    pub scaled_up_nodes: Family<Labels, Counter>,
    /// `failed_scale_ups_total{reason}`.
    pub failed_scale_ups: Family<Labels, Counter>,
    /// `failed_node_creations_total{reason}`.
    pub failed_node_creations: Family<Labels, Counter>,
    /// `scaled_down_nodes_total{reason}`.
    pub scaled_down_nodes: Family<Labels, Counter>,
    /// `evicted_pods_total{eviction_result}`.
    pub evicted_pods: Family<Labels, Counter>,
    /// `unneeded_nodes_count`.
    pub unneeded_nodes_count: FGauge,
    /// `unremovable_nodes_count{reason}`.
    pub unremovable_nodes_count: Family<Labels, FGauge>,
    /// `scale_down_in_cooldown`.
    pub scale_down_in_cooldown: FGauge,
    /// `max_node_skip_eval_duration_seconds` (set with
    /// `--max-node-skip-eval-time-tracker-enabled`, 0 otherwise).
    pub max_node_skip_eval_duration: FGauge,
    /// `old_unregistered_nodes_removed_count`.
    pub old_unregistered_removed: Counter,
    /// `skipped_scale_events_count{direction,reason}`.
    pub skipped_scale_events: Family<Labels, Counter>,
    /// `node_taints_count{type}`.
    pub node_taints_count: Family<Labels, FGauge>,
    /// `node_group_min_count{node_group}` (with `--emit-per-nodegroup-metrics`).
    pub node_group_min: Family<Labels, FGauge>,
    /// `node_group_max_count{node_group}`.
    pub node_group_max: Family<Labels, FGauge>,
    /// `node_group_target_count{node_group}`.
    pub node_group_target: Family<Labels, FGauge>,
    /// `node_group_healthiness{node_group}`.
    pub node_group_healthiness: Family<Labels, FGauge>,
    /// `node_removal_latency_seconds{deleted,delay_reason}` (with
    /// `--node-removal-latency-tracking-enabled`).
    pub node_removal_latency: Family<Labels, Histogram>,
    /// `dra_node_template_resources_mismatch{driver,mismatch_type}`.
    pub dra_template_mismatch: Family<Labels, FGauge>,
}

impl Metrics {
    /// Registers everything and pre-initialises the series upstream starts at 0.
    pub fn new(per_group: bool) -> Self {
        let mut r = Registrar {
            registry: Registry::with_prefix("cluster_autoscaler"),
            described: Vec::new(),
        };
        let m = Self::unregistered();
        m.register_cluster_state(&mut r);
        m.register_loop(&mut r);
        m.register_scale_up(&mut r);
        m.register_scale_down(&mut r);
        m.register_taints_and_skipped_events(&mut r);
        if per_group {
            m.register_per_group(&mut r);
        }
        m.preinitialise();
        Self {
            registry: r.registry,
            described: r.described,
            ..m
        }
    }

    /// Every metric, empty and not registered anywhere.
    fn unregistered() -> Self {
        Self {
            safe_to_autoscale: FGauge::default(),
            nodes_count: Family::default(),
            node_groups_count: Family::default(),
            unschedulable_pods_count: Family::default(),
            skipped_pods_count: Family::default(),
            max_nodes_count: FGauge::default(),
            cpu_current_cores: FGauge::default(),
            cpu_limits_cores: Family::default(),
            memory_current_bytes: FGauge::default(),
            memory_limits_bytes: Family::default(),
            last_activity: Family::default(),
            function_duration: Family::new_with_constructor(duration_histogram),
            errors: Family::default(),
            scaled_up_nodes: Family::default(),
            failed_scale_ups: Family::default(),
            failed_node_creations: Family::default(),
            scaled_down_nodes: Family::default(),
            evicted_pods: Family::default(),
            unneeded_nodes_count: FGauge::default(),
            unremovable_nodes_count: Family::default(),
            scale_down_in_cooldown: FGauge::default(),
            max_node_skip_eval_duration: FGauge::default(),
            old_unregistered_removed: Counter::default(),
            skipped_scale_events: Family::default(),
            node_taints_count: Family::default(),
            node_group_min: Family::default(),
            node_group_max: Family::default(),
            node_group_target: Family::default(),
            node_group_healthiness: Family::default(),
            node_removal_latency: Family::new_with_constructor(removal_latency_histogram),
            dra_template_mismatch: Family::default(),
            registry: Registry::default(),
            described: Vec::new(),
        }
    }

    /// The cluster gauges: health, node and group counts, cores and memory with their limits.
    fn register_cluster_state(&self, r: &mut Registrar) {
        r.register(
            "cluster_safe_to_autoscale",
            "Whether or not cluster is healthy enough for autoscaling. 1 if it is, 0 otherwise.",
            self.safe_to_autoscale.clone(),
        );
        r.register(
            "nodes_count",
            "Number of nodes in cluster.",
            self.nodes_count.clone(),
        );
        r.register(
            "node_groups_count",
            "Number of node groups managed by CA.",
            self.node_groups_count.clone(),
        );
        r.register(
            "unschedulable_pods_count",
            "Number of unschedulable pods in the cluster.",
            self.unschedulable_pods_count.clone(),
        );
        r.register(
            "skipped_pods_count",
            "Number of pods where scheduling simulation was skipped.",
            self.skipped_pods_count.clone(),
        );
        r.register(
            "max_nodes_count",
            "Maximum number of nodes in all node groups",
            self.max_nodes_count.clone(),
        );
        r.register(
            "cluster_cpu_current_cores",
            "Current number of cores in the cluster, minus deleting nodes.",
            self.cpu_current_cores.clone(),
        );
        r.register(
            "cpu_limits_cores",
            "Minimum and maximum number of cores in the cluster.",
            self.cpu_limits_cores.clone(),
        );
        r.register(
            "cluster_memory_current_bytes",
            "Current number of bytes of memory in the cluster, minus deleting nodes.",
            self.memory_current_bytes.clone(),
        );
        r.register(
            "memory_limits_bytes",
            "Minimum and maximum number of bytes of memory in cluster.",
            self.memory_limits_bytes.clone(),
        );
        r.register(
            "dra_node_template_resources_mismatch",
            "Count of resource mismatches between ready nodes and node templates",
            self.dra_template_mismatch.clone(),
        );
    }

    /// The loop's activity, function durations and errors.
    fn register_loop(&self, r: &mut Registrar) {
        r.register(
            "last_activity",
            "Last time certain part of CA logic executed.",
            self.last_activity.clone(),
        );
        r.register(
            "function_duration_seconds",
            "Time taken by various parts of CA main loop.",
            self.function_duration.clone(),
        );
        r.register(
            "errors",
            "The number of CA loops failed due to an error.",
            self.errors.clone(),
        );
    }

    /// Scale-up counters.
    fn register_scale_up(&self, r: &mut Registrar) {
        r.register(
            "scaled_up_nodes",
            "Number of nodes added by CA.",
            self.scaled_up_nodes.clone(),
        );
        r.register(
            "failed_scale_ups",
            "Number of times scale-up operation has failed.",
            self.failed_scale_ups.clone(),
        );
        r.register(
            "failed_node_creations",
            "Number of nodes that failed creation.",
            self.failed_node_creations.clone(),
        );
    }

    /// Scale-down counters and gauges.
    fn register_scale_down(&self, r: &mut Registrar) {
        r.register(
            "scaled_down_nodes",
            "Number of nodes removed by CA.",
            self.scaled_down_nodes.clone(),
        );
        r.register(
            "evicted_pods",
            "Number of pods evicted by CA",
            self.evicted_pods.clone(),
        );
        r.register(
            "node_removal_latency_seconds",
            "Latency from when an unneeded node is eligible for scale down until it is removed (deleted=true) or it became needed again (deleted=false). The 'delay_reason' label indicates the technical bottleneck that delayed the scale-down ('none' if not delayed).",
            self.node_removal_latency.clone(),
        );
        r.register(
            "max_node_skip_eval_duration_seconds",
            "Maximum evaluation time of a node being skipped during ScaleDown.",
            self.max_node_skip_eval_duration.clone(),
        );
        r.register(
            "unneeded_nodes_count",
            "Number of nodes currently considered unneeded by CA.",
            self.unneeded_nodes_count.clone(),
        );
        r.register(
            "unremovable_nodes_count",
            "Number of nodes currently considered unremovable by CA.",
            self.unremovable_nodes_count.clone(),
        );
        r.register(
            "scale_down_in_cooldown",
            "Whether or not the scale down is in cooldown. 1 if its, 0 otherwise.",
            self.scale_down_in_cooldown.clone(),
        );
        r.register(
            "old_unregistered_nodes_removed_count",
            "Number of unregistered nodes removed by CA.",
            self.old_unregistered_removed.clone(),
        );
    }

    /// Taints by type, and scale events skipped at the resource limits.
    fn register_taints_and_skipped_events(&self, r: &mut Registrar) {
        r.register(
            "node_taints_count",
            "Number of taints per type used in the cluster.",
            self.node_taints_count.clone(),
        );
        r.register(
            "skipped_scale_events_count",
            "Count of scaling events that the CA has chosen to skip.",
            self.skipped_scale_events.clone(),
        );
    }

    /// Each group's sizes and health (`--emit-per-nodegroup-metrics`).
    fn register_per_group(&self, r: &mut Registrar) {
        r.register(
            "node_group_min_count",
            "Minimum number of nodes in the node group",
            self.node_group_min.clone(),
        );
        r.register(
            "node_group_max_count",
            "Maximum number of nodes in the node group",
            self.node_group_max.clone(),
        );
        r.register(
            "node_group_target_count",
            "Target number of nodes in the node group by CA.",
            self.node_group_target.clone(),
        );
        r.register(
            "node_group_healthiness",
            "Whether or not node group is healthy enough for autoscaling. 1 if it is, 0 otherwise.",
            self.node_group_healthiness.clone(),
        );
    }

    /// Creates at 0 the series upstream starts at 0.
    fn preinitialise(&self) {
        for t in [
            "cloudProviderError",
            "apiCallError",
            "internalError",
            "transientError",
            "configurationError",
            "nodeGroupDoesNotExistError",
            "unexpectedScaleDownStateError",
        ] {
            let _ = self.errors.get_or_create(&labels(&[("type", t)]));
        }
        for reason in ["cloudProviderError", "apiCallError", "timeout"] {
            let _ = self
                .failed_scale_ups
                .get_or_create(&scale_labels(&[("reason", reason)], ""));
            let _ = self
                .failed_node_creations
                .get_or_create(&labels(&[("reason", reason)]));
        }
        for reason in ["underutilized", "empty", "unready"] {
            let _ = self
                .scaled_down_nodes
                .get_or_create(&scale_labels(&[("reason", reason)], ""));
        }
        for result in ["succeeded", "failed"] {
            let _ = self
                .evicted_pods
                .get_or_create(&labels(&[("eviction_result", result)]));
        }
        for direction in ["up", "down"] {
            for reason in ["CpuResourceLimit", "MemoryResourceLimit"] {
                let _ = self
                    .skipped_scale_events
                    .get_or_create(&labels(&[("direction", direction), ("reason", reason)]));
            }
        }
    }

    /// The `--cores-total` and `--memory-total` limits, set once.
    pub fn set_resource_limits(&self, validated: &crate::config::Validated) {
        let gib = (1i64 << 30) as f64;
        let limits = [
            (
                &self.cpu_limits_cores,
                "minimum",
                validated.cores_total.min as f64,
            ),
            (
                &self.cpu_limits_cores,
                "maximum",
                validated.cores_total.max as f64,
            ),
            (
                &self.memory_limits_bytes,
                "minimum",
                validated.memory_total.min as f64 * gib,
            ),
            (
                &self.memory_limits_bytes,
                "maximum",
                validated.memory_total.max as f64 * gib,
            ),
        ];
        for (family, direction, value) in limits {
            Self::set(family, &[("direction", direction)], value);
        }
    }

    /// Every registered metric, in the order of registration.
    pub fn described(&self) -> &[Described] {
        &self.described
    }

    /// The OpenMetrics text.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!("encoding metrics: {e}");
        }
        out
    }

    /// Sets a labelled gauge.
    pub fn set(family: &Family<Labels, FGauge>, pairs: &[(&str, &str)], value: f64) {
        family.get_or_create(&labels(pairs)).set(value);
    }

    /// Increments a labelled counter.
    pub fn inc(family: &Family<Labels, Counter>, pairs: &[(&str, &str)], by: u64) {
        family.get_or_create(&labels(pairs)).inc_by(by);
    }

    /// Increments a scale counter (`scaled_up_nodes`, `failed_scale_ups`,
    /// `scaled_down_nodes`): `pairs`, the (empty) GPU labels, and the
    /// [`dra_drivers`] label of the group's template.
    pub fn inc_scale(
        family: &Family<Labels, Counter>,
        pairs: &[(&str, &str)],
        dra_drivers: &str,
        by: u64,
    ) {
        family
            .get_or_create(&scale_labels(pairs, dra_drivers))
            .inc_by(by);
    }

    /// Records a loop phase duration.
    pub fn observe(&self, function: &str, d: Duration) {
        self.function_duration
            .get_or_create(&labels(&[("function", function)]))
            .observe(d.as_secs_f64());
    }

    /// Records when an activity ran.
    pub fn activity(&self, activity: &str, at: SystemTime) {
        let secs = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        Self::set(&self.last_activity, &[("activity", activity)], secs);
    }
}

/// The loop has been inactive or failing for too long: the 500 body of
/// `/health-check`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Error: last activity more {} ago, last success more than {} ago",
    simclock::format_go_duration(*.inactive),
    simclock::format_go_duration(*.failing)
)]
pub struct Unhealthy {
    /// Since the last loop started.
    pub inactive: Duration,
    /// Since the last loop succeeded (or the process started).
    pub failing: Duration,
}

/// The `/health-check` verdict (docs/reference/ca-rules.md §8.3).
pub fn health(
    now: SystemTime,
    last_activity: SystemTime,
    last_success: Option<SystemTime>,
    started: SystemTime,
    max_inactivity: Duration,
    max_failing: Duration,
    max_startup: Duration,
) -> Result<(), Unhealthy> {
    let startup = max_startup.max(max_inactivity).max(max_failing);
    let (activity_timeout, success_timeout, success_since) = match last_success {
        Some(t) => (max_inactivity, max_failing, t),
        None => (startup, startup, started),
    };
    let inactive = now.duration_since(last_activity).unwrap_or_default();
    let failing = now.duration_since(success_since).unwrap_or_default();
    if inactive > activity_timeout || failing > success_timeout {
        return Err(Unhealthy { inactive, failing });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn names_and_preinitialised_series() {
        let m = Metrics::new(false);
        m.safe_to_autoscale.set(1.0);
        Metrics::set(&m.nodes_count, &[("state", "ready")], 3.0);
        m.observe("main", Duration::from_millis(250));
        let text = m.encode();
        for line in [
            "cluster_autoscaler_cluster_safe_to_autoscale 1.0",
            "cluster_autoscaler_nodes_count{state=\"ready\"} 3.0",
            "cluster_autoscaler_errors_total{type=\"cloudProviderError\"} 0",
            "cluster_autoscaler_failed_scale_ups_total{reason=\"timeout\",gpu_resource_name=\"\",gpu_name=\"\",dra_drivers=\"\"} 0",
            "cluster_autoscaler_scaled_down_nodes_total{reason=\"empty\",gpu_resource_name=\"\",gpu_name=\"\",dra_drivers=\"\"} 0",
            "cluster_autoscaler_evicted_pods_total{eviction_result=\"failed\"} 0",
            "cluster_autoscaler_failed_node_creations_total{reason=\"timeout\"} 0",
            "cluster_autoscaler_function_duration_seconds_count{function=\"main\"} 1",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        Metrics::set(&m.node_group_min, &[("node_group", "g")], 1.0);
        assert!(
            !m.encode().contains("node_group_min_count"),
            "per-group metrics need the flag"
        );
        let with = Metrics::new(true);
        Metrics::set(&with.node_group_min, &[("node_group", "g")], 1.0);
        assert!(
            with.encode()
                .contains("cluster_autoscaler_node_group_min_count{node_group=\"g\"} 1.0")
        );
    }

    #[test]
    fn dra_drivers_label_names_the_known_drivers_and_groups_the_rest() {
        assert_eq!(dra_drivers([]), "");
        assert_eq!(
            dra_drivers([
                "tpu.google.com",
                "gpu.example.com",
                "dra.net",
                "nic.example.com"
            ]),
            "custom.driver,dra.net,tpu.google.com"
        );
        assert_eq!(
            dra_drivers(["gpu.nvidia.com", "gpu.nvidia.com"]),
            "gpu.nvidia.com"
        );
        let m = Metrics::new(false);
        Metrics::inc_scale(&m.scaled_up_nodes, &[], "gpu.nvidia.com", 2);
        assert!(m.encode().contains(
            "cluster_autoscaler_scaled_up_nodes_total{gpu_resource_name=\"\",gpu_name=\"\",dra_drivers=\"gpu.nvidia.com\"} 2"
        ));
    }

    #[test]
    fn health_check_timeouts() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let min = |m: u64| Duration::from_secs(60 * m);
        // Before the first success, 20 minutes of grace.
        assert!(
            health(
                t0 + min(19),
                t0 + min(19),
                None,
                t0,
                min(10),
                min(15),
                min(20)
            )
            .is_ok()
        );
        assert!(
            health(
                t0 + min(21),
                t0 + min(21),
                None,
                t0,
                min(10),
                min(15),
                min(20)
            )
            .is_err()
        );
        // After: 10 minutes without activity or 15 without success fail.
        assert!(
            health(
                t0 + min(14),
                t0 + min(5),
                Some(t0),
                t0,
                min(10),
                min(15),
                min(20)
            )
            .is_ok()
        );
        let e = health(
            t0 + min(16),
            t0 + min(16),
            Some(t0),
            t0,
            min(10),
            min(15),
            min(20),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "Error: last activity more 0s ago, last success more than 16m0s ago"
        );
        assert!(
            health(
                t0 + min(11),
                t0,
                Some(t0 + min(1)),
                t0,
                min(10),
                min(15),
                min(20)
            )
            .is_err()
        );
    }
}
