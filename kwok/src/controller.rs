//! The kwok controller: watches nodes and pods, picks a Stage for each
//! change, waits its delay and performs its steps; renews node leases and
//! hands out pod IPs. Event-driven only: every change of an object cancels
//! and replaces the job queued for it (kwok-compat §1.3).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use serde_json::{Value, json};
use simclock::Clock;
use tokio::task::JoinHandle;

use crate::stage::{Compiled, choose};
use crate::template::{Context, Template};

/// Controller settings (the kwok flags that matter here).
#[derive(Debug, Clone)]
pub struct Config {
    /// Manage every node (`--manage-all-nodes`).
    pub manage_all_nodes: bool,
    /// Annotation selector for managed nodes
    /// (`--manage-nodes-with-annotation-selector`), default `kwok.x-k8s.io/node=fake`.
    pub node_annotation_selector: String,
    /// Pod CIDR (`--cidr`).
    pub cidr: String,
    /// `--node-ip`.
    pub node_ip: String,
    /// `--node-name`.
    pub node_name: String,
    /// Node lease duration; zero turns leases off.
    pub node_lease_duration: Duration,
    /// Lease holder identity.
    pub identity: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            manage_all_nodes: false,
            node_annotation_selector: "kwok.x-k8s.io/node=fake".into(),
            cidr: "10.0.0.0/24".into(),
            node_ip: "10.0.0.1".into(),
            node_name: String::new(),
            node_lease_duration: Duration::from_secs(40),
            identity: "kwok-controller".into(),
        }
    }
}

/// Whether a node's annotations pass an annotation selector (`k=v`,
/// `k!=v`, `k`, `!k`, comma-separated, all must hold).
pub fn annotations_match(selector: &str, annotations: &BTreeMap<String, String>) -> bool {
    selector
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .all(|req| {
            if let Some((k, v)) = req.split_once("!=") {
                annotations.get(k.trim()).map(String::as_str) != Some(v.trim())
            } else if let Some((k, v)) = req.split_once('=') {
                annotations
                    .get(k.trim().trim_end_matches('='))
                    .map(String::as_str)
                    == Some(v.trim())
            } else if let Some(k) = req.strip_prefix('!') {
                !annotations.contains_key(k.trim())
            } else {
                annotations.contains_key(req)
            }
        })
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
}

enum Change {
    Pod(Box<Event<Pod>>),
    Node(Box<Event<Node>>),
}

struct Job {
    resource_version: String,
    handle: JoinHandle<()>,
}

/// The kwok controller.
pub struct Controller {
    shared: Arc<Shared>,
    stages: Vec<Compiled>,
    /// Managed nodes by name (their latest JSON).
    nodes: HashMap<String, Value>,
    /// Bound pods whose node is not managed (yet), by `namespace/name`:
    /// they are run once their node becomes managed.
    pods: HashMap<String, Value>,
    jobs: HashMap<String, Job>,
    /// Managed node names and uids, for the lease renewer.
    leased: Arc<Mutex<BTreeMap<String, String>>>,
}

impl Controller {
    /// A controller with the given stages (use [`crate::default_stages`]
    /// plus any custom ones).
    pub fn new(client: Client, clock: Clock, config: Config, stages: Vec<Compiled>) -> Self {
        Self {
            shared: Arc::new(Shared {
                client,
                clock,
                config,
                ips: Mutex::new(IpPool::default()),
            }),
            stages,
            nodes: HashMap::new(),
            pods: HashMap::new(),
            jobs: HashMap::new(),
            leased: Arc::new(Mutex::new(BTreeMap::new())),
        }
    }

    /// Runs until the watches end.
    pub async fn run(mut self) {
        let client = self.shared.client.clone();
        let cfg = watcher::Config::default;
        let nodes: BoxStream<'static, Change> =
            watcher::watcher(Api::<Node>::all(client.clone()), cfg())
                .default_backoff()
                .filter_map(|e| async move { e.ok().map(|e| Change::Node(Box::new(e))) })
                .boxed();
        let pods = watcher::watcher(
            Api::<Pod>::all(client.clone()),
            cfg().fields("spec.nodeName!="),
        )
        .default_backoff()
        .filter_map(|e| async move { e.ok().map(|e| Change::Pod(Box::new(e))) })
        .boxed();
        let lease_task = (!self.shared.config.node_lease_duration.is_zero())
            .then(|| tokio::spawn(renew_leases(self.shared.clone(), self.leased.clone())));
        let mut changes = futures::stream::select_all([nodes, pods]);
        while let Some(change) = changes.next().await {
            match change {
                Change::Node(ev) => self.node_event(*ev),
                Change::Pod(ev) => self.pod_event(*ev),
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
                self.cancel(&format!("Node/{name}"));
                if let Ok(mut l) = self.leased.lock() {
                    l.remove(&name);
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

    fn manages(&self, node: &Node) -> bool {
        self.shared.config.manage_all_nodes
            || annotations_match(
                &self.shared.config.node_annotation_selector,
                node.metadata
                    .annotations
                    .as_ref()
                    .unwrap_or(&BTreeMap::new()),
            )
    }

    fn node_changed(&mut self, node: Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        if !self.manages(&node) {
            return;
        }
        let first = !self.nodes.contains_key(&name);
        if let Ok(mut l) = self.leased.lock() {
            l.insert(name.clone(), node.metadata.uid.clone().unwrap_or_default());
        }
        let value = serde_json::to_value(&node).unwrap_or(Value::Null);
        self.nodes.insert(name.clone(), value.clone());
        self.evaluate("Node", format!("Node/{name}"), value);
        if first {
            // Pods bound before the node was managed.
            let waiting: Vec<(String, Value)> = self
                .pods
                .iter()
                .filter(|(_, p)| {
                    p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(name.as_str())
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for (key, pod) in waiting {
                self.pods.remove(&key);
                self.evaluate("Pod", format!("Pod/{key}"), pod);
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
        if self.nodes.contains_key(&node) {
            self.pods.remove(&key);
            self.evaluate("Pod", format!("Pod/{key}"), value);
        } else {
            // Kept until its node is managed (kwok relists such pods then).
            self.pods.insert(key, value);
        }
    }

    fn cancel(&mut self, key: &str) {
        if let Some(job) = self.jobs.remove(key) {
            job.handle.abort();
        }
    }

    /// Picks a stage for the object and queues its job, replacing any other.
    fn evaluate(&mut self, kind: &str, key: String, obj: Value) {
        let rv = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if self
            .jobs
            .get(&key)
            .is_some_and(|j| j.resource_version == rv && !j.handle.is_finished())
        {
            return;
        }
        self.cancel(&key);
        let matching: Vec<&Compiled> = self
            .stages
            .iter()
            .filter(|s| s.kind() == kind && s.matches(&obj))
            .collect();
        let Some(stage) = choose(&matching) else {
            return;
        };
        let delay = stage.delay(&obj, self.shared.clock.now());
        let stage = stage.clone();
        let shared = self.shared.clone();
        let node = (kind == "Pod")
            .then(|| {
                obj.pointer("/spec/nodeName")
                    .and_then(Value::as_str)
                    .and_then(|n| self.nodes.get(n))
                    .cloned()
            })
            .flatten();
        let handle = tokio::spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if let Err(e) = perform(&shared, &stage, &obj, node.as_ref()).await {
                tracing::debug!("kwok stage {} on {}: {e}", stage.name(), describe(&obj));
            }
        });
        self.jobs.insert(
            key,
            Job {
                resource_version: rv,
                handle,
            },
        );
    }
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

/// Runs a stage's steps in kwok's order: event, finalizers, status, delete.
async fn perform(
    shared: &Shared,
    stage: &Compiled,
    obj: &Value,
    node: Option<&Value>,
) -> Result<(), kube::Error> {
    let next = &stage.stage.spec.next;
    let is_pod = stage.kind() == "Pod";
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    let client = shared.client.clone();
    if let Some(ev) = &next.event {
        record_event(shared, obj, &ev.type_, &ev.reason, &ev.message).await;
    }
    if let Some(f) = &next.finalizers {
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
            let patch = Patch::Merge(
                json!({"metadata": {"finalizers": if wanted.is_empty() { Value::Null } else { json!(wanted) }}}),
            );
            if is_pod {
                Api::<Pod>::namespaced(client.clone(), &ns)
                    .patch(&name, &PatchParams::default(), &patch)
                    .await?;
            } else {
                Api::<Node>::all(client.clone())
                    .patch(&name, &PatchParams::default(), &patch)
                    .await?;
            }
        }
    }
    if let Some(text) = &next.status_template {
        let template =
            Template::parse(text).map_err(|e| kube::Error::Service(e.to_string().into()))?;
        let needs_ip =
            is_pod && template == Template::PodReady && obj.pointer("/status/podIP").is_none();
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
            node,
            pod_ip,
        };
        let status = template
            .render(obj, &ctx)
            .map_err(|e| kube::Error::Service(e.into()))?;
        let patch = Patch::Strategic(json!({"status": status}));
        if is_pod {
            Api::<Pod>::namespaced(client.clone(), &ns)
                .patch_status(&name, &PatchParams::default(), &patch)
                .await?;
        } else {
            Api::<Node>::all(client.clone())
                .patch_status(&name, &PatchParams::default(), &patch)
                .await?;
        }
    }
    if next.delete {
        let dp = DeleteParams::default().grace_period(0);
        if is_pod {
            Api::<Pod>::namespaced(client, &ns)
                .delete(&name, &dp)
                .await?;
        } else {
            Api::<Node>::all(client).delete(&name, &dp).await?;
        }
    }
    Ok(())
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

/// Renews the lease of every managed node every duration/4 (kwok-compat §1.4).
async fn renew_leases(shared: Arc<Shared>, leased: Arc<Mutex<BTreeMap<String, String>>>) {
    let duration = shared.config.node_lease_duration;
    let api: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(shared.client.clone(), "kube-node-lease");
    let params = PatchParams::apply(&shared.config.identity).force();
    loop {
        let nodes: Vec<(String, String)> = leased
            .lock()
            .map(|l| l.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let now = shared.clock.now();
        let renew = jiff::Timestamp::try_from(now)
            .map(|t| format!("{t:.6}"))
            .unwrap_or_default();
        for (name, uid) in nodes {
            let lease = json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease",
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}]},
                "spec": {"holderIdentity": shared.config.identity,
                    "leaseDurationSeconds": duration.as_secs(), "renewTime": renew},
            });
            if let Err(e) = api.patch(&name, &params, &Patch::Apply(lease)).await {
                tracing::debug!("renewing the lease of node {name}: {e}");
            }
        }
        tokio::time::sleep(duration / 4).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotation_selectors() {
        let a: BTreeMap<String, String> =
            [("kwok.x-k8s.io/node".to_string(), "fake".to_string())].into();
        assert!(annotations_match("kwok.x-k8s.io/node=fake", &a));
        assert!(!annotations_match("kwok.x-k8s.io/node=real", &a));
        assert!(annotations_match("kwok.x-k8s.io/node", &a));
        assert!(!annotations_match("!kwok.x-k8s.io/node", &a));
        assert!(annotations_match("other!=x", &a));
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
}
