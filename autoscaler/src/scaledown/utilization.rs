//! How a node's utilization is computed (docs/compat.md §3.3, upstream's
//! `simulator/utilization`).

use std::time::SystemTime;

use predicates::NodeInfo;

use crate::simulator::drainability::{is_daemonset_pod, is_long_terminating, is_mirror_pod};

/// A node's utilization cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UtilizationError {
    /// The node has no allocatable CPU or memory.
    #[error("node {node} has no allocatable resources")]
    NoAllocatable {
        /// The node.
        node: String,
    },
}

/// A node's utilization (docs/compat.md §3.3).
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
) -> Result<Utilization, UtilizationError> {
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
    let frac = |used: i64, alloc: i64, excl: i64| -> Result<f64, UtilizationError> {
        let base = alloc - excl;
        if alloc <= 0 {
            return Err(UtilizationError::NoAllocatable {
                node: node.name().to_string(),
            });
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
