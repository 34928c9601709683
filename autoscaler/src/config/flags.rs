//! The `cluster-autoscaler` flags as clap reads them ([`Flags`]): every
//! flag's name, default, value parser, help text and `--help` group.

use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser};

use super::goflags::normalize_args;
use super::help;
use super::provider::ProviderName;

/// A flag value clap's parsers refuse (the message names the value; clap
/// adds the flag).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// Not a Go duration.
    #[error("{0:?} is not a Go duration (like 10s, 1m30s, 3h0m0s)")]
    Duration(String),
    /// Not a non-negative number.
    #[error("{0:?} is not a non-negative number")]
    Ratio(String),
}

fn duration(s: &str) -> Result<Duration, ValueError> {
    simclock::parse_go_duration(s).ok_or_else(|| ValueError::Duration(s.to_string()))
}

fn ratio(s: &str) -> Result<f64, ValueError> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(ValueError::Ratio(s.to_string())),
    }
}

/// `cluster-autoscaler` flags.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "cluster-autoscaler",
    version,
    about = "A drop-in replacement for the Kubernetes Cluster Autoscaler",
    rename_all = "kebab-case",
    // As Go's flag packages: a flag given again overrides (repeatable
    // flags such as --nodes accumulate).
    args_override_self = true
)]
pub struct Flags {
    // ---- General and API access ----
    /// The address to expose Prometheus metrics, /health-check and /decisions.
    #[arg(long, default_value = ":8085")]
    #[arg(help_heading = "Client and server")]
    pub address: String,
    /// Cloud provider type (the help lists the implemented ones).
    #[arg(long, default_value = "gce")]
    #[arg(help_heading = "Cloud provider")]
    pub cloud_provider: String,
    /// The path to the cloud provider configuration file.
    #[arg(long, default_value = "")]
    #[arg(help_heading = "Cloud provider")]
    pub cloud_config: String,
    /// Autoscaled cluster name, if available.
    #[arg(long, default_value = "")]
    #[arg(help_heading = "Cloud provider")]
    pub cluster_name: String,
    /// Path to kubeconfig file; in-cluster config when empty.
    #[arg(long, default_value = "")]
    #[arg(help_heading = "Client and server")]
    pub kubeconfig: String,
    /// Kubernetes master location. Leave blank for default.
    #[arg(long, default_value = "")]
    #[arg(help_heading = "Client and server")]
    pub kubernetes: String,
    /// Content type of requests sent to apiserver.
    #[arg(long, default_value = "application/vnd.kubernetes.protobuf")]
    #[arg(help_heading = "Client and server")]
    pub kube_api_content_type: String,
    /// Burst value for kubernetes client.
    #[arg(long, default_value_t = 10)]
    #[arg(help_heading = "Client and server")]
    pub kube_client_burst: u32,
    /// QPS value for kubernetes client.
    #[arg(long, default_value_t = 5.0, value_parser = ratio)]
    #[arg(help_heading = "Client and server")]
    pub kube_client_qps: f64,
    /// User agent used for HTTP calls.
    #[arg(long, default_value = "cluster-autoscaler")]
    #[arg(help_heading = "Client and server")]
    pub user_agent: String,
    /// Namespace in which cluster-autoscaler runs (status and priority ConfigMaps, lease).
    #[arg(long, default_value = "kube-system")]
    #[arg(help_heading = "Client and server")]
    pub namespace: String,
    /// Run leader election on a Lease before starting.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Client and server")]
    pub leader_elect: bool,
    /// Leader election lease duration.
    #[arg(long, default_value = "15s", value_parser = duration)]
    #[arg(help_heading = "Client and server")]
    pub leader_elect_lease_duration: Duration,
    /// Leader election renew deadline.
    #[arg(long, default_value = "10s", value_parser = duration)]
    #[arg(help_heading = "Client and server")]
    pub leader_elect_renew_deadline: Duration,
    /// Leader election retry period.
    #[arg(long, default_value = "2s", value_parser = duration)]
    #[arg(help_heading = "Client and server")]
    pub leader_elect_retry_period: Duration,
    /// Leader election lock type (only `leases`).
    #[arg(long, default_value = "leases")]
    #[arg(help_heading = "Client and server")]
    pub leader_elect_resource_lock: String,
    /// Leader election lock name.
    #[arg(long, default_value = "cluster-autoscaler")]
    #[arg(help_heading = "Client and server")]
    pub leader_elect_resource_name: String,
    /// Accepted and ignored: the lock lives in --namespace.
    #[arg(long, default_value = "")]
    #[arg(help_heading = "Client and server")]
    pub leader_elect_resource_namespace: String,
    /// The lease resource to use in leader election (old name of --leader-elect-resource-name).
    #[arg(long, default_value = "")]
    #[arg(help_heading = "Client and server")]
    pub lease_resource_name: String,
    /// Is debug/pprof endpoint enabled.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Client and server")]
    pub profiling: bool,
    /// Whether the debugging snapshot feature is enabled.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Client and server")]
    pub debugging_snapshot_enabled: bool,
    /// Feature gates (key=value pairs).
    #[arg(long, default_value = "")]
    #[arg(help_heading = "Client and server")]
    pub feature_gates: String,

    // ---- Loop, health and status ----
    /// How often cluster is reevaluated for scale up or down.
    #[arg(long, default_value = "10s", value_parser = duration)]
    #[arg(help_heading = "Loop, health and status")]
    pub scan_interval: Duration,
    /// Trigger new iterations more frequently when needed.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Loop, health and status")]
    pub frequent_loops_enabled: bool,
    /// Maximum time from last recorded autoscaler activity before automatic restart.
    #[arg(long, default_value = "10m0s", value_parser = duration)]
    #[arg(help_heading = "Loop, health and status")]
    pub max_inactivity: Duration,
    /// Maximum time from last recorded successful autoscaler run before automatic restart.
    #[arg(long, default_value = "15m0s", value_parser = duration)]
    #[arg(help_heading = "Loop, health and status")]
    pub max_failing_time: Duration,
    /// Health-check timeout until the first successful loop.
    #[arg(long, default_value = "20m0s", value_parser = duration)]
    #[arg(help_heading = "Loop, health and status")]
    pub max_startup_time: Duration,
    /// Should CA write status information to a configmap.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Loop, health and status")]
    pub write_status_configmap: bool,
    /// Status configmap name.
    #[arg(long, default_value = "cluster-autoscaler-status")]
    #[arg(help_heading = "Loop, health and status")]
    pub status_config_map_name: String,
    /// Enable duplication of similar events within a 5 minute window.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Loop, health and status")]
    pub record_duplicated_events: bool,
    /// If true, emit per node group metrics.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Loop, health and status")]
    pub emit_per_nodegroup_metrics: bool,
    /// Maximum percentage of unready nodes in the cluster. After this is exceeded, CA halts operations.
    #[arg(long, default_value_t = 45.0, value_parser = ratio)]
    #[arg(help_heading = "Loop, health and status")]
    pub max_total_unready_percentage: f64,
    /// Number of allowed unready nodes, irrespective of max-total-unready-percentage.
    #[arg(long, default_value_t = 3)]
    #[arg(help_heading = "Loop, health and status")]
    pub ok_total_unready_count: usize,
    /// Should CA scale up when there are 0 ready nodes.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Loop, health and status")]
    pub scale_up_from_zero: bool,
    /// Ours: false skips upstream's 2 s wait for a burst of new pods (with frequent loops).
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Loop, health and status")]
    pub very_new_pods_wait: bool,
    /// Ours, not upstream's (kube-aws-autoscaler's --once): run one loop, print its decision record as JSON on stdout and exit.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Loop, health and status")]
    pub once: bool,

    // ---- Node groups and limits ----
    /// Node group `<min>:<max>:<name>` (repeatable).
    #[arg(long, action = clap::ArgAction::Append)]
    #[arg(help_heading = "Node groups")]
    pub nodes: Vec<String>,
    /// Node group auto-discovery `<discoverer>:<key>[=<value>]` (repeatable).
    #[arg(long, action = clap::ArgAction::Append)]
    #[arg(help_heading = "Node groups")]
    pub node_group_auto_discovery: Vec<String>,
    /// Maximum number of nodes in all node groups (0: no limit).
    #[arg(long, default_value_t = 0)]
    #[arg(help_heading = "Limits")]
    pub max_nodes_total: usize,
    /// Minimum and maximum number of cores in cluster, `<min>:<max>`.
    #[arg(long, default_value = "0:320000")]
    #[arg(help_heading = "Limits")]
    pub cores_total: String,
    /// Minimum and maximum number of gigabytes of memory in cluster, `<min>:<max>`.
    #[arg(long, default_value = "0:6400000")]
    #[arg(help_heading = "Limits")]
    pub memory_total: String,
    /// GPU limits `<gpu_type>:<min>:<max>` (repeatable).
    #[arg(long, action = clap::ArgAction::Append)]
    #[arg(help_heading = "Limits")]
    pub gpu_total: Vec<String>,
    /// Node Info cache expire time for each item.
    #[arg(long, default_value = "87600h0m0s", value_parser = duration)]
    #[arg(help_heading = "Node groups")]
    pub node_info_cache_expire_time: Duration,
    /// Blocks scale-up of node groups too small for all suitable DaemonSet pods.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Node groups")]
    pub force_ds: bool,
    /// A taint to ignore in node templates when considering to scale a node group (repeatable).
    #[arg(long, action = clap::ArgAction::Append)]
    #[arg(help_heading = "Node groups")]
    pub startup_taint: Vec<String>,
    /// Extra startup taint key prefixes (repeatable).
    #[arg(long, action = clap::ArgAction::Append)]
    #[arg(help_heading = "Node groups")]
    pub startup_taint_prefix: Vec<String>,
    /// A taint to ignore in templates; nodes with it are not treated as unready (repeatable).
    #[arg(long, action = clap::ArgAction::Append)]
    #[arg(help_heading = "Node groups")]
    pub status_taint: Vec<String>,
    /// Deprecated alias of --startup-taint (repeatable).
    #[arg(long, action = clap::ArgAction::Append)]
    #[arg(help_heading = "Node groups")]
    pub ignore_taint: Vec<String>,
    /// Clear spec.unschedulable on templates built from cordoned nodes.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Node groups")]
    pub scale_from_unschedulable: bool,
    /// Whether to enable force deletion of long unregistered nodes, regardless of min size.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Node groups")]
    pub force_delete_unregistered_nodes: bool,
    /// Force deletion of instances that failed to be created, regardless of min size.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Node groups")]
    pub force_delete_failed_nodes: bool,
    /// Handle DRA objects (locked to true).
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Node groups")]
    pub enable_dynamic_resource_allocation: bool,
    /// Use CSINode volume limits in simulation.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Node groups")]
    pub enable_csi_node_aware_scheduling: bool,
    /// CapacityQuota CRD support.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Node groups")]
    pub capacity_quotas_enabled: bool,
    /// Whether node groups are created and deleted asynchronously.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Node groups")]
    pub async_node_groups: bool,
    /// Should CA autoprovision node groups (deprecated).
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Node groups")]
    pub node_autoprovisioning_enabled: bool,
    /// Maximum number of autoprovisioned groups (deprecated).
    #[arg(long, default_value_t = 15)]
    #[arg(help_heading = "Node groups")]
    pub max_autoprovisioned_node_group_count: usize,

    // ---- Provider specific ----
    /// Cluster is regional (GCE).
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Cloud provider")]
    pub regional: bool,
    /// AWS: use the static instance list.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Cloud provider")]
    pub aws_use_static_instance_list: bool,
    /// Cluster API: treat --cloud-config authoritatively.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Cloud provider")]
    pub clusterapi_cloud_config_authoritative: bool,
    /// GCE: concurrent refreshes.
    #[arg(long, default_value_t = 1)]
    #[arg(help_heading = "Cloud provider")]
    pub gce_concurrent_refreshes: u32,
    /// GCE: minimum MIG refresh wait.
    #[arg(long, default_value = "5s", value_parser = duration)]
    #[arg(help_heading = "Cloud provider")]
    pub gce_mig_instances_min_refresh_wait_time: Duration,
    /// GCE: ephemeral storage in the expander (deprecated).
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Cloud provider")]
    pub gce_expander_ephemeral_storage_support: bool,
    /// GCE: bulk MIG instance listing.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Cloud provider")]
    pub bulk_mig_instances_listing_enabled: bool,
    /// GCE: L4 LB source CIDRs.
    #[arg(
        long,
        default_value = "130.211.0.0/22,209.85.152.0/22,209.85.204.0/22,35.191.0.0/16"
    )]
    #[arg(help_heading = "Cloud provider")]
    pub cloud_provider_gce_lb_src_cidrs: String,
    /// GCE: L7 LB source CIDRs.
    #[arg(long, default_value = "130.211.0.0/22,35.191.0.0/16")]
    #[arg(help_heading = "Cloud provider")]
    pub cloud_provider_gce_l7lb_src_cidrs: String,

    // ---- Scale-up ----
    /// Type of resource estimator to be used in scale up (binpacking).
    #[arg(long, default_value = "binpacking")]
    #[arg(help_heading = "Scale-up")]
    pub estimator: String,
    /// Node group expanders, comma-separated, applied in order.
    #[arg(long, default_value = "least-waste")]
    #[arg(help_heading = "Scale-up")]
    pub expander: String,
    /// URL to reach the gRPC expander server.
    #[arg(long, default_value = "")]
    #[arg(help_heading = "Scale-up")]
    pub grpc_expander_url: String,
    /// Path to the gRPC expander server's TLS cert.
    #[arg(long, default_value = "")]
    #[arg(help_heading = "Scale-up")]
    pub grpc_expander_cert: String,
    /// Pods with priority below cutoff are expendable.
    #[arg(long, default_value_t = -10, allow_negative_numbers = true)]
    #[arg(help_heading = "Scale-up")]
    pub expendable_pods_priority_cutoff: i32,
    /// Pods less than this old will not be considered for scale-up.
    #[arg(long, default_value = "0s", value_parser = duration)]
    #[arg(help_heading = "Scale-up")]
    pub new_pod_scale_up_delay: Duration,
    /// Enables graceful degradation for unschedulable pods.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-up")]
    pub enable_graceful_degradation: bool,
    /// Maximum time checking which pending pods fit.
    #[arg(long, default_value = "4m0s", value_parser = duration)]
    #[arg(help_heading = "Scale-up")]
    pub pending_pods_batching_timeout: Duration,
    /// Names of schedulers to bypass (comma-separated).
    #[arg(long, value_delimiter = ',')]
    #[arg(help_heading = "Scale-up")]
    pub bypassed_scheduler_names: Vec<String>,
    /// Only pods of these schedulers are considered (comma-separated).
    #[arg(long, value_delimiter = ',')]
    #[arg(help_heading = "Scale-up")]
    pub allowed_scheduler_names: Vec<String>,
    /// Max nodes added in a single scale-up.
    #[arg(long, default_value_t = 1000)]
    #[arg(help_heading = "Scale-up")]
    pub max_nodes_per_scaleup: usize,
    /// Maximum time spent in binpacking simulation for each node group.
    #[arg(long, default_value = "10s", value_parser = duration)]
    #[arg(help_heading = "Scale-up")]
    pub max_nodegroup_binpacking_duration: Duration,
    /// Maximum time spent on binpacking for a single scale-up.
    #[arg(long, default_value = "5m0s", value_parser = duration)]
    #[arg(help_heading = "Scale-up")]
    pub max_binpacking_time: Duration,
    /// Closed-form binpacking for the last equivalence group.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-up")]
    pub fastpath_binpacking_enabled: bool,
    /// Detect similar node groups and balance the number of nodes between them.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-up")]
    pub balance_similar_node_groups: bool,
    /// A label to ignore when comparing node groups (repeatable).
    #[arg(long, action = clap::ArgAction::Append)]
    #[arg(help_heading = "Scale-up")]
    pub balancing_ignore_label: Vec<String>,
    /// A label that alone decides node group similarity (repeatable).
    #[arg(long, action = clap::ArgAction::Append)]
    #[arg(help_heading = "Scale-up")]
    pub balancing_label: Vec<String>,
    /// Maximum memory capacity difference ratio between similar node groups.
    #[arg(long, default_value_t = 0.015, value_parser = ratio)]
    #[arg(help_heading = "Scale-up")]
    pub memory_difference_ratio: f64,
    /// Maximum free resources difference ratio between similar node groups.
    #[arg(long, default_value_t = 0.05, value_parser = ratio)]
    #[arg(help_heading = "Scale-up")]
    pub max_free_difference_ratio: f64,
    /// Maximum allocatable difference ratio between similar node groups.
    #[arg(long, default_value_t = 0.05, value_parser = ratio)]
    #[arg(help_heading = "Scale-up")]
    pub max_allocatable_difference_ratio: f64,
    /// The default maximum time CA waits for node to be provisioned.
    #[arg(long, default_value = "15m0s", value_parser = duration)]
    #[arg(help_heading = "Scale-up")]
    pub max_node_provision_time: Duration,
    /// The default maximum time a registered node may take to become ready.
    #[arg(long, default_value = "15m0s", value_parser = duration)]
    #[arg(help_heading = "Scale-up")]
    pub max_node_startup_time: Duration,
    /// Duration of the first backoff after a node group failed to scale up.
    #[arg(long, default_value = "5m0s", value_parser = duration)]
    #[arg(help_heading = "Scale-up")]
    pub initial_node_group_backoff_duration: Duration,
    /// Maximum backoff duration for a node group.
    #[arg(long, default_value = "30m0s", value_parser = duration)]
    #[arg(help_heading = "Scale-up")]
    pub max_node_group_backoff_duration: Duration,
    /// Time after the last failed scale-up when the backoff duration is reset.
    #[arg(long, default_value = "3h0m0s", value_parser = duration)]
    #[arg(help_heading = "Scale-up")]
    pub node_group_backoff_reset_timeout: Duration,
    /// Should CA scale up the node group to the configured min size if needed.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-up")]
    pub enforce_node_group_min_size: bool,
    /// Whether to allow parallel node group scale-ups.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-up")]
    pub parallel_scale_up: bool,
    /// Several scale-ups per loop.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-up")]
    pub salvo_scale_up: bool,
    /// Time budget of salvo scale-ups.
    #[arg(long, default_value = "1m0s", value_parser = duration)]
    #[arg(help_heading = "Scale-up")]
    pub salvo_scale_up_budget: Duration,
    /// Also simulate skipped node groups to enrich NotTriggerScaleUp reasons.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-up")]
    pub scaleup_simulation_for_skipped_node_groups_enabled: bool,
    /// Whether to enable proactive scale-ups.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-up")]
    pub enable_proactive_scaleup: bool,
    /// Limits total number of pods while injecting fake pods.
    #[arg(long, default_value_t = 5000)]
    #[arg(help_heading = "Scale-up")]
    pub pod_injection_limit: usize,
    /// Predicate checking parallelism.
    #[arg(long, default_value_t = 4)]
    #[arg(help_heading = "Scale-up")]
    pub predicate_parallelism: usize,
    /// Deprecated, unused.
    #[arg(long, default_value_t = 16)]
    #[arg(help_heading = "Scale-up")]
    pub cluster_snapshot_parallelism: usize,
    /// KubeSchedulerConfiguration for the in-tree plugins.
    #[arg(long, default_value = "")]
    #[arg(help_heading = "Scale-up")]
    pub scheduler_config_file: String,
    /// Log verbosity of the embedded scheduler.
    #[arg(long, default_value_t = 0)]
    #[arg(help_heading = "Scale-up")]
    pub scheduler_verbosity: u32,
    /// Inter-pod affinity hostname fast path.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-up")]
    pub enable_inter_pod_affinity_hostname_fast_path: bool,
    /// CapacityBuffer controller.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-up")]
    pub capacity_buffer_controller_enabled: bool,
    /// CapacityBuffer pod injection.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-up")]
    pub capacity_buffer_pod_injection_enabled: bool,
    /// CapacityBuffer dry run.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-up")]
    pub capacity_buffer_pod_dry_run_enabled: bool,

    // ---- Scale-down ----
    /// Should CA scale down the cluster.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-down")]
    pub scale_down_enabled: bool,
    /// How long after scale up that scale down evaluation resumes.
    #[arg(long, default_value = "10m0s", value_parser = duration)]
    #[arg(help_heading = "Scale-down")]
    pub scale_down_delay_after_add: Duration,
    /// How long after node deletion that scale down evaluation resumes.
    #[arg(long, default_value = "0s", value_parser = duration)]
    #[arg(help_heading = "Scale-down")]
    pub scale_down_delay_after_delete: Duration,
    /// How long after scale down failure that scale down evaluation resumes.
    #[arg(long, default_value = "3m0s", value_parser = duration)]
    #[arg(help_heading = "Scale-down")]
    pub scale_down_delay_after_failure: Duration,
    /// Apply the --scale-down-delay-after-* flags per node group.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-down")]
    pub scale_down_delay_type_local: bool,
    /// How long a node should be unneeded before it is eligible for scale down.
    #[arg(long, default_value = "10m0s", value_parser = duration)]
    #[arg(help_heading = "Scale-down")]
    pub scale_down_unneeded_time: Duration,
    /// How long an unready node should be unneeded before it is eligible for scale down.
    #[arg(long, default_value = "20m0s", value_parser = duration)]
    #[arg(help_heading = "Scale-down")]
    pub scale_down_unready_time: Duration,
    /// Should CA scale down unready nodes of the cluster.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-down")]
    pub scale_down_unready_enabled: bool,
    /// Utilization (max of cpu and memory requests over allocatable) below which a node can be removed.
    #[arg(long, default_value_t = 0.5, value_parser = ratio)]
    #[arg(help_heading = "Scale-down")]
    pub scale_down_utilization_threshold: f64,
    /// GPU utilization below which a GPU node can be removed.
    #[arg(long, default_value_t = 0.5, value_parser = ratio)]
    #[arg(help_heading = "Scale-down")]
    pub scale_down_gpu_utilization_threshold: f64,
    /// Ignore DaemonSet pods when calculating utilization.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-down")]
    pub ignore_daemonsets_utilization: bool,
    /// Ignore mirror pods when calculating utilization.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-down")]
    pub ignore_mirror_pods_utilization: bool,
    /// How long the scale down simulation may run.
    #[arg(long, default_value = "30s", value_parser = duration)]
    #[arg(help_heading = "Scale-down")]
    pub scale_down_simulation_timeout: Duration,
    /// Accepted; no effect (as upstream).
    #[arg(long, default_value_t = 30, allow_negative_numbers = true)]
    #[arg(help_heading = "Scale-down")]
    pub scale_down_non_empty_candidates_count: i64,
    /// Accepted; no effect (as upstream).
    #[arg(long, default_value_t = 0.1, value_parser = ratio)]
    #[arg(help_heading = "Scale-down")]
    pub scale_down_candidates_pool_ratio: f64,
    /// Accepted; no effect (as upstream).
    #[arg(long, default_value_t = 50)]
    #[arg(help_heading = "Scale-down")]
    pub scale_down_candidates_pool_min_count: usize,
    /// The timeout before we check again a node that couldn't be removed before.
    #[arg(long, default_value = "5m0s", value_parser = duration)]
    #[arg(help_heading = "Scale-down")]
    pub unremovable_node_recheck_timeout: Duration,
    /// Maximum number of nodes (empty or needing drain) deleted in parallel.
    #[arg(long, default_value_t = 10)]
    #[arg(help_heading = "Scale-down")]
    pub max_scale_down_parallelism: usize,
    /// Maximum number of nodes needing drain deleted in parallel.
    #[arg(long, default_value_t = 1)]
    #[arg(help_heading = "Scale-down")]
    pub max_drain_parallelism: usize,
    /// Maximum number of empty nodes deleted at the same time (deprecated).
    #[arg(long, default_value_t = 10)]
    #[arg(help_heading = "Scale-down")]
    pub max_empty_bulk_delete: usize,
    /// Maximum number of nodes tainted/untainted PreferNoSchedule per loop (0 turns soft taints off).
    #[arg(long, default_value_t = 10)]
    #[arg(help_heading = "Scale-down")]
    pub max_bulk_soft_taint_count: usize,
    /// Maximum duration of soft tainting per loop.
    #[arg(long, default_value = "3s", value_parser = duration)]
    #[arg(help_heading = "Scale-down")]
    pub max_bulk_soft_taint_time: Duration,
    /// Restore unneeded timers from soft taints younger than this.
    #[arg(long, default_value = "0s", value_parser = duration)]
    #[arg(help_heading = "Scale-down")]
    pub node_deletion_candidate_ttl: Duration,
    /// Never delete nodes with kube-system pods (except DaemonSet or mirror pods).
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-down")]
    pub skip_nodes_with_system_pods: bool,
    /// Age after which PDB-less kube-system pods stop blocking scale-down.
    #[arg(long, default_value = "1h0m0s", value_parser = duration)]
    #[arg(help_heading = "Scale-down")]
    pub blocking_system_pod_distruption_timeout: Duration,
    /// Never delete nodes with pods with local storage (EmptyDir, HostPath).
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-down")]
    pub skip_nodes_with_local_storage: bool,
    /// Never delete nodes with pods owned by custom controllers.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-down")]
    pub skip_nodes_with_custom_controller_pods: bool,
    /// Minimum replicas a ReplicaSet or ReplicationController must have to allow deleting its pods.
    #[arg(long, default_value_t = 0)]
    #[arg(help_heading = "Scale-down")]
    pub min_replica_count: i32,
    /// Maximum seconds CA waits for pod termination when scaling down a node.
    #[arg(long)]
    #[arg(help_heading = "Scale-down")]
    pub max_graceful_termination_sec: Option<i64>,
    /// Priority evictor: `priority:terminationGracePeriodSeconds` pairs, comma-separated.
    #[arg(long, default_value = "")]
    #[arg(help_heading = "Scale-down")]
    pub drain_priority_config: String,
    /// Maximum time CA tries to evict a pod before giving up.
    #[arg(long, default_value = "2m0s", value_parser = duration)]
    #[arg(help_heading = "Scale-down")]
    pub max_pod_eviction_time: Duration,
    /// DaemonSet pods are gracefully terminated from empty nodes.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-down")]
    pub daemonset_eviction_for_empty_nodes: bool,
    /// DaemonSet pods are gracefully terminated from non-empty nodes.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-down")]
    pub daemonset_eviction_for_occupied_nodes: bool,
    /// Cordon nodes before terminating them during scale-down.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-down")]
    pub cordon_node_before_terminating: bool,
    /// How long to wait before deleting a node after tainting it.
    #[arg(long, default_value = "5s", value_parser = duration)]
    #[arg(help_heading = "Scale-down")]
    pub node_delete_delay_after_taint: Duration,
    /// Adjust --node-delete-delay-after-taint to the API server latency.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-down")]
    pub dynamic_node_delete_delay_after_taint_enabled: bool,
    /// Maximum time to wait for delay-deletion annotations to be removed.
    #[arg(long, default_value = "2m0s", value_parser = duration)]
    #[arg(help_heading = "Scale-down")]
    pub node_deletion_delay_timeout: Duration,
    /// How long scale-down gathers nodes to delete them in a batch.
    #[arg(long, default_value = "0s", value_parser = duration)]
    #[arg(help_heading = "Scale-down")]
    pub node_deletion_batcher_interval: Duration,
    /// Track node removal latency.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-down")]
    pub node_removal_latency_tracking_enabled: bool,
    /// Track max node skip evaluation time.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Scale-down")]
    pub max_node_skip_eval_time_tracker_enabled: bool,

    // ---- ProvisioningRequests ----
    /// Handle ProvisioningRequest CRs.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "ProvisioningRequests")]
    pub enable_provisioning_requests: bool,
    /// Initial backoff of ProvisioningRequest retries.
    #[arg(long, default_value = "1m0s", value_parser = duration)]
    #[arg(help_heading = "ProvisioningRequests")]
    pub provisioning_request_initial_backoff_time: Duration,
    /// Maximum backoff of ProvisioningRequest retries.
    #[arg(long, default_value = "10m0s", value_parser = duration)]
    #[arg(help_heading = "ProvisioningRequests")]
    pub provisioning_request_max_backoff_time: Duration,
    /// ProvisioningRequest backoff cache size.
    #[arg(long, default_value_t = 1000)]
    #[arg(help_heading = "ProvisioningRequests")]
    pub provisioning_request_max_backoff_cache_size: usize,
    /// Batch processing of check-capacity requests.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "ProvisioningRequests")]
    pub check_capacity_batch_processing: bool,
    /// Maximum check-capacity requests per batch.
    #[arg(long, default_value_t = 10)]
    #[arg(help_heading = "ProvisioningRequests")]
    pub check_capacity_provisioning_request_max_batch_size: usize,
    /// Time box of a check-capacity batch.
    #[arg(long, default_value = "10s", value_parser = duration)]
    #[arg(help_heading = "ProvisioningRequests")]
    pub check_capacity_provisioning_request_batch_timebox: Duration,
    /// Check-capacity processor instance.
    #[arg(long, default_value = "")]
    #[arg(help_heading = "ProvisioningRequests")]
    pub check_capacity_processor_instance: String,

    // ---- Logging ----
    /// Log level verbosity.
    #[arg(long = "v", default_value_t = 0)]
    #[arg(help_heading = "Logging")]
    pub verbosity: u32,
    /// Per-file verbosity (accepted, text format only).
    #[arg(long, default_value = "")]
    #[arg(help_heading = "Logging")]
    pub vmodule: String,
    /// Log format: text or json.
    #[arg(long, default_value = "text")]
    #[arg(help_heading = "Logging")]
    pub logging_format: String,
    /// Log to standard error instead of files.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Logging")]
    pub logtostderr: bool,
    /// Log to standard error as well as files.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Logging")]
    pub alsologtostderr: bool,
    /// Log file (with --logtostderr=false).
    #[arg(long, default_value = "")]
    #[arg(help_heading = "Logging")]
    pub log_file: String,
    /// Log directory (with --logtostderr=false).
    #[arg(long, default_value = "")]
    #[arg(help_heading = "Logging")]
    pub log_dir: String,
    /// Maximum log file size in MB (accepted).
    #[arg(long, default_value_t = 1800)]
    #[arg(help_heading = "Logging")]
    pub log_file_max_size: u64,
    /// Log flush frequency (accepted).
    #[arg(long, default_value = "5s", value_parser = duration)]
    #[arg(help_heading = "Logging")]
    pub log_flush_frequency: Duration,
    /// klog: stack trace at file:N (accepted).
    #[arg(long, default_value = ":0")]
    #[arg(help_heading = "Logging")]
    pub log_backtrace_at: String,
    /// klog: add the file directory to the header (accepted).
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Logging")]
    pub add_dir_header: bool,
    /// klog: no header prefixes (accepted).
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Logging")]
    pub skip_headers: bool,
    /// klog: no headers in log files (accepted).
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Logging")]
    pub skip_log_headers: bool,
    /// klog: only native severity (accepted).
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Logging")]
    pub one_output: bool,
    /// klog: stderr threshold (accepted).
    #[arg(long, default_value = "2")]
    #[arg(help_heading = "Logging")]
    pub stderrthreshold: String,
    /// klog (accepted).
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Logging")]
    pub legacy_stderr_threshold_behavior: bool,
    /// Split JSON log streams (accepted).
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Logging")]
    pub log_json_split_stream: bool,
    /// JSON info buffer size (accepted).
    #[arg(long, default_value = "0")]
    #[arg(help_heading = "Logging")]
    pub log_json_info_buffer_size: String,
    /// Split text log streams (accepted).
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    #[arg(help_heading = "Logging")]
    pub log_text_split_stream: bool,
    /// Text info buffer size (accepted).
    #[arg(long, default_value = "0")]
    #[arg(help_heading = "Logging")]
    pub log_text_info_buffer_size: String,
}

impl Flags {
    /// Parses the process's arguments (Go-style spellings accepted).
    pub fn from_env() -> Result<Self, clap::Error> {
        Self::parse_args(std::env::args())
    }

    /// Parses `args` (the program name first; Go-style spellings accepted).
    /// `--help` prints [`help::render`]'s text.
    pub fn parse_args<I: IntoIterator<Item = String>>(args: I) -> Result<Self, clap::Error> {
        let matches = Self::command_with_help().try_get_matches_from(normalize_args(args))?;
        Self::from_arg_matches(&matches)
    }

    /// clap's command with the texts made at run time: the provider list
    /// in `--cloud-provider`'s help, and the whole `--help` text.
    pub fn command_with_help() -> clap::Command {
        let mut cmd =
            Self::command().mut_arg("cloud_provider", |a| a.help(ProviderName::flag_help()));
        // Adds clap's own --help and --version, so that the help lists them.
        cmd.build();
        let text = help::render(&cmd, help::output_width());
        cmd.override_help(text)
    }

    /// The flags with every default value.
    pub fn default_values() -> Self {
        // Parsing no arguments cannot fail: every flag has a default.
        Self::try_parse_from(["cluster-autoscaler"])
            .unwrap_or_else(|e| panic!("the flag defaults do not parse: {e}"))
    }
}
