//! Custom resources a new node must have before it counts as ready
//! (upstream's `processors/customresources`): GPUs are in [`crate::gpu`];
//! here DRA devices and CSI drivers. A node these rules find unready is
//! unready, reason `cluster-autoscaler.kubernetes.io/resource-not-ready`:
//! an upcoming node while its group's startup time lasts, so its pods wait
//! for it rather than trigger another scale-up.
//!
//! - DRA devices (`dra_processor.go`, DRA being locked on): a Ready node
//!   whose drivers have not published as many complete pools as its
//!   group's template has, per driver ([`dra_pools_ready`]). The template
//!   is the group's last-loop template (a copy of a ready node, or the
//!   provider's), else the provider's. The nodes let through are compared
//!   with their templates ([`NodeResourcesComparator`]).
//! - CSI drivers (`csi_processor.go`, with
//!   `--enable-csi-node-aware-scheduling`): a Ready node of a group whose
//!   provider template lists CSI drivers (Cluster API's `csi-driver`
//!   annotation) while its CSINode lacks one of them; a node with no
//!   CSINode yet is left ready, as upstream does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use predicates::CsiNode;
use predicates::dynamicresources::api::ResourceSlice;

use super::nodeinfosprovider::TemplateNodes;
use crate::cache::dra::DraCache;
use crate::cloudprovider::{CloudProvider, NodeGroup};
use crate::metrics::Metrics;
use crate::simulator::dynamicresources::comparator::{Compared, NodeResourcesComparator};

/// The number of complete pools of each driver among these slices
/// (upstream's `getCompleteResourcePools`): per driver and pool, the
/// slices of its newest generation, complete when there are as many as
/// the pool's `resourceSliceCount` (the first such slice's).
fn complete_pools(slices: &[Arc<ResourceSlice>]) -> BTreeMap<&str, usize> {
    // (driver, pool) -> (generation, slices seen, slices expected)
    let mut pools: BTreeMap<(&str, &str), (i64, i64, i64)> = BTreeMap::new();
    for s in slices {
        let pool = &s.spec.pool;
        let key = (s.spec.driver.as_str(), pool.name.as_str());
        let fresh = (pool.generation, 0, pool.resource_slice_count);
        let state = pools.entry(key).or_insert(fresh);
        if pool.generation > state.0 {
            *state = fresh;
        } else if pool.generation < state.0 {
            continue;
        }
        state.1 += 1;
    }
    let mut out = BTreeMap::new();
    for ((driver, _), (_, seen, expected)) in pools {
        if seen == expected {
            *out.entry(driver).or_default() += 1;
        }
    }
    out
}

/// Whether a node's devices are ready by its template's: for each driver
/// of the template, at least as many complete pools (pool names, devices
/// and extra drivers do not matter).
pub fn dra_pools_ready(node: &[Arc<ResourceSlice>], template: &[Arc<ResourceSlice>]) -> bool {
    let have = complete_pools(node);
    complete_pools(template)
        .into_iter()
        .all(|(driver, want)| have.get(driver).copied().unwrap_or(0) >= want)
}

/// The Ready nodes (`ready`) whose DRA devices are not all published yet
/// (see the module's documentation); the others are compared with their
/// templates, which sets the mismatch gauges.
pub fn dra_unready_nodes(
    provider: &dyn CloudProvider,
    ready: &[&Arc<Node>],
    (dra, templates): (&DraCache, &TemplateNodes),
    comparator: &mut NodeResourcesComparator,
    metrics: &Metrics,
) -> BTreeSet<String> {
    let mut provider_templates: BTreeMap<String, Vec<Arc<ResourceSlice>>> = BTreeMap::new();
    let mut template_of = |group: &dyn NodeGroup| -> Option<Vec<Arc<ResourceSlice>>> {
        let id = group.id();
        if let Some(t) = templates.last_slices(&id) {
            return Some(t.to_vec());
        }
        if let Some(t) = provider_templates.get(&id) {
            return Some(t.clone());
        }
        match group.template_node_info() {
            Ok(t) => {
                let slices: Vec<_> = t.slices.into_iter().map(Arc::new).collect();
                provider_templates.insert(id, slices.clone());
                Some(slices)
            }
            Err(e) => {
                tracing::warn!(
                    "Failed to get template node info for node group {id} with error: {e}"
                );
                None
            }
        }
    };
    let mut out = BTreeSet::new();
    // Without a node-local slice in the cluster or in any template, every
    // node's devices are ready and match its template's.
    if !dra.has_node_slices()
        && provider
            .node_groups()
            .iter()
            .all(|g| template_of(&**g).is_none_or(|t| t.is_empty()))
    {
        comparator.report(&[], metrics);
        return out;
    }
    let mut compared = Vec::new();
    for node in ready {
        let name = node.metadata.name.as_deref().unwrap_or("");
        let group = match provider.node_group_for_node(node) {
            Ok(Some(g)) => g,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(
                    "Failed to get node group for node {name}, Skipping DRA readiness check and keeping node in ready list. Error: {e}"
                );
                continue;
            }
        };
        let Some(template) = template_of(&*group) else {
            continue;
        };
        let slices = dra.node_slices(name);
        if dra_pools_ready(&slices, &template) {
            compared.push(Compared {
                node: name,
                template,
                slices,
            });
        } else {
            out.insert(name.to_string());
        }
    }
    comparator.report(&compared, metrics);
    out
}

/// The nodes whose CSI drivers are not all registered yet.
pub fn csi_unready_nodes(
    provider: &dyn CloudProvider,
    nodes: &[Arc<Node>],
    live: &BTreeMap<String, Arc<CsiNode>>,
) -> BTreeSet<String> {
    let mut templates: BTreeMap<String, Option<CsiNode>> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or("");
        let Some(have) = live.get(name) else {
            tracing::trace!(
                "No CSI node found for node {name}, Skipping CSI readiness check and keeping node in ready list."
            );
            continue;
        };
        let group = match provider.node_group_for_node(node) {
            Ok(Some(g)) => g,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(
                    "Failed to get node group for node {name}, Skipping CSI readiness check and keeping node in ready list. Error: {e}"
                );
                continue;
            }
        };
        let id = group.id();
        let want = templates.entry(id.clone()).or_insert_with(|| {
            group
                .template_node_info()
                .map_err(|e| {
                    tracing::warn!(
                        "Failed to get template node info for node group {id} with error: {e}"
                    )
                })
                .ok()
                .and_then(|t| t.csi)
        });
        let Some(want) = want else {
            continue;
        };
        if want.drivers.keys().any(|d| !have.drivers.contains_key(d)) {
            out.insert(name.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn slice(driver: &str, pool: &str, generation: i64, count: i64) -> Arc<ResourceSlice> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": format!("{pool}-{driver}")},
                "spec": {"driver": driver, "nodeName": "n",
                    "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
                    "devices": [{"name": "d0"}]}}))
            .unwrap(),
        )
    }

    #[test]
    fn a_node_is_ready_with_as_many_complete_pools_per_driver_as_its_template() {
        let template = [slice("gpu.example.com", "t", 1, 1)];
        assert!(!dra_pools_ready(&[], &template), "nothing published yet");
        let other = [slice("nic.example.com", "n", 1, 1)];
        assert!(!dra_pools_ready(&other, &template), "another driver");
        let published = [slice("gpu.example.com", "node-1", 3, 1), other[0].clone()];
        assert!(
            dra_pools_ready(&published, &template),
            "pool names and extra drivers do not matter"
        );
        assert!(dra_pools_ready(&[], &[]), "a template without devices");
    }

    #[test]
    fn a_pool_is_complete_at_its_newest_generation_only() {
        let template = [slice("gpu.example.com", "t", 1, 1)];
        let half = [slice("gpu.example.com", "p", 1, 2)];
        assert!(!dra_pools_ready(&half, &template), "one slice of two");
        let both = [half[0].clone(), slice("gpu.example.com", "p", 1, 2)];
        assert!(dra_pools_ready(&both, &template));
        let updating = [
            both[0].clone(),
            both[1].clone(),
            slice("gpu.example.com", "p", 2, 2),
        ];
        assert!(
            !dra_pools_ready(&updating, &template),
            "generation 2 has one slice of two"
        );
    }
}
