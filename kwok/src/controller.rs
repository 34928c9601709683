//! The kwok controller: watches nodes and pods, picks a Stage for each
//! change, waits its delay and performs its actions; renews node leases and
//! hands out pod IPs. Event-driven only: every change of an object cancels
//! and replaces the job queued for it (kwok-compat §1.3).
//!
//! One task owns the state (managed nodes, queued jobs, stages) and reads
//! one merged stream of changes: the node and pod watches, Stage objects
//! from the cluster (when enabled), lease results from the lease task, and
//! objects fed back by jobs (`immediateNextStage`, relists). Jobs run as
//! their own tasks and never touch the state.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use serde_json::{Value, json};
use simclock::Clock;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use apimachinery::labels::{LabelSelector, Operator, Requirement, labels_of};

use crate::NODE_ANNOTATION;
use crate::stage::{Action, Compiled, PatchType, Stage, choose};
use crate::template::{Context, Template};

/// Which nodes this controller manages (kwok-compat §1.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeSelection {
    /// Every node (`--manage-all-nodes`).
    All,
    /// One node by name (`--manage-single-node`).
    Single(String),
    /// Nodes passing an annotation selector (evaluated here, with the
    /// label selector grammar) and a label selector (sent to the API
    /// server); both apply when both are set.
    Selectors {
        /// `--manage-nodes-with-annotation-selector`.
        annotation: LabelSelector,
        /// `--manage-nodes-with-label-selector`.
        label: String,
    },
}

/// Controller settings (the kwok flags that matter here).
#[derive(Debug, Clone)]
pub struct Config {
    /// Which nodes are managed; default: annotation `kwok.x-k8s.io/node=fake`.
    pub nodes: NodeSelection,
    /// Pod CIDR (`--cidr`).
    pub cidr: String,
    /// `--node-ip`.
    pub node_ip: String,
    /// `--node-name`.
    pub node_name: String,
    /// `--node-port` (written to `daemonEndpoints` when non-zero).
    pub node_port: u16,
    /// Node lease duration; zero turns leases (and lease gating) off.
    pub node_lease_duration: Duration,
    /// Lease holder identity.
    pub identity: String,
    /// Also read Stage objects (`kwok.x-k8s.io/v1alpha1`) from the cluster;
    /// added, changed and removed Stages take effect at once.
    pub stages_from_cluster: bool,
}

impl std::fmt::Display for NodeSelection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeSelection::All => f.write_str("all nodes"),
            NodeSelection::Single(name) => write!(f, "node {name}"),
            NodeSelection::Selectors { annotation, label } => {
                write!(
                    f,
                    "nodes with annotations {annotation:?} and labels {label:?}",
                    annotation = annotation.to_string()
                )
            }
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            nodes: NodeSelection::Selectors {
                annotation: LabelSelector::All(vec![Requirement::new(
                    NODE_ANNOTATION,
                    Operator::In,
                    ["fake"],
                )]),
                label: String::new(),
            },
            cidr: "10.0.0.0/24".into(),
            node_ip: "10.0.0.1".into(),
            node_name: String::new(),
            node_port: 0,
            node_lease_duration: Duration::from_secs(40),
            identity: "kwok-controller".into(),
            stages_from_cluster: false,
        }
    }
}

/// A pool of pod IPs per CIDR string (kwok-compat §1.6).
#[derive(Debug, Default)]
struct IpPool {
    next: HashMap<String, u32>,
    free: HashMap<String, BTreeSet<u32>>,
}

impl IpPool {
    fn base(cidr: &str) -> u32 {
        cidr.split('/')
            .next()
            .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
            .map_or(0x0a00_0000, u32::from)
    }

    fn allocate(&mut self, cidr: &str) -> String {
        if let Some(ip) = self.free.get_mut(cidr).and_then(|f| f.pop_first()) {
            return Ipv4Addr::from(ip).to_string();
        }
        let k = self.next.entry(cidr.to_string()).or_insert(0);
        *k += 1;
        Ipv4Addr::from(Self::base(cidr).wrapping_add(*k)).to_string()
    }

    fn release(&mut self, cidr: &str, ip: &str) {
        if let Ok(ip) = ip.parse::<Ipv4Addr>() {
            let ip = u32::from(ip);
            let base = Self::base(cidr);
            if ip > base && ip - base <= self.next.get(cidr).copied().unwrap_or(0) {
                self.free.entry(cidr.to_string()).or_default().insert(ip);
            }
        }
    }
}

struct Shared {
    client: Client,
    clock: Clock,
    config: Config,
    ips: Mutex<IpPool>,
    /// Objects fed back to the controller task.
    feedback: mpsc::UnboundedSender<Change>,
}

enum Change {
    Pod(Box<Event<Pod>>),
    Node(Box<Event<Node>>),
    Stage(Box<Event<DynamicObject>>),
    /// The lease task's verdict on a node.
    Lease {
        node: String,
        held: bool,
    },
    /// An object to run through stage selection again (`immediateNextStage`,
    /// pods relisted after a lease was taken back).
    Reevaluate(Box<Value>),
}

/// Messages to the lease task.
enum LeaseMsg {
    Manage { node: String, uid: String },
    Forget(String),
}

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
    static_stages: Vec<Compiled>,
    /// Stages read from the cluster, by name.
    cluster_stages: BTreeMap<String, Compiled>,
    /// Selected nodes by name (their latest JSON).
    nodes: HashMap<String, Value>,
    /// Selected nodes whose lease this controller holds (all selected
    /// nodes when leases are off).
    held: HashSet<String>,
    /// Nodes held at some point, so that pods must be relisted when the
    /// lease comes back.
    ever_held: HashSet<String>,
    /// Bound pods whose node is not managed (yet), by `namespace/name`:
    /// they are run once their node becomes managed.
    pods: HashMap<String, Value>,
    jobs: HashMap<String, Job>,
    leases: Option<mpsc::UnboundedSender<LeaseMsg>>,
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
            static_stages: stages,
            cluster_stages: BTreeMap::new(),
            nodes: HashMap::new(),
            held: HashSet::new(),
            ever_held: HashSet::new(),
            pods: HashMap::new(),
            jobs: HashMap::new(),
            leases: None,
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
        let pods = watcher::watcher(Api::<Pod>::all(client.clone()), pod_watch)
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

    fn pod_event(&mut self, ev: Event<Pod>) {
        match ev {
            Event::Apply(p) | Event::InitApply(p) => self.pod_changed(p),
            Event::Delete(p) => {
                let key = format!(
                    "{}/{}",
                    p.metadata.namespace.as_deref().unwrap_or(""),
                    p.metadata.name.as_deref().unwrap_or("")
                );
                self.pods.remove(&key);
                self.cancel(&format!("Pod/{key}"));
                if let Some(ip) = p.status.as_ref().and_then(|s| s.pod_ip.as_deref())
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
                        self.cluster_stages.insert(name, stage);
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
                if let Some(node) = self.nodes.get(&name).cloned() {
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
        let first = self.nodes.insert(name.clone(), value.clone()).is_none();
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
                    self.evaluate("Node", format!("Node/{name}"), value, false);
                }
            }
            None => {
                if first {
                    self.held.insert(name.clone());
                }
                self.evaluate("Node", format!("Node/{name}"), value, false);
                if first {
                    self.run_waiting_pods(&name);
                }
            }
        }
    }

    /// The lease task took or lost a node's lease: a node is handled only
    /// while this controller holds its lease (kwok-compat §1.2).
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
        if let Some(node) = self.nodes.get(&name).cloned() {
            self.evaluate("Node", format!("Node/{name}"), node, true);
        }
        self.run_waiting_pods(&name);
        if !self.ever_held.insert(name.clone()) {
            // Held before, lost, taken back: its pods were not kept.
            relist_pods(&self.shared, &name);
        }
    }

    fn run_waiting_pods(&mut self, node: &str) {
        let waiting: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, p)| p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node))
            .map(|(k, _)| k.clone())
            .collect();
        for key in waiting {
            if let Some(pod) = self.pods.remove(&key) {
                self.evaluate("Pod", format!("Pod/{key}"), pod, false);
            }
        }
    }

    fn pod_changed(&mut self, pod: Pod) {
        let key = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or(""),
            pod.metadata.name.as_deref().unwrap_or("")
        );
        let value = serde_json::to_value(&pod).unwrap_or(Value::Null);
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        if self.held.contains(&node) {
            self.pods.remove(&key);
            self.evaluate("Pod", format!("Pod/{key}"), value, false);
        } else {
            // Kept until its node is managed (kwok relists such pods then).
            self.pods.insert(key, value);
        }
    }

    fn reevaluate(&mut self, obj: Value) {
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match kind {
            "Node" if self.held.contains(&name) => {
                self.nodes.insert(name.clone(), obj.clone());
                self.evaluate("Node", format!("Node/{name}"), obj, true);
            }
            "Pod" => {
                let node = obj.pointer("/spec/nodeName").and_then(Value::as_str);
                if node.is_some_and(|n| self.held.contains(n)) {
                    let ns = obj
                        .pointer("/metadata/namespace")
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
            .pointer("/metadata/resourceVersion")
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
        let matching: Vec<&Compiled> = self
            .static_stages
            .iter()
            .chain(self.cluster_stages.values())
            .filter(|s| s.kind() == kind && s.matches(&obj))
            .collect();
        let Some(stage) = choose(&matching, &obj) else {
            return;
        };
        let delay = stage.delay(&obj, self.shared.clock.now());
        let stage = stage.clone();
        let shared = self.shared.clone();
        let node_name = (kind == "Pod")
            .then(|| obj.pointer("/spec/nodeName").and_then(Value::as_str))
            .flatten()
            .map(str::to_string);
        let node = node_name.as_ref().and_then(|n| self.nodes.get(n)).cloned();
        let handle = simclock::busy::spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            run_job(&shared, &stage, obj, node.as_ref()).await;
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
    let shared = shared.clone();
    let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let node = node.to_string();
    simclock::busy::spawn(async move {
        match Api::<Pod>::all(shared.client.clone()).list(&lp).await {
            Ok(list) => {
                for pod in list.items {
                    let mut v = serde_json::to_value(&pod).unwrap_or(Value::Null);
                    v["kind"] = json!("Pod");
                    v["apiVersion"] = json!("v1");
                    let _ = shared.feedback.send(Change::Reevaluate(Box::new(v)));
                }
            }
            Err(e) => tracing::warn!("kwok: listing the pods of node {node}: {e}"),
        }
    });
}

fn describe(obj: &Value) -> String {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("object");
    let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str);
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    match ns {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Whether kwok retries a failed call: connection errors, timeouts, 429
/// and 503 (kwok-compat §1.3 step 6).
fn retriable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => matches!(s.code, 429 | 503 | 504) || s.reason == "ServerTimeout",
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Runs a stage's actions; a retriable failure waits (1 s, doubling, 20 %
/// jitter, at most 32 min) and resumes at the failed action; any other
/// failure drops the job (the next watch event re-evaluates the object).
async fn run_job(shared: &Shared, stage: &Compiled, obj: Value, node: Option<&Value>) {
    let mut from = 0;
    let mut backoff = Duration::from_secs(1);
    loop {
        match perform(shared, stage, &obj, node, from).await {
            Ok(patched) => {
                if stage.immediate_next_stage()
                    && let Some(obj) = patched
                {
                    let _ = shared.feedback.send(Change::Reevaluate(Box::new(obj)));
                }
                return;
            }
            Err((step, e)) if retriable(&e) => {
                tracing::debug!(
                    "kwok stage {} on {}: {e}; retrying in {backoff:?}",
                    stage.name(),
                    describe(&obj)
                );
                let jitter = backoff.mul_f64(fastrand::f64() * 0.2);
                tokio::time::sleep(backoff + jitter).await;
                backoff = (backoff * 2).min(Duration::from_secs(32 * 60));
                from = step;
            }
            Err((_, e)) => {
                tracing::debug!("kwok stage {} on {}: {e}", stage.name(), describe(&obj));
                return;
            }
        }
    }
}

/// Runs the actions from index `from`. Returns the last patched object, or
/// the index of the failed action with its error. After a delete, only
/// events are still recorded (as upstream does).
async fn perform(
    shared: &Shared,
    stage: &Compiled,
    obj: &Value,
    node: Option<&Value>,
    from: usize,
) -> Result<Option<Value>, (usize, kube::Error)> {
    let target = Target::of(shared, stage.kind(), obj);
    let mut deleted = false;
    let mut patched = None;
    for (i, action) in stage.actions().iter().enumerate().skip(from) {
        let fail = |e| (i, e);
        match action {
            Action::Event(ev) => {
                record_event(shared, obj, &ev.type_, &ev.reason, &ev.message).await;
            }
            _ if deleted => {}
            Action::Finalizers(f) => {
                let current: Vec<String> = obj
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                let mut wanted: Vec<String> = if f.empty {
                    Vec::new()
                } else {
                    current
                        .iter()
                        .filter(|c| !f.remove.iter().any(|r| &r.value == *c))
                        .cloned()
                        .collect()
                };
                for a in &f.add {
                    if !wanted.contains(&a.value) {
                        wanted.push(a.value.clone());
                    }
                }
                if wanted != current {
                    let list = if wanted.is_empty() {
                        Value::Null
                    } else {
                        json!(wanted)
                    };
                    let patch = Patch::Merge(json!({"metadata": {"finalizers": list}}));
                    patched = Some(target.patch(None, &patch).await.map_err(fail)?);
                }
            }
            Action::Patch {
                template,
                subresource,
                root,
                patch_type,
            } => {
                let rendered = render(shared, template, obj, node).map_err(fail)?;
                let current = patched.as_ref().unwrap_or(obj);
                if *patch_type != PatchType::Json {
                    let body = match root {
                        Some(root) => json!({ root.as_str(): &rendered }),
                        None => rendered.clone(),
                    };
                    if contained(&body, current, *patch_type == PatchType::Strategic) {
                        // Upstream skips patches that would not change the object.
                        continue;
                    }
                }
                let patch = build_patch(rendered, root.as_deref(), *patch_type).map_err(fail)?;
                patched = Some(
                    target
                        .patch(subresource.as_deref(), &patch)
                        .await
                        .map_err(fail)?,
                );
            }
            Action::Delete => {
                let dp = DeleteParams::default().grace_period(0);
                match target.delete(&dp).await {
                    Ok(()) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err((i, e)),
                }
                deleted = true;
                patched = None;
            }
        }
    }
    Ok(patched)
}

/// Whether applying `patch` to `obj` would leave it unchanged: every field
/// of the patch is already there with the same value (`null` meaning
/// absent). In a strategic merge a list entry only has to be contained in
/// some entry of the object's list (entries merge by key); in a JSON merge
/// lists are replaced, so they must be equal.
fn contained(patch: &Value, obj: &Value, strategic: bool) -> bool {
    match (patch, obj) {
        (Value::Object(p), Value::Object(o)) => p.iter().all(|(k, pv)| match o.get(k) {
            Some(ov) => contained(pv, ov, strategic),
            None => pv.is_null(),
        }),
        (Value::Array(p), Value::Array(o)) if strategic => p
            .iter()
            .all(|pe| o.iter().any(|oe| contained(pe, oe, strategic))),
        (Value::String(p), Value::String(o)) => {
            // Timestamps are stored with one-second precision.
            p == o
                || simclock::parse_rfc3339(p)
                    .zip(simclock::parse_rfc3339(o))
                    .is_some_and(|(a, b)| a == b)
        }
        (Value::Number(p), Value::Number(o)) => p.as_f64() == o.as_f64(),
        (p, o) => p == o,
    }
}

/// The API object a job acts on.
struct Target {
    api: Api<DynamicObject>,
    name: String,
}

impl Target {
    fn of(shared: &Shared, kind: &str, obj: &Value) -> Self {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let client = shared.client.clone();
        let api = if kind == "Pod" {
            let ns = obj
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("default");
            Api::namespaced_with(client, ns, &ApiResource::erase::<Pod>(&()))
        } else {
            Api::all_with(client, &ApiResource::erase::<Node>(&()))
        };
        Self { api, name }
    }

    async fn patch(
        &self,
        subresource: Option<&str>,
        patch: &Patch<Value>,
    ) -> Result<Value, kube::Error> {
        let pp = PatchParams::default();
        let obj = match subresource {
            Some(sub) => {
                self.api
                    .patch_subresource(sub, &self.name, &pp, patch)
                    .await?
            }
            None => self.api.patch(&self.name, &pp, patch).await?,
        };
        serde_json::to_value(obj).map_err(kube::Error::SerdeError)
    }

    async fn delete(&self, dp: &DeleteParams) -> Result<(), kube::Error> {
        self.api.delete(&self.name, dp).await.map(|_| ())
    }
}

fn render(
    shared: &Shared,
    template: &Template,
    obj: &Value,
    node: Option<&Value>,
) -> Result<Value, kube::Error> {
    let needs_ip = *template == Template::PodReady && obj.pointer("/status/podIP").is_none();
    let pod_ip = if needs_ip {
        shared
            .ips
            .lock()
            .ok()
            .map(|mut ips| ips.allocate(&shared.config.cidr))
    } else {
        obj.pointer("/status/podIP")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let ctx = Context {
        now: shared.clock.now(),
        start: SystemTime::UNIX_EPOCH,
        node_ip: &shared.config.node_ip,
        node_name: &shared.config.node_name,
        node_port: shared.config.node_port,
        node,
        pod_ip,
    };
    template.render(obj, &ctx).map_err(|e| {
        kube::Error::Service(format!("rendering the template of {}: {e}", describe(obj)).into())
    })
}

/// Wraps a rendered document under `root` (a JSON patch gets `/root`
/// prefixed to its paths) and builds the patch.
fn build_patch(
    rendered: Value,
    root: Option<&str>,
    patch_type: PatchType,
) -> Result<Patch<Value>, kube::Error> {
    let bad = |m: String| kube::Error::Service(m.into());
    match patch_type {
        PatchType::Json => {
            let mut ops = match rendered {
                Value::Array(ops) => ops,
                other => {
                    return Err(bad(format!(
                        "a json patch template must render a list of operations, got {other}"
                    )));
                }
            };
            if let Some(root) = root {
                for op in &mut ops {
                    for field in ["path", "from"] {
                        if let Some(p) = op.get(field).and_then(Value::as_str) {
                            op[field] = json!(format!("/{root}{p}"));
                        }
                    }
                }
            }
            let ops: json_patch::Patch = serde_json::from_value(Value::Array(ops))
                .map_err(|e| bad(format!("invalid json patch: {e}")))?;
            Ok(Patch::Json(ops))
        }
        PatchType::Merge | PatchType::Strategic => {
            let body = match root {
                Some(root) => json!({ root: rendered }),
                None => rendered,
            };
            Ok(if patch_type == PatchType::Merge {
                Patch::Merge(body)
            } else {
                Patch::Strategic(body)
            })
        }
    }
}

async fn record_event(shared: &Shared, obj: &Value, type_: &str, reason: &str, message: &str) {
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let now = shared.clock.rfc3339();
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": format!("{}.", obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("x")), "namespace": ns},
        "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "name": obj.pointer("/metadata/name"), "namespace": obj.pointer("/metadata/namespace"), "uid": obj.pointer("/metadata/uid")},
        "type": type_, "reason": reason, "message": message,
        "source": {"component": "kwok_controller"},
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    });
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(shared.client.clone(), ns);
    match serde_json::from_value(event) {
        Ok(ev) => {
            if let Err(e) = api.create(&PostParams::default(), &ev).await {
                tracing::debug!("recording event {reason}: {e}");
            }
        }
        Err(e) => tracing::debug!("building event {reason}: {e}"),
    }
}

/// Holds the leases of the selected nodes (kwok-compat §1.4): takes a lease
/// that is free, ours or expired, renews every duration/4 (±4 %), and
/// tells the controller whenever it gains or loses a node.
async fn lease_task(shared: Arc<Shared>, mut inbox: mpsc::UnboundedReceiver<LeaseMsg>) {
    let duration = shared.config.node_lease_duration;
    let api: Api<Lease> = Api::namespaced(shared.client.clone(), "kube-node-lease");
    let mut nodes: BTreeMap<String, (String, bool)> = BTreeMap::new();
    let period = || (duration / 4).mul_f64(0.96 + fastrand::f64() * 0.08);
    let mut next = tokio::time::Instant::now() + period();
    loop {
        tokio::select! {
            msg = inbox.recv() => match msg {
                None => return,
                Some(LeaseMsg::Forget(node)) => { nodes.remove(&node); }
                Some(LeaseMsg::Manage { node, uid }) => {
                    let held = try_hold(&shared, &api, &node, &uid).await;
                    nodes.insert(node.clone(), (uid, held));
                    if held {
                        let _ = shared.feedback.send(Change::Lease { node, held });
                    }
                }
            },
            _ = tokio::time::sleep_until(next) => {
                for (node, (uid, was)) in nodes.iter_mut() {
                    let held = try_hold(&shared, &api, node, uid).await;
                    if held != *was {
                        *was = held;
                        let _ = shared.feedback.send(Change::Lease { node: node.clone(), held });
                    }
                }
                next = tokio::time::Instant::now() + period();
            }
        }
    }
}

/// Takes or renews one node's lease; false when another controller holds
/// it and it has not expired, or when the API call fails.
async fn try_hold(shared: &Shared, api: &Api<Lease>, node: &str, uid: &str) -> bool {
    let config = &shared.config;
    let now = shared.clock.now();
    let current = match api.get_opt(node).await {
        Ok(l) => l,
        Err(e) => {
            tracing::debug!("reading the lease of node {node}: {e}");
            return false;
        }
    };
    let spec = current
        .as_ref()
        .and_then(|l| l.spec.clone())
        .unwrap_or_default();
    let holder = spec.holder_identity.unwrap_or_default();
    let mut transitions = spec.lease_transitions.unwrap_or(0);
    if !holder.is_empty() && holder != config.identity {
        let expires = spec.renew_time.map(|t| {
            let secs = u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
            SystemTime::from(t.0) + Duration::from_secs(secs)
        });
        if expires.is_some_and(|e| e > now) {
            return false;
        }
        transitions += 1;
    }
    let renew = jiff::Timestamp::try_from(now)
        .map(|t| format!("{t:.6}"))
        .unwrap_or_default();
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": node, "namespace": "kube-node-lease",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}]},
        "spec": {"holderIdentity": config.identity,
            "leaseDurationSeconds": config.node_lease_duration.as_secs(), "renewTime": renew,
            "leaseTransitions": transitions},
    });
    let params = PatchParams::apply(&config.identity).force();
    match api.patch(node, &params, &Patch::Apply(lease)).await {
        Ok(_) => true,
        Err(e) => {
            tracing::debug!("renewing the lease of node {node}: {e}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotation_selectors_use_the_label_selector_grammar() {
        let a: BTreeMap<String, String> =
            [(NODE_ANNOTATION.to_string(), "fake".to_string())].into();
        let matches = |s: &str| {
            LabelSelector::parse(s)
                .unwrap_or_else(|e| panic!("{s}: {e}"))
                .matches(&a)
        };
        assert!(matches("kwok.x-k8s.io/node=fake"));
        assert!(matches("kwok.x-k8s.io/node==fake"));
        assert!(!matches("kwok.x-k8s.io/node=real"));
        assert!(matches("kwok.x-k8s.io/node"));
        assert!(!matches("!kwok.x-k8s.io/node"));
        assert!(matches("other!=x"));
        assert!(matches(
            "kwok.x-k8s.io/node in (real, fake),other notin (x)"
        ));
        assert!(!matches("kwok.x-k8s.io/node notin (fake)"));
        assert!(!matches("kwok.x-k8s.io/node in (real),x"));
        let default = Config::default();
        let NodeSelection::Selectors { annotation, .. } = &default.nodes else {
            panic!("the default selects by annotation")
        };
        assert!(annotation.matches(&a));
    }

    #[test]
    fn ip_pool_is_sequential_and_reuses_released_addresses() {
        let mut pool = IpPool::default();
        assert_eq!(pool.allocate("10.0.0.0/24"), "10.0.0.1");
        assert_eq!(pool.allocate("10.0.0.0/24"), "10.0.0.2");
        pool.release("10.0.0.0/24", "10.0.0.1");
        assert_eq!(pool.allocate("10.0.0.0/24"), "10.0.0.1");
        assert_eq!(pool.allocate("10.0.0.0/24"), "10.0.0.3");
        assert_eq!(pool.allocate("10.1.0.1/16"), "10.1.0.2");
    }

    #[test]
    fn no_op_patches_are_recognised() {
        let node = json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "False"}, {"type": "DiskPressure", "status": "False"}]}});
        let same = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        assert!(contained(&same, &node, true));
        assert!(
            !contained(&same, &node, false),
            "a merge patch replaces the list"
        );
        let flip = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert!(!contained(&flip, &node, true));
        assert!(contained(&json!({"status": {"podIP": null}}), &node, true));
        assert!(!contained(&json!({"status": {"phase": null}}), &node, true));
    }

    #[test]
    fn patches_are_wrapped_under_their_root() {
        let p = build_patch(
            json!({"phase": "Running"}),
            Some("status"),
            PatchType::Strategic,
        )
        .unwrap();
        assert!(matches!(p, Patch::Strategic(v) if v == json!({"status": {"phase": "Running"}})));
        let p = build_patch(
            json!([{"op": "replace", "path": "/phase", "value": "Failed"}]),
            Some("status"),
            PatchType::Json,
        )
        .unwrap();
        let Patch::Json(ops) = p else {
            panic!("not a json patch")
        };
        assert_eq!(
            serde_json::to_value(ops).unwrap(),
            json!([{"op": "replace", "path": "/status/phase", "value": "Failed"}])
        );
        assert!(build_patch(json!({"a": 1}), None, PatchType::Json).is_err());
    }
}
