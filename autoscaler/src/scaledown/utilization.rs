//! How a node's utilization is computed (docs/reference/ca-rules.md §3.3, upstream's
//! `simulator/utilization`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use predicates::{DraObjects, NodeInfo};

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
    /// A claim of a pod on the node is not allocated.
    #[error("claim {claim} not allocated")]
    ClaimNotAllocated {
        /// The claim's `namespace/name`.
        claim: String,
    },
    /// A pool of the node's devices misses slices of its newest generation.
    #[error(
        "pool {pool:?} error: newest generation: {generation}, slice count: {expected} - found only {found} slices"
    )]
    IncompletePool {
        /// The pool.
        pool: String,
        /// Its newest generation.
        generation: i64,
        /// The slices it should have.
        expected: i64,
        /// The slices it has.
        found: usize,
    },
}

/// A node's utilization (docs/reference/ca-rules.md §3.3).
#[derive(Debug, Clone, PartialEq)]
pub struct Utilization {
    /// CPU fraction.
    pub cpu: f64,
    /// Memory fraction.
    pub memory: f64,
    /// GPU fraction (GPU nodes).
    pub gpu: f64,
    /// Devices fraction (nodes with ResourceSlices).
    pub dra: f64,
    /// `cpu`, `memory`, the GPU resource or the busiest device pool
    /// (`<driver>/<pool>`).
    pub resource: String,
    /// The deciding value.
    pub utilization: f64,
}

impl std::fmt::Display for Utilization {
    /// Go's `%v` of upstream's record: `{cpu mem gpu dra resource util}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{{{} {} {} {} {} {}}}",
            self.cpu, self.memory, self.gpu, self.dra, self.resource, self.utilization
        )
    }
}

/// Utilization of a node: requests of its pods over allocatable, per
/// resource; DaemonSet and mirror pods excluded (and their requests taken
/// off allocatable) when the flags say so; long-terminating pods skipped.
/// A GPU node's is its GPUs'; a node with ResourceSlices, its devices'
/// ([`dra_utilization`]).
pub fn utilization(
    node: &NodeInfo,
    ignore_ds: bool,
    ignore_mirror: bool,
    gpu_resource: Option<&str>,
    dra: &DraObjects,
    now: SystemTime,
) -> Result<Utilization, UtilizationError> {
    if gpu_resource.is_none() && !node.slices.is_empty() {
        return dra_utilization(node, dra);
    }
    let mut used = predicates::resources::Resources::default();
    let mut excluded = predicates::resources::Resources::default();
    if node.terminating_pods == 0 && !ignore_ds && !ignore_mirror {
        // Every pod counts: the node's requests are their sum.
        used = node.requested.clone();
    } else {
        for p in node.pods.iter() {
            if is_long_terminating(&p.pod, now) {
                continue;
            }
            if (ignore_ds && is_daemonset_pod(&p.pod)) || (ignore_mirror && is_mirror_pod(&p.pod)) {
                excluded.add(&p.requests);
            } else {
                used.add(&p.requests);
            }
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
            dra: 0.0,
            resource: "gpu".into(),
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
        dra: 0.0,
        resource: resource.into(),
        utilization,
    })
}

/// A device pool of a node, in its newest generation.
struct Pool<'a> {
    generation: i64,
    /// The slices it should have.
    expected: i64,
    /// The slices it has.
    found: usize,
    devices: Vec<&'a str>,
}

/// A node with ResourceSlices (upstream's DRA utilization, every pod
/// counted): for each pool of its newest generation, the devices its pods'
/// claims hold over the pool's devices; the busiest pool decides, named
/// `<driver>/<pool>`. A pool missing slices, or a pod's claim not
/// allocated, is an error (the node is not removable).
pub fn dra_utilization(node: &NodeInfo, dra: &DraObjects) -> Result<Utilization, UtilizationError> {
    // driver → pool → devices held.
    let mut held: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for p in node.pods.iter() {
        let Ok(claims) = predicates::dynamicresources::pod_claims(&p.pod) else {
            continue;
        };
        for c in claims {
            if !seen.insert(c.key.clone()) {
                continue;
            }
            let Some(claim) = dra.claims.get(&c.key) else {
                continue;
            };
            let allocation = claim.status.allocation.as_ref().ok_or_else(|| {
                UtilizationError::ClaimNotAllocated {
                    claim: c.key.clone(),
                }
            })?;
            for r in &allocation.devices.results {
                held.entry((r.driver.as_str(), r.pool.as_str()))
                    .or_default()
                    .insert(r.device.as_str());
            }
        }
    }
    let mut pools: BTreeMap<(&str, &str), Pool<'_>> = BTreeMap::new();
    for s in &node.slices {
        let p = &s.spec.pool;
        let fresh = || Pool {
            generation: p.generation,
            expected: p.resource_slice_count,
            found: 0,
            devices: Vec::new(),
        };
        let e = pools
            .entry((s.spec.driver.as_str(), p.name.as_str()))
            .or_insert_with(fresh);
        if p.generation > e.generation {
            *e = fresh();
        }
        if p.generation == e.generation {
            e.found += 1;
            e.devices
                .extend(s.spec.devices.iter().map(|d| d.name.as_str()));
        }
    }
    let mut best: Option<(f64, String)> = None;
    for ((driver, pool), p) in pools {
        let Pool {
            generation,
            expected,
            found,
            devices,
        } = p;
        if usize::try_from(expected).ok() != Some(found) {
            return Err(UtilizationError::IncompletePool {
                pool: pool.to_string(),
                generation,
                expected,
                found,
            });
        }
        let taken = held.get(&(driver, pool));
        let used = devices
            .iter()
            .filter(|d| taken.is_some_and(|t| t.contains(*d)))
            .count();
        let u = if devices.is_empty() {
            0.0
        } else {
            used as f64 / devices.len() as f64
        };
        if best.as_ref().is_none_or(|(b, _)| u >= *b) {
            best = Some((u, format!("{driver}/{pool}")));
        }
    }
    let (u, resource) = best.unwrap_or((0.0, String::new()));
    Ok(Utilization {
        cpu: 0.0,
        memory: 0.0,
        gpu: 0.0,
        dra: u,
        resource,
        utilization: u,
    })
}
