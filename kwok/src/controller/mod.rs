//! The kwok controller: watches nodes and pods, picks a Stage for each
//! change, waits its delay and performs its actions; renews node leases and
//! hands out pod IPs. Event-driven only: every change of an object cancels
//! and replaces the job queued for it (docs/reference/kwok-rules.md §1.3).
//!
//! One task owns the state (managed nodes, queued jobs, stages) and reads
//! one merged stream of changes: the node and pod watches, Stage objects
//! from the cluster (when enabled), lease results from the lease task, and
//! objects fed back by jobs (`immediateNextStage`, relists). Jobs run as
//! their own tasks and never touch the state. Managed nodes that declare
//! devices get ResourceSlices from the fake DRA driver ([`dra`]). Pods bound
//! to a node not managed yet wait by node (`waiting`) until its lease is
//! taken.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use apimachinery::json::Lookup;
use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::Node;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use serde_json::Value;
use simclock::Clock;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use apimachinery::labels::labels_of;

use crate::stage::{Compiled, Stage, choose};

mod config;
pub mod dra;
mod ippool;
mod jobs;
mod leases;
mod raw_pod;
mod shared;
#[cfg(test)]
mod tests;
mod waiting;

pub use config::{Config, NODE_ANNOTATION, NodeSelection};
use ippool::IpPool;
use jobs::run_job;
use leases::lease_task;
use raw_pod::RawPod;
use shared::{Change, LeaseMsg, Shared};

struct Job {
    resource_version: String,
    /// For pod jobs: the pod's node.
    node: Option<String>,
    handle: JoinHandle<()>,
}

/// The kwok controller.
pub struct Controller {
    shared: Arc<Shared>,
    feedback: Option<mpsc::UnboundedReceiver<Change>>,
    /// Stages given at start (built-in and files).
    static_stages: Vec<Arc<Compiled>>,
    /// Stages read from the cluster, by name.
    cluster_stages: BTreeMap<String, Arc<Compiled>>,
    /// Selected nodes by name (their latest JSON), shared with the jobs of
    /// their pods (a pod's stage reads its node's fields).
    nodes: HashMap<String, Arc<Value>>,
    /// Selected nodes whose lease this controller holds (all selected
    /// nodes when leases are off).
    held: HashSet<String>,
    /// Nodes held at some point, so that pods must be relisted when the
    /// lease comes back.
    ever_held: HashSet<String>,
    /// Bound pods whose node is not managed (yet), by node: they are run
    /// once their node becomes managed.
    pods: waiting::WaitingPods,
    jobs: HashMap<String, Job>,
    leases: Option<mpsc::UnboundedSender<LeaseMsg>>,
    /// The device annotation last published per node (the fake DRA
    /// driver, [`dra`]).
    devices: HashMap<String, String>,
}

impl Controller {
    /// A controller with the given stages (use [`crate::default_stages`]
    /// plus any custom ones).
    pub fn new(client: Client, clock: Clock, config: Config, stages: Vec<Compiled>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        for s in &stages {
            warn_if_unwatched(s);
        }
        Self {
            shared: Arc::new(Shared {
                client,
                clock,
                config,
                ips: Mutex::new(IpPool::default()),
                feedback: tx,
            }),
            feedback: Some(rx),
            static_stages: stages.into_iter().map(Arc::new).collect(),
            cluster_stages: BTreeMap::new(),
            nodes: HashMap::new(),
            held: HashSet::new(),
            ever_held: HashSet::new(),
            pods: waiting::WaitingPods::default(),
            jobs: HashMap::new(),
            leases: None,
            devices: HashMap::new(),
        }
    }

    /// Runs until the watches end.
    pub async fn run(mut self) {
        let client = self.shared.client.clone();
        let config = self.shared.config.clone();
        let mut node_watch = watcher::Config::default();
        let mut pod_watch = watcher::Config::default().fields("spec.nodeName!=");
        match &config.nodes {
            NodeSelection::All => {}
            NodeSelection::Single(name) => {
                node_watch = node_watch.fields(&format!("metadata.name={name}"));
                pod_watch = pod_watch.fields(&format!("spec.nodeName={name}"));
            }
            NodeSelection::Selectors { label, .. } if !label.is_empty() => {
                node_watch = node_watch.labels(label);
            }
            NodeSelection::Selectors { .. } => {}
        }
        let nodes: BoxStream<'static, Change> =
            watcher::watcher(Api::<Node>::all(client.clone()), node_watch)
                .default_backoff()
                .filter_map(
                    |e| async move { ok_or_log(e, "nodes").map(|e| Change::Node(Box::new(e))) },
                )
                .boxed();
        let pods = watcher::watcher(Api::<RawPod>::all(client.clone()), pod_watch)
            .default_backoff()
            .filter_map(|e| async move { ok_or_log(e, "pods").map(|e| Change::Pod(Box::new(e))) })
            .boxed();
        let mut streams = vec![nodes, pods];
        if config.stages_from_cluster {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &stage_resource());
            streams.push(
                watcher::watcher(api, watcher::Config::default())
                    .default_backoff()
                    .filter_map(|e| async move {
                        ok_or_log(e, "kwok.x-k8s.io Stages").map(|e| Change::Stage(Box::new(e)))
                    })
                    .boxed(),
            );
        }
        if let Some(rx) = self.feedback.take() {
            streams.push(tokio_stream::wrappers::UnboundedReceiverStream::new(rx).boxed());
        }
        let lease_task = (!config.node_lease_duration.is_zero()).then(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            self.leases = Some(tx);
            simclock::busy::spawn(lease_task(self.shared.clone(), rx))
        });
        let mut changes = futures::stream::select_all(streams);
        while let Some(change) = changes.next().await {
            match change {
                Change::Node(ev) => self.node_event(*ev),
                Change::Pod(ev) => self.pod_event(*ev),
                Change::Stage(ev) => self.stage_event(*ev),
                Change::Lease { node, held } => self.lease_changed(node, held),
                Change::Reevaluate(obj) => self.reevaluate(*obj),
            }
        }
        if let Some(t) = lease_task {
            t.abort();
        }
    }

    fn node_event(&mut self, ev: Event<Node>) {
        match ev {
            Event::Apply(n) | Event::InitApply(n) => self.node_changed(n),
            Event::Delete(n) => {
                let name = n.metadata.name.unwrap_or_default();
                self.nodes.remove(&name);
                self.devices.remove(&name);
                self.held.remove(&name);
                self.ever_held.remove(&name);
                self.cancel(&format!("Node/{name}"));
                if let Some(l) = &self.leases {
                    let _ = l.send(LeaseMsg::Forget(name));
                }
            }
            Event::Init | Event::InitDone => {}
        }
    }

    fn pod_event(&mut self, ev: Event<RawPod>) {
        match ev {
            Event::Apply(p) | Event::InitApply(p) => self.pod_changed(p),
            Event::Delete(p) => {
                let key = p.key();
                self.pods.remove(&key);
                self.cancel(&format!("Pod/{key}"));
                if let Some(ip) = p.pod_ip()
                    && let Ok(mut ips) = self.shared.ips.lock()
                {
                    ips.release(&self.shared.config.cidr, ip);
                }
            }
            Event::Init | Event::InitDone => {}
        }
    }

    fn stage_event(&mut self, ev: Event<DynamicObject>) {
        let mut changed = false;
        match ev {
            Event::Apply(obj) | Event::InitApply(obj) => {
                let name = obj.metadata.name.clone().unwrap_or_default();
                let compiled = serde_json::to_value(&obj)
                    .map_err(|e| e.to_string())
                    .and_then(|v| {
                        serde_json::from_value::<Stage>(v).map_err(|e| format!("stage {name}: {e}"))
                    })
                    .and_then(|s| Compiled::new(s).map_err(|e| e.to_string()));
                match compiled {
                    Ok(stage) => {
                        warn_if_unwatched(&stage);
                        self.cluster_stages.insert(name, Arc::new(stage));
                    }
                    Err(e) => {
                        tracing::warn!("ignoring Stage object: {e}");
                        self.cluster_stages.remove(&name);
                    }
                }
                changed = true;
            }
            Event::Delete(obj) => {
                changed = self
                    .cluster_stages
                    .remove(obj.metadata.name.as_deref().unwrap_or(""))
                    .is_some();
            }
            Event::Init | Event::InitDone => {}
        }
        if changed {
            // New stages apply to objects that are already there: run every
            // managed node and its pods through selection again.
            let nodes: Vec<String> = self.held.iter().cloned().collect();
            for name in nodes {
                if let Some(node) = self.nodes.get(&name) {
                    let node = Value::clone(node);
                    self.evaluate("Node", format!("Node/{name}"), node, true);
                }
                relist_pods(&self.shared, &name);
            }
        }
    }

    fn selected(&self, node: &Node) -> bool {
        match &self.shared.config.nodes {
            NodeSelection::All => true,
            NodeSelection::Single(name) => node.metadata.name.as_deref() == Some(name.as_str()),
            NodeSelection::Selectors { annotation, .. } => {
                annotation.matches(labels_of(node.metadata.annotations.as_ref()))
            }
        }
    }

    fn node_changed(&mut self, node: Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        if !self.selected(&node) {
            return;
        }
        let value = serde_json::to_value(&node).unwrap_or(Value::Null);
        let first = self
            .nodes
            .insert(name.clone(), Arc::new(value.clone()))
            .is_none();
        match &self.leases {
            Some(leases) => {
                if first {
                    let uid = node.metadata.uid.clone().unwrap_or_default();
                    let _ = leases.send(LeaseMsg::Manage {
                        node: name.clone(),
                        uid,
                    });
                }
                if self.held.contains(&name) {
                    self.publish_devices(&node);
                    self.evaluate("Node", format!("Node/{name}"), value, false);
                }
            }
            None => {
                if first {
                    self.held.insert(name.clone());
                }
                self.publish_devices(&node);
                self.evaluate("Node", format!("Node/{name}"), value, false);
                if first {
                    self.run_waiting_pods(&name);
                }
            }
        }
    }

    /// The fake DRA driver: publishes the node's devices when its
    /// annotation is new (after the node's publish delay) or changed.
    fn publish_devices(&mut self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let Some(annotation) = node
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(dra::DRA_DEVICES_ANNOTATION))
        else {
            return;
        };
        let first = match self.devices.get(&name) {
            Some(published) if published == annotation => return,
            Some(_) => false,
            None => true,
        };
        self.devices.insert(name.clone(), annotation.clone());
        let delay = match node
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(dra::DRA_PUBLISH_DELAY_ANNOTATION))
        {
            Some(d) if first => simclock::parse_go_duration(d).unwrap_or_else(|| {
                tracing::warn!(
                    "node {name}: annotation {} is not a duration: {d:?}",
                    dra::DRA_PUBLISH_DELAY_ANNOTATION
                );
                std::time::Duration::ZERO
            }),
            _ => std::time::Duration::ZERO,
        };
        let uid = node.metadata.uid.clone().unwrap_or_default();
        simclock::busy::spawn(dra::publish(
            self.shared.clone(),
            name,
            uid,
            annotation.clone(),
            delay,
        ));
    }

    /// The lease task took or lost a node's lease: a node is handled only
    /// while this controller holds its lease (docs/reference/kwok-rules.md §1.2).
    fn lease_changed(&mut self, name: String, held: bool) {
        if !self.nodes.contains_key(&name) {
            return;
        }
        if !held {
            if self.held.remove(&name) {
                self.cancel(&format!("Node/{name}"));
                let keys: Vec<String> = self
                    .jobs
                    .iter()
                    .filter(|(_, j)| j.node.as_deref() == Some(name.as_str()))
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in keys {
                    self.cancel(&k);
                }
            }
            return;
        }
        if !self.held.insert(name.clone()) {
            return;
        }
        if let Some(node) = self.nodes.get(&name) {
            let node = Value::clone(node);
            self.evaluate("Node", format!("Node/{name}"), node, true);
        }
        self.run_waiting_pods(&name);
        if !self.ever_held.insert(name.clone()) {
            // Held before, lost, taken back: its pods were not kept.
            relist_pods(&self.shared, &name);
        }
    }

    fn run_waiting_pods(&mut self, node: &str) {
        for (key, pod) in self.pods.take_node(node) {
            self.evaluate("Pod", format!("Pod/{key}"), pod, false);
        }
    }

    fn pod_changed(&mut self, pod: RawPod) {
        let key = pod.key();
        let node = pod.node_name().to_string();
        if self.held.contains(&node) {
            self.pods.remove(&key);
            self.evaluate("Pod", format!("Pod/{key}"), pod.value, false);
        } else {
            // Kept until its node is managed (kwok relists such pods then).
            self.pods.insert(key, node, pod.value);
        }
    }

    fn reevaluate(&mut self, obj: Value) {
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        let name = obj
            .lookup("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match kind {
            "Node" if self.held.contains(&name) => {
                self.nodes.insert(name.clone(), Arc::new(obj.clone()));
                self.evaluate("Node", format!("Node/{name}"), obj, true);
            }
            "Pod" => {
                let node = obj.lookup("/spec/nodeName").and_then(Value::as_str);
                if node.is_some_and(|n| self.held.contains(n)) {
                    let ns = obj
                        .lookup("/metadata/namespace")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let key = format!("Pod/{ns}/{name}");
                    self.evaluate("Pod", key, obj, true);
                }
            }
            _ => {}
        }
    }

    fn cancel(&mut self, key: &str) {
        if let Some(job) = self.jobs.remove(key) {
            job.handle.abort();
        }
    }

    /// Picks a stage for the object and queues its job, replacing any
    /// other. Without `force`, an event for the version a queued job is
    /// already working on is ignored.
    fn evaluate(&mut self, kind: &str, key: String, obj: Value, force: bool) {
        let rv = obj
            .lookup("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !force
            && self
                .jobs
                .get(&key)
                .is_some_and(|j| j.resource_version == rv && !j.handle.is_finished())
        {
            return;
        }
        self.cancel(&key);
        let matching: Vec<&Arc<Compiled>> = self
            .static_stages
            .iter()
            .chain(self.cluster_stages.values())
            .filter(|s| s.kind() == kind && s.matches(&obj))
            .collect();
        let Some(stage) = choose(&matching, &obj) else {
            return;
        };
        let delay = stage.delay(&obj, self.shared.clock.now());
        let stage = Arc::clone(stage);
        let shared = self.shared.clone();
        let node_name = (kind == "Pod")
            .then(|| obj.lookup("/spec/nodeName").and_then(Value::as_str))
            .flatten()
            .map(str::to_string);
        let node = node_name.as_ref().and_then(|n| self.nodes.get(n)).cloned();
        let handle = simclock::busy::spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            run_job(&shared, &stage, obj, node.as_deref()).await;
        });
        self.jobs.insert(
            key,
            Job {
                resource_version: rv,
                node: node_name,
                handle,
            },
        );
    }
}

fn ok_or_log<T>(r: Result<T, watcher::Error>, what: &str) -> Option<T> {
    r.map_err(|e| tracing::debug!("kwok: watching {what}: {e}"))
        .ok()
}

/// Stages for kinds other than Node and Pod are loaded but never run.
fn warn_if_unwatched(stage: &Compiled) {
    if !matches!(stage.kind(), "Node" | "Pod") {
        tracing::warn!(
            "stage {} drives kind {}; this kwok handles only Node and Pod stages, so it is ignored",
            stage.name(),
            stage.kind()
        );
    }
}

/// The `stages.kwok.x-k8s.io` resource.
pub fn stage_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kwok.x-k8s.io", "v1alpha1", "Stage"),
        "stages",
    )
}

/// Lists the pods bound to a node and feeds them back for evaluation.
fn relist_pods(shared: &Arc<Shared>, node: &str) {
    tracing::debug!("kwok: listing the pods of node {node} again");
    let shared = shared.clone();
    let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let node = node.to_string();
    simclock::busy::spawn(async move {
        match Api::<RawPod>::all(shared.client.clone()).list(&lp).await {
            Ok(list) => {
                for pod in list.items {
                    let _ = shared
                        .feedback
                        .send(Change::Reevaluate(Box::new(pod.value)));
                }
            }
            Err(e) => tracing::warn!("kwok: listing the pods of node {node}: {e}"),
        }
    });
}
