//! The binpacking estimator (docs/reference/ca-rules.md §4.4, upstream's `estimator`): how
//! many template nodes a set of pod groups needs.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm};
use predicates::labels::{labels_of, selector_matches};
use predicates::resources::Resources;
use predicates::{NodeInfo, PodInfo};

use super::equivalence::PodGroup;
use crate::simulator::{Snapshot, node_from_template};

/// What the estimator found for one node group.
#[derive(Debug, Clone, Default)]
pub struct Estimate {
    /// New nodes that received pods.
    pub node_count: usize,
    /// Pods placed, by key.
    pub pods: Vec<String>,
    /// Their summed CPU (milli) and memory requests.
    pub requests: (i64, i64),
}

/// The binpacking estimator (docs/reference/ca-rules.md §4.4): how many template nodes the
/// pod groups need, at most `limit` new nodes. The snapshot is left as it
/// was. With `fastpath` (`--fastpath-binpacking-enabled`), the group that
/// saves the most simulations goes last and is packed by [`fast_path`].
pub fn estimate(
    snapshot: &mut Snapshot,
    template: &NodeInfo,
    groups: &[&PodGroup],
    limit: usize,
    name_prefix: &str,
    time_box: Duration,
    fastpath: bool,
) -> Estimate {
    let started = std::time::Instant::now();
    let alloc = (
        template.allocatable.milli_cpu.max(1) as f64,
        template.allocatable.memory.max(1) as f64,
    );
    let mut ordered: Vec<&PodGroup> = groups.to_vec();
    let score = |g: &PodGroup| {
        let r = &g.sample().requests;
        r.milli_cpu as f64 / alloc.0 + r.memory as f64 / alloc.1
    };
    ordered.sort_by(|a, b| score(b).total_cmp(&score(a)));
    let fast_last = fastpath && move_best_for_fast_path_last(&mut ordered, template);
    snapshot.fork();
    let mut p = Packing {
        snapshot,
        template,
        name_prefix,
        added: Vec::new(),
        used: Vec::new(),
        virtual_nodes: 0,
        out: Estimate::default(),
    };
    let template_pods = template.pods.len();
    let last = ordered.len().saturating_sub(1);
    'groups: for (g, group) in ordered.into_iter().enumerate() {
        let mut try_all = true;
        for (k, info) in group.pods.iter().enumerate() {
            let mut placed = None;
            if try_all {
                placed = p
                    .added
                    .iter()
                    .position(|&i| p.snapshot.fits(info, i).is_ok());
                if placed.is_none() {
                    try_all = false;
                }
            } else if let Some(&last) = p.added.last()
                && p.snapshot.fits(info, last).is_ok()
            {
                placed = Some(p.added.len() - 1);
            }
            if placed.is_none() && fast_last && g == last {
                if p.added.len() >= limit || started.elapsed() > time_box {
                    break 'groups;
                }
                fast_path(&mut p, &group.pods[k..], limit);
                break 'groups;
            }
            if placed.is_none() {
                if let Some(&last) = p.added.last()
                    && p.snapshot.node(last).pods.len() == template_pods
                {
                    // Even an empty template node cannot take this pod.
                    continue 'groups;
                }
                if p.added.len() >= limit || started.elapsed() > time_box {
                    break 'groups;
                }
                let k = p.add_node();
                if p.snapshot.fits(info, p.added[k]).is_ok() {
                    placed = Some(k);
                } else {
                    continue 'groups;
                }
            }
            if let Some(k) = placed {
                p.place(k, info);
            }
        }
    }
    let mut out = p.out;
    out.node_count = p.used.iter().filter(|u| **u).count() + p.virtual_nodes;
    p.snapshot.revert();
    out
}

/// The estimate under way: the new nodes added to the snapshot, whether
/// each got a pod, the nodes only counted (fast path), the pods placed.
struct Packing<'a> {
    snapshot: &'a mut Snapshot,
    template: &'a NodeInfo,
    name_prefix: &'a str,
    added: Vec<usize>,
    used: Vec<bool>,
    virtual_nodes: usize,
    out: Estimate,
}

impl Packing<'_> {
    /// Adds a template node to the snapshot; its index among the new ones.
    fn add_node(&mut self) -> usize {
        let name = format!("{}-{}", self.name_prefix, self.added.len());
        let i = self
            .snapshot
            .add_node(node_from_template(self.template, &name));
        self.added.push(i);
        self.used.push(false);
        self.added.len() - 1
    }

    /// Places the pod on the `k`-th new node.
    fn place(&mut self, k: usize, info: &PodInfo) {
        self.count(info);
        self.snapshot.add_pod(self.added[k], info.clone());
        self.used[k] = true;
    }

    /// Counts the pod among those the estimate places.
    fn count(&mut self, info: &PodInfo) {
        self.out.requests.0 += info.requests.milli_cpu;
        self.out.requests.1 += info.requests.memory;
        self.out.pods.push(info.key.clone());
    }
}

/// Upstream's `tryFastPath`: one new node takes the pods, in order, until
/// one does not fit; each further node is assumed to take as many, and is
/// only counted (not simulated), up to the limit.
fn fast_path(p: &mut Packing<'_>, pods: &[PodInfo], limit: usize) {
    let k = p.add_node();
    let node = p.added[k];
    let per_node = pods
        .iter()
        .take_while(|info| {
            let fits = p.snapshot.fits(info, node).is_ok();
            if fits {
                p.place(k, info);
            }
            fits
        })
        .count();
    if per_node == 0 {
        return;
    }
    let mut rest = &pods[per_node..];
    while !rest.is_empty() {
        if p.added.len() + p.virtual_nodes >= limit {
            return;
        }
        p.virtual_nodes += 1;
        let (these, later) = rest.split_at(per_node.min(rest.len()));
        for info in these {
            p.count(info);
        }
        rest = later;
    }
}

/// Upstream's `determineBestPEGToFastpath`: moves to the end the group that
/// fast path saves the most simulations (pods − pods per node, the nodes
/// it needs by CPU, memory or hostname anti-affinity to itself; the later
/// group on a tie), among those fast path suits. Whether one was found.
/// Upstream reads the first container's requests; the cache keeps the
/// pod's effective requests, the same for one container.
fn move_best_for_fast_path_last(groups: &mut Vec<&PodGroup>, template: &NodeInfo) -> bool {
    let capacity = {
        let c = Resources::from_list(
            template
                .node
                .status
                .as_ref()
                .and_then(|s| s.capacity.as_ref()),
        );
        if c.milli_cpu > 0 && c.memory > 0 {
            (c.milli_cpu, c.memory)
        } else {
            (template.allocatable.milli_cpu, template.allocatable.memory)
        }
    };
    let nodes_for = |pods: usize, request: i64, capacity: i64| -> usize {
        if request <= 0 || capacity <= 0 {
            return 0;
        }
        (pods as f64 * request as f64 / capacity as f64).ceil() as usize
    };
    let mut best = None;
    let mut most_saved = 0;
    for (i, g) in groups.iter().enumerate() {
        let sample = g.sample();
        let n = g.pods.len();
        let by_anti_affinity = if anti_affine_to_itself_by_hostname(&sample.pod) {
            n
        } else {
            0
        };
        let needed = by_anti_affinity
            .max(nodes_for(n, sample.requests.milli_cpu, capacity.0))
            .max(nodes_for(n, sample.requests.memory, capacity.1));
        let saved = n.checked_div(needed).map_or(0, |per_node| n - per_node);
        if saved >= most_saved && suits_fast_path(&sample.pod) {
            best = Some(i);
            most_saved = saved;
        }
    }
    let Some(i) = best else {
        return false;
    };
    let g = groups.remove(i);
    groups.push(g);
    true
}

/// The required anti-affinity terms of a pod.
fn required_anti_affinity(pod: &Pod) -> &[PodAffinityTerm] {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default()
}

/// Whether a required anti-affinity term keeps the pod's equals off its
/// node (hostname topology, a selector matching its own labels).
fn anti_affine_to_itself_by_hostname(pod: &Pod) -> bool {
    let labels = labels_of(pod.metadata.labels.as_ref());
    required_anti_affinity(pod).iter().any(|t| {
        t.topology_key == HOSTNAME
            && t.label_selector
                .as_ref()
                .is_some_and(|s| selector_matches(s, labels))
    })
}

/// Upstream's `shouldUseFastPath`: not with topology spread constraints
/// or anti-affinity over a wider topology than the node (a second node
/// would not take as many pods as the first).
fn suits_fast_path(pod: &Pod) -> bool {
    let spread = pod
        .spec
        .as_ref()
        .is_some_and(|s| s.topology_spread_constraints.is_some());
    !spread
        && required_anti_affinity(pod)
            .iter()
            .all(|t| t.topology_key == HOSTNAME)
}

/// The hostname topology key.
const HOSTNAME: &str = "kubernetes.io/hostname";
