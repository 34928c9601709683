//! The simulator: a cluster snapshot that scale-up and scale-down change
//! freely and undo cheaply ([`Snapshot::fork`] / [`Snapshot::revert`]),
//! checked with the same kube-scheduler filters as the testbed's scheduler
//! (the `predicates` crate), and the drainability rules
//! ([`drainability`]).
//!
//! Changes are journaled while a fork is open: a fork records the journal
//! length; revert undoes entries back to it; commit forgets the mark and
//! keeps the changes (changes made outside any fork are final). Nodes
//! are addressed by index; a node taken out of the simulation (being
//! removed) stays in place as a topology domain but is no destination.
//!
//! Where a removed node's pods go is [`scheduling`]'s choice: the node
//! each went to last time, else a search that goes on from where the last
//! one ended.
//!
//! Pods with ResourceClaims reserve them where they are placed (claims not
//! allocated yet are allocated from the node's devices) and release them
//! when taken off; the claim changes are journaled like the rest
//! ([`dynamicresources`]).

pub mod drainability;
pub mod dynamicresources;
pub mod fake;
pub mod scheduling;

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use predicates::dynamicresources::api::ResourceClaim;
use predicates::filters::Reason;
use predicates::{DraObjects, FilterPlugins, NodeInfo, PodInfo, PreFilter, VolumeObjects};

enum Undo {
    AddedPod {
        node: usize,
        key: String,
    },
    RemovedPod {
        node: usize,
        pod: PodInfo,
    },
    AddedNode,
    Disabled {
        node: usize,
    },
    /// A claim changed (allocated, reserved, released): its key and how it
    /// was (`None`: it did not exist).
    Claim {
        key: String,
        before: Option<Arc<ResourceClaim>>,
    },
}

/// A forkable cluster snapshot.
#[derive(Default)]
pub struct Snapshot {
    nodes: Vec<NodeInfo>,
    disabled: Vec<bool>,
    index: HashMap<String, usize, crate::cache::LoopHasher>,
    journal: Vec<Undo>,
    marks: Vec<usize>,
    /// Pods with required anti-affinity on all nodes (see
    /// [`PreFilter::with_existing_anti_affinity`]).
    anti_affinity_pods: usize,
    /// The filter plugins the scheduler profile runs
    /// (`--scheduler-config-file`).
    plugins: FilterPlugins,
    /// The claims and volumes NodeVolumeLimits reads (`None`: it does not
    /// run).
    volumes: Option<Arc<VolumeObjects>>,
    /// DeviceClasses, ResourceClaims and shared slices (DynamicResources;
    /// copied on the first change).
    dra: Arc<DraObjects>,
}

impl Snapshot {
    /// Only these filter plugins decide where pods fit.
    pub fn with_plugins(mut self, plugins: FilterPlugins) -> Self {
        self.plugins = plugins;
        self
    }

    /// NodeVolumeLimits counts the pods' CSI volumes, resolved through
    /// `volumes`, against the nodes' CSINodes.
    pub fn with_volumes(mut self, volumes: Arc<VolumeObjects>) -> Self {
        self.volumes = Some(volumes);
        self
    }

    /// DynamicResources allocates the pods' claims from these classes,
    /// claims and shared slices, and the nodes' own slices.
    pub fn with_dra(mut self, dra: Arc<DraObjects>) -> Self {
        self.dra = dra;
        self
    }

    /// The DRA objects as the simulation has changed them.
    pub fn dra(&self) -> &DraObjects {
        &self.dra
    }

    /// A snapshot of these nodes (with their pods).
    pub fn new(nodes: Vec<NodeInfo>) -> Self {
        let index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name().to_string(), i))
            .collect();
        Self {
            disabled: vec![false; nodes.len()],
            anti_affinity_pods: nodes.iter().map(|n| n.anti_affinity_pods).sum(),
            nodes,
            index,
            journal: Vec::new(),
            marks: Vec::new(),
            plugins: FilterPlugins::default(),
            volumes: None,
            dra: Arc::default(),
        }
    }

    /// All nodes, by index.
    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    /// A node by index.
    pub fn node(&self, i: usize) -> &NodeInfo {
        &self.nodes[i]
    }

    /// The index of a node by name.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Whether the node is a possible destination.
    pub fn enabled(&self, i: usize) -> bool {
        !self.disabled[i]
    }

    /// Starts a change set that [`Self::revert`] can undo.
    pub fn fork(&mut self) {
        self.marks.push(self.journal.len());
    }

    /// Whether a fork is open: changes outside one cannot be undone and are
    /// not journaled.
    fn forked(&self) -> bool {
        !self.marks.is_empty()
    }

    /// Journals a change when a fork is open.
    fn record(&mut self, undo: impl FnOnce() -> Undo) {
        if self.forked() {
            self.journal.push(undo());
        }
    }

    /// Undoes everything since the last fork.
    pub fn revert(&mut self) {
        let Some(mark) = self.marks.pop() else {
            return;
        };
        while self.journal.len() > mark {
            match self.journal.pop() {
                Some(Undo::AddedPod { node, key }) => {
                    self.take(node, &key);
                }
                Some(Undo::RemovedPod { node, pod }) => self.place(node, pod),
                Some(Undo::AddedNode) => {
                    if let Some(n) = self.nodes.pop() {
                        self.index.remove(n.name());
                        self.anti_affinity_pods -= n.anti_affinity_pods;
                    }
                    self.disabled.pop();
                }
                Some(Undo::Disabled { node }) => self.disabled[node] = false,
                Some(Undo::Claim { key, before }) => {
                    let dra = Arc::make_mut(&mut self.dra);
                    match before {
                        Some(c) => dra.insert_claim(c),
                        None => {
                            dra.remove_claim(&key);
                        }
                    }
                }
                None => break,
            }
        }
    }

    /// Keeps the changes since the last fork (they become part of the
    /// enclosing change set, if any).
    pub fn commit(&mut self) {
        self.marks.pop();
        if self.marks.is_empty() {
            self.journal.clear();
        }
    }

    /// Adds a node (an upcoming or template node).
    pub fn add_node(&mut self, node: NodeInfo) -> usize {
        let i = self.nodes.len();
        self.index.insert(node.name().to_string(), i);
        self.anti_affinity_pods += node.anti_affinity_pods;
        self.nodes.push(node);
        self.disabled.push(false);
        self.record(|| Undo::AddedNode);
        i
    }

    /// Places a pod on a node (a pod with claims reserves them there,
    /// allocating those not allocated yet: the scheduler's Reserve).
    pub fn add_pod(&mut self, node: usize, pod: PodInfo) {
        let key = self.forked().then(|| pod.key.clone());
        if predicates::dynamicresources::has_claims(&pod.pod) {
            let changes = dynamicresources::reserve(&self.dra, &pod.pod, &self.nodes[node]);
            self.change_claims(changes);
        }
        self.place(node, pod);
        if let Some(key) = key {
            self.journal.push(Undo::AddedPod { node, key });
        }
    }

    /// Takes a pod off a node (its claims no longer reserved for it, and
    /// deallocated when it owned them or nobody else uses them).
    pub fn remove_pod(&mut self, node: usize, key: &str) -> Option<PodInfo> {
        let pod = self.take(node, key)?;
        if predicates::dynamicresources::has_claims(&pod.pod) {
            let changes = dynamicresources::unreserve(&self.dra, &pod.pod);
            self.change_claims(changes);
        }
        self.record(|| Undo::RemovedPod {
            node,
            pod: pod.clone(),
        });
        Some(pod)
    }

    /// Replaces claims, journaled inside a fork.
    fn change_claims(&mut self, claims: Vec<ResourceClaim>) {
        if claims.is_empty() {
            return;
        }
        let forked = self.forked();
        let dra = Arc::make_mut(&mut self.dra);
        for c in claims {
            let key = c.key();
            let before = forked.then(|| dra.claims.get(&key).cloned());
            dra.insert_claim(Arc::new(c));
            if let Some(before) = before {
                self.journal.push(Undo::Claim { key, before });
            }
        }
    }

    /// Puts a pod on a node (replacing one with its key), keeping the count
    /// of anti-affine pods.
    fn place(&mut self, node: usize, pod: PodInfo) {
        let before = self.nodes[node].anti_affinity_pods;
        self.nodes[node].add_pod(pod);
        self.anti_affinity_pods =
            self.anti_affinity_pods + self.nodes[node].anti_affinity_pods - before;
    }

    /// Takes a pod off a node, keeping the count of anti-affine pods.
    fn take(&mut self, node: usize, key: &str) -> Option<PodInfo> {
        let pod = self.nodes[node].remove_pod(key)?;
        self.anti_affinity_pods -= usize::from(pod.has_required_anti_affinity);
        Some(pod)
    }

    /// Takes a node out as a destination (it is being removed).
    pub fn disable(&mut self, node: usize) {
        if !self.disabled[node] {
            self.disabled[node] = true;
            self.record(|| Undo::Disabled { node });
        }
    }

    /// Whether the pod passes the scheduler's filters on one node.
    pub fn fits(&self, pod: &PodInfo, node: usize) -> Result<(), Vec<Reason>> {
        self.prefilter(pod).filter(&self.nodes[node])
    }

    fn prefilter<'a>(&'a self, pod: &'a PodInfo) -> PreFilter<'a> {
        let pre =
            PreFilter::with_existing_anti_affinity(pod, &self.nodes, self.anti_affinity_pods > 0)
                .with_plugins(self.plugins)
                .with_dra(&self.dra);
        match &self.volumes {
            Some(v) => pre.with_volumes(v),
            None => pre,
        }
    }

    /// The first enabled node (from `start`, wrapping) where the pod fits,
    /// among those `accept` allows.
    pub fn find_fit(
        &self,
        pod: &PodInfo,
        start: usize,
        mut accept: impl FnMut(usize) -> bool,
    ) -> Option<usize> {
        let n = self.nodes.len();
        if n == 0 {
            return None;
        }
        let pre = self.prefilter(pod);
        let mut fits = |i: usize| !self.disabled[i] && accept(i) && pre.passes(&self.nodes[i]);
        // A pod that names its nodes (a DaemonSet pod) passes no other:
        // the filters run on those alone.
        let named = pre.named_nodes();
        (0..n).map(|k| (start + k) % n).find(|&i| {
            named
                .as_ref()
                .is_none_or(|names| names.contains(self.nodes[i].name()))
                && fits(i)
        })
    }
}

/// A node built for simulation from a template (scale-up estimates,
/// upcoming nodes): named `name`, hostname label updated, its CSINode's
/// drivers (a template has them with `--enable-csi-node-aware-scheduling`),
/// its ResourceSlices made its own (renamed, pools of its own), with the
/// template's pods (DaemonSet and mirror pods) renamed to stay unique.
pub fn node_from_template(template: &NodeInfo, name: &str) -> NodeInfo {
    let mut node: Node = (*template.node).clone();
    node.metadata.name = Some(name.to_string());
    node.metadata.uid = Some(format!("uid-{name}"));
    node.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("kubernetes.io/hostname".into(), name.to_string());
    let mut info = NodeInfo::new(Arc::new(node));
    info.csi = template.csi.clone();
    info.slices = dynamicresources::slices_for_node(&template.slices, name);
    for p in template.pods.iter() {
        let mut pod = (*p.pod).clone();
        let base = pod.metadata.name.clone().unwrap_or_default();
        pod.metadata.name = Some(format!("{base}-{name}"));
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(name.to_string());
        }
        info.add_pod(p.with_pod(pod));
    }
    info
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    pub(crate) fn node(name: &str, cpu: &str) -> NodeInfo {
        NodeInfo::new(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name},
                "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}))
            .unwrap(),
        ))
    }

    pub(crate) fn pod(name: &str, cpu: &str) -> PodInfo {
        let p: Pod = serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}}))
        .unwrap();
        PodInfo::new(Arc::new(p))
    }

    #[test]
    fn fork_and_revert_undo_every_change() {
        let mut s = Snapshot::new(vec![node("a", "2"), node("b", "2")]);
        s.add_pod(0, pod("base", "1"));
        s.commit();
        s.fork();
        s.add_pod(1, pod("x", "1"));
        s.remove_pod(0, "default/base");
        let t = s.add_node(node("template-1", "4"));
        s.add_pod(t, pod("y", "3"));
        s.disable(0);
        assert_eq!(s.nodes().len(), 3);
        assert!(!s.enabled(0));
        s.revert();
        assert_eq!(s.nodes().len(), 2);
        assert!(s.enabled(0));
        assert_eq!(s.node(0).pods.len(), 1);
        assert!(s.node(1).pods.is_empty());
        assert_eq!(s.node(0).requested.milli_cpu, 1000);
        assert!(s.index_of("template-1").is_none());
    }

    #[test]
    fn nested_forks_revert_only_the_inner_changes() {
        let mut s = Snapshot::new(vec![node("a", "4")]);
        s.fork();
        s.add_pod(0, pod("outer", "1"));
        s.fork();
        s.add_pod(0, pod("inner", "1"));
        s.revert();
        assert_eq!(s.node(0).pods.len(), 1);
        s.commit();
        assert_eq!(s.node(0).pods.len(), 1, "committed");
    }

    #[test]
    fn find_fit_skips_full_and_disabled_nodes() {
        let mut s = Snapshot::new(vec![node("a", "1"), node("b", "2"), node("c", "2")]);
        s.disable(1);
        assert_eq!(s.find_fit(&pod("p", "1500m"), 0, |_| true), Some(2));
        assert_eq!(s.find_fit(&pod("p", "3"), 0, |_| true), None);
        assert_eq!(s.find_fit(&pod("p", "500m"), 1, |i| i != 2), Some(0));
        assert!(s.fits(&pod("p", "1500m"), 0).is_err());
    }

    /// A pod that names its nodes (as a DaemonSet's does) fits only there:
    /// the first of them from the start, none when they are full,
    /// disabled or refused.
    #[test]
    fn find_fit_tries_the_nodes_a_pod_names() {
        let pinned = |names: &[&str], cpu: &str| {
            let mut p = (*pod("ds", cpu).pod).clone();
            p.spec.as_mut().unwrap().affinity = Some(
                serde_json::from_value(json!({"nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": names}]}]}}}))
                .unwrap(),
            );
            PodInfo::new(Arc::new(p))
        };
        let mut s = Snapshot::new(vec![
            node("a", "2"),
            node("b", "2"),
            node("c", "1"),
            node("d", "2"),
        ]);
        assert_eq!(s.find_fit(&pinned(&["c"], "500m"), 0, |_| true), Some(2));
        assert_eq!(
            s.find_fit(&pinned(&["c"], "1500m"), 0, |_| true),
            None,
            "full"
        );
        assert_eq!(s.find_fit(&pinned(&["gone"], "500m"), 0, |_| true), None);
        assert_eq!(
            s.find_fit(&pinned(&["a", "d"], "500m"), 0, |_| true),
            Some(0)
        );
        assert_eq!(
            s.find_fit(&pinned(&["a", "d"], "500m"), 2, |_| true),
            Some(3),
            "from the start"
        );
        assert_eq!(
            s.find_fit(&pinned(&["a", "d"], "500m"), 2, |i| i != 3),
            Some(0)
        );
        s.disable(0);
        assert_eq!(
            s.find_fit(&pinned(&["a"], "500m"), 0, |_| true),
            None,
            "disabled"
        );
    }

    /// A pod of app=web that no other app=web pod may share a node with.
    fn anti_affine(name: &str) -> PodInfo {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "i"}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "web"}},
                     "topologyKey": "kubernetes.io/hostname"}]}}}}))
        .unwrap();
        PodInfo::new(Arc::new(p))
    }

    /// A pod of app=web without terms of its own: only an existing pod's
    /// anti-affinity keeps it off a node.
    fn plain_web(name: &str) -> PodInfo {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}))
        .unwrap();
        PodInfo::new(Arc::new(p))
    }

    fn hostname_node(name: &str) -> NodeInfo {
        NodeInfo::new(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name,
                "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
            .unwrap(),
        ))
    }

    #[test]
    fn an_existing_pods_anti_affinity_is_honoured_through_every_change() {
        let first = |s: &Snapshot| s.find_fit(&plain_web("w"), 0, |_| true);
        let mut s = Snapshot::new(vec![hostname_node("a"), hostname_node("b")]);
        assert_eq!(first(&s), Some(0));
        s.fork();
        s.add_pod(0, anti_affine("guard"));
        assert_eq!(first(&s), Some(1), "added");
        s.revert();
        assert_eq!(first(&s), Some(0), "reverted");
        s.add_pod(0, anti_affine("guard"));
        s.commit();
        s.fork();
        s.remove_pod(0, "default/guard");
        assert_eq!(first(&s), Some(0), "removed");
        s.revert();
        assert_eq!(first(&s), Some(1), "restored");
        // A node that came with one, and stays guarded after another node
        // came and went.
        let mut guarded = hostname_node("c");
        guarded.add_pod(anti_affine("guard-c"));
        let mut s = Snapshot::new(vec![guarded]);
        assert_eq!(first(&s), None, "came with one");
        s.fork();
        s.add_node(hostname_node("t"));
        assert_eq!(first(&s), Some(1), "the new node");
        s.revert();
        assert_eq!(first(&s), None, "after a node came and went");
    }

    #[test]
    fn template_copies_get_their_own_names() {
        let mut t = node("template", "4");
        t.add_pod(pod("ds", "100m"));
        let n = node_from_template(&t, "template-1");
        assert_eq!(n.name(), "template-1");
        assert_eq!(n.labels()["kubernetes.io/hostname"], "template-1");
        assert_eq!(n.pods[0].key, "default/ds-template-1");
        assert_eq!(n.requested.milli_cpu, 100);
    }
}
