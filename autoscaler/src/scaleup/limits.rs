//! Cluster-wide resource limits on scale-up (`--max-nodes-total`,
//! `--cores-total`, `--memory-total`; upstream's `core/scaleup/resource`).

use predicates::NodeInfo;

/// Cluster-wide limits (`--max-nodes-total`, `--cores-total`, `--memory-total`).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Max nodes (0: none).
    pub max_nodes_total: usize,
    /// Nodes in the snapshot (upcoming included).
    pub nodes_now: usize,
    /// Max cores and the cores now.
    pub cores: (i64, i64),
    /// Max memory bytes and the bytes now.
    pub memory: (i64, i64),
    /// `--max-nodes-per-scaleup`.
    pub max_nodes_per_scaleup: usize,
}

/// A cluster-wide resource the limits cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitedResource {
    /// `--cores-total`.
    Cpu,
    /// `--memory-total`.
    Memory,
}

impl LimitedResource {
    /// The resource name in CA's message.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Memory => "memory",
        }
    }

    /// The `skipped_scale_events_count` reason for a scale-up it stopped.
    pub fn skipped_reason(self) -> &'static str {
        match self {
            Self::Cpu => "CpuResourceLimit",
            Self::Memory => "MemoryResourceLimit",
        }
    }
}

/// Not even one node of a group fits under the cluster-wide limits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("exceeded quota: \"cluster-wide\", resources: {}", .resources.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(", "))]
pub struct LimitExceeded {
    /// The exceeded resources, cpu first.
    pub resources: Vec<LimitedResource>,
}

impl Limits {
    /// How many nodes of this shape fit under the cluster-wide limits;
    /// the error names the exceeded resources when not even one does.
    pub fn nodes_allowed(&self, template: &NodeInfo) -> Result<usize, LimitExceeded> {
        let cap = template
            .node
            .status
            .as_ref()
            .and_then(|s| s.capacity.as_ref());
        let res = predicates::resources::Resources::from_list(cap);
        let cores = (res.milli_cpu + 999) / 1000;
        let mut allowed = usize::MAX;
        let mut exceeded = Vec::new();
        for (resource, per_node, (max, now)) in [
            (LimitedResource::Cpu, cores, self.cores),
            (LimitedResource::Memory, res.memory, self.memory),
        ] {
            if per_node <= 0 {
                continue;
            }
            let n = usize::try_from((max - now).max(0) / per_node).unwrap_or(0);
            if n == 0 {
                exceeded.push(resource);
            }
            allowed = allowed.min(n);
        }
        if !exceeded.is_empty() {
            return Err(LimitExceeded {
                resources: exceeded,
            });
        }
        Ok(allowed)
    }
}
