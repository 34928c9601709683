//! What clap cannot check alone: node group specs, min:max pairs, the
//! expander chain, drain priorities, the address. Every error names its
//! flag and is reported before anything starts.

use super::flags::Flags;

/// A static node group from `--nodes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeGroupSpec {
    /// Minimum size.
    pub min: usize,
    /// Maximum size.
    pub max: usize,
    /// Provider-specific name.
    pub name: String,
}

/// `<min>:<max>` limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinMax {
    /// Minimum.
    pub min: i64,
    /// Maximum.
    pub max: i64,
}

/// `--gpu-total` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuLimit {
    /// GPU type.
    pub gpu_type: String,
    /// Limits.
    pub limits: MinMax,
}

/// An expander name (docs/reference/ca-rules.md §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpanderName {
    /// `random`.
    Random,
    /// `most-pods`.
    MostPods,
    /// `least-waste`.
    LeastWaste,
    /// `least-nodes`.
    LeastNodes,
    /// `price`.
    Price,
    /// `priority`.
    Priority,
    /// `grpc`.
    Grpc,
}

impl ExpanderName {
    /// The flag spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Random => "random",
            Self::MostPods => "most-pods",
            Self::LeastWaste => "least-waste",
            Self::LeastNodes => "least-nodes",
            Self::Price => "price",
            Self::Priority => "priority",
            Self::Grpc => "grpc",
        }
    }
}

/// A `--drain-priority-config` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainPriority {
    /// Pods with at least this priority...
    pub priority: i32,
    /// ...get this grace period (seconds).
    pub grace_seconds: i64,
}

/// A bad flag value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid value for --{flag}: {message}")]
pub struct FlagError {
    /// The flag, without dashes.
    pub flag: &'static str,
    /// What is wrong.
    pub message: String,
}

fn err(flag: &'static str, message: impl Into<String>) -> FlagError {
    FlagError {
        flag,
        message: message.into(),
    }
}

/// The flags after validation, in typed form.
#[derive(Debug, Clone)]
pub struct Validated {
    /// Static node groups.
    pub node_groups: Vec<NodeGroupSpec>,
    /// `--cores-total`.
    pub cores_total: MinMax,
    /// `--memory-total` in GiB.
    pub memory_total: MinMax,
    /// `--gpu-total`.
    pub gpu_total: Vec<GpuLimit>,
    /// `--expander`, in order.
    pub expanders: Vec<ExpanderName>,
    /// `--drain-priority-config`, sorted by priority ascending; empty when unset.
    pub drain_priorities: Vec<DrainPriority>,
    /// `--max-graceful-termination-sec` (600 unless set).
    pub max_graceful_termination_sec: i64,
    /// The listen address as `host:port` (an empty host means all interfaces).
    pub address: std::net::SocketAddr,
    /// `--scheduler-config-file`: the filter plugins its profile runs
    /// (all without the flag).
    pub filter_plugins: predicates::FilterPlugins,
}

fn min_max(flag: &'static str, value: &str) -> Result<MinMax, FlagError> {
    let (a, b) = value
        .split_once(':')
        .ok_or_else(|| err(flag, format!("{value:?} is not <min>:<max>")))?;
    let parse = |s: &str, what: &str| {
        s.trim()
            .parse::<i64>()
            .map_err(|_| err(flag, format!("{what} {s:?} in {value:?} is not an integer")))
    };
    let (min, max) = (parse(a, "min")?, parse(b, "max")?);
    if min < 0 || max < min {
        return Err(err(
            flag,
            format!("{value:?}: want 0 <= min <= max, got min {min} and max {max}"),
        ));
    }
    Ok(MinMax { min, max })
}

/// Parses one `--nodes` value: `<min>:<max>:<name>`, split into at most
/// three tokens so names may contain `:`.
pub fn parse_node_group_spec(value: &str) -> Result<NodeGroupSpec, FlagError> {
    let mut parts = value.splitn(3, ':');
    let (Some(min), Some(max), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(err("nodes", format!("{value:?} is not <min>:<max>:<name>")));
    };
    let num = |s: &str, what: &str| {
        s.parse::<usize>().map_err(|_| {
            err(
                "nodes",
                format!("{what} {s:?} in {value:?} is not a non-negative integer"),
            )
        })
    };
    let (min, max) = (num(min, "min")?, num(max, "max")?);
    if max < min {
        return Err(err(
            "nodes",
            format!("{value:?}: max {max} is below min {min}"),
        ));
    }
    if name.is_empty() {
        return Err(err(
            "nodes",
            format!("{value:?}: the node group name is empty"),
        ));
    }
    Ok(NodeGroupSpec {
        min,
        max,
        name: name.to_string(),
    })
}

/// Parses `--expander` with upstream's rules: known names, each at most
/// once, `random` (which always returns one option) only last.
pub fn parse_expanders(value: &str) -> Result<Vec<ExpanderName>, FlagError> {
    let mut out: Vec<ExpanderName> = Vec::new();
    for name in value.split(',').map(str::trim) {
        let e = match name {
            "random" => ExpanderName::Random,
            "most-pods" => ExpanderName::MostPods,
            "least-waste" => ExpanderName::LeastWaste,
            "least-nodes" => ExpanderName::LeastNodes,
            "price" => ExpanderName::Price,
            "priority" => ExpanderName::Priority,
            "grpc" => ExpanderName::Grpc,
            other => return Err(err("expander", format!("Expander {other} not supported"))),
        };
        if out.contains(&e) {
            return Err(err(
                "expander",
                format!(
                    "Expander {name} was specified multiple times, each expander must not be specified more than once"
                ),
            ));
        }
        if let Some(prev) = out.last().filter(|p| **p == ExpanderName::Random) {
            return Err(err(
                "expander",
                format!(
                    "Expander {name} came after an expander {} that will always return only one result, this is not allowed since {name} will never be used",
                    prev.as_str()
                ),
            ));
        }
        out.push(e);
    }
    Ok(out)
}

fn parse_drain_priorities(value: &str) -> Result<Vec<DrainPriority>, FlagError> {
    let mut out = Vec::new();
    for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (p, g) = pair.split_once(':').ok_or_else(|| {
            err(
                "drain-priority-config",
                format!("{pair:?} is not <priority>:<terminationGracePeriodSeconds>"),
            )
        })?;
        let priority = p.trim().parse::<i32>().map_err(|_| {
            err(
                "drain-priority-config",
                format!("priority {p:?} in {pair:?} is not an integer"),
            )
        })?;
        let grace_seconds = g.trim().parse::<i64>().map_err(|_| {
            err(
                "drain-priority-config",
                format!("grace period {g:?} in {pair:?} is not an integer"),
            )
        })?;
        if out.iter().any(|d: &DrainPriority| d.priority == priority) {
            return Err(err(
                "drain-priority-config",
                format!("priority {priority} appears twice"),
            ));
        }
        out.push(DrainPriority {
            priority,
            grace_seconds,
        });
    }
    out.sort_by_key(|d| d.priority);
    Ok(out)
}

fn parse_address(value: &str) -> Result<std::net::SocketAddr, FlagError> {
    let full = if value.starts_with(':') {
        format!("0.0.0.0{value}")
    } else {
        value.to_string()
    };
    full.parse().map_err(|_| {
        err(
            "address",
            format!("{value:?} is not <host>:<port> or :<port>"),
        )
    })
}

impl Flags {
    /// Checks every value that clap cannot check alone.
    pub fn validate(&self) -> Result<Validated, FlagError> {
        let node_groups = self
            .nodes
            .iter()
            .map(|n| parse_node_group_spec(n))
            .collect::<Result<Vec<_>, _>>()?;
        let mut gpu_total = Vec::new();
        for g in &self.gpu_total {
            let (t, rest) = g
                .split_once(':')
                .ok_or_else(|| err("gpu-total", format!("{g:?} is not <gpu_type>:<min>:<max>")))?;
            if t.is_empty() {
                return Err(err("gpu-total", format!("{g:?}: the GPU type is empty")));
            }
            gpu_total.push(GpuLimit {
                gpu_type: t.to_string(),
                limits: min_max("gpu-total", rest)?,
            });
        }
        let drain_priorities = parse_drain_priorities(&self.drain_priority_config)?;
        if !drain_priorities.is_empty() && self.max_graceful_termination_sec.is_some() {
            return Err(err(
                "drain-priority-config",
                "cannot be used together with --max-graceful-termination-sec",
            ));
        }
        if self.estimator != "binpacking" {
            return Err(err(
                "estimator",
                format!(
                    "{:?} is not supported (available: binpacking)",
                    self.estimator
                ),
            ));
        }
        if !self.balancing_label.is_empty() && !self.balancing_ignore_label.is_empty() {
            return Err(err(
                "balancing-label",
                "cannot be combined with --balancing-ignore-label",
            ));
        }
        if !self.allowed_scheduler_names.is_empty()
            && let Some(b) = self
                .bypassed_scheduler_names
                .iter()
                .find(|b| !self.allowed_scheduler_names.contains(b))
        {
            return Err(err(
                "bypassed-scheduler-names",
                format!("scheduler {b:?} is bypassed but not in --allowed-scheduler-names"),
            ));
        }
        if self.max_total_unready_percentage > 100.0 {
            return Err(err(
                "max-total-unready-percentage",
                format!("{} is above 100", self.max_total_unready_percentage),
            ));
        }
        if self.scale_down_utilization_threshold > 1.0 {
            return Err(err(
                "scale-down-utilization-threshold",
                format!("{} is above 1", self.scale_down_utilization_threshold),
            ));
        }
        if self.scale_down_gpu_utilization_threshold > 1.0 {
            return Err(err(
                "scale-down-gpu-utilization-threshold",
                format!("{} is above 1", self.scale_down_gpu_utilization_threshold),
            ));
        }
        if !self.enable_dynamic_resource_allocation {
            // Upstream 1.35+: `--enable-dynamic-resource-allocation flag
            // must be true: false`, fatal.
            return Err(err(
                "enable-dynamic-resource-allocation",
                "flag must be true: false",
            ));
        }
        if self.scan_interval.is_zero() {
            return Err(err("scan-interval", "must be above 0s"));
        }
        if self.max_scale_down_parallelism == 0 {
            return Err(err("max-scale-down-parallelism", "must be at least 1"));
        }
        if self.predicate_parallelism == 0 {
            return Err(err("predicate-parallelism", "must be at least 1"));
        }
        if !matches!(self.logging_format.as_str(), "text" | "json") {
            return Err(err(
                "logging-format",
                format!("{:?} is not text or json", self.logging_format),
            ));
        }
        if self.leader_elect_resource_lock != "leases" {
            return Err(err(
                "leader-elect-resource-lock",
                format!(
                    "{:?} is not supported (only leases)",
                    self.leader_elect_resource_lock
                ),
            ));
        }
        Ok(Validated {
            node_groups,
            cores_total: min_max("cores-total", &self.cores_total)?,
            memory_total: min_max("memory-total", &self.memory_total)?,
            gpu_total,
            expanders: parse_expanders(&self.expander)?,
            drain_priorities,
            max_graceful_termination_sec: self.max_graceful_termination_sec.unwrap_or(600),
            address: parse_address(&self.address)?,
            filter_plugins: if self.scheduler_config_file.is_empty() {
                predicates::FilterPlugins::default()
            } else {
                super::scheduler::from_path(&self.scheduler_config_file)
                    .map_err(|e| err("scheduler-config-file", e.to_string()))?
            },
        })
    }
}
