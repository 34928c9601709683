//! The cluster gauges updated at the start of every loop: node counts by
//! state, node groups, the max node count, taints by type, the cluster's
//! cores and memory, and with `--emit-per-nodegroup-metrics` each group's
//! sizes and health.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Node;

use super::facts::cluster_resources;
use super::registry::ClusterStateRegistry;
use crate::context::AutoscalingContext;
use crate::metrics::Metrics;
use crate::taints;

/// Updates the cluster gauges from the registry and the nodes.
pub fn update_cluster_metrics(
    ctx: &AutoscalingContext,
    registry: &ClusterStateRegistry,
    nodes: &[Arc<Node>],
    now: SystemTime,
) {
    let m = &ctx.metrics;
    let t = registry.totals();
    m.safe_to_autoscale
        .set(if registry.is_healthy() { 1.0 } else { 0.0 });
    for (state, n) in [
        ("ready", t.ready),
        ("unready", t.unready),
        ("notStarted", t.not_started),
        ("suspended", 0),
        ("longUnregistered", t.long_unregistered),
        ("unregistered", t.unregistered),
    ] {
        Metrics::set(&m.nodes_count, &[("state", state)], n as f64);
    }
    Metrics::set(
        &m.node_groups_count,
        &[("node_group_type", "autoscaled")],
        registry.groups().len() as f64,
    );
    Metrics::set(
        &m.node_groups_count,
        &[("node_group_type", "autoprovisioned")],
        0.0,
    );
    let sum_max: usize = registry.groups().values().map(|g| g.group.max_size()).sum();
    let max = if ctx.flags.max_nodes_total > 0 {
        ctx.flags.max_nodes_total.min(sum_max)
    } else {
        sum_max
    };
    m.max_nodes_count.set(max as f64);
    let mut taint_types: BTreeMap<String, usize> = BTreeMap::new();
    for n in nodes {
        for t in n.spec.iter().flat_map(|s| s.taints.iter().flatten()) {
            *taint_types
                .entry(taints::metric_type(&t.key, &ctx.taints))
                .or_default() += 1;
        }
    }
    m.node_taints_count.clear();
    for (t, count) in taint_types {
        Metrics::set(&m.node_taints_count, &[("type", &t)], count as f64);
    }
    let (cores, memory) = cluster_resources(nodes, &ctx.node_facts, now);
    m.cpu_current_cores.set(cores as f64);
    m.memory_current_bytes.set(memory as f64);
    if ctx.flags.emit_per_nodegroup_metrics {
        for (id, g) in registry.groups() {
            let l = [("node_group", id.as_str())];
            Metrics::set(&m.node_group_min, &l, g.group.min_size() as f64);
            Metrics::set(&m.node_group_max, &l, g.group.max_size() as f64);
            Metrics::set(&m.node_group_target, &l, g.target as f64);
            Metrics::set(
                &m.node_group_healthiness,
                &l,
                if g.healthy { 1.0 } else { 0.0 },
            );
        }
    }
}
