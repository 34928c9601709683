//! The controller task: one merged stream of watches on pods, nodes and the
//! workload kinds, a cache of them (with the pods each controller owns),
//! the owners to reconcile after each batch of changes, pod garbage
//! collection, and the pod and status writes the reconcilers share.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use futures::{FutureExt, StreamExt, stream::BoxStream};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use simclock::Clock;

use super::placement::{DaemonPlacement, NodeScope};
use super::pods::{CachedPod, key};
use crate::slim_pod::{SlimPod, into_pod_event};

/// Which owner a change concerns.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Owner {
    ReplicaSet(String),
    Deployment(String),
    DaemonSet(String),
    StatefulSet(String),
    Job(String),
}

enum Change {
    Pod(Event<Pod>),
    Node(Event<Node>),
    ReplicaSet(Event<ReplicaSet>),
    Deployment(Event<Deployment>),
    DaemonSet(Event<DaemonSet>),
    StatefulSet(Event<StatefulSet>),
    Job(Event<Job>),
}

/// How many resources the controllers watch: they sync nothing until the
/// first list of each is in, as kube-controller-manager's controllers wait
/// for their informers' caches (a ReplicaSet synced before its pods are
/// listed would create pods it already has, then delete them).
const WATCHED: usize = 7;

impl Change {
    /// The resource whose first (or a later) list this change completes.
    fn list_done(&self) -> Option<&'static str> {
        match self {
            Change::Pod(e) => matches!(e, Event::InitDone).then_some("Pod"),
            Change::Node(e) => matches!(e, Event::InitDone).then_some("Node"),
            Change::ReplicaSet(e) => matches!(e, Event::InitDone).then_some("ReplicaSet"),
            Change::Deployment(e) => matches!(e, Event::InitDone).then_some("Deployment"),
            Change::DaemonSet(e) => matches!(e, Event::InitDone).then_some("DaemonSet"),
            Change::StatefulSet(e) => matches!(e, Event::InitDone).then_some("StatefulSet"),
            Change::Job(e) => matches!(e, Event::InitDone).then_some("Job"),
        }
    }
}

/// The pods one controller owns, and how many are active, ready and
/// scheduled.
#[derive(Default)]
pub(super) struct Owned {
    keys: BTreeSet<String>,
    pub active: usize,
    pub ready: usize,
    pub scheduled: usize,
    /// A DaemonSet's active pods, by the node each is for.
    pub daemon_pods: BTreeMap<String, BTreeSet<String>>,
}

impl Owned {
    /// Adds (`sign` 1) or takes away (-1) `p`, cached as `k`, from the
    /// counts and the daemon pods.
    fn count(&mut self, k: &str, p: &CachedPod, sign: isize) {
        if !p.is_active() {
            return;
        }
        self.active = self.active.saturating_add_signed(sign);
        if p.ready {
            self.ready = self.ready.saturating_add_signed(sign);
        }
        if p.node_name.is_some() {
            self.scheduled = self.scheduled.saturating_add_signed(sign);
        }
        if p.daemon_set.is_some()
            && let Some(node) = p.daemon_node()
        {
            if sign > 0 {
                let on_node = self.daemon_pods.entry(node.to_string()).or_default();
                on_node.insert(k.to_string());
            } else if let Some(on_node) = self.daemon_pods.get_mut(node) {
                on_node.remove(k);
                if on_node.is_empty() {
                    self.daemon_pods.remove(node);
                }
            }
        }
    }
}

/// The controller task.
pub struct Controllers {
    pub(super) client: Client,
    pub(super) clock: Clock,
    /// What they read of each pod, by `namespace/name`.
    pub(super) pods: BTreeMap<String, CachedPod>,
    /// What each controller owns, by its uid: kept as pods change, so
    /// that a controller's sync does not scan every pod.
    pub(super) owned_by: HashMap<String, Owned>,
    pub(super) nodes: BTreeMap<String, Node>,
    pub(super) replicasets: BTreeMap<String, ReplicaSet>,
    pub(super) deployments: BTreeMap<String, Deployment>,
    pub(super) daemonsets: BTreeMap<String, DaemonSet>,
    pub(super) statefulsets: BTreeMap<String, StatefulSet>,
    pub(super) jobs: BTreeMap<String, Job>,
    /// The nodes each DaemonSet (by key) looks at again at its next sync.
    pub(super) daemon_scopes: HashMap<String, NodeScope>,
    /// Where each DaemonSet's pod belongs on every node, as its syncs
    /// found it: a sync reads again only the nodes in its scope.
    pub(super) daemon_placements: HashMap<String, BTreeMap<String, DaemonPlacement>>,
    dirty: BTreeSet<Owner>,
    pub(super) nodes_synced: bool,
    /// The resources whose first list is in.
    listed: BTreeSet<&'static str>,
    /// The pods bound to each node, by `namespace/name`.
    pods_by_node: HashMap<String, BTreeSet<String>>,
    /// Pod GC's work: pods seen bound to a node not in the cache (a node's
    /// pods when it goes away), and whether every pod is checked (once the
    /// nodes are listed).
    orphan_candidates: BTreeSet<String>,
    orphan_scan_all: bool,
}

impl Controllers {
    /// Controllers talking to the API server through `client`.
    pub fn new(client: Client, clock: Clock) -> Self {
        Self {
            client,
            clock,
            pods: BTreeMap::new(),
            owned_by: HashMap::new(),
            nodes: BTreeMap::new(),
            replicasets: BTreeMap::new(),
            deployments: BTreeMap::new(),
            daemonsets: BTreeMap::new(),
            statefulsets: BTreeMap::new(),
            jobs: BTreeMap::new(),
            daemon_scopes: HashMap::new(),
            daemon_placements: HashMap::new(),
            dirty: BTreeSet::new(),
            nodes_synced: false,
            listed: BTreeSet::new(),
            pods_by_node: HashMap::new(),
            orphan_candidates: BTreeSet::new(),
            orphan_scan_all: false,
        }
    }

    /// Runs until the watches end.
    pub async fn run(mut self) {
        fn watch<K, F>(client: &Client, f: F) -> BoxStream<'static, Change>
        where
            K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
                + Clone
                + std::fmt::Debug
                + serde::de::DeserializeOwned
                + Send
                + 'static,
            F: Fn(Event<K>) -> Change + Send + Sync + Copy + 'static,
        {
            watcher::watcher(Api::<K>::all(client.clone()), watcher::Config::default())
                .default_backoff()
                .filter_map(move |e| async move { e.ok().map(f) })
                .boxed()
        }
        let c = &self.client;
        let nodes = watcher::watcher(Api::<Node>::all(c.clone()), watcher::Config::default())
            .default_backoff()
            .filter_map(|e| async move { e.ok().map(Change::Node) })
            .boxed();
        let mut changes = futures::stream::select_all([
            nodes,
            watch(c, |e: Event<SlimPod>| Change::Pod(into_pod_event(e))),
            watch(c, Change::ReplicaSet),
            watch(c, Change::Deployment),
            watch(c, Change::DaemonSet),
            watch(c, Change::StatefulSet),
            watch(c, Change::Job),
        ]);
        loop {
            // An owner whose sync was cut short (a burst) is synced again
            // without waiting for a change.
            if self.dirty.is_empty() || !self.all_listed() {
                match changes.next().await {
                    Some(change) => self.apply(change),
                    None => return,
                }
            }
            while let Some(Some(c)) = changes.next().now_or_never() {
                self.apply(c);
            }
            if self.all_listed() {
                self.reconcile_dirty().await;
            }
        }
    }

    /// Whether the first list of every watched resource is in.
    fn all_listed(&self) -> bool {
        self.listed.len() == WATCHED
    }

    fn apply(&mut self, change: Change) {
        if let Some(kind) = change.list_done() {
            self.listed.insert(kind);
        }
        macro_rules! cache {
            ($map:ident, $ev:expr, $owner:path) => {
                match $ev {
                    Event::Apply(o) | Event::InitApply(o) => {
                        let k = key(&o);
                        self.dirty.insert($owner(k.clone()));
                        self.$map.insert(k, o);
                    }
                    Event::Delete(o) => {
                        let k = key(&o);
                        self.$map.remove(&k);
                    }
                    _ => {}
                }
            };
        }
        match change {
            Change::Pod(ev) => match ev {
                Event::Apply(p) | Event::InitApply(p) => {
                    self.mark_owner(&p);
                    let p = CachedPod::of(&p);
                    self.mark_daemon_nodes(&p);
                    if self.bound_to_missing_node(&p) {
                        self.orphan_candidates.insert(p.key());
                    }
                    self.insert_pod(p);
                }
                Event::Delete(p) => {
                    self.mark_owner(&p);
                    self.mark_daemon_nodes(&CachedPod::of(&p));
                    self.remove_pod(&key(&p));
                }
                _ => {}
            },
            Change::Node(ev) => {
                // DaemonSets place pods by what a node is (labels, taints,
                // schedulability, allocatable), not by its heartbeats.
                let placement_changed = match ev {
                    Event::Apply(n) | Event::InitApply(n) => {
                        let name = n.name_any();
                        let changed = self
                            .nodes
                            .get(&name)
                            .is_none_or(|old| placement_differs(old, &n));
                        self.nodes.insert(name.clone(), n);
                        changed.then_some(Some(name))
                    }
                    Event::Delete(n) => {
                        let name = n.name_any();
                        self.nodes.remove(&name);
                        if let Some(pods) = self.pods_by_node.get(&name) {
                            self.orphan_candidates.extend(pods.iter().cloned());
                        }
                        Some(Some(name))
                    }
                    Event::InitDone => {
                        self.nodes_synced = true;
                        self.orphan_scan_all = true;
                        Some(None)
                    }
                    Event::Init => None,
                };
                // `Some(None)`: every node may have changed.
                if let Some(node) = placement_changed {
                    let all: Vec<String> = self.daemonsets.keys().cloned().collect();
                    for k in &all {
                        let scope = self.daemon_scopes.entry(k.clone()).or_default();
                        match &node {
                            Some(name) => scope.mark(name),
                            None => *scope = NodeScope::All,
                        }
                    }
                    self.dirty.extend(all.into_iter().map(Owner::DaemonSet));
                }
            }
            Change::ReplicaSet(ev) => {
                if let Event::Apply(rs) | Event::Delete(rs) = &ev {
                    self.mark_owner_of_owner(
                        rs.metadata.owner_references.as_ref(),
                        rs.metadata.namespace.as_deref(),
                    );
                }
                cache!(replicasets, ev, Owner::ReplicaSet)
            }
            Change::Deployment(ev) => cache!(deployments, ev, Owner::Deployment),
            Change::DaemonSet(ev) => {
                // A new pod template may place pods elsewhere: every node
                // is read again (not on a change of status alone).
                if let Event::Apply(ds) | Event::InitApply(ds) = &ev {
                    let k = key(ds);
                    if self
                        .daemonsets
                        .get(&k)
                        .is_none_or(|old| old.spec != ds.spec)
                    {
                        self.daemon_scopes.insert(k, NodeScope::All);
                    }
                }
                cache!(daemonsets, ev, Owner::DaemonSet)
            }
            Change::StatefulSet(ev) => cache!(statefulsets, ev, Owner::StatefulSet),
            Change::Job(ev) => cache!(jobs, ev, Owner::Job),
        }
    }

    /// Marks the node a daemon pod is for (as cached, and as `p` has it)
    /// for its DaemonSet's next sync.
    fn mark_daemon_nodes(&mut self, p: &CachedPod) {
        let cached = self.pods.get(&p.key()).and_then(CachedPod::daemon_of);
        for (ds, node) in p.daemon_of().into_iter().chain(cached) {
            self.daemon_scopes.entry(ds).or_default().mark(node);
        }
    }

    fn insert_pod(&mut self, p: CachedPod) {
        let k = p.key();
        self.remove_pod(&k);
        if let Some(uid) = &p.controller_uid {
            let owned = self.owned_by.entry(uid.clone()).or_default();
            owned.keys.insert(k.clone());
            owned.count(&k, &p, 1);
        }
        if let Some(node) = p.node_name.as_deref().filter(|n| !n.is_empty()) {
            self.pods_by_node
                .entry(node.to_string())
                .or_default()
                .insert(k.clone());
        }
        self.pods.insert(k, p);
    }

    /// Takes `k` out of the cache and the index; returns the pod it was.
    fn remove_pod(&mut self, k: &str) -> Option<CachedPod> {
        let old = self.pods.remove(k)?;
        if let Some(uid) = &old.controller_uid
            && let Some(owned) = self.owned_by.get_mut(uid)
        {
            owned.keys.remove(k);
            owned.count(k, &old, -1);
            if owned.keys.is_empty() {
                self.owned_by.remove(uid);
            }
        }
        if let Some(node) = old.node_name.as_deref()
            && let Some(pods) = self.pods_by_node.get_mut(node)
        {
            pods.remove(k);
            if pods.is_empty() {
                self.pods_by_node.remove(node);
            }
        }
        Some(old)
    }

    /// (active, ready) pods of the controller with `uid`.
    pub(super) fn owned_counts(&self, uid: &str) -> (usize, usize) {
        self.owned_by
            .get(uid)
            .map_or((0, 0), |o| (o.active, o.ready))
    }

    fn mark_owner(&mut self, p: &Pod) {
        self.mark_owner_of_owner(
            p.metadata.owner_references.as_ref(),
            p.metadata.namespace.as_deref(),
        );
    }

    fn mark_owner_of_owner(&mut self, refs: Option<&Vec<OwnerReference>>, ns: Option<&str>) {
        let Some(o) = refs
            .into_iter()
            .flatten()
            .find(|o| o.controller == Some(true))
        else {
            return;
        };
        let k = format!("{}/{}", ns.unwrap_or(""), o.name);
        self.dirty.insert(match o.kind.as_str() {
            "ReplicaSet" => Owner::ReplicaSet(k),
            "Deployment" => Owner::Deployment(k),
            "DaemonSet" => Owner::DaemonSet(k),
            "StatefulSet" => Owner::StatefulSet(k),
            "Job" => Owner::Job(k),
            _ => return,
        });
    }

    /// Syncs `owner` again at the next round: its sync did part of the
    /// work (a burst's worth).
    pub(super) fn requeue(&mut self, owner: Owner) {
        self.dirty.insert(owner);
    }

    /// Syncs every owner marked so far, each once; those marked during
    /// this round (by a change they made, or a burst cut short) are synced
    /// at the next.
    async fn reconcile_dirty(&mut self) {
        if self.nodes_synced {
            self.collect_orphan_pods().await;
        }
        for owner in std::mem::take(&mut self.dirty) {
            match owner {
                Owner::ReplicaSet(k) => self.reconcile_replicaset(&k).await,
                Owner::Deployment(k) => self.reconcile_deployment(&k).await,
                Owner::DaemonSet(k) => self.reconcile_daemonset(&k).await,
                Owner::StatefulSet(k) => self.reconcile_statefulset(&k).await,
                Owner::Job(k) => self.reconcile_job(&k).await,
            }
        }
    }

    /// Whether `p` is bound to a node the cache does not have.
    fn bound_to_missing_node(&self, p: &CachedPod) -> bool {
        p.node_name
            .as_deref()
            .is_some_and(|n| !n.is_empty() && !self.nodes.contains_key(n))
            && !p.deleting
    }

    /// Pod GC: pods bound to a node that no longer exists are deleted.
    /// Only the pods that may be orphans are checked: all of them once the
    /// nodes are listed, else those seen bound to an unknown node and
    /// those of the nodes gone (a scan of every pod on every change is
    /// quadratic at 30,000 pods).
    async fn collect_orphan_pods(&mut self) {
        let candidates = std::mem::take(&mut self.orphan_candidates);
        let orphans: Vec<String> = if std::mem::take(&mut self.orphan_scan_all) {
            self.pods
                .iter()
                .filter(|(_, p)| self.bound_to_missing_node(p))
                .map(|(k, _)| k.clone())
                .collect()
        } else {
            candidates
                .into_iter()
                .filter(|k| {
                    self.pods
                        .get(k)
                        .is_some_and(|p| self.bound_to_missing_node(p))
                })
                .collect()
        };
        for k in orphans {
            self.delete_pod(&k, Some(0)).await;
        }
    }

    /// The pods a controller owns (by controller ownerReference uid).
    pub(super) fn owned(&self, ns: &str, uid: &str) -> Vec<&CachedPod> {
        self.owned_by
            .get(uid)
            .into_iter()
            .flat_map(|o| &o.keys)
            .filter_map(|k| self.pods.get(k))
            .filter(|p| p.namespace == ns)
            .collect()
    }

    pub(super) async fn create_pod(
        &mut self,
        ns: &str,
        template: &PodTemplateSpec,
        meta: ObjectMeta,
    ) -> bool {
        let mut tmeta = template.metadata.clone().unwrap_or_default();
        tmeta.name = meta.name;
        tmeta.generate_name = meta.generate_name;
        tmeta.namespace = Some(ns.to_string());
        tmeta.owner_references = meta.owner_references;
        if let Some(extra) = meta.labels {
            tmeta.labels.get_or_insert_with(BTreeMap::new).extend(extra);
        }
        let pod = Pod {
            metadata: tmeta,
            spec: template.spec.clone(),
            status: None,
        };
        // The answer is read as a [`SlimPod`]: the cache reads nothing
        // more, and a full pod decoded for every creation was a good part
        // of a burst's cost.
        let created = match serde_json::to_vec(&pod) {
            Ok(body) => {
                let req = kube::core::Request::new(Pod::url_path(&(), Some(ns)))
                    .create(&PostParams::default(), body)
                    .map_err(kube::Error::BuildRequest);
                match req {
                    Ok(req) => self.client.request::<SlimPod>(req).await,
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(kube::Error::SerdeError(e)),
        };
        // The in-memory API server does a creation's work in this task: a
        // burst of them would hold a worker thread while the scheduler,
        // kwok and the watches wait (in a cluster the controller manager
        // has CPUs of its own, and a client rate limit). Yielding after
        // each lets them run alongside the burst.
        tokio::task::yield_now().await;
        match created {
            Ok(created) => {
                // Cached at once (the watch confirms later), so that the
                // next sync does not create it again.
                self.insert_pod(CachedPod::of(&created.0));
                true
            }
            Err(e) => {
                tracing::debug!("creating a pod in {ns}: {e}");
                false
            }
        }
    }

    /// Deletes the pod cached as `k`; whether the API server took it.
    pub(super) async fn delete_pod(&mut self, k: &str, grace: Option<u32>) -> bool {
        let (ns, name) = k.split_once('/').unwrap_or(("", k));
        let mut dp = DeleteParams::default();
        if let Some(g) = grace {
            dp = dp.grace_period(g);
        }
        // What the API server answers (the pod, or a Status) is not read.
        let req = kube::core::Request::new(Pod::url_path(&(), Some(ns)))
            .delete(name, &dp)
            .map_err(kube::Error::BuildRequest);
        let deleted = match req {
            Ok(req) => self.client.request_text(req).await,
            Err(e) => Err(e),
        };
        match deleted {
            Ok(_) => {
                if let Some(mut p) = self.remove_pod(k) {
                    p.deleting = true;
                    self.insert_pod(p);
                }
                true
            }
            Err(e) => {
                tracing::debug!("deleting pod {k}: {e}");
                false
            }
        }
    }

    pub(super) async fn patch_status<K>(&self, obj: &K, status: serde_json::Value)
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned,
    {
        let api: Api<K> = Api::namespaced(
            self.client.clone(),
            obj.meta().namespace.as_deref().unwrap_or("default"),
        );
        if let Err(e) = api
            .patch_status(
                obj.meta().name.as_deref().unwrap_or(""),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
        {
            tracing::debug!("updating the status of {}: {e}", key(obj));
        }
    }
}

/// Whether a node changed in what decides where DaemonSet pods run: its
/// labels, taints, schedulability, allocatable resources or readiness.
fn placement_differs(old: &Node, new: &Node) -> bool {
    let ready = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.clone())
    };
    old.metadata.labels != new.metadata.labels
        || old.spec.as_ref().map(|s| (&s.taints, s.unschedulable))
            != new.spec.as_ref().map(|s| (&s.taints, s.unschedulable))
        || old.status.as_ref().map(|s| &s.allocatable)
            != new.status.as_ref().map(|s| &s.allocatable)
        || ready(old) != ready(new)
}
