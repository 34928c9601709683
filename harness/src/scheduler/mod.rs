//! The embedded scheduler: kube-scheduler's behaviour for pods whose
//! `schedulerName` is `default-scheduler`, over the API server only.
//!
//! It keeps a cache of nodes and bound pods from watches (bound pods
//! compact: [`predicates::PodInfo::compact`]), and a queue of
//! pending pods ([`queue`]) ordered as kube-scheduler's `PrioritySort`: by
//! priority, then by when the pod entered the queue, which a failed attempt
//! renews (a retried pod goes behind the pods that arrived meanwhile). Each pod gets one scheduling
//! cycle ([`predicates::find_node_from`]) over kube-scheduler's adaptive
//! `percentageOfNodesToScore` of the nodes, each cycle starting where the
//! last one stopped ([`predicates::Sample`]); a pod that fits is bound through
//! `pods/binding` and assumed on its node at once; a pod that fits nowhere
//! may preempt lower-priority pods (victims deleted, `nominatedNodeName`
//! set; the room stays reserved for it against pods of lower priority), and gets `PodScheduled=False, reason Unschedulable` with
//! kube-scheduler's message. Unschedulable pods are retried when the
//! cluster changes (a node added or changed, a pod deleted), after a
//! per-pod backoff of 1 s doubling to 10 s, and at the latest every 5 min.
//! Pods with ResourceClaims go through DynamicResources ([`dra`]): the
//! claims' allocations and reservations are written before the binding.
//! With a time scale (a real-time cluster serving an autoscaler whose
//! timing flags are divided by the same factor) these waits are divided too.

mod dra;
mod events;
pub mod queue;
mod writes;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::DeleteParams;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use predicates::dynamicresources::has_claims;
use predicates::preemption::{Budget, preempt};
use predicates::{CsiNode, NodeInfo, Objects, PodInfo, Sample, VolumeObjects, find_node_from};
use simclock::Clock;
use tokio::time::Instant;

/// The scheduler name this scheduler serves.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";
/// The least time between two scheduling passes.
const PASS_GAP: Duration = Duration::from_millis(20);

enum Change {
    Pod(Box<Event<Pod>>),
    Node(Box<Event<Node>>),
    Budget(Box<Event<PodDisruptionBudget>>),
    /// CSINodes, claims, volumes and classes (NodeVolumeLimits).
    Storage(Box<StorageEvent>),
    /// DeviceClasses, ResourceClaims and ResourceSlices (DynamicResources).
    Dra(Box<dra::DraEvent>),
}

/// A watch event of a kind NodeVolumeLimits reads.
enum StorageEvent {
    CsiNode(Event<CSINode>),
    Claim(Box<Event<PersistentVolumeClaim>>),
    Volume(Box<Event<PersistentVolume>>),
    Class(Event<StorageClass>),
}

/// A pod waiting to be scheduled (when it is tried: [`queue::Queue`]).
struct Pending {
    /// Its scheduling facts over the compact pod ([`PodInfo::compact`]),
    /// computed once per change rather than on every attempt: at 10,000
    /// nodes most of 300,000 pods wait at once, and a decoded pod's
    /// containers alone are over 2 KB.
    info: PodInfo,
    /// The last Unschedulable message written, to skip identical patches.
    last_message: Option<String>,
    /// The node its preemption made room on (`status.nominatedNodeName`).
    nominated: Option<String>,
    /// Its scheduling equivalence class ([`equivalence_class`]).
    class: Option<u64>,
}

/// Why an attempt failed, the reason of the pod's `PodScheduled=False`
/// condition (kube-scheduler's `handleSchedulingFailure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FailureReason {
    /// No node fits (a plugin rejected every node): `Unschedulable`, the
    /// pods the cluster autoscaler helps.
    Unschedulable,
    /// A plugin failed (a DRA selector's CEL runtime error):
    /// `SchedulerError`; the pod is tried again after its backoff.
    SchedulerError,
}

impl FailureReason {
    /// The condition's reason.
    fn as_str(self) -> &'static str {
        match self {
            Self::Unschedulable => "Unschedulable",
            Self::SchedulerError => "SchedulerError",
        }
    }
}

/// A status patch that marks a pod unschedulable, written after the pass.
/// A `PodScheduled=False` condition to write; its time and its
/// `FailedScheduling` event are taken when it is written, which is when
/// the pod is marked for anyone watching.
struct Mark {
    key: String,
    pod: Arc<Pod>,
    message: String,
    reason: FailureReason,
    nominated: Option<String>,
}

/// A pod assumed on a node in a pass, to be bound after it.
struct Bind {
    key: String,
    node: String,
    /// Its queue entry, put back if the binding fails.
    entry: Pending,
    /// Its place and backoff in the queue, put back with it.
    slot: queue::Slot,
    /// Its claims' status writes (PreBind).
    claims: Vec<dra::ClaimWrite>,
}

/// The scheduler's state.
pub struct Scheduler {
    client: Client,
    /// Its bindings, conditions and events.
    writer: writes::Writer,
    /// Nodes by name (sorted: a deterministic order for scoring ties).
    nodes: BTreeMap<String, NodeInfo>,
    /// Bound pods whose node is not (yet) known, by node name.
    orphans: HashMap<String, Vec<PodInfo>>,
    /// Where each bound pod is: key → node name.
    bound: HashMap<String, String>,
    pending: HashMap<String, Pending>,
    /// When the pending pods are tried.
    queue: queue::Queue,
    /// Pending pods nominated to a node by their preemption.
    nominated: BTreeSet<String>,
    budgets: HashMap<String, Budget>,
    /// Pods whose binding is in flight or done, until the watch confirms.
    assumed: HashSet<String>,
    /// CSINodes by node name.
    csi_nodes: HashMap<String, Arc<CsiNode>>,
    /// Claims, volumes and classes.
    volumes: VolumeObjects,
    /// DRA classes, claims and slices.
    dra: dra::DraState,
    /// Where the next cycle starts filtering (kube-scheduler's
    /// `nextStartNodeIndex`, see [`Sample`]).
    next_start: usize,
}

impl Scheduler {
    /// A scheduler talking to the API server through `client`.
    pub fn new(client: Client, clock: Clock) -> Self {
        Self {
            writer: writes::Writer::new(client.clone(), clock),
            client,
            nodes: BTreeMap::new(),
            orphans: HashMap::new(),
            bound: HashMap::new(),
            pending: HashMap::new(),
            queue: queue::Queue::new(1.0),
            nominated: BTreeSet::new(),
            budgets: HashMap::new(),
            assumed: HashSet::new(),
            csi_nodes: HashMap::new(),
            volumes: VolumeObjects::default(),
            dra: dra::DraState::default(),
            next_start: 0,
        }
    }

    /// Divides the scheduler's waits (backoff, the periodic retry of
    /// unschedulable pods) by `scale` (at least 1).
    pub fn with_time_scale(mut self, scale: f64) -> Self {
        self.queue = queue::Queue::new(scale);
        self
    }

    /// Records no `Scheduled` and `FailedScheduling` events: for a cluster
    /// in which nothing reads them (an autoscaler does not watch Events),
    /// where each pod's event would be a write for nothing.
    pub fn without_events(mut self) -> Self {
        self.writer = self.writer.without_events();
        self
    }

    /// Runs until the watches end (the API server goes away).
    pub async fn run(mut self) {
        let cfg = watcher::Config::default;
        let pods: BoxStream<'static, Change> =
            watcher::watcher(Api::<Pod>::all(self.client.clone()), cfg())
                .default_backoff()
                .filter_map(|e| async move { e.ok().map(|e| Change::Pod(Box::new(e))) })
                .boxed();
        let nodes = watcher::watcher(Api::<Node>::all(self.client.clone()), cfg())
            .default_backoff()
            .filter_map(|e| async move { e.ok().map(|e| Change::Node(Box::new(e))) })
            .boxed();
        let budgets = watcher::watcher(Api::<PodDisruptionBudget>::all(self.client.clone()), cfg())
            .default_backoff()
            .filter_map(|e| async move { e.ok().map(|e| Change::Budget(Box::new(e))) })
            .boxed();
        let mut streams = vec![pods, nodes, budgets];
        streams.extend(storage_watches(&self.client));
        streams.extend(dra::watches(&self.client, |e| Change::Dra(Box::new(e))));
        let mut changes = futures::stream::select_all(streams);
        let mut last_pass: Option<Instant> = None;
        loop {
            let deadline = self.queue.next_due();
            tokio::select! {
                c = changes.next() => match c {
                    Some(c) => self.apply(c),
                    None => return,
                },
                () = sleep_until(deadline) => {}
            }
            // Passes are at least PASS_GAP apart: a burst of changes is
            // taken in one pass, not one pass each.
            if let Some(last) = last_pass {
                tokio::time::sleep_until(last + PASS_GAP).await;
            }
            // Take every change already delivered before scheduling.
            while let Some(Some(c)) = changes.next().now_or_never() {
                self.apply(c);
            }
            self.schedule_ready().await;
            last_pass = Some(Instant::now());
        }
    }

    fn apply(&mut self, change: Change) {
        match change {
            Change::Pod(ev) => self.pod_event(*ev),
            Change::Node(ev) => self.node_event(*ev),
            Change::Budget(ev) => self.budget_event(*ev),
            Change::Storage(ev) => self.storage_event(*ev),
            Change::Dra(ev) => {
                self.dra.apply(*ev, &mut self.nodes);
                self.cluster_changed();
            }
        }
    }

    fn storage_event(&mut self, ev: StorageEvent) {
        fn apply<K: kube::Resource>(
            ev: Event<K>,
            map: &mut HashMap<String, Arc<K>>,
            key: impl Fn(&K) -> String,
        ) {
            match ev {
                Event::Apply(o) | Event::InitApply(o) => {
                    map.insert(key(&o), Arc::new(o));
                }
                Event::Delete(o) => {
                    map.remove(&key(&o));
                }
                Event::Init | Event::InitDone => {}
            }
        }
        match ev {
            StorageEvent::CsiNode(Event::Apply(c) | Event::InitApply(c)) => {
                let csi = Arc::new(CsiNode::from_object(&c));
                if let Some(info) = self.nodes.get_mut(&c.name_any()) {
                    info.csi = Some(csi.clone());
                }
                self.csi_nodes.insert(c.name_any(), csi);
            }
            StorageEvent::CsiNode(Event::Delete(c)) => {
                self.csi_nodes.remove(&c.name_any());
                if let Some(info) = self.nodes.get_mut(&c.name_any()) {
                    info.csi = None;
                }
            }
            StorageEvent::CsiNode(Event::Init | Event::InitDone) => {}
            StorageEvent::Claim(ev) => apply(*ev, &mut self.volumes.claims, |c| {
                format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any())
            }),
            StorageEvent::Volume(ev) => apply(*ev, &mut self.volumes.volumes, |v| v.name_any()),
            StorageEvent::Class(ev) => apply(ev, &mut self.volumes.classes, |c| c.name_any()),
        }
        self.cluster_changed();
    }

    fn pod_event(&mut self, ev: Event<Pod>) {
        match ev {
            Event::Apply(p) | Event::InitApply(p) => self.pod_changed(p),
            Event::Delete(p) => {
                self.pod_gone(&predicates::nodeinfo::pod_key(&p));
                self.cluster_changed();
            }
            Event::Init | Event::InitDone => {}
        }
    }

    fn node_event(&mut self, ev: Event<Node>) {
        match ev {
            Event::Apply(n) | Event::InitApply(n) => {
                let name = n.metadata.name.clone().unwrap_or_default();
                let n = Arc::new(n);
                match self.nodes.get_mut(&name) {
                    Some(info) => info.set_node(n),
                    None => {
                        let mut info = NodeInfo::new(n);
                        info.csi = self.csi_nodes.get(&name).cloned();
                        info.slices = self.dra.slices_of(&name);
                        for p in self.orphans.remove(&name).unwrap_or_default() {
                            info.add_pod(p);
                        }
                        self.nodes.insert(name, info);
                    }
                }
                self.cluster_changed();
            }
            Event::Delete(n) => {
                let name = n.metadata.name.unwrap_or_default();
                if let Some(info) = self.nodes.remove(&name) {
                    self.orphans.insert(name, Arc::unwrap_or_clone(info.pods));
                }
            }
            Event::Init | Event::InitDone => {}
        }
    }

    fn budget_event(&mut self, ev: Event<PodDisruptionBudget>) {
        match ev {
            Event::Apply(b) | Event::InitApply(b) => {
                let key = format!(
                    "{}/{}",
                    b.metadata.namespace.as_deref().unwrap_or_default(),
                    b.metadata.name.as_deref().unwrap_or_default()
                );
                self.budgets.insert(
                    key,
                    Budget {
                        namespace: b.metadata.namespace.clone().unwrap_or_default(),
                        selector: b
                            .spec
                            .as_ref()
                            .and_then(|s| s.selector.clone())
                            .unwrap_or_default(),
                        disruptions_allowed: b.status.as_ref().map_or(0, |s| s.disruptions_allowed),
                    },
                );
            }
            Event::Delete(b) => {
                self.budgets.remove(&format!(
                    "{}/{}",
                    b.metadata.namespace.as_deref().unwrap_or_default(),
                    b.metadata.name.as_deref().unwrap_or_default()
                ));
            }

            Event::Init | Event::InitDone => {}
        }
    }

    fn pod_changed(&mut self, pod: Pod) {
        let key = predicates::nodeinfo::pod_key(&pod);
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let terminal = matches!(phase, Some("Succeeded" | "Failed"));
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty());
        match node {
            Some(_) if terminal => {
                // Terminal pods use no resources (kube-scheduler ignores them).
                self.pod_gone(&key);
                self.cluster_changed();
            }
            Some(node) => {
                self.pending.remove(&key);
                self.queue.remove(&key);
                self.assumed.remove(&key);
                // Every pod of the cluster ends up here: kept compact.
                let info = PodInfo::new(Arc::new(pod)).compact();
                if let Some(old) = self.bound.insert(key.clone(), node.clone())
                    && old != node
                    && let Some(n) = self.nodes.get_mut(&old)
                {
                    n.remove_pod(&key);
                }
                match self.nodes.get_mut(&node) {
                    Some(n) => n.add_pod(info),
                    None => self.orphans.entry(node).or_default().push(info),
                }
            }
            None => {
                let ours = pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.scheduler_name.as_deref())
                    .is_none_or(|s| s == DEFAULT_SCHEDULER);
                if !ours
                    || terminal
                    || pod.metadata.deletion_timestamp.is_some()
                    || self.assumed.contains(&key)
                {
                    self.pending.remove(&key);
                    self.queue.remove(&key);
                    return;
                }
                let info = PodInfo::new(Arc::new(pod)).compact();
                match self.pending.get_mut(&key) {
                    Some(p) => {
                        // Most updates are status writes: the class and the
                        // priority follow from the spec, labels and facts.
                        if p.info.pod.spec != info.pod.spec
                            || p.info.pod.metadata.labels != info.pod.metadata.labels
                            || p.info.requests != info.requests
                            || p.info.ports != info.ports
                        {
                            p.class = equivalence_class(&info);
                            self.queue.set_priority(&key, info.priority);
                        }
                        p.info = info;
                    }
                    None => {
                        self.queue.add(&key, info.priority);
                        let class = equivalence_class(&info);
                        self.pending.insert(
                            key,
                            Pending {
                                info,
                                last_message: None,
                                nominated: None,
                                class,
                            },
                        );
                    }
                }
            }
        }
    }

    fn pod_gone(&mut self, key: &str) {
        self.pending.remove(key);
        self.queue.remove(key);
        self.assumed.remove(key);
        if let Some(node) = self.bound.remove(key) {
            if let Some(n) = self.nodes.get_mut(&node) {
                n.remove_pod(key);
            } else if let Some(list) = self.orphans.get_mut(&node) {
                list.retain(|p| p.key != key);
            }
        }
    }

    /// A change that may make unschedulable pods fit: the next pass
    /// unparks them (they still honour their backoff).
    fn cluster_changed(&mut self) {
        self.queue.cluster_changed();
    }

    async fn schedule_ready(&mut self) {
        let ready = self.queue.pop_due(Instant::now());
        if ready.is_empty() {
            // Nothing due (a parked pod's backoff ended): no pass.
            return;
        }
        let nodes_vec: Vec<String> = self.nodes.keys().cloned().collect();
        let mut infos: Vec<NodeInfo> = std::mem::take(&mut self.nodes).into_values().collect();
        // Within one pass nodes only gain pods, so a pod that fit nowhere
        // (and could preempt nothing) is followed by every pod of its
        // equivalence class: they get its message without another cycle.
        let mut failed: HashMap<u64, String> = HashMap::new();
        let mut marks = Vec::new();
        let mut binds = Vec::new();
        let mut nominated = self.nominated_pods(&nodes_vec);
        // Kept as pods are assumed: a cycle then need not look at every
        // node to know that no pod on them has required anti-affinity.
        let mut existing_anti_affinity = infos.iter().any(|n| n.anti_affinity_pods > 0);
        for key in ready {
            let Some(pending) = self.pending.get(&key) else {
                continue;
            };
            let pod = pending.info.clone();
            // PreEnqueue: a pod whose claims do not exist yet waits, not
            // marked, until they do.
            if let Some(why) = self.dra.waiting_for_claims(&pod.pod) {
                tracing::debug!("scheduler: pod {key} waits: {why}");
                self.park(&key);
                continue;
            }
            let reserved = with_nominated_pods(&key, &pod, &nominated, &infos);
            let class = pending.class.filter(|_| reserved.is_none());
            if let Some(message) = class.and_then(|c| failed.get(&c)) {
                let message = message.clone();
                marks.extend(self.mark_unschedulable(&key, &message, None));
                continue;
            }
            let nodes = reserved.as_deref().unwrap_or(&infos);
            let existing = reserved.is_none().then_some(existing_anti_affinity);
            match self.cycle(&pod, nodes, existing) {
                Ok(i) => {
                    // Reserve: the claims' allocations, held in memory
                    // until PreBind writes them.
                    let claims = if has_claims(&pod.pod) {
                        match self.dra.reserve(&pod.pod, &nodes[i]) {
                            Ok(w) => w,
                            Err(r) => {
                                marks.extend(self.mark_unschedulable(&key, &r.to_string(), None));
                                continue;
                            }
                        }
                    } else {
                        Vec::new()
                    };
                    // Assumed on its node at once; bound after the pass.
                    let node = nodes_vec[i].clone();
                    let (Some(entry), Some(slot)) =
                        (self.pending.remove(&key), self.queue.remove(&key))
                    else {
                        continue;
                    };
                    nominated.retain(|(k, _, _)| *k != key);
                    self.assumed.insert(key.clone());
                    self.bound.insert(key.clone(), node.clone());
                    let mut assumed = (*pod.pod).clone();
                    if let Some(spec) = assumed.spec.as_mut() {
                        spec.node_name = Some(node.clone());
                    }
                    // The facts carry over: the compact pod has no containers.
                    infos[i].add_pod(pod.with_pod(assumed));
                    existing_anti_affinity |= infos[i].anti_affinity_pods > 0;
                    binds.push(Bind {
                        key,
                        node,
                        entry,
                        slot,
                        claims,
                    });
                }
                Err(fit) if fit.plugin_error => {
                    // A plugin's error: the attempt fails as it is, with
                    // no preemption, and the pod is not Unschedulable.
                    marks.extend(self.mark(
                        &key,
                        &fit.message,
                        FailureReason::SchedulerError,
                        None,
                    ));
                }
                Err(fit) => {
                    let budgets: Vec<Budget> = self.budgets.values().cloned().collect();
                    let node = match preempt(&pod, &infos, &fit.failures, &budgets) {
                        Some(p) => {
                            for v in &p.victims {
                                self.delete_victim(v).await;
                            }
                            Some(nodes_vec[p.node].clone())
                        }
                        None => None,
                    };
                    let message = if node.is_some() {
                        fit.message.clone()
                    } else {
                        format!(
                            "{} {}, preemption: 0/{} nodes are available: {}.",
                            fit.message,
                            dra::post_filter_message(&pod.pod, &fit),
                            infos.len(),
                            preemption_summary(&fit.failures, infos.len())
                        )
                    };
                    match (&node, class) {
                        (Some(n), _) => {
                            if let Some(i) = nodes_vec.iter().position(|x| x == n) {
                                nominated.retain(|(k, _, _)| *k != key);
                                nominated.push((key.clone(), i, pod.clone()));
                            }
                        }
                        (None, Some(c)) => {
                            failed.insert(c, message.clone());
                        }
                        (None, None) => {}
                    }
                    marks.extend(self.mark_unschedulable(&key, &message, node));
                }
            }
        }
        self.nodes = nodes_vec.into_iter().zip(infos).collect();
        let (failed_binds, ()) = futures::join!(self.writer.binds(binds), self.writer.marks(marks));
        for b in failed_binds {
            self.unassume(b);
        }
    }

    /// One scheduling cycle for `pod` over kube-scheduler's sample of
    /// `nodes`, starting where the last cycle stopped.
    fn cycle(
        &mut self,
        pod: &PodInfo,
        nodes: &[NodeInfo],
        existing_anti_affinity: Option<bool>,
    ) -> Result<usize, predicates::FitError> {
        let objects = Objects {
            volumes: Some(&self.volumes),
            dra: Some(&self.dra.objects),
            existing_anti_affinity,
        };
        let found = find_node_from(
            pod,
            nodes,
            objects,
            Sample::adaptive(nodes.len(), self.next_start),
        );
        if !nodes.is_empty() {
            self.next_start = (self.next_start + found.examined) % nodes.len();
        }
        found.result
    }

    /// Takes back a pod whose binding failed: off its node, back in the
    /// queue after its backoff.
    fn unassume(&mut self, b: Bind) {
        self.dra.unreserve(&b.claims);
        self.assumed.remove(&b.key);
        if self.bound.get(&b.key) == Some(&b.node) {
            self.bound.remove(&b.key);
        }
        if let Some(n) = self.nodes.get_mut(&b.node) {
            n.remove_pod(&b.key);
        }
        self.pending.insert(b.key.clone(), b.entry);
        self.queue.restore(&b.key, b.slot);
        self.queue.failed(&b.key, false);
    }

    /// The pending pods nominated to a node (after their preemption):
    /// (key, node index, pod).
    fn nominated_pods(&mut self, names: &[String]) -> Vec<(String, usize, PodInfo)> {
        let pending = &self.pending;
        self.nominated
            .retain(|k| pending.get(k).is_some_and(|p| p.nominated.is_some()));
        if self.nominated.is_empty() {
            return Vec::new();
        }
        let index: HashMap<&str, usize> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        self.nominated
            .iter()
            .filter_map(|k| {
                let p = pending.get(k)?;
                let node = *index.get(p.nominated.as_deref()?)?;
                Some((k.clone(), node, p.info.clone()))
            })
            .collect()
    }

    /// Puts a pod aside until the cluster changes, without a condition.
    fn park(&mut self, key: &str) {
        self.queue.failed(key, true);
    }

    async fn delete_victim(&self, victim: &PodInfo) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), victim.namespace());
        let name = victim.pod.metadata.name.clone().unwrap_or_default();
        if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
            tracing::debug!("preemption: deleting victim {} failed: {e}", victim.key);
        }
    }

    /// Records `key` as unschedulable with `message` (backoff, parked) and
    /// returns the status patch to write, if its condition changes.
    fn mark_unschedulable(
        &mut self,
        key: &str,
        message: &str,
        nominated: Option<String>,
    ) -> Option<Mark> {
        self.mark(key, message, FailureReason::Unschedulable, nominated)
    }

    /// Records a failed attempt (backoff; an unschedulable pod is parked
    /// until the cluster changes, a failed one only backs off) and returns
    /// the status patch to write, if its condition changes.
    fn mark(
        &mut self,
        key: &str,
        message: &str,
        reason: FailureReason,
        nominated: Option<String>,
    ) -> Option<Mark> {
        self.queue
            .failed(key, reason == FailureReason::Unschedulable);
        let p = self.pending.get_mut(key)?;
        if nominated.is_some() {
            p.nominated.clone_from(&nominated);
            self.nominated.insert(key.to_string());
        }
        let already = p.last_message.as_deref() == Some(message) && nominated.is_none();
        let current = p
            .info
            .pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| {
                c.iter().find(|c| c.type_ == "PodScheduled").map(|c| {
                    c.status == "False"
                        && c.reason.as_deref() == Some(reason.as_str())
                        && c.message.as_deref() == Some(message)
                })
            });
        if already || (current == Some(true) && nominated.is_none()) {
            return None;
        }
        p.last_message = Some(message.to_string());
        Some(Mark {
            key: key.to_string(),
            pod: p.info.pod.clone(),
            message: message.to_string(),
            reason,
            nominated,
        })
    }
}

/// The watches of the kinds NodeVolumeLimits reads.
fn storage_watches(client: &Client) -> Vec<BoxStream<'static, Change>> {
    fn watch<K>(client: &Client, wrap: fn(Event<K>) -> StorageEvent) -> BoxStream<'static, Change>
    where
        K: kube::Resource<DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + Send
            + 'static,
    {
        watcher::watcher(Api::<K>::all(client.clone()), watcher::Config::default())
            .default_backoff()
            .filter_map(move |e| async move { e.ok().map(|e| Change::Storage(Box::new(wrap(e)))) })
            .boxed()
    }
    vec![
        watch(client, StorageEvent::CsiNode),
        watch(client, |e| StorageEvent::Claim(Box::new(e))),
        watch(client, |e| StorageEvent::Volume(Box::new(e))),
        watch(client, StorageEvent::Class),
    ]
}

/// A pod's scheduling equivalence class: pods with the same namespace,
/// labels, priority, spec (without containers: the compact pod's) and
/// container requests and host ports get the same scheduling result on
/// the same nodes. `None` for pods with required pod affinity, whose
/// result can change as pods are placed (the first pod of a self-affine
/// group).
fn equivalence_class(info: &PodInfo) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let pod = &info.pod;
    let spec = pod.spec.as_ref()?;
    // Pods with claims take devices or pin shared claims: no two alike.
    if has_claims(pod) {
        return None;
    }
    let affine = spec
        .affinity
        .as_ref()
        .and_then(|a| a.pod_affinity.as_ref())
        .is_some_and(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
                .is_some_and(|t| !t.is_empty())
        });
    if affine {
        return None;
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    pod.metadata.namespace.hash(&mut h);
    pod.metadata.labels.hash(&mut h);
    serde_json::to_string(spec).ok()?.hash(&mut h);
    info.requests.hash(&mut h);
    info.ports.hash(&mut h);
    Some(h.finish())
}

/// The nodes as `pod` sees them when other pending pods of at least its
/// priority are nominated to some of them: with those pods added, so that
/// the room a preemption made stays reserved for the preemptor
/// (kube-scheduler's `addNominatedPods`). `None` when no pod is.
fn with_nominated_pods(
    key: &str,
    pod: &PodInfo,
    nominated: &[(String, usize, PodInfo)],
    infos: &[NodeInfo],
) -> Option<Vec<NodeInfo>> {
    let mut out: Option<Vec<NodeInfo>> = None;
    for (k, node, info) in nominated {
        if k != key && info.priority >= pod.priority {
            out.get_or_insert_with(|| infos.to_vec())[*node].add_pod(info.clone());
        }
    }
    out
}

/// The preemption part of the message when no victims help.
fn preemption_summary(failures: &[(usize, Vec<predicates::Reason>)], nodes: usize) -> String {
    let unresolvable = failures
        .iter()
        .filter(|(_, r)| r.iter().any(predicates::Reason::unresolvable))
        .count();
    let rest = nodes.saturating_sub(unresolvable);
    let mut parts = Vec::new();
    if rest > 0 {
        parts.push(format!(
            "{rest} No preemption victims found for incoming pod"
        ));
    }
    if unresolvable > 0 {
        parts.push(format!(
            "{unresolvable} Preemption is not helpful for scheduling"
        ));
    }
    parts.sort();
    parts.join(", ")
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => futures::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
