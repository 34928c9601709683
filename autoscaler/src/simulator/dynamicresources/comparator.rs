//! Ready nodes' devices against their templates' (upstream's
//! `simulator/dynamicresources/comparator`): each loop, every node the DRA
//! readiness rule let through is compared with its group's template, and
//! the differences are counted per driver in the gauge
//! `dra_node_template_resources_mismatch{driver,mismatch_type}` and logged
//! for up to five nodes. A template that does not look like its nodes
//! makes scale-up wrong (pods placed on devices a new node will not have,
//! or groups skipped for devices it will have).
//!
//! The comparison ([`compare_pools`]) groups each side's devices by
//! driver, pool and the set of their attribute names (values and
//! capacities are not compared). Groups equal in driver, attribute names
//! and device count match whatever their pools. Each remaining template
//! group is paired with the node group of its driver that shares the most
//! attribute names (then the closest count): a `Mismatch`. What is left is
//! `Missing` (the template's) or `Extra` (the node's). A driver whose node
//! pools are being updated (several generations, or fewer slices than the
//! pool says) is not compared.
//!
//! Upstream samples the logged nodes at random; here they are the first
//! five with differences, in node order.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use predicates::dynamicresources::api::ResourceSlice;

use crate::metrics::{Metrics, ResourceMismatchType};

/// How many nodes' differences one loop logs.
const LOGGED_NODES: usize = 5;

/// One difference between a template's devices and a node's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDelta {
    /// Which kind.
    pub kind: ResourceMismatchType,
    /// The driver.
    pub driver: String,
    /// The template's pool (`""` for `Extra`).
    pub template_pool: String,
    /// The node's pool (`""` for `Missing`).
    pub node_pool: String,
    /// Template devices minus node devices.
    pub device_count_delta: i64,
    /// The template group's attribute names.
    pub template_attributes: BTreeSet<String>,
    /// The node group's attribute names.
    pub node_attributes: BTreeSet<String>,
}

impl fmt::Display for ResourceDelta {
    /// Upstream's log form:
    /// `ResourceDelta{Type="Mismatch", Driver="…", TemplatePool="…", …}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |s: &mut dyn Iterator<Item = &String>| {
            s.map(String::as_str).collect::<Vec<_>>().join(";")
        };
        let kind = self.kind.log_name();
        let (t, n) = (&self.template_attributes, &self.node_attributes);
        write!(
            f,
            "ResourceDelta{{Type=\"{kind}\", Driver=\"{}\", TemplatePool=\"{}\", NodePool=\"{}\", DeviceCountDelta=\"{}\", TemplateSignature=\"{}\", NodeSignature=\"{}\", MissingAttributes=\"{}\", ExtraAttributes=\"{}\"}}",
            self.driver,
            self.template_pool,
            self.node_pool,
            self.device_count_delta,
            join(&mut t.iter()),
            join(&mut n.iter()),
            join(&mut t.difference(n)),
            join(&mut n.difference(t)),
        )
    }
}

/// Devices of one driver and pool with the same attribute names.
#[derive(Debug, Clone)]
struct ResourceGroup {
    driver: String,
    pool: String,
    attributes: BTreeSet<String>,
    devices: u64,
}

/// The drivers whose pools among these slices are being updated: a pool
/// seen at more than one generation, or with a slice count other than
/// its `resourceSliceCount`.
fn drivers_in_flux(slices: &[Arc<ResourceSlice>]) -> BTreeSet<&str> {
    let mut pools: BTreeMap<(&str, &str), (i64, i64, i64)> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for s in slices {
        let pool = &s.spec.pool;
        let key = (s.spec.driver.as_str(), pool.name.as_str());
        let (generation, count, _) =
            pools
                .entry(key)
                .or_insert((pool.generation, 0, pool.resource_slice_count));
        if *generation != pool.generation {
            out.insert(key.0);
        }
        *count += 1;
    }
    for ((driver, _), (_, count, want)) in pools {
        if count != want {
            out.insert(driver);
        }
    }
    out
}

/// The device groups of these slices, of the compared drivers only, in
/// the order their first devices come.
fn resource_groups(slices: &[Arc<ResourceSlice>], compared: &BTreeSet<&str>) -> Vec<ResourceGroup> {
    let mut groups: Vec<ResourceGroup> = Vec::new();
    for s in slices
        .iter()
        .filter(|s| compared.contains(s.spec.driver.as_str()))
    {
        for d in &s.spec.devices {
            let attributes: BTreeSet<String> = d.attributes.keys().cloned().collect();
            let same = |g: &&mut ResourceGroup| {
                g.driver == s.spec.driver
                    && g.pool == s.spec.pool.name
                    && g.attributes == attributes
            };
            match groups.iter_mut().find(same) {
                Some(g) => g.devices += 1,
                None => groups.push(ResourceGroup {
                    driver: s.spec.driver.clone(),
                    pool: s.spec.pool.name.clone(),
                    attributes,
                    devices: 1,
                }),
            }
        }
    }
    groups
}

/// The differences between a template's slices and a node's (see the
/// module's documentation for the rule).
pub fn compare_pools(
    template: &[Arc<ResourceSlice>],
    node: &[Arc<ResourceSlice>],
) -> Vec<ResourceDelta> {
    let in_flux = drivers_in_flux(node);
    let compared: BTreeSet<&str> = template
        .iter()
        .chain(node)
        .map(|s| s.spec.driver.as_str())
        .filter(|d| !in_flux.contains(d))
        .collect();
    let mut templates = resource_groups(template, &compared);
    let mut nodes = resource_groups(node, &compared);
    // Exact matches first: same driver, attribute names and count.
    for i in (0..templates.len()).rev() {
        let t = &templates[i];
        let exact = nodes.iter().position(|n| {
            n.driver == t.driver && n.attributes == t.attributes && n.devices == t.devices
        });
        if let Some(j) = exact {
            templates.swap_remove(i);
            nodes.swap_remove(j);
        }
    }
    let mut deltas = Vec::new();
    for i in (0..templates.len()).rev() {
        let Some(j) = closest(&templates[i], &nodes) else {
            continue;
        };
        let (t, n) = (templates.swap_remove(i), nodes.swap_remove(j));
        deltas.push(ResourceDelta {
            kind: ResourceMismatchType::Mismatch,
            driver: t.driver,
            template_pool: t.pool,
            node_pool: n.pool,
            device_count_delta: t.devices as i64 - n.devices as i64,
            template_attributes: t.attributes,
            node_attributes: n.attributes,
        });
    }
    deltas.extend(templates.into_iter().map(|t| ResourceDelta {
        kind: ResourceMismatchType::Missing,
        driver: t.driver,
        template_pool: t.pool,
        node_pool: String::new(),
        device_count_delta: t.devices as i64,
        template_attributes: t.attributes,
        node_attributes: BTreeSet::new(),
    }));
    deltas.extend(nodes.into_iter().map(|n| ResourceDelta {
        kind: ResourceMismatchType::Extra,
        driver: n.driver,
        template_pool: String::new(),
        node_pool: n.pool,
        device_count_delta: -(n.devices as i64),
        template_attributes: BTreeSet::new(),
        node_attributes: n.attributes,
    }));
    deltas
}

/// The node group of the template group's driver sharing the most
/// attribute names with it; on a tie, the one whose count is closest.
fn closest(t: &ResourceGroup, nodes: &[ResourceGroup]) -> Option<usize> {
    let mut best: Option<(usize, usize, u64)> = None;
    for (j, n) in nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.driver == t.driver)
    {
        let overlap = t.attributes.intersection(&n.attributes).count();
        let distance = t.devices.abs_diff(n.devices);
        let better = match best {
            None => true,
            Some((_, o, d)) => overlap > o || (overlap == o && distance < d),
        };
        if better {
            best = Some((j, overlap, distance));
        }
    }
    best.map(|(j, _, _)| j)
}

/// One ready node to compare: its name, its template's slices, its own.
pub struct Compared<'a> {
    /// The node.
    pub node: &'a str,
    /// Its group's template's node-local slices.
    pub template: Vec<Arc<ResourceSlice>>,
    /// The node's own slices.
    pub slices: Vec<Arc<ResourceSlice>>,
}

/// The comparison of every loop, with the drivers whose gauges the last
/// loop set (upstream's `NodeResourcesComparator`).
#[derive(Debug, Default)]
pub struct NodeResourcesComparator {
    last_seen: BTreeSet<String>,
}

impl NodeResourcesComparator {
    /// Compares the nodes with their templates: sets the gauges of every
    /// driver with differences now or in the last loop (so a driver's go
    /// back to 0 once it matches), and logs the first nodes' differences.
    pub fn report(&mut self, nodes: &[Compared<'_>], metrics: &Metrics) {
        let mut counts: BTreeMap<String, BTreeMap<ResourceMismatchType, u32>> = self
            .last_seen
            .iter()
            .map(|d| (d.clone(), BTreeMap::new()))
            .collect();
        self.last_seen.clear();
        let mut logged = Vec::new();
        for n in nodes {
            if n.template.is_empty() && n.slices.is_empty() {
                continue;
            }
            let deltas = compare_pools(&n.template, &n.slices);
            if deltas.is_empty() {
                continue;
            }
            for d in &deltas {
                *counts
                    .entry(d.driver.clone())
                    .or_default()
                    .entry(d.kind)
                    .or_default() += 1;
                self.last_seen.insert(d.driver.clone());
            }
            if logged.len() < LOGGED_NODES {
                let deltas: Vec<String> = deltas.iter().map(ToString::to_string).collect();
                logged.push(format!("- {}: {}", n.node, deltas.join(", ")));
            }
        }
        for (driver, by_kind) in &counts {
            for kind in ResourceMismatchType::ALL {
                let value = by_kind.get(&kind).copied().unwrap_or(0);
                let labels = [("driver", driver.as_str()), ("mismatch_type", kind.label())];
                Metrics::set(&metrics.dra_template_mismatch, &labels, f64::from(value));
            }
        }
        if !logged.is_empty() {
            tracing::warn!(
                "DRA Resource Discrepancies detected between node templates and actual nodes:\n{}",
                logged.join("\n")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    /// A slice of `driver` in `pool` with `count` devices per attribute
    /// name list.
    fn slice(driver: &str, pool: &str, devices: &[(usize, &[&str])]) -> Arc<ResourceSlice> {
        let mut list = Vec::new();
        for (count, names) in devices {
            for _ in 0..*count {
                let attributes: serde_json::Map<String, serde_json::Value> = names
                    .iter()
                    .map(|n| (n.to_string(), json!({"string": "x"})))
                    .collect();
                list.push(json!({"name": format!("d{}", list.len()), "attributes": attributes}));
            }
        }
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": format!("{pool}-{driver}")},
                "spec": {"driver": driver, "nodeName": "n",
                    "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                    "devices": list}}))
            .unwrap(),
        )
    }

    #[test]
    fn alike_devices_in_other_pools_match() {
        let t = [slice("gpu.example.com", "template", &[(2, &["model"])])];
        let n = [slice("gpu.example.com", "node-1", &[(2, &["model"])])];
        assert_eq!(compare_pools(&t, &n), []);
    }

    #[test]
    fn fewer_devices_with_other_attributes_are_a_mismatch_and_a_new_driver_is_extra() {
        let t = [slice("gpu.example.com", "tp", &[(4, &["model", "memory"])])];
        let n = [
            slice("gpu.example.com", "np", &[(2, &["model", "uuid"])]),
            slice("nic.example.com", "np", &[(1, &[])]),
        ];
        let deltas = compare_pools(&t, &n);
        assert_eq!(deltas.len(), 2);
        assert_eq!(
            deltas[0].to_string(),
            r#"ResourceDelta{Type="Mismatch", Driver="gpu.example.com", TemplatePool="tp", NodePool="np", DeviceCountDelta="2", TemplateSignature="memory;model", NodeSignature="model;uuid", MissingAttributes="memory", ExtraAttributes="uuid"}"#
        );
        assert_eq!(deltas[1].kind, ResourceMismatchType::Extra);
        assert_eq!(deltas[1].driver, "nic.example.com");
        assert_eq!(deltas[1].device_count_delta, -1);
    }

    #[test]
    fn a_node_without_the_templates_devices_misses_them() {
        let t = [slice("gpu.example.com", "tp", &[(2, &["model"])])];
        let deltas = compare_pools(&t, &[]);
        assert_eq!(deltas.len(), 1);
        assert_eq!(deltas[0].kind, ResourceMismatchType::Missing);
        assert_eq!(deltas[0].device_count_delta, 2);
    }

    #[test]
    fn a_driver_updating_its_pool_is_not_compared() {
        let t = [slice("gpu.example.com", "tp", &[(2, &["model"])])];
        let mut incomplete = (*slice("gpu.example.com", "np", &[(1, &["model"])])).clone();
        incomplete.spec.pool.resource_slice_count = 2;
        assert_eq!(compare_pools(&t, &[Arc::new(incomplete)]), []);
    }

    #[test]
    fn gauges_count_per_driver_and_fall_back_to_zero() {
        let metrics = Metrics::new(false);
        let mut c = NodeResourcesComparator::default();
        let t = [slice("gpu.example.com", "tp", &[(2, &["model"])])];
        let bad = [slice("gpu.example.com", "np", &[(1, &["model"])])];
        let good = [slice("gpu.example.com", "np", &[(2, &["model"])])];
        let line = |v: u32| {
            format!(
                "cluster_autoscaler_dra_node_template_resources_mismatch{{driver=\"gpu.example.com\",mismatch_type=\"mismatch\"}} {v}"
            )
        };
        let compared = |slices: &[Arc<ResourceSlice>]| Compared {
            node: "n1",
            template: t.to_vec(),
            slices: slices.to_vec(),
        };
        c.report(&[compared(&bad), compared(&bad)], &metrics);
        assert!(metrics.encode().contains(&line(2)), "{}", metrics.encode());
        c.report(&[compared(&good)], &metrics);
        assert!(metrics.encode().contains(&line(0)), "{}", metrics.encode());
    }
}
