//! kube-scheduler semantics, shared by the embedded scheduler (`harness`)
//! and the autoscaler's simulator: one implementation of "does this pod fit
//! on this node, and where would it go".
//!
//! - [`quantity`] and [`resources`]: requests and allocatable as integers,
//!   with kube-scheduler's init-container, sidecar and overhead rules.
//! - [`labels`]: node selector terms and tolerations (label selectors are
//!   the `apimachinery` crate's, re-exported).
//! - [`nodeinfo`]: a node with its pods ([`NodeInfo`]), the unit of work.
//! - [`filters`]: the default filter plugins and their failure [`Reason`]s,
//!   worded as kube-scheduler words them, and the `0/N nodes are available`
//!   message.
//! - [`score`]: the default scoring plugins.
//! - [`volumelimits`]: NodeVolumeLimits, CSINode volume counts per driver
//!   (the filter runs when the caller gives the claims and volumes).
//! - [`dynamicresources`]: DynamicResources, ResourceClaims allocated from
//!   the devices of ResourceSlices (selectors in CEL, from `kubecel`).
//! - [`preemption`]: victims and node choice for a high-priority pod.
//!
//! [`find_node`] runs one scheduling cycle for a pod over a set of nodes;
//! [`find_node_from`] runs it over kube-scheduler's sample of them
//! (`percentageOfNodesToScore`, [`Sample`]), as the embedded scheduler does.
//! A node without room for the pod is passed by with NodeResourcesFit's
//! allocation-free check and its reasons are computed only if no node fits
//! (most nodes are full during a large scale-up).
//!
//! Upstream names: `filters` and `score` are kube-scheduler's
//! `framework/plugins` (NodeResourcesFit, NodeAffinity, TaintToleration,
//! PodTopologySpread, InterPodAffinity, NodePorts, NodeUnschedulable...),
//! `nodeinfo` is `framework.NodeInfo`, `preemption` the DefaultPreemption
//! plugin; CA's simulator calls the same code as its `PredicateChecker`.

pub mod dynamicresources;
pub mod filters;
pub mod labels;
pub mod nodeinfo;
pub mod preemption;
pub mod quantity;
pub mod resources;
pub mod score;
pub mod volumelimits;

pub use dynamicresources::DraObjects;
pub use filters::{FilterPlugins, PreFilter, Reason, fit_error_message};
pub use nodeinfo::{NodeInfo, PodInfo};
pub use volumelimits::{CsiNode, VolumeObjects};

/// A pod that fits nowhere: the failures per node and kube-scheduler's message.
#[derive(Debug, Clone)]
pub struct FitError {
    /// (node index, reasons) for every node.
    pub failures: Vec<(usize, Vec<Reason>)>,
    /// `0/N nodes are available: ...`, or a plugin's error.
    pub message: String,
    /// A plugin failed (kube-scheduler's `SchedulerError`, not
    /// `Unschedulable`): `message` is `running "<plugin>" filter plugin: ...`.
    pub plugin_error: bool,
}

/// The FitError of a pod that failed on every node: a DynamicResources
/// refusal that holds for every node (PreFilter's) or a plugin error is
/// the message on its own, as kube-scheduler reports them.
fn fit_error(num_nodes: usize, failures: Vec<(usize, Vec<Reason>)>) -> FitError {
    let dra = failures.iter().flat_map(|(_, r)| r).find_map(|r| match r {
        Reason::Dra(d) if d.every_node() || d.is_error() => Some(d),
        _ => None,
    });
    let (message, plugin_error) = match dra {
        Some(d) if d.is_error() => (
            format!("running \"DynamicResources\" filter plugin: {d}"),
            true,
        ),
        Some(d) => (format!("0/{num_nodes} nodes are available: {d}."), false),
        None => {
            let reasons: Vec<Vec<Reason>> = failures.iter().map(|(_, r)| r.clone()).collect();
            (fit_error_message(num_nodes, &reasons), false)
        }
    };
    FitError {
        message,
        plugin_error,
        failures,
    }
}

/// The objects the filters that read more than nodes and pods need
/// (`None`: that filter does not run).
#[derive(Debug, Clone, Copy, Default)]
pub struct Objects<'a> {
    /// NodeVolumeLimits: claims, volumes and classes.
    pub volumes: Option<&'a VolumeObjects>,
    /// DynamicResources: claims, classes and slices.
    pub dra: Option<&'a DraObjects>,
    /// Whether any node holds a pod with required anti-affinity, when the
    /// caller keeps count (`None`: each cycle looks at every node).
    pub existing_anti_affinity: Option<bool>,
}

/// One scheduling cycle: filters every node, scores the feasible ones and
/// returns the index of the best (the first among equals, so runs are
/// deterministic for a given node order).
pub fn find_node(pod: &PodInfo, nodes: &[NodeInfo]) -> Result<usize, FitError> {
    find_node_with(pod, nodes, Objects::default())
}

/// [`find_node`], with the objects the volume and DRA filters read.
pub fn find_node_with(
    pod: &PodInfo,
    nodes: &[NodeInfo],
    objects: Objects<'_>,
) -> Result<usize, FitError> {
    find_node_from(pod, nodes, objects, Sample::every_node(nodes.len())).result
}

/// kube-scheduler's `minFeasibleNodesToFind`: below this many nodes a
/// cycle filters them all.
const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// kube-scheduler's `minFeasibleNodesPercentageToFind`.
const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;

/// Which nodes a scheduling cycle filters: kube-scheduler's
/// `percentageOfNodesToScore`. The cycle starts at node `start` (kube-
/// scheduler's `nextStartNodeIndex`, which moves on by the nodes each
/// cycle examined, so that cycles spread over the cluster) and stops once
/// `to_find` nodes passed the filters; only those are scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// The first node examined (wrapping around).
    pub start: usize,
    /// How many feasible nodes end the search.
    pub to_find: usize,
}

impl Sample {
    /// Every node, from the first.
    pub fn every_node(num_nodes: usize) -> Self {
        Self {
            start: 0,
            to_find: num_nodes,
        }
    }

    /// kube-scheduler's default (adaptive) `percentageOfNodesToScore`
    /// from `start`: every node below 100 nodes, else 50% less 1% per 125
    /// nodes, at least 5% and at least 100 nodes (`numFeasibleNodesToFind`).
    pub fn adaptive(num_nodes: usize, start: usize) -> Self {
        let to_find = if num_nodes < MIN_FEASIBLE_NODES_TO_FIND {
            num_nodes
        } else {
            let percentage = 50usize
                .saturating_sub(num_nodes / 125)
                .max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
            (num_nodes * percentage / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
        };
        Self { start, to_find }
    }
}

/// What a sampled cycle ([`find_node_from`]) found, and how many nodes it
/// examined (the caller's next start moves on by this many).
#[derive(Debug, Clone)]
pub struct Found {
    /// The chosen node's index, or why none fits (every node examined).
    pub result: Result<usize, FitError>,
    /// Nodes filtered: the feasible ones found and the ones that failed.
    pub examined: usize,
}

/// One scheduling cycle over the nodes `sample` picks: filters from
/// `sample.start` until `sample.to_find` nodes pass, then scores those and
/// returns the best (the first examined among equals). A pod that fits
/// nowhere has examined every node, and its failures are in node order.
pub fn find_node_from(
    pod: &PodInfo,
    nodes: &[NodeInfo],
    objects: Objects<'_>,
    sample: Sample,
) -> Found {
    let mut pre = match objects.existing_anti_affinity {
        Some(existing) => PreFilter::with_existing_anti_affinity(pod, nodes, existing),
        None => PreFilter::new(pod, nodes),
    };
    if let Some(v) = objects.volumes {
        pre = pre.with_volumes(v);
    }
    if let Some(d) = objects.dra {
        pre = pre.with_dra(d);
    }
    let n = nodes.len();
    let to_find = sample.to_find.clamp(1, n.max(1));
    let mut feasible = Vec::new();
    let mut failures = Vec::new();
    // Nodes without room for the pod: infeasible, their reasons found
    // only if no node fits (most nodes are full in a large cluster).
    let mut full = Vec::new();
    for k in 0..n {
        let i = (sample.start + k) % n;
        if pre.resources_rejected(&nodes[i]) {
            full.push(i);
            continue;
        }
        match pre.filter(&nodes[i]) {
            Ok(()) => {
                feasible.push(i);
                if feasible.len() == to_find {
                    break;
                }
            }
            Err(r) => failures.push((i, r)),
        }
    }
    let examined = feasible.len() + failures.len() + full.len();
    let result = match feasible.len() {
        0 => {
            failures.extend(
                full.into_iter()
                    .filter_map(|i| pre.filter(&nodes[i]).err().map(|r| (i, r))),
            );
            failures.sort_by_key(|(i, _)| *i);
            Err(fit_error(n, failures))
        }
        1 => Ok(feasible[0]),
        _ => {
            let refs: Vec<&NodeInfo> = feasible.iter().map(|i| &nodes[*i]).collect();
            let scores = score::score(&pre, &refs);
            let mut best = 0;
            for (k, s) in scores.iter().enumerate() {
                if *s > scores[best] {
                    best = k;
                }
            }
            Ok(feasible[best])
        }
    };
    Found { result, examined }
}
