//! [`Quota`]: one limit scale-up enforces, and what a node counts for in it.

use std::collections::BTreeMap;
use std::sync::Arc;

use apimachinery::labels::{LabelSelector, SelectorError};
use k8s_openapi::api::core::v1::Node;

use super::types::CapacityQuota;

/// The resource name of a node count.
pub const NODES: &str = "nodes";

/// Why a CapacityQuota is not valid.
#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    /// The selector does not go through JSON.
    #[error("{source}")]
    Encode {
        /// The CapacityQuota.
        quota: String,
        /// The serializer's error.
        source: serde_json::Error,
    },
    /// The selector does not parse (upstream's validation text).
    #[error("spec.selector: Invalid value: {value}: {source}")]
    Selector {
        /// The CapacityQuota.
        quota: String,
        /// The selector, as JSON.
        value: serde_json::Value,
        /// The parser's error.
        source: SelectorError,
    },
}

/// One quota scale-up enforces.
#[derive(Debug, Clone)]
pub struct Quota {
    /// `cluster-wide` or `CapacityQuota/<name>`.
    pub id: String,
    /// The nodes it covers.
    pub selector: LabelSelector,
    /// Resource → the most the covered nodes may have (cores for `cpu`,
    /// bytes for `memory`, a count for `nodes`).
    pub limits: BTreeMap<String, i64>,
}

impl Quota {
    /// The quota a CapacityQuota sets, or why it is not valid (upstream's
    /// validation: the selector).
    pub fn from_capacity_quota(q: &CapacityQuota) -> Result<Self, QuotaError> {
        let selector = match &q.spec.selector {
            None => LabelSelector::everything(),
            Some(s) => {
                let v = serde_json::to_value(s).map_err(|source| QuotaError::Encode {
                    quota: q.name().to_string(),
                    source,
                })?;
                LabelSelector::from_value(Some(&v)).map_err(|source| QuotaError::Selector {
                    quota: q.name().to_string(),
                    value: v.clone(),
                    source,
                })?
            }
        };
        let limits = q
            .spec
            .limits
            .resources
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    predicates::quantity::parse_value(&v.0).unwrap_or(0),
                )
            })
            .collect();
        Ok(Self {
            id: format!("CapacityQuota/{}", q.name()),
            selector,
            limits,
        })
    }

    /// Whether the quota covers a node of these labels.
    pub fn applies_to(&self, node: &Node) -> bool {
        self.selector.matches(apimachinery::labels::labels_of(
            node.metadata.labels.as_ref(),
        ))
    }

    /// What `nodes` it covers have of each resource it limits.
    pub fn usage(&self, nodes: &[Arc<Node>]) -> BTreeMap<String, i64> {
        let mut used: BTreeMap<String, i64> = self.limits.keys().map(|k| (k.clone(), 0)).collect();
        for n in nodes.iter().filter(|n| self.applies_to(n)) {
            let per = node_resources(n);
            for (k, v) in used.iter_mut() {
                *v += per.get(k).copied().unwrap_or(0);
            }
        }
        used
    }
}

/// What one node counts for in a quota: `cpu` in cores (rounded up),
/// `memory` in bytes, `nodes` 1, any other resource its capacity.
pub fn node_resources(node: &Node) -> BTreeMap<String, i64> {
    let cap = node.status.as_ref().and_then(|s| s.capacity.as_ref());
    let mut out = BTreeMap::from([(NODES.to_string(), 1)]);
    for (k, q) in cap.into_iter().flatten() {
        let v = match k.as_str() {
            "cpu" => predicates::quantity::parse_milli(&q.0).map(|m| (m + 999) / 1000),
            _ => predicates::quantity::parse_value(&q.0),
        };
        out.insert(k.clone(), v.unwrap_or(0));
    }
    out
}
