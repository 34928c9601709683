//! The filter plugins of kube-scheduler's default profile, in its order:
//! NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts,
//! NodeResourcesFit, PodTopologySpread, InterPodAffinity.
//!
//! [`PreFilter::new`] computes once per pod what the cross-node plugins need
//! (topology counts); [`PreFilter::filter`] then checks one node. A node
//! fails at the first failing plugin, as in the scheduling framework.
//! [`FilterPlugins`] turns plugins off, as a scheduler profile may.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use k8s_openapi::api::core::v1::{
    Node, Pod, PodAffinityTerm, Taint, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use crate::dynamicresources::{ClaimRefusal, DraObjects, has_claims};
use crate::labels::{
    Labels, labels_of, node_selector_term_matches, selector_matches, tolerated_by,
};
use crate::nodeinfo::{NodeInfo, PodInfo};
use crate::volumelimits::{Attachable, VolumeObjects, VolumeRefusal, volume_limits_fit};

/// Why a node cannot take a pod, worded as kube-scheduler words it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// NodeUnschedulable.
    Unschedulable,
    /// NodeName.
    NodeName,
    /// TaintToleration: the first untolerated NoSchedule/NoExecute taint.
    UntoleratedTaint {
        /// Taint key.
        key: String,
        /// Taint value.
        value: String,
    },
    /// NodeAffinity (nodeSelector or required node affinity).
    NodeAffinity,
    /// NodePorts.
    HostPorts,
    /// NodeResourcesFit: `Insufficient <resource>`.
    Insufficient(String),
    /// NodeResourcesFit: pod count.
    TooManyPods,
    /// PodTopologySpread: the node lacks a constraint's topology key.
    SpreadMissingLabel,
    /// PodTopologySpread: placing here would exceed maxSkew.
    Spread,
    /// InterPodAffinity: the pod's affinity terms.
    PodAffinity,
    /// InterPodAffinity: the pod's anti-affinity terms.
    PodAntiAffinity,
    /// InterPodAffinity: an existing pod's anti-affinity terms.
    ExistingAntiAffinity,
    /// NodeVolumeLimits: a CSI driver's volume count would pass its limit.
    MaxVolumeCount,
    /// The pod's PersistentVolumeClaim does not exist (VolumeBinding).
    ClaimNotFound(String),
    /// DynamicResources: the pod's ResourceClaims.
    Dra(ClaimRefusal),
}

impl Reason {
    /// Whether preemption cannot help (`UnschedulableAndUnresolvable`).
    pub fn unresolvable(&self) -> bool {
        matches!(
            self,
            Self::Unschedulable
                | Self::NodeName
                | Self::UntoleratedTaint { .. }
                | Self::NodeAffinity
                | Self::SpreadMissingLabel
                | Self::PodAffinity
                | Self::ClaimNotFound(_)
                | Self::Dra(_)
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unschedulable => f.write_str("node(s) were unschedulable"),
            Self::NodeName => f.write_str("node(s) didn't match the requested node name"),
            Self::UntoleratedTaint { key, value } => {
                write!(f, "node(s) had untolerated taint {{{key}: {value}}}")
            }
            Self::NodeAffinity => f.write_str("node(s) didn't match Pod's node affinity/selector"),
            Self::HostPorts => {
                f.write_str("node(s) didn't have free ports for the requested pod ports")
            }
            Self::Insufficient(r) => write!(f, "Insufficient {r}"),
            Self::TooManyPods => f.write_str("Too many pods"),
            Self::SpreadMissingLabel => f.write_str(
                "node(s) didn't match pod topology spread constraints (missing required label)",
            ),
            Self::Spread => f.write_str("node(s) didn't match pod topology spread constraints"),
            Self::PodAffinity => f.write_str("node(s) didn't match pod affinity rules"),
            Self::PodAntiAffinity => f.write_str("node(s) didn't match pod anti-affinity rules"),
            Self::ExistingAntiAffinity => {
                f.write_str("node(s) didn't satisfy existing pods anti-affinity rules")
            }
            Self::MaxVolumeCount => f.write_str("node(s) exceed max volume count"),
            Self::ClaimNotFound(name) => {
                write!(f, "persistentvolumeclaim \"{name}\" not found")
            }
            Self::Dra(refusal) => refusal.fmt(f),
        }
    }
}

impl From<VolumeRefusal> for Reason {
    fn from(r: VolumeRefusal) -> Self {
        match r {
            VolumeRefusal::MaxVolumeCount => Self::MaxVolumeCount,
            VolumeRefusal::ClaimNotFound(name) => Self::ClaimNotFound(name),
        }
    }
}

/// kube-scheduler's FitError message: `0/N nodes are available: <count>
/// <reason>, ...` with the reasons counted over nodes and sorted.
pub fn fit_error_message(num_nodes: usize, failures: &[Vec<Reason>]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for reasons in failures {
        for r in reasons {
            *counts.entry(r.to_string()).or_default() += 1;
        }
    }
    let mut parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    format!("0/{num_nodes} nodes are available: {}.", parts.join(", "))
}

/// The `node.kubernetes.io/unschedulable` taint a cordoned node implies.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

fn tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default()
}

/// Whether the pod's nodeSelector and required node affinity accept the node
/// (the NodeAffinity filter; also PodTopologySpread's `nodeAffinityPolicy`).
pub fn node_affinity_matches(pod: &Pod, node: &NodeInfo) -> bool {
    node_affinity_matches_node(pod, &node.node)
}

/// [`node_affinity_matches`] for a bare `Node`, as the DaemonSet controller
/// asks it of every node.
pub fn node_affinity_matches_node(pod: &Pod, node: &Node) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    let labels = crate::labels::labels_of(node.metadata.labels.as_ref());
    if let Some(sel) = &spec.node_selector
        && !sel.iter().all(|(k, v)| labels.get(k) == Some(v))
    {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    match required {
        Some(r) => r
            .node_selector_terms
            .iter()
            .any(|t| node_selector_term_matches(t, node)),
        None => true,
    }
}

/// The only nodes a pod can go to by their names (NodeAffinity's
/// PreFilter result): when every required node selector term has
/// `matchFields` `metadata.name In` requirements, the union over the terms
/// of each term's intersection of their values (empty: no node); `None`
/// when any term (or the pod) has none, and any node may pass. DaemonSet
/// pods name their node this way: a search for a fit tries those nodes
/// only.
pub fn named_nodes(pod: &Pod) -> Option<BTreeSet<&str>> {
    let terms = &pod
        .spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    let mut names: Option<BTreeSet<&str>> = None;
    for term in terms {
        let mut term_names: Option<BTreeSet<&str>> = None;
        for r in term.match_fields.iter().flatten() {
            if r.key == "metadata.name" && r.operator == "In" {
                let values: BTreeSet<&str> =
                    r.values.iter().flatten().map(String::as_str).collect();
                term_names = Some(match term_names {
                    None => values,
                    Some(t) => t.intersection(&values).copied().collect(),
                });
            }
        }
        names.get_or_insert_with(BTreeSet::new).extend(term_names?);
    }
    names
}

/// The first NoSchedule/NoExecute taint of the node the pod does not tolerate.
pub fn untolerated_taint<'a>(taints: &'a [Taint], tols: &[Toleration]) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !tolerated_by(tols, t))
}

/// A topology domain: (topology key, value).
type Domain = (String, String);

/// One required pod (anti-)affinity term, resolved.
#[derive(Debug, Clone)]
struct Term {
    selector: LabelSelector,
    /// `None` = all namespaces.
    namespaces: Option<Vec<String>>,
    topology_key: String,
}

impl Term {
    fn new(t: &PodAffinityTerm, owner: &Pod) -> Self {
        let own_ns = owner
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let mut selector = t.label_selector.clone().unwrap_or_default();
        // matchLabelKeys / mismatchLabelKeys add In / NotIn on the owner's values.
        let labels = labels_of(owner.metadata.labels.as_ref());
        for (keys, op) in [
            (&t.match_label_keys, "In"),
            (&t.mismatch_label_keys, "NotIn"),
        ] {
            for k in keys.iter().flatten() {
                if let Some(v) = labels.get(k) {
                    selector
                        .match_expressions
                        .get_or_insert_with(Vec::new)
                        .push(LabelSelectorRequirement {
                            key: k.clone(),
                            operator: op.into(),
                            values: Some(vec![v.clone()]),
                        });
                }
            }
        }
        let all = t.namespace_selector.as_ref().is_some_and(|s| {
            s.match_labels.as_ref().is_none_or(|m| m.is_empty())
                && s.match_expressions.as_ref().is_none_or(|m| m.is_empty())
        });
        let namespaces = if all {
            None
        } else {
            match t.namespaces.as_ref().filter(|n| !n.is_empty()) {
                Some(ns) => Some(ns.clone()),
                None => Some(vec![own_ns]),
            }
        };
        Self {
            selector,
            namespaces,
            topology_key: t.topology_key.clone(),
        }
    }

    fn matches(&self, namespace: &str, labels: &Labels) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|ns| ns.iter().any(|n| n == namespace))
            && selector_matches(&self.selector, labels)
    }
}

fn required_terms(pod: &Pod, anti: bool) -> Vec<Term> {
    let a = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let terms = if anti {
        a.and_then(|a| a.pod_anti_affinity.as_ref()).and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
    } else {
        a.and_then(|a| a.pod_affinity.as_ref()).and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
    };
    terms
        .iter()
        .flat_map(|t| t.iter())
        .map(|t| Term::new(t, pod))
        .collect()
}

/// A DoNotSchedule topology spread constraint with its counts.
#[derive(Debug)]
struct Spread {
    topology_key: String,
    max_skew: i32,
    min_domains: i32,
    self_match: bool,
    /// Pods matching the selector per domain value, over eligible nodes.
    counts: HashMap<String, i32>,
}

/// Which filter plugins run (a KubeSchedulerConfiguration profile may
/// disable some of the default profile's); all by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterPlugins {
    /// NodeUnschedulable.
    pub node_unschedulable: bool,
    /// NodeName.
    pub node_name: bool,
    /// TaintToleration.
    pub taint_toleration: bool,
    /// NodeAffinity.
    pub node_affinity: bool,
    /// NodePorts.
    pub node_ports: bool,
    /// NodeResourcesFit.
    pub node_resources_fit: bool,
    /// PodTopologySpread.
    pub pod_topology_spread: bool,
    /// InterPodAffinity.
    pub inter_pod_affinity: bool,
    /// NodeVolumeLimits (runs when the claims are given:
    /// [`PreFilter::with_volumes`]).
    pub node_volume_limits: bool,
    /// DynamicResources (runs when the DRA objects are given:
    /// [`PreFilter::with_dra`]).
    pub dynamic_resources: bool,
}

impl Default for FilterPlugins {
    fn default() -> Self {
        Self {
            node_unschedulable: true,
            node_name: true,
            taint_toleration: true,
            node_affinity: true,
            node_ports: true,
            node_resources_fit: true,
            pod_topology_spread: true,
            inter_pod_affinity: true,
            node_volume_limits: true,
            dynamic_resources: true,
        }
    }
}

impl FilterPlugins {
    /// The plugins' names, as the scheduling framework knows them.
    pub const NAMES: [&'static str; 10] = [
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeVolumeLimits",
        "DynamicResources",
    ];

    /// The switch of the plugin named `name`, if it is one of these.
    pub fn switch(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "NodeUnschedulable" => &mut self.node_unschedulable,
            "NodeName" => &mut self.node_name,
            "TaintToleration" => &mut self.taint_toleration,
            "NodeAffinity" => &mut self.node_affinity,
            "NodePorts" => &mut self.node_ports,
            "NodeResourcesFit" => &mut self.node_resources_fit,
            "PodTopologySpread" => &mut self.pod_topology_spread,
            "InterPodAffinity" => &mut self.inter_pod_affinity,
            "NodeVolumeLimits" => &mut self.node_volume_limits,
            "DynamicResources" => &mut self.dynamic_resources,
            _ => return None,
        })
    }
}

/// What the cross-node plugins precompute for one pod.
#[derive(Debug)]
pub struct PreFilter<'a> {
    /// The incoming pod.
    pub pod: &'a PodInfo,
    affinity: Vec<Term>,
    anti_affinity: Vec<Term>,
    /// Domains with pods matching all the affinity terms.
    affinity_counts: HashMap<Domain, usize>,
    /// Domains with pods matching one of the anti-affinity terms.
    anti_affinity_counts: HashMap<Domain, usize>,
    /// Domains where an existing pod's anti-affinity rejects the incoming pod.
    existing_anti_affinity: HashMap<Domain, usize>,
    /// The pod matches its own affinity terms (first pod of a group).
    self_affinity: bool,
    spreads: Vec<Spread>,
    plugins: FilterPlugins,
    /// The claims and volumes, with the pod's attachable CSI volumes.
    volumes: Option<(&'a VolumeObjects, Result<Attachable, VolumeRefusal>)>,
    /// The DRA objects, when the pod has claims, with what holds for
    /// every node (PreFilter's refusal).
    dra: Option<(&'a DraObjects, Option<ClaimRefusal>)>,
}

impl<'a> PreFilter<'a> {
    /// Precomputes, over all nodes, what the InterPodAffinity and
    /// PodTopologySpread filters need for `pod`.
    pub fn new(pod: &'a PodInfo, nodes: &[NodeInfo]) -> Self {
        let existing = nodes.iter().any(|n| n.anti_affinity_pods > 0);
        Self::with_existing_anti_affinity(pod, nodes, existing)
    }

    /// As [`Self::new`], told whether any node holds a pod with required
    /// anti-affinity (a snapshot counts them as it changes): a pod without
    /// terms of its own among nodes without such pods skips the scan of
    /// every node's pods, which would make a loop cost pods x nodes.
    pub fn with_existing_anti_affinity(
        pod: &'a PodInfo,
        nodes: &[NodeInfo],
        existing: bool,
    ) -> Self {
        let affinity = required_terms(&pod.pod, false);
        let anti_affinity = required_terms(&pod.pod, true);
        let mut affinity_counts = HashMap::new();
        let mut anti_affinity_counts = HashMap::new();
        let mut existing_anti_affinity = HashMap::new();
        let ns = pod.namespace();
        let labels = pod.labels();
        let own_terms = !affinity.is_empty() || !anti_affinity.is_empty();
        let scanned = if own_terms || existing { nodes } else { &[] };
        for node in scanned {
            // Most pods have no terms and most nodes no anti-affine pods.
            if !own_terms && node.anti_affinity_pods == 0 {
                continue;
            }
            let node_labels = node.labels();
            for other in node.pods.iter() {
                if other.key == pod.key {
                    continue;
                }
                let (ons, olabels) = (other.namespace(), other.labels());
                if !affinity.is_empty() && affinity.iter().all(|t| t.matches(ons, olabels)) {
                    for t in &affinity {
                        if let Some(v) = node_labels.get(&t.topology_key) {
                            *affinity_counts
                                .entry((t.topology_key.clone(), v.clone()))
                                .or_insert(0) += 1;
                        }
                    }
                }
                for t in &anti_affinity {
                    if t.matches(ons, olabels)
                        && let Some(v) = node_labels.get(&t.topology_key)
                    {
                        *anti_affinity_counts
                            .entry((t.topology_key.clone(), v.clone()))
                            .or_insert(0) += 1;
                    }
                }
                if other.has_required_anti_affinity {
                    for t in required_terms(&other.pod, true) {
                        if t.matches(ns, labels)
                            && let Some(v) = node_labels.get(&t.topology_key)
                        {
                            *existing_anti_affinity
                                .entry((t.topology_key.clone(), v.clone()))
                                .or_insert(0) += 1;
                        }
                    }
                }
            }
        }
        let self_affinity = !affinity.is_empty() && affinity.iter().all(|t| t.matches(ns, labels));
        let spreads = Self::spreads(pod, nodes);
        Self {
            pod,
            affinity,
            anti_affinity,
            affinity_counts,
            anti_affinity_counts,
            existing_anti_affinity,
            self_affinity,
            spreads,
            plugins: FilterPlugins::default(),
            volumes: None,
            dra: None,
        }
    }

    fn spreads(pod: &PodInfo, nodes: &[NodeInfo]) -> Vec<Spread> {
        let constraints: Vec<&TopologySpreadConstraint> = pod
            .pod
            .spec
            .iter()
            .flat_map(|s| s.topology_spread_constraints.iter().flatten())
            .filter(|c| c.when_unsatisfiable == "DoNotSchedule")
            .collect();
        if constraints.is_empty() {
            return Vec::new();
        }
        let tols = tolerations(&pod.pod);
        constraints
            .into_iter()
            .map(|c| {
                let mut selector = c.label_selector.clone().unwrap_or_default();
                for k in c.match_label_keys.iter().flatten() {
                    if let Some(v) = pod.labels().get(k) {
                        selector
                            .match_labels
                            .get_or_insert_with(BTreeMap::new)
                            .insert(k.clone(), v.clone());
                    }
                }
                let honor_affinity = c.node_affinity_policy.as_deref() != Some("Ignore");
                let honor_taints = c.node_taints_policy.as_deref() == Some("Honor");
                let mut counts: HashMap<String, i32> = HashMap::new();
                for node in nodes {
                    let Some(value) = node.labels().get(&c.topology_key) else {
                        continue;
                    };
                    if honor_affinity && !node_affinity_matches(&pod.pod, node) {
                        continue;
                    }
                    let taints = node
                        .node
                        .spec
                        .as_ref()
                        .and_then(|s| s.taints.as_deref())
                        .unwrap_or_default();
                    if honor_taints && untolerated_taint(taints, tols).is_some() {
                        continue;
                    }
                    let n = node
                        .pods
                        .iter()
                        .filter(|p| {
                            p.key != pod.key
                                && p.namespace() == pod.namespace()
                                && p.pod.metadata.deletion_timestamp.is_none()
                                && selector_matches(&selector, p.labels())
                        })
                        .count();
                    *counts.entry(value.clone()).or_insert(0) +=
                        i32::try_from(n).unwrap_or(i32::MAX);
                }
                Spread {
                    topology_key: c.topology_key.clone(),
                    max_skew: c.max_skew,
                    min_domains: c.min_domains.unwrap_or(1),
                    self_match: selector_matches(&selector, pod.labels()),
                    counts,
                }
            })
            .collect()
    }

    /// NodeVolumeLimits runs, resolving volumes through `objects`.
    pub fn with_volumes(mut self, objects: &'a VolumeObjects) -> Self {
        let has_volumes = self
            .pod
            .pod
            .spec
            .as_ref()
            .is_some_and(|s| s.volumes.as_ref().is_some_and(|v| !v.is_empty()));
        if has_volumes {
            self.volumes = Some((objects, objects.attachable(&self.pod.pod, true)));
        }
        self
    }

    /// DynamicResources runs, with the claims, classes and slices of
    /// `objects` (the nodes carry their local slices).
    pub fn with_dra(mut self, objects: &'a DraObjects) -> Self {
        if has_claims(&self.pod.pod) {
            let every_node = objects.claims_of(&self.pod.pod).err();
            self.dra = Some((objects, every_node));
        }
        self
    }

    /// Only these filter plugins run.
    pub fn with_plugins(mut self, plugins: FilterPlugins) -> Self {
        self.plugins = plugins;
        self
    }

    /// Whether NodeResourcesFit (when on) rejects `node`, without the
    /// reasons and without allocating: such a node is infeasible whatever
    /// the other filters say, so a cycle over many full nodes can pass it
    /// by and ask [`PreFilter::filter`] for its reasons only if no node
    /// fits.
    pub fn resources_rejected(&self, node: &NodeInfo) -> bool {
        self.plugins.node_resources_fit && shortfalls(self.pod, node).next().is_some()
    }

    /// The only nodes the pod can pass by name ([`named_nodes`]), when
    /// NodeAffinity is on; `None`: any node may.
    pub fn named_nodes(&self) -> Option<BTreeSet<&'a str>> {
        if self.plugins.node_affinity {
            named_nodes(&self.pod.pod)
        } else {
            None
        }
    }

    /// Whether the pod passes every filter on `node`: [`PreFilter::filter`]
    /// without the reasons, a node without room passed by before the other
    /// filters run and before any reason is made (searches for a fit try
    /// many nodes that do not have it).
    pub fn passes(&self, node: &NodeInfo) -> bool {
        !self.resources_rejected(node) && self.filter(node).is_ok()
    }

    /// Runs the filters on one node: `Ok` when the pod fits, else the
    /// reasons of the first failing plugin.
    pub fn filter(&self, node: &NodeInfo) -> Result<(), Vec<Reason>> {
        let pod = &self.pod.pod;
        let spec = node.node.spec.as_ref();
        let tols = tolerations(pod);
        let taints = spec.and_then(|s| s.taints.as_deref()).unwrap_or_default();
        let on = &self.plugins;

        // NodeUnschedulable
        if on.node_unschedulable && spec.and_then(|s| s.unschedulable).unwrap_or(false) {
            let cordon = Taint {
                key: UNSCHEDULABLE_TAINT.into(),
                effect: "NoSchedule".into(),
                ..Taint::default()
            };
            if !tolerated_by(tols, &cordon) {
                return Err(vec![Reason::Unschedulable]);
            }
        }
        // NodeName
        if on.node_name
            && let Some(want) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
            && !want.is_empty()
            && want != node.name()
        {
            return Err(vec![Reason::NodeName]);
        }
        // TaintToleration
        if on.taint_toleration
            && let Some(t) = untolerated_taint(taints, tols)
        {
            return Err(vec![Reason::UntoleratedTaint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
            }]);
        }
        // NodeAffinity
        if on.node_affinity && !node_affinity_matches(pod, node) {
            return Err(vec![Reason::NodeAffinity]);
        }
        // NodePorts
        if on.node_ports
            && self.pod.ports.iter().any(|want| {
                node.pods
                    .iter()
                    .flat_map(|p| &p.ports)
                    .any(|used| used.conflicts(want))
            })
        {
            return Err(vec![Reason::HostPorts]);
        }
        // NodeResourcesFit
        if on.node_resources_fit {
            let fit = resources_fit(self.pod, node);
            if !fit.is_empty() {
                return Err(fit);
            }
        }
        // NodeVolumeLimits
        if on.node_volume_limits
            && let Some((objects, new)) = &self.volumes
        {
            let new = new.as_ref().map_err(|r| vec![Reason::from(r.clone())])?;
            volume_limits_fit(new, node, objects).map_err(|r| vec![Reason::from(r)])?;
        }
        // PodTopologySpread
        if on.pod_topology_spread {
            self.filter_spread(node)?;
        }
        // InterPodAffinity
        if on.inter_pod_affinity {
            self.filter_inter_pod(node)?;
        }
        // DynamicResources
        if on.dynamic_resources
            && let Some((objects, every_node)) = &self.dra
        {
            if let Some(refusal) = every_node {
                return Err(vec![Reason::Dra(refusal.clone())]);
            }
            objects
                .allocate(&self.pod.pod, node)
                .map_err(|r| vec![Reason::Dra(r)])?;
        }
        Ok(())
    }

    fn filter_spread(&self, node: &NodeInfo) -> Result<(), Vec<Reason>> {
        for s in &self.spreads {
            let Some(value) = node.labels().get(&s.topology_key) else {
                return Err(vec![Reason::SpreadMissingLabel]);
            };
            let domains = i32::try_from(s.counts.len()).unwrap_or(i32::MAX);
            let min = if domains < s.min_domains {
                0
            } else {
                s.counts.values().copied().min().unwrap_or(0)
            };
            let here = s.counts.get(value).copied().unwrap_or(0) + i32::from(s.self_match);
            if here - min > s.max_skew {
                return Err(vec![Reason::Spread]);
            }
        }
        Ok(())
    }

    fn filter_inter_pod(&self, node: &NodeInfo) -> Result<(), Vec<Reason>> {
        let labels = node.labels();
        let domain_has = |counts: &HashMap<Domain, usize>, key: &str| {
            labels.get(key).is_some_and(|v| {
                counts
                    .get(&(key.to_string(), v.clone()))
                    .is_some_and(|n| *n > 0)
            })
        };
        if self
            .existing_anti_affinity
            .keys()
            .any(|(k, _)| domain_has(&self.existing_anti_affinity, k))
        {
            return Err(vec![Reason::ExistingAntiAffinity]);
        }
        if self
            .anti_affinity
            .iter()
            .any(|t| domain_has(&self.anti_affinity_counts, &t.topology_key))
        {
            return Err(vec![Reason::PodAntiAffinity]);
        }
        if !self.affinity.is_empty() {
            let all_present = self
                .affinity
                .iter()
                .all(|t| domain_has(&self.affinity_counts, &t.topology_key));
            let first_of_group = self.affinity_counts.is_empty()
                && self.self_affinity
                && self
                    .affinity
                    .iter()
                    .all(|t| labels.contains_key(&t.topology_key));
            if !all_present && !first_of_group {
                return Err(vec![Reason::PodAffinity]);
            }
        }
        Ok(())
    }
}

/// NodeResourcesFit: every resource the pod requests must fit in what the
/// node has left; all shortfalls are reported.
pub fn resources_fit(pod: &PodInfo, node: &NodeInfo) -> Vec<Reason> {
    shortfalls(pod, node)
        .map(|s| match s {
            Shortfall::Pods => Reason::TooManyPods,
            Shortfall::Of(name) => Reason::Insufficient(name.to_string()),
        })
        .collect()
}

/// A resource the pod asks more of than the node has left.
enum Shortfall<'a> {
    Pods,
    Of(&'a str),
}

/// NodeResourcesFit's shortfalls in its order (pods, cpu, memory,
/// ephemeral-storage, then the scalar resources), computed as they are
/// read: [`PreFilter::resources_rejected`] stops at the first.
fn shortfalls<'a>(pod: &'a PodInfo, node: &'a NodeInfo) -> impl Iterator<Item = Shortfall<'a>> {
    let (a, u, r) = (&node.allocatable, &node.requested, &pod.requests);
    let fixed = [
        (u.pods + 1 > a.pods).then_some(Shortfall::Pods),
        (r.milli_cpu > 0 && r.milli_cpu > a.milli_cpu - u.milli_cpu)
            .then_some(Shortfall::Of("cpu")),
        (r.memory > 0 && r.memory > a.memory - u.memory).then_some(Shortfall::Of("memory")),
        (r.ephemeral_storage > 0
            && r.ephemeral_storage > a.ephemeral_storage - u.ephemeral_storage)
            .then_some(Shortfall::Of("ephemeral-storage")),
    ];
    let scalar = r.scalar.iter().filter_map(|(name, want)| {
        let have =
            a.scalar.get(name).copied().unwrap_or(0) - u.scalar.get(name).copied().unwrap_or(0);
        (*want != 0 && *want > have).then_some(Shortfall::Of(name.as_str()))
    });
    fixed.into_iter().flatten().chain(scalar)
}
