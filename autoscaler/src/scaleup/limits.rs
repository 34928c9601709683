//! Resource limits on scale-up (upstream's `resourcequotas` tracker as
//! `core/scaleup` uses it): the cluster-wide one (`--max-nodes-total`,
//! `--cores-total`, `--memory-total`) and, with `--capacity-quotas-enabled`,
//! each valid CapacityQuota on the nodes its selector matches. A group
//! whose template node does not fit even once is skipped with one reason
//! per exceeded quota (`exceeded quota: "CapacityQuota/gpu", resources:
//! nodes`); otherwise its increase is cut to what fits.

use std::collections::BTreeMap;

use predicates::NodeInfo;

use crate::resourcequotas::{Quota, node_resources};

/// The limits of one scale-up.
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
    /// The CapacityQuotas, each with what is left under it.
    pub quotas: Vec<QuotaLeft>,
}

/// A quota and what is left under it.
#[derive(Debug, Clone)]
pub struct QuotaLeft {
    /// The quota.
    pub quota: Quota,
    /// Resource → how much more the covered nodes may have (never negative).
    pub left: BTreeMap<String, i64>,
}

impl QuotaLeft {
    /// What is left of `quota` with `usage` in use.
    pub fn new(quota: Quota, usage: &BTreeMap<String, i64>) -> Self {
        let left = quota
            .limits
            .iter()
            .map(|(k, limit)| {
                (
                    k.clone(),
                    (limit - usage.get(k).copied().unwrap_or(0)).max(0),
                )
            })
            .collect();
        Self { quota, left }
    }
}

/// The `skipped_scale_events_count` reason for a scale-up a resource
/// stopped (upstream counts cpu and memory only).
pub fn skipped_reason(resource: &str) -> Option<&'static str> {
    match resource {
        "cpu" => Some("CpuResourceLimit"),
        "memory" => Some("MemoryResourceLimit"),
        _ => None,
    }
}

/// One quota a node would exceed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExceededQuota {
    /// `cluster-wide` or `CapacityQuota/<name>`.
    pub id: String,
    /// The exceeded resources (cpu, memory, then by name).
    pub resources: Vec<String>,
}

impl std::fmt::Display for ExceededQuota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exceeded quota: {:?}, resources: {}",
            self.id,
            self.resources.join(", ")
        )
    }
}

/// Not even one node of a group fits under the limits: every quota that
/// stops it (each a reason of its own, as upstream's
/// `MaxResourceLimitReached`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitExceeded {
    /// The exceeded quotas, cluster-wide first.
    pub quotas: Vec<ExceededQuota>,
}

impl LimitExceeded {
    /// One reason per exceeded quota.
    pub fn reasons(&self) -> Vec<String> {
        self.quotas.iter().map(ToString::to_string).collect()
    }

    /// Every exceeded resource (a resource once).
    pub fn resources(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for r in self.quotas.iter().flat_map(|q| &q.resources) {
            if !out.contains(&r.as_str()) {
                out.push(r);
            }
        }
        out
    }
}

impl std::fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reasons().join("; "))
    }
}

/// The order resources are named in: cpu, memory, nodes, then by name.
fn resource_order(r: &str) -> (u8, &str) {
    match r {
        "cpu" => (0, r),
        "memory" => (1, r),
        "nodes" => (2, r),
        _ => (3, r),
    }
}

impl Limits {
    /// How many nodes of this shape fit under every limit; the error names
    /// the exceeded quotas when not even one does.
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
        let mut cluster_wide = Vec::new();
        for (resource, per_node, (max, now)) in [
            ("cpu", cores, self.cores),
            ("memory", res.memory, self.memory),
        ] {
            if per_node <= 0 {
                continue;
            }
            let n = usize::try_from((max - now).max(0) / per_node).unwrap_or(0);
            if n == 0 {
                cluster_wide.push(resource.to_string());
            }
            allowed = allowed.min(n);
        }
        if !cluster_wide.is_empty() {
            exceeded.push(ExceededQuota {
                id: "cluster-wide".into(),
                resources: cluster_wide,
            });
        }
        let (fit, over) = self.fit_in_quotas(template, &node_resources(&template.node));
        allowed = allowed.min(fit);
        exceeded.extend(over);
        if !exceeded.is_empty() {
            return Err(LimitExceeded { quotas: exceeded });
        }
        Ok(allowed)
    }

    /// Takes up to `n` nodes of this shape from the CapacityQuotas that
    /// cover it (upstream's `capScaleUpsByQuota`, for balanced groups that
    /// share a quota): how many it took.
    pub fn consume(&mut self, template: &NodeInfo, n: usize) -> usize {
        let per_node = node_resources(&template.node);
        let allowed = n.min(self.fit_in_quotas(template, &per_node).0);
        let taken = i64::try_from(allowed).unwrap_or(i64::MAX);
        for q in self
            .quotas
            .iter_mut()
            .filter(|q| q.quota.applies_to(&template.node))
        {
            for (resource, left) in q.left.iter_mut() {
                if let Some(&delta) = per_node.get(resource) {
                    *left = (*left - delta.saturating_mul(taken)).max(0);
                }
            }
        }
        allowed
    }

    /// How many nodes of this shape (`per_node` each) the CapacityQuotas
    /// covering it leave room for, and those that leave room for none.
    fn fit_in_quotas(
        &self,
        template: &NodeInfo,
        per_node: &BTreeMap<String, i64>,
    ) -> (usize, Vec<ExceededQuota>) {
        let mut allowed = usize::MAX;
        let mut exceeded = Vec::new();
        for q in self
            .quotas
            .iter()
            .filter(|q| q.quota.applies_to(&template.node))
        {
            let mut resources = Vec::new();
            for (resource, left) in &q.left {
                let Some(&delta) = per_node.get(resource).filter(|d| **d > 0) else {
                    continue;
                };
                let n = usize::try_from(left / delta).unwrap_or(0);
                if n == 0 {
                    resources.push(resource.clone());
                }
                allowed = allowed.min(n);
            }
            if !resources.is_empty() {
                resources.sort_by(|a, b| resource_order(a).cmp(&resource_order(b)));
                exceeded.push(ExceededQuota {
                    id: q.quota.id.clone(),
                    resources,
                });
            }
        }
        (allowed, exceeded)
    }
}
