//! Balancing similar node groups (docs/reference/ca-rules.md §4.5, upstream's
//! `processors/nodegroupset`): which groups are similar, and how a
//! scale-up is split over them.

use std::collections::BTreeMap;

use predicates::NodeInfo;

use super::types::ScaleUpInfo;

/// Balancing settings (`--balance-similar-node-groups` and friends).
#[derive(Debug, Clone, Default)]
pub struct Balancing {
    /// Enabled.
    pub enabled: bool,
    /// Extra ignored labels.
    pub ignore_labels: Vec<String>,
    /// Only these labels decide similarity (when non-empty).
    pub labels: Vec<String>,
    /// `--memory-difference-ratio`.
    pub memory_ratio: f64,
    /// `--max-allocatable-difference-ratio`.
    pub allocatable_ratio: f64,
    /// `--max-free-difference-ratio`.
    pub free_ratio: f64,
}

const ALWAYS_IGNORED: [&str; 7] = [
    "kubernetes.io/hostname",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "beta.kubernetes.io/fluentd-ds-ready",
    "kops.k8s.io/instancegroup",
];

fn within(a: i64, b: i64, ratio: f64) -> bool {
    let (lo, hi) = (a.min(b) as f64, a.max(b) as f64);
    hi - lo <= ratio * hi
}

/// Whether two templates are similar enough to balance (docs/reference/ca-rules.md §4.5).
pub fn similar(a: &NodeInfo, b: &NodeInfo, cfg: &Balancing) -> bool {
    let labels_a = a.labels();
    let labels_b = b.labels();
    if !cfg.labels.is_empty() {
        return cfg
            .labels
            .iter()
            .all(|l| labels_a.get(l).is_some() && labels_a.get(l) == labels_b.get(l));
    }
    let ignored =
        |k: &String| ALWAYS_IGNORED.contains(&k.as_str()) || cfg.ignore_labels.contains(k);
    let la: BTreeMap<_, _> = labels_a.iter().filter(|(k, _)| !ignored(k)).collect();
    let lb: BTreeMap<_, _> = labels_b.iter().filter(|(k, _)| !ignored(k)).collect();
    if la != lb {
        return false;
    }
    let cap = |n: &NodeInfo| {
        predicates::resources::Resources::from_list(
            n.node.status.as_ref().and_then(|s| s.capacity.as_ref()),
        )
    };
    let (ca, cb) = (cap(a), cap(b));
    if ca.milli_cpu != cb.milli_cpu
        || ca.pods != cb.pods
        || ca.scalar != cb.scalar
        || !within(ca.memory, cb.memory, cfg.memory_ratio)
    {
        return false;
    }
    let (aa, ab) = (&a.allocatable, &b.allocatable);
    if !within(aa.milli_cpu, ab.milli_cpu, cfg.allocatable_ratio)
        || !within(aa.memory, ab.memory, cfg.allocatable_ratio)
    {
        return false;
    }
    let free = |n: &NodeInfo| {
        (
            n.allocatable.milli_cpu - n.requested.milli_cpu,
            n.allocatable.memory - n.requested.memory,
        )
    };
    let (fa, fb) = (free(a), free(b));
    within(fa.0, fb.0, cfg.free_ratio) && within(fa.1, fb.1, cfg.free_ratio)
}

/// Splits `nodes` over similar groups (docs/reference/ca-rules.md §4.5): groups at max are
/// dropped; each node goes to the group with the smallest new size (ties
/// to the one with the smaller current size, then the earlier one).
pub fn balance(groups: &[(String, usize, usize)], nodes: usize) -> Vec<ScaleUpInfo> {
    let mut sizes: Vec<(String, usize, usize, usize)> = groups
        .iter()
        .filter(|(_, cur, max)| cur < max)
        .map(|(id, cur, max)| (id.clone(), *cur, *cur, *max))
        .collect();
    sizes.sort_by_key(|(_, cur, _, _)| *cur);
    let capacity: usize = sizes.iter().map(|(_, cur, _, max)| max - cur).sum();
    for _ in 0..nodes.min(capacity) {
        let pick = sizes
            .iter()
            .enumerate()
            .filter(|(_, (_, _, new, max))| new < max)
            .min_by_key(|(_, (_, _, new, _))| *new)
            .map(|(i, _)| i);
        if let Some(i) = pick {
            sizes[i].2 += 1;
        }
    }
    sizes
        .into_iter()
        .filter(|(_, cur, new, _)| new > cur)
        .map(|(group, current, new, max)| ScaleUpInfo {
            group,
            current,
            new,
            max,
        })
        .collect()
}
