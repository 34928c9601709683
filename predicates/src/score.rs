//! Scoring of the nodes that passed the filters, with kube-scheduler's
//! default plugins and weights: NodeResourcesFit (LeastAllocated, weight 1),
//! NodeResourcesBalancedAllocation (1), TaintToleration (PreferNoSchedule, 3),
//! NodeAffinity (preferred terms, 2).

use crate::filters::PreFilter;
use crate::labels::{node_selector_term_matches, tolerated_by};
use crate::nodeinfo::NodeInfo;

/// Highest score of one plugin.
pub const MAX_NODE_SCORE: i64 = 100;

/// Scores each feasible node; the result is parallel to `nodes`.
pub fn score(pre: &PreFilter<'_>, nodes: &[&NodeInfo]) -> Vec<i64> {
    let pod = &pre.pod;
    let (cpu, mem) = pod.non_zero;
    let tols = pod
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    let preferred = pod
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default();

    let mut taint_counts = Vec::with_capacity(nodes.len());
    let mut affinity_sums = Vec::with_capacity(nodes.len());
    let mut base = Vec::with_capacity(nodes.len());
    for n in nodes {
        let alloc_cpu = n.allocatable.milli_cpu;
        let alloc_mem = n.allocatable.memory;
        let used_cpu = n.non_zero.0 + cpu;
        let used_mem = n.non_zero.1 + mem;
        let least = |used: i64, alloc: i64| {
            if alloc <= 0 || used > alloc {
                0
            } else {
                (alloc - used) * MAX_NODE_SCORE / alloc
            }
        };
        let least_allocated = (least(used_cpu, alloc_cpu) + least(used_mem, alloc_mem)) / 2;
        let frac = |used: i64, alloc: i64| {
            if alloc <= 0 {
                1.0
            } else {
                (used as f64 / alloc as f64).min(1.0)
            }
        };
        let (fc, fm) = (frac(used_cpu, alloc_cpu), frac(used_mem, alloc_mem));
        let std = (fc - fm).abs() / 2.0;
        #[allow(clippy::cast_possible_truncation)]
        let balanced = ((1.0 - std) * MAX_NODE_SCORE as f64) as i64;
        base.push(least_allocated + balanced);

        let taints = n
            .node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or_default();
        taint_counts.push(
            taints
                .iter()
                .filter(|t| t.effect == "PreferNoSchedule" && !tolerated_by(tols, t))
                .count() as i64,
        );
        affinity_sums.push(
            preferred
                .iter()
                .filter(|t| node_selector_term_matches(&t.preference, &n.node))
                .map(|t| i64::from(t.weight))
                .sum::<i64>(),
        );
    }
    // TaintToleration: fewer intolerable taints is better (reverse-normalised).
    let max_taints = taint_counts.iter().copied().max().unwrap_or(0);
    let max_affinity = affinity_sums.iter().copied().max().unwrap_or(0);
    base.iter()
        .zip(taint_counts.iter().zip(&affinity_sums))
        .map(|(b, (t, a))| {
            let taint_score = if max_taints == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE - t * MAX_NODE_SCORE / max_taints
            };
            let affinity_score = if max_affinity == 0 {
                0
            } else {
                a * MAX_NODE_SCORE / max_affinity
            };
            b + 3 * taint_score + 2 * affinity_score
        })
        .collect()
}
