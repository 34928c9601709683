//! The autoscaler's view of the cluster, kept up to date by watches (no
//! relisting per loop): nodes, pods (indexed by node), PodDisruptionBudgets
//! and the controllers the drainability rules look up. Per-node
//! [`NodeInfo`]s are rebuilt only for nodes whose pods changed, so building
//! the loop's snapshot costs a clone.
//!
//! Pods in phase Succeeded or Failed are invisible (ca-compat §0.2);
//! expendable pods (priority below `--expendable-pods-priority-cutoff`) do
//! not enter the snapshot. An unbound pod added or updated within
//! [`RECENT_UNSCHEDULABLE`] of being marked Unschedulable notifies
//! [`ClusterCache::unschedulable_pod`], so the loop can start at once
//! (upstream's `UnschedulablePodObserver`: a re-mark with a new message,
//! after the scheduler's backoff, triggers a loop too). While the loop has
//! nodes upcoming ([`ClusterCache::set_nodes_upcoming`]), a pod the
//! scheduler binds notifies [`ClusterCache::pod_bound`]: the room a loop
//! counted on upcoming nodes for marked pods may have gone to pods the
//! scheduler had not tried, and the marked pods would otherwise wait for
//! its backoff to mark them again (a tail of seconds at 30,000 pods).
//! Upstream has no such trigger; it changes when a loop starts, not what it
//! decides.
//!
//! Pods are kept compact: their scheduling facts (requests, ports,
//! priority, anti-affinity) are computed once into a [`PodInfo`] when the
//! pod changes, and the copy kept drops what CA never reads again
//! (containers, container statuses, managed fields, the last-applied
//! annotation; [`compact`]). A pending pod's `Container`s alone are over
//! 2 KB, at 150,000 pending pods a third of the autoscaler's memory; what
//! scale-up needs of them is in the [`PodInfo`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, SystemTime};

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource, ResourceExt};
use predicates::{NodeInfo, PodInfo};
use simclock::Clock;
use tokio::sync::{Notify, watch};

use crate::simulator::drainability::{Budget, ControllerState, Controllers, controller_uid};

/// Whether a pod is listed by CA at all (not Succeeded or Failed).
pub fn is_active(pod: &Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Whether the scheduler marked the pod `PodScheduled=False/Unschedulable`.
pub fn is_unschedulable(pod: &Pod) -> bool {
    unschedulable_condition(pod).is_some()
}

/// The pod's `PodScheduled=False/Unschedulable` condition, if it has one.
fn unschedulable_condition(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
    })
}

/// An unschedulable pod's change triggers a loop only this long after the
/// pod was marked (upstream's `maxPodChangeAge`).
pub const RECENT_UNSCHEDULABLE: Duration = Duration::from_secs(10);

/// Whether a change to `pod` should start a loop: it is active, unbound
/// and was marked Unschedulable no more than [`RECENT_UNSCHEDULABLE`] ago.
fn is_recent_unschedulable(pod: &Pod, now: SystemTime) -> bool {
    if !is_active(pod) || node_name(pod).is_some() {
        return false;
    }
    unschedulable_condition(pod).is_some_and(|c| {
        c.last_transition_time
            .as_ref()
            .is_some_and(|t| SystemTime::from(t.0) + RECENT_UNSCHEDULABLE >= now)
    })
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// The cached state.
#[derive(Default)]
pub struct State {
    /// Nodes by name.
    pub nodes: BTreeMap<String, Arc<Node>>,
    /// Active pods by `namespace/name` (bound ones compact).
    pub pods: HashMap<String, PodInfo>,
    /// Pod keys by node name (bound pods only).
    pub by_node: HashMap<String, BTreeSet<String>>,
    /// Pod keys by controller uid.
    pub by_owner: HashMap<String, BTreeSet<String>>,
    /// Unbound active pods by key (compact, as in `pods`).
    pub unbound: BTreeMap<String, PodInfo>,
    /// Budgets by `namespace/name`.
    pub budgets: BTreeMap<String, Arc<PodDisruptionBudget>>,
    /// Controllers: (kind, namespace, name) → replicas.
    pub controllers: HashMap<(String, String, String), Option<i32>>,
    /// DaemonSets by `namespace/name` (their pods go on template nodes).
    pub daemonsets: BTreeMap<String, Arc<DaemonSet>>,
    /// Per-node infos (non-expendable pods), rebuilt when dirty.
    infos: HashMap<String, NodeInfo>,
    dirty: BTreeSet<String>,
    /// Keys seen since a relist started, per kind: at the end of the relist
    /// everything not seen is gone (deleted while the watch was down).
    relisting: HashMap<&'static str, BTreeSet<String>>,
}

impl State {
    fn relist_started(&mut self, kind: &'static str) {
        self.relisting.insert(kind, BTreeSet::new());
    }

    fn seen(&mut self, kind: &'static str, key: &str) {
        if let Some(set) = self.relisting.get_mut(kind) {
            set.insert(key.to_string());
        }
    }

    /// Ends a relist: drops what the relist did not contain.
    fn relist_done(&mut self, kind: &'static str) {
        let Some(seen) = self.relisting.remove(kind) else {
            return;
        };
        match kind {
            "Node" => {
                let gone: Vec<String> = self
                    .nodes
                    .keys()
                    .filter(|k| !seen.contains(*k))
                    .cloned()
                    .collect();
                for name in gone {
                    self.nodes.remove(&name);
                    self.touch(&name);
                }
            }
            "Pod" => {
                let gone: Vec<String> = self
                    .pods
                    .keys()
                    .filter(|k| !seen.contains(*k))
                    .cloned()
                    .collect();
                for key in gone {
                    self.drop_pod(&key);
                }
            }
            "PodDisruptionBudget" => self.budgets.retain(|k, _| seen.contains(k)),
            controller => {
                if controller == "DaemonSet" {
                    self.daemonsets.retain(|k, _| seen.contains(k));
                }
                self.controllers.retain(|(k, ns, name), _| {
                    k != controller || seen.contains(&format!("{ns}/{name}"))
                })
            }
        }
    }

    fn touch(&mut self, node: &str) {
        self.dirty.insert(node.to_string());
    }

    /// Keeps `pod` under `key` (its [`predicates::nodeinfo::pod_key`]).
    fn put_pod(&mut self, key: String, mut pod: Pod) {
        pod.metadata.managed_fields = None;
        self.drop_pod(&key);
        if !is_active(&pod) {
            return;
        }
        if let Some(uid) = controller_uid(&pod) {
            let uid = uid.to_string();
            self.by_owner.entry(uid).or_default().insert(key.clone());
        }
        let info = compact(PodInfo::new(Arc::new(pod)));
        match node_name(&info.pod).map(str::to_string) {
            Some(n) => {
                self.by_node
                    .entry(n.clone())
                    .or_default()
                    .insert(key.clone());
                self.touch(&n);
            }
            None => {
                self.unbound.insert(key.clone(), info.clone());
            }
        }
        self.pods.insert(key, info);
    }

    fn drop_pod(&mut self, key: &str) {
        if let Some(old) = self.pods.remove(key) {
            if let Some(uid) = controller_uid(&old.pod)
                && let Some(set) = self.by_owner.get_mut(uid)
            {
                set.remove(key);
                if set.is_empty() {
                    self.by_owner.remove(uid);
                }
            }
            match node_name(&old.pod) {
                Some(n) => {
                    let n = n.to_string();
                    if let Some(set) = self.by_node.get_mut(&n) {
                        set.remove(key);
                    }
                    self.touch(&n);
                }
                None => {
                    self.unbound.remove(key);
                }
            }
        }
    }

    /// Pods of a controller (by its uid), bound or not.
    pub fn pods_of_owner(&self, uid: &str) -> Vec<PodInfo> {
        self.by_owner
            .get(uid)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k).cloned())
            .collect()
    }

    /// Pods bound to a node (compact: no containers).
    pub fn pods_on(&self, node: &str) -> Vec<Arc<Pod>> {
        self.pod_infos_on(node)
            .into_iter()
            .map(|p| p.pod.clone())
            .collect()
    }

    /// The scheduling facts of the pods bound to a node.
    pub fn pod_infos_on(&self, node: &str) -> Vec<PodInfo> {
        self.by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k).cloned())
            .collect()
    }

    /// NodeInfos of every node with its non-expendable pods; rebuilds the
    /// ones whose pods or node changed since the last call.
    pub fn node_infos(&mut self, expendable_cutoff: i32) -> Vec<NodeInfo> {
        let dirty = std::mem::take(&mut self.dirty);
        for name in dirty {
            let Some(node) = self.nodes.get(&name).cloned() else {
                self.infos.remove(&name);
                continue;
            };
            let mut info = NodeInfo::new(node);
            for pod in self.pod_infos_on(&name) {
                if !is_expendable(&pod.pod, expendable_cutoff) {
                    info.add_pod(pod);
                }
            }
            self.infos.insert(name, info);
        }
        self.nodes
            .keys()
            .filter_map(|n| self.infos.get(n).cloned())
            .collect()
    }

    /// The budgets, as the drainability rules use them.
    pub fn budgets(&self) -> Vec<Budget> {
        self.budgets
            .values()
            .filter_map(|b| {
                Some(Budget {
                    namespace: b.metadata.namespace.clone().unwrap_or_default(),
                    name: b.metadata.name.clone().unwrap_or_default(),
                    selector: b.spec.as_ref()?.selector.clone()?,
                    disruptions_allowed: b.status.as_ref().map_or(0, |s| s.disruptions_allowed),
                })
            })
            .collect()
    }
}

impl Controllers for State {
    fn lookup(&self, kind: &str, namespace: &str, name: &str) -> ControllerState {
        match self
            .controllers
            .get(&(kind.to_string(), namespace.to_string(), name.to_string()))
        {
            Some(replicas) => ControllerState::Found {
                replicas: *replicas,
            },
            None => ControllerState::NotFound,
        }
    }
}

/// Keeps a pod's scheduling facts and drops the parts of the object that
/// nothing reads once they are computed (module docs). Scale-up compares
/// pods for equivalence by these facts and the rest of the spec.
pub fn compact(info: PodInfo) -> PodInfo {
    let mut pod = (*info.pod).clone();
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers = Vec::new();
        spec.init_containers = None;
        spec.ephemeral_containers = None;
    }
    if let Some(status) = pod.status.as_mut() {
        status.container_statuses = None;
        status.init_container_statuses = None;
        status.ephemeral_container_statuses = None;
    }
    if let Some(a) = pod.metadata.annotations.as_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    info.with_pod(pod)
}

/// Whether a pod is expendable: priority below the cutoff (a pod without
/// priority never is).
pub fn is_expendable(pod: &Pod, cutoff: i32) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.priority)
        .is_some_and(|p| p < cutoff)
}

enum Change {
    Node(Box<Event<Node>>),
    Pod(Box<Event<Pod>>),
    Budget(Box<Event<PodDisruptionBudget>>),
    Controller(&'static str, Event<(String, String, Option<i32>)>),
    DaemonSet(Box<Event<DaemonSet>>),
}

/// The watch-fed cache.
pub struct ClusterCache {
    state: RwLock<State>,
    /// The autoscaler's clock (how recent an Unschedulable mark is).
    clock: Clock,
    unschedulable: Notify,
    /// Whether the last loop left nodes upcoming.
    nodes_upcoming: std::sync::atomic::AtomicBool,
    bound: Notify,
    ready: watch::Sender<bool>,
    /// Counts pod events, so that waiters wake on the next one.
    pod_events: watch::Sender<u64>,
}

impl ClusterCache {
    /// Starts the watches; [`Self::wait_ready`] returns once every initial
    /// list is in.
    pub fn start(client: Client, clock: Clock) -> (Arc<Self>, tokio::task::JoinHandle<()>) {
        let (ready, _) = watch::channel(false);
        let (pod_events, _) = watch::channel(0);
        let cache = Arc::new(Self {
            state: RwLock::new(State::default()),
            clock,
            unschedulable: Notify::new(),
            nodes_upcoming: std::sync::atomic::AtomicBool::new(false),
            bound: Notify::new(),
            ready,
            pod_events,
        });
        let task = tokio::spawn(cache.clone().run(client));
        (cache, task)
    }

    /// Waits until every watch has delivered its initial list.
    pub async fn wait_ready(&self) {
        let mut rx = self.ready.subscribe();
        let _ = rx.wait_for(|r| *r).await;
    }

    /// Read access.
    pub fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Write access (snapshot building rebuilds dirty node infos).
    pub fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// A receiver that sees every pod event applied to the cache from now
    /// on (`changed()` resolves after the next one).
    pub fn pod_events(&self) -> watch::Receiver<u64> {
        self.pod_events.subscribe()
    }

    /// Resolves on the next change to a recently Unschedulable pod (module
    /// docs), or at once if one came since the last call.
    pub async fn unschedulable_pod(&self) {
        self.unschedulable.notified().await;
    }

    /// Whether nodes are upcoming, which makes binds notify
    /// [`Self::pod_bound`].
    pub fn set_nodes_upcoming(&self, upcoming: bool) {
        self.nodes_upcoming
            .store(upcoming, std::sync::atomic::Ordering::Relaxed);
    }

    /// Resolves on the next pod bound while nodes are upcoming (module
    /// docs), or at once if one was since the last call.
    pub async fn pod_bound(&self) {
        self.bound.notified().await;
    }

    async fn run(self: Arc<Self>, client: Client) {
        fn stream<K, F>(api: Api<K>, f: F) -> BoxStream<'static, Change>
        where
            K: Resource
                + Clone
                + std::fmt::Debug
                + serde::de::DeserializeOwned
                + Send
                + Sync
                + 'static,
            F: Fn(Event<K>) -> Change + Send + Sync + 'static,
        {
            watcher::watcher(api, watcher::Config::default())
                .default_backoff()
                .filter_map(move |e| {
                    let out = match e {
                        Ok(e) => Some(f(e)),
                        Err(err) => {
                            tracing::debug!("cluster cache watch: {err}");
                            None
                        }
                    };
                    async move { out }
                })
                .boxed()
        }
        fn controller<K>(
            client: &Client,
            kind: &'static str,
            replicas: fn(&K) -> Option<i32>,
        ) -> BoxStream<'static, Change>
        where
            K: Resource<DynamicType = ()>
                + Clone
                + std::fmt::Debug
                + serde::de::DeserializeOwned
                + Send
                + Sync
                + 'static,
        {
            stream(Api::<K>::all(client.clone()), move |e: Event<K>| {
                let id = |k: K| {
                    (
                        k.namespace().unwrap_or_default(),
                        k.name_any(),
                        replicas(&k),
                    )
                };
                Change::Controller(
                    kind,
                    match e {
                        Event::Apply(k) => Event::Apply(id(k)),
                        Event::InitApply(k) => Event::InitApply(id(k)),
                        Event::Delete(k) => Event::Delete(id(k)),
                        Event::Init => Event::Init,
                        Event::InitDone => Event::InitDone,
                    },
                )
            })
        }
        let streams = vec![
            stream(Api::<Node>::all(client.clone()), |e| {
                Change::Node(Box::new(e))
            }),
            stream(Api::<Pod>::all(client.clone()), |e| {
                Change::Pod(Box::new(e))
            }),
            stream(Api::<PodDisruptionBudget>::all(client.clone()), |e| {
                Change::Budget(Box::new(e))
            }),
            controller::<ReplicaSet>(&client, "ReplicaSet", |r| {
                r.spec.as_ref().and_then(|s| s.replicas)
            }),
            controller::<ReplicationController>(&client, "ReplicationController", |r| {
                r.spec.as_ref().and_then(|s| s.replicas)
            }),
            controller::<StatefulSet>(&client, "StatefulSet", |r| {
                r.spec.as_ref().and_then(|s| s.replicas)
            }),
            controller::<Job>(&client, "Job", |_| None),
            stream(Api::<DaemonSet>::all(client.clone()), |e| {
                Change::DaemonSet(Box::new(e))
            }),
        ];
        let total = streams.len();
        let mut synced = 0;
        let mut changes = futures::stream::select_all(streams);
        while let Some(change) = changes.next().await {
            let mut notify = false;
            let mut bound = false;
            let mut init_done = false;
            let pod_event = matches!(&change, Change::Pod(e) if matches!(**e, Event::Apply(_) | Event::Delete(_)));
            {
                let mut s = self.write();
                match change {
                    Change::Node(e) => match *e {
                        Event::Apply(n) | Event::InitApply(n) => {
                            let name = n.name_any();
                            s.seen("Node", &name);
                            let mut n = n;
                            n.metadata.managed_fields = None;
                            s.nodes.insert(name.clone(), Arc::new(n));
                            s.touch(&name);
                        }
                        Event::Delete(n) => {
                            let name = n.name_any();
                            s.nodes.remove(&name);
                            s.touch(&name);
                        }
                        Event::InitDone => {
                            s.relist_done("Node");
                            init_done = true;
                        }
                        Event::Init => s.relist_started("Node"),
                    },
                    Change::Pod(e) => match *e {
                        Event::Apply(p) | Event::InitApply(p) => {
                            let key = predicates::nodeinfo::pod_key(&p);
                            s.seen("Pod", &key);
                            notify = is_recent_unschedulable(&p, self.clock.now());
                            bound = node_name(&p).is_some()
                                && self
                                    .nodes_upcoming
                                    .load(std::sync::atomic::Ordering::Relaxed)
                                && s.unbound.contains_key(&key);
                            s.put_pod(key, p);
                        }
                        Event::Delete(p) => s.drop_pod(&predicates::nodeinfo::pod_key(&p)),
                        Event::InitDone => {
                            s.relist_done("Pod");
                            init_done = true;
                        }
                        Event::Init => s.relist_started("Pod"),
                    },
                    Change::Budget(e) => match *e {
                        Event::Apply(b) | Event::InitApply(b) => {
                            let key =
                                format!("{}/{}", b.namespace().unwrap_or_default(), b.name_any());
                            s.seen("PodDisruptionBudget", &key);
                            s.budgets.insert(key, Arc::new(b));
                        }
                        Event::Delete(b) => {
                            let key =
                                format!("{}/{}", b.namespace().unwrap_or_default(), b.name_any());
                            s.budgets.remove(&key);
                        }
                        Event::InitDone => {
                            s.relist_done("PodDisruptionBudget");
                            init_done = true;
                        }
                        Event::Init => s.relist_started("PodDisruptionBudget"),
                    },
                    Change::DaemonSet(e) => match *e {
                        Event::Apply(mut d) | Event::InitApply(mut d) => {
                            d.metadata.managed_fields = None;
                            let (ns, name) = (d.namespace().unwrap_or_default(), d.name_any());
                            s.seen("DaemonSet", &format!("{ns}/{name}"));
                            s.controllers
                                .insert(("DaemonSet".into(), ns.clone(), name.clone()), None);
                            s.daemonsets.insert(format!("{ns}/{name}"), Arc::new(d));
                        }
                        Event::Delete(d) => {
                            let (ns, name) = (d.namespace().unwrap_or_default(), d.name_any());
                            s.controllers
                                .remove(&("DaemonSet".into(), ns.clone(), name.clone()));
                            s.daemonsets.remove(&format!("{ns}/{name}"));
                        }
                        Event::InitDone => {
                            s.relist_done("DaemonSet");
                            init_done = true;
                        }
                        Event::Init => s.relist_started("DaemonSet"),
                    },
                    Change::Controller(kind, e) => match e {
                        Event::Apply((ns, name, r)) | Event::InitApply((ns, name, r)) => {
                            s.seen(kind, &format!("{ns}/{name}"));
                            s.controllers.insert((kind.to_string(), ns, name), r);
                        }
                        Event::Delete((ns, name, _)) => {
                            s.controllers.remove(&(kind.to_string(), ns, name));
                        }
                        Event::InitDone => {
                            s.relist_done(kind);
                            init_done = true;
                        }
                        Event::Init => s.relist_started(kind),
                    },
                }
            }
            if init_done {
                synced += 1;
                if synced >= total {
                    self.ready.send_replace(true);
                }
            }
            if notify {
                self.unschedulable.notify_one();
            }
            if bound {
                self.bound.notify_one();
            }
            if pod_event {
                self.pod_events.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn put(s: &mut State, pod: Pod) {
        s.put_pod(predicates::nodeinfo::pod_key(&pod), pod);
    }

    #[test]
    fn pods_are_kept_compact_with_their_scheduling_facts() {
        let mut s = State::default();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}", "keep": "me"}},
            "spec": {"nodeName": "n1",
                "initContainers": [{"name": "init", "image": "i", "resources": {"requests": {"cpu": "2"}}}],
                "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080}], "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "c", "image": "i", "imageID": "x", "ready": true, "restartCount": 0}]}
        }))
        .unwrap();
        put(&mut s, pod.clone());
        let info = &s.pods["default/p"];
        assert_eq!(info.requests.milli_cpu, 2000, "init container counted");
        assert_eq!(info.ports.len(), 1);
        assert!(info.pod.spec.as_ref().unwrap().containers.is_empty());
        assert!(
            info.pod
                .status
                .as_ref()
                .unwrap()
                .container_statuses
                .is_none()
        );
        let annotations = info.pod.metadata.annotations.as_ref().unwrap();
        assert!(!annotations.contains_key("kubectl.kubernetes.io/last-applied-configuration"));
        assert_eq!(annotations["keep"], "me");
        // Unbound pods too: scale-up reads their facts.
        let mut pending = pod;
        pending.metadata.name = Some("q".into());
        pending.spec.as_mut().unwrap().node_name = None;
        put(&mut s, pending);
        let q = &s.unbound["default/q"];
        assert!(q.pod.spec.as_ref().unwrap().containers.is_empty());
        assert_eq!(q.requests.milli_cpu, 2000);
        assert_eq!(q.ports.len(), 1);
    }

    #[test]
    fn pods_are_indexed_by_node_and_by_owner() {
        let mut s = State::default();
        let pod = |name: &str, node: Option<&str>, owner: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": owner, "controller": true}]},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}}))
            .unwrap()
        };
        put(&mut s, pod("a", Some("n1"), "rs1"));
        put(&mut s, pod("b", Some("n2"), "rs1"));
        put(&mut s, pod("c", None, "rs2"));
        assert_eq!(s.pods_of_owner("rs1").len(), 2);
        assert_eq!(s.pods_of_owner("rs2").len(), 1);
        assert_eq!(s.pods_on("n1").len(), 1);
        // Moving and deleting keep the indexes right.
        put(&mut s, pod("a", Some("n2"), "rs1"));
        assert!(s.pods_on("n1").is_empty());
        assert_eq!(s.pods_on("n2").len(), 2);
        s.drop_pod("default/b");
        assert_eq!(s.pods_of_owner("rs1").len(), 1);
        s.drop_pod("default/a");
        assert!(!s.by_owner.contains_key("rs1"));
    }

    #[test]
    fn a_change_to_a_recently_unschedulable_unbound_pod_starts_a_loop() {
        let pod = |node: Option<&str>, marked: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "default"},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
                "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled",
                    "status": "False", "reason": "Unschedulable",
                    "lastTransitionTime": marked}]}}))
            .unwrap()
        };
        let now = SystemTime::from("2026-01-01T00:00:20Z".parse::<jiff::Timestamp>().unwrap());
        assert!(is_recent_unschedulable(
            &pod(None, "2026-01-01T00:00:10Z"),
            now
        ));
        assert!(!is_recent_unschedulable(
            &pod(None, "2026-01-01T00:00:09Z"),
            now
        ));
        assert!(!is_recent_unschedulable(
            &pod(Some("n1"), "2026-01-01T00:00:15Z"),
            now
        ));
        let mut scheduled = pod(None, "2026-01-01T00:00:15Z");
        scheduled
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()[0]
            .reason = Some("SchedulerError".into());
        assert!(!is_recent_unschedulable(&scheduled, now));
    }
}
