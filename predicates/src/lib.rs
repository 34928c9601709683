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
//! [`find_node`] runs one scheduling cycle for a pod over a set of nodes.
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
    let mut pre = PreFilter::new(pod, nodes);
    if let Some(v) = objects.volumes {
        pre = pre.with_volumes(v);
    }
    if let Some(d) = objects.dra {
        pre = pre.with_dra(d);
    }
    let mut feasible = Vec::new();
    let mut failures = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        match pre.filter(n) {
            Ok(()) => feasible.push(i),
            Err(r) => failures.push((i, r)),
        }
    }
    if feasible.is_empty() {
        return Err(fit_error(nodes.len(), failures));
    }
    if feasible.len() == 1 {
        return Ok(feasible[0]);
    }
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
