//! `Cluster`: what tests and the conformance suite hold.
//!
//! [`ClusterBuilder::start`] brings up the embedded cluster in one call: the
//! API server, the scheduler, the workload controllers, the resourceclaim controller and kwok, each a task
//! talking to the API server through its own in-memory `kube::Client`; then
//! creates the namespaces, priority classes, nodes and objects asked for.
//!
//! Time is the clock of the runtime: under `#[tokio::test(start_paused =
//! true)]` it is virtual (tokio jumps to the next timer whenever every task
//! is idle), so [`Cluster::advance`] by ten minutes costs milliseconds; in a
//! normal runtime it is real time. Observers ([`Cluster::wait_until`] and
//! the functions built on it) poll the API server on that clock, with a
//! bounded timeout and a failure message that says what was last seen.
//!
//! Everything a test does goes through [`Cluster::client`]; nothing reaches
//! into the components. A cluster in containers can stand behind the same
//! API: it only needs a client and a clock ([`Cluster::external`]).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, PostParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::{Api, Client};
use serde_json::{Value, json};
use simclock::{Clock, busy};
use tokio::task::JoinHandle;

use crate::controllers::Controllers;
use crate::scheduler::Scheduler;
use crate::slim_pod::SlimPod;

/// The annotation that marks kwok's nodes.
pub use kwok::NODE_ANNOTATION as KWOK_NODE_ANNOTATION;

/// Why a cluster operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The API server did not start.
    #[error("starting the embedded API server: {0}")]
    Start(#[from] apiserver::ApiError),
    /// A request failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The client error.
        source: kube::Error,
    },
    /// A manifest or stage could not be used.
    #[error("{0}")]
    Invalid(String),
    /// A container backend failed.
    #[error(transparent)]
    Container(#[from] crate::container::ContainerError),
    /// The cluster is not what the backend can serve.
    #[error("{0}")]
    Backend(String),
    /// An observer timed out.
    #[error("timed out after {timeout:?} waiting until {what}; last seen: {seen}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// The bound.
        timeout: Duration,
        /// The last observation.
        seen: String,
    },
}

/// A node shape for [`ClusterBuilder::nodes`].
#[derive(Debug, Clone)]
pub struct NodeTemplate {
    /// Name prefix; nodes are `<prefix>-<i>`.
    pub prefix: String,
    /// CPU capacity (`4`, `3500m`).
    pub cpu: String,
    /// Memory capacity (`16Gi`).
    pub memory: String,
    /// Pod capacity.
    pub pods: u32,
    /// Extra labels.
    pub labels: BTreeMap<String, String>,
    /// Extra annotations.
    pub annotations: BTreeMap<String, String>,
    /// Taints (`{key, value, effect}` objects).
    pub taints: Vec<Value>,
}

impl Default for NodeTemplate {
    fn default() -> Self {
        Self {
            prefix: "node".into(),
            cpu: "4".into(),
            memory: "16Gi".into(),
            pods: 110,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            taints: Vec::new(),
        }
    }
}

impl NodeTemplate {
    /// A node template with this CPU and memory.
    pub fn new(prefix: &str, cpu: &str, memory: &str) -> Self {
        Self {
            prefix: prefix.into(),
            cpu: cpu.into(),
            memory: memory.into(),
            ..Self::default()
        }
    }

    /// Node `i` from a Node manifest used as a template: named
    /// `<metadata.name>-<i>`, with the kwok annotation and hostname label.
    pub fn from_node(template: &Value, i: usize) -> Value {
        let mut node = template.clone();
        let base = template
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("node");
        let name = format!("{base}-{i}");
        node["metadata"]["name"] = json!(name);
        if !node["metadata"]["labels"].is_object() {
            node["metadata"]["labels"] = json!({});
        }
        node["metadata"]["labels"]["kubernetes.io/hostname"] = json!(name);
        if !node["metadata"]["annotations"].is_object() {
            node["metadata"]["annotations"] = json!({});
        }
        node["metadata"]["annotations"][KWOK_NODE_ANNOTATION] = json!("fake");
        node
    }

    /// The Node object for index `i`: a kwok-managed fake node with its
    /// capacity in status (kwok keeps what the creator set).
    pub fn node(&self, i: usize) -> Value {
        let name = format!("{}-{i}", self.prefix);
        let mut labels = json!({
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", "type": "kwok",
        });
        for (k, v) in &self.labels {
            labels[k] = json!(v);
        }
        let mut annotations = json!({KWOK_NODE_ANNOTATION: "fake"});
        for (k, v) in &self.annotations {
            annotations[k] = json!(v);
        }
        let resources = json!({"cpu": self.cpu, "memory": self.memory, "pods": self.pods.to_string(), "ephemeral-storage": "100Gi"});
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {"taints": if self.taints.is_empty() { Value::Null } else { json!(self.taints) }},
            "status": {"capacity": resources, "allocatable": resources,
                "addresses": [{"type": "InternalIP", "address": format!("192.168.{}.{}", i / 250, i % 250 + 1)}]},
        })
    }
}

/// Builds an embedded cluster.
#[derive(Default)]
pub struct ClusterBuilder {
    pub(crate) objects: Vec<Value>,
    pub(crate) stages: Vec<kwok::Compiled>,
    pub(crate) kwok: kwok::Config,
    pub(crate) errors: Vec<String>,
    pub(crate) time_scale: Option<f64>,
    pub(crate) capi: bool,
    pub(crate) aws: Option<String>,
    pub(crate) epoch: Option<std::time::SystemTime>,
    pub(crate) without_stages: Vec<String>,
    pub(crate) without_scheduler_events: bool,
    pub(crate) without_resourceclaim_controller: bool,
}

impl ClusterBuilder {
    /// `count` fake nodes of a template.
    pub fn nodes(mut self, count: usize, template: &NodeTemplate) -> Self {
        self.objects.extend((0..count).map(|i| template.node(i)));
        self
    }

    /// A namespace.
    pub fn namespace(mut self, name: &str) -> Self {
        self.objects
            .push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}));
        self
    }

    /// A PriorityClass.
    pub fn priority_class(mut self, name: &str, value: i32) -> Self {
        self.objects.push(
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value}),
        );
        self
    }

    /// Any object (a workload, a PDB, a ConfigMap...), created in order.
    pub fn object(mut self, obj: Value) -> Self {
        self.objects.push(obj);
        self
    }

    /// Objects, created in order after those given before.
    pub fn objects(mut self, objs: impl IntoIterator<Item = Value>) -> Self {
        self.objects.extend(objs);
        self
    }

    /// Custom kwok stages (multi-document YAML), added to the defaults.
    pub fn stages(mut self, yaml: &str) -> Self {
        match kwok::parse_stages(yaml, "builder stages") {
            Ok(s) => self.stages.extend(s),
            Err(e) => self.errors.push(e.to_string()),
        }
        self
    }

    /// Leaves a default kwok stage out by name: `node-heartbeat-with-lease`
    /// for a cluster in which nothing reads node heartbeats (no node
    /// lifecycle controller runs here), so no node is patched every ten
    /// minutes for nothing.
    pub fn without_stage(mut self, name: &str) -> Self {
        if !kwok::default_stages().iter().any(|s| s.name() == name) {
            self.errors.push(format!(
                "without_stage: no default kwok stage is named {name:?}"
            ));
        }
        self.without_stages.push(name.to_string());
        self
    }

    /// The scheduler records no events ([`Scheduler::without_events`]):
    /// for a cluster in which nothing reads them.
    pub fn without_scheduler_events(mut self) -> Self {
        self.without_scheduler_events = true;
        self
    }

    /// No ResourceClaim controller runs: for a cluster that will have no
    /// ResourceClaimTemplates, claims or pods that ask for claims (it
    /// watches every pod for those).
    pub fn without_resourceclaim_controller(mut self) -> Self {
        self.without_resourceclaim_controller = true;
        self
    }

    /// kwok settings (leases, CIDR, node selection).
    pub fn kwok_config(mut self, config: kwok::Config) -> Self {
        self.kwok = config;
        self
    }

    /// Serves Cluster API: its CRDs and the controllers that turn
    /// MachineDeployments into Machines and kwok Nodes
    /// ([`crate::controllers::capi`]).
    pub fn capi(mut self) -> Self {
        self.capi = true;
        self
    }

    /// Runs the AWS bridge (`harness::aws::Bridge`, with the `aws`
    /// feature) from the AWS API at `endpoint` (an emulator): its ASGs'
    /// running instances become kwok Nodes, within five seconds. Without the
    /// feature the build fails with an error saying so.
    pub fn aws(mut self, endpoint: &str) -> Self {
        if !cfg!(feature = "aws") {
            self.errors.push(format!(
                "AWS node groups ({endpoint}) need the testbed built with the `aws` feature \
                 (cargo build -p conformance --features aws)"
            ));
        }
        self.aws = Some(endpoint.to_string());
        self
    }

    /// For a cluster in real time serving an autoscaler whose timing flags
    /// are divided by `scale` (conformance binary mode): the cluster's own
    /// waits (the scheduler's backoff and periodic retry) are divided too,
    /// so that both sides keep the same proportions in scenario time.
    pub fn time_scale(mut self, scale: f64) -> Self {
        self.time_scale = Some(scale);
        self
    }

    /// The cluster's clock starts at `epoch` instead of the current time:
    /// a run on paused time then stamps every object alike, run after run.
    pub fn epoch(mut self, epoch: std::time::SystemTime) -> Self {
        self.epoch = Some(epoch);
        self
    }

    /// Starts the cluster on the runtime's clock and creates the objects.
    pub async fn start(self) -> Result<Cluster, ClusterError> {
        let (cluster, ()) = self
            .start_loaded(|_, _| async { Ok::<(), ClusterError>(()) })
            .await?;
        Ok(cluster)
    }

    /// Like [`Self::start`], but `load` runs on a client of the API server,
    /// and on the server itself (for [`apiserver::Server::restore`]),
    /// before the scheduler, the controllers and kwok start: what it
    /// creates is there when they first list, as objects restored into a
    /// cluster whose control plane then starts. Its result comes back with
    /// the cluster.
    pub async fn start_loaded<T, E, F, Fut>(self, load: F) -> Result<(Cluster, T), E>
    where
        F: FnOnce(Client, Arc<apiserver::Server>) -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
        E: From<ClusterError>,
    {
        if let Some(e) = self.errors.first() {
            return Err(ClusterError::Invalid(e.clone()).into());
        }
        let clock = match self.epoch {
            Some(epoch) => Clock::starting_at(epoch),
            None => Clock::new(),
        };
        let api = apiserver::ApiServer::start(clock.clone()).map_err(ClusterError::from)?;
        let mut stages = kwok::default_stages();
        stages.retain(|s| !self.without_stages.iter().any(|n| n == s.name()));
        stages.extend(self.stages);
        // Stage objects can be added while the cluster runs (fault
        // injection in scenarios); their CRD exists before kwok watches.
        let mut kwok_config = self.kwok;
        kwok_config.stages_from_cluster = true;
        let setup = Cluster::external(api.client(), clock.clone());
        setup.create(kwok::stage_crd()).await?;
        if self.capi {
            for crd in crate::controllers::capi::crds() {
                setup.create(crd).await?;
            }
        }
        let loaded = load(api.client(), api.server().clone()).await?;
        let mut tasks = vec![
            tokio::spawn(busy::timed(
                "scheduler",
                {
                    let scheduler = Scheduler::new(api.client(), clock.clone())
                        .with_time_scale(self.time_scale.unwrap_or(1.0));
                    if self.without_scheduler_events {
                        scheduler.without_events()
                    } else {
                        scheduler
                    }
                }
                .run(),
            )),
            tokio::spawn(busy::timed(
                "controllers",
                Controllers::new(api.client(), clock.clone()).run(),
            )),
        ];
        if !self.without_resourceclaim_controller {
            tasks.push(tokio::spawn(busy::timed(
                "resourceclaim",
                crate::controllers::ResourceClaimController::new(api.client(), clock.clone()).run(),
            )));
        }
        tasks.push(tokio::spawn(busy::timed(
            "kwok",
            kwok::Controller::new(api.client(), clock.clone(), kwok_config, stages).run(),
        )));
        if self.capi {
            tasks.push(tokio::spawn(busy::timed(
                "capi",
                crate::controllers::CapiController::new(api.client(), clock.clone()).run(),
            )));
        }
        #[cfg(feature = "aws")]
        if let Some(endpoint) = &self.aws {
            let bridge = crate::aws::Bridge::new(
                endpoint,
                api.client(),
                clock.clone(),
                std::time::Duration::from_secs(5),
            );
            tasks.push(tokio::spawn(busy::timed("aws", bridge.run())));
        }
        let cluster = Cluster {
            client: api.client(),
            clock,
            embedded: Some(Embedded { api, tasks }),
            remote: None,
            poll: POLL,
        };
        for obj in self.objects {
            cluster.create(obj).await?;
        }
        Ok((cluster, loaded))
    }
}

struct Embedded {
    api: apiserver::ApiServer,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Embedded {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// What a cluster outside this process comes with: the container it runs
/// in (removed on drop), its kubeconfig on disk, and tasks of ours that
/// serve it (kwok's controller for a kind node), stopped on drop.
pub struct Remote {
    /// The container the cluster runs in.
    pub container: crate::container::Container,
    /// A kubeconfig that reaches it from this host.
    pub kubeconfig: std::path::PathBuf,
    /// Holds the kubeconfig's directory.
    pub dir: tempfile::TempDir,
    /// Our tasks serving it.
    pub tasks: Vec<JoinHandle<()>>,
}

impl Drop for Remote {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A running cluster.
pub struct Cluster {
    client: Client,
    clock: Clock,
    embedded: Option<Embedded>,
    remote: Option<Remote>,
    /// How often the waits check (the cluster's time).
    poll: Duration,
}

/// How often the waits check by default (the cluster's time).
const POLL: Duration = Duration::from_millis(250);

impl Cluster {
    /// A builder for an embedded cluster.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// A cluster that something else runs (containers, a real cluster):
    /// observers and steps work the same through its client.
    pub fn external(client: Client, clock: Clock) -> Self {
        Self {
            client,
            clock,
            embedded: None,
            remote: None,
            poll: POLL,
        }
    }

    /// A cluster outside this process ([`crate::backend`]'s container
    /// backends), reached through `client`, kept alive by `remote`.
    pub fn remote(client: Client, clock: Clock, remote: Remote) -> Self {
        Self {
            client,
            clock,
            embedded: None,
            remote: Some(remote),
            poll: POLL,
        }
    }

    /// The kubeconfig of a cluster outside this process (an autoscaler
    /// binary uses it); `None` for the embedded cluster, which
    /// [`apiserver::ApiServer::serve_tls`] serves on demand.
    pub fn kubeconfig(&self) -> Option<&std::path::Path> {
        self.remote.as_ref().map(|r| r.kubeconfig.as_path())
    }

    /// A client (a fresh handle; all share the connection).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// A client for the autoscaler under test: the embedded API server's
    /// fault rules ([`apiserver::faults`]) apply to it. Elsewhere the same
    /// as [`Cluster::client`].
    pub fn client_under_test(&self) -> Client {
        self.api_server()
            .map_or_else(|| self.client(), apiserver::ApiServer::client_under_test)
    }

    /// A client under test whose writes the embedded API server logs as
    /// `name`'s ([`apiserver::writes`]): one autoscaler replica of several.
    /// Elsewhere the same as [`Cluster::client`].
    pub fn client_under_test_named(&self, name: &str) -> Client {
        self.api_server()
            .map_or_else(|| self.client(), |a| a.client_under_test_named(name))
    }

    /// The cluster's clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The embedded API server, when there is one (to serve it over TLS).
    pub fn api_server(&self) -> Option<&apiserver::ApiServer> {
        self.embedded.as_ref().map(|e| &e.api)
    }

    /// Lets `d` pass (virtual or real, per the runtime) while every
    /// component runs.
    pub async fn advance(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }

    /// Creates any object from its JSON form (built-in or custom kind).
    pub async fn create(&self, obj: Value) -> Result<(), ClusterError> {
        self.create_with(obj, false).await
    }

    /// Sends `obj` to be created in a server dry run (`dryRun=All`): the
    /// API server checks it as for a create and stores nothing.
    pub async fn create_dry_run(&self, obj: Value) -> Result<(), ClusterError> {
        self.create_with(obj, true).await
    }

    /// Whether the object `obj` names (kind, namespace, name) exists.
    pub async fn exists(&self, obj: &Value) -> Result<bool, ClusterError> {
        let (api, kind, name) = self.api_of(obj).await?;
        api.get_opt(&name)
            .await
            .map(|o| o.is_some())
            .map_err(|source| ClusterError::Api {
                what: format!("getting {kind} {name}"),
                source,
            })
    }

    async fn create_with(&self, obj: Value, dry_run: bool) -> Result<(), ClusterError> {
        let (api, kind, name) = self.api_of(&obj).await?;
        let dynamic: DynamicObject = serde_json::from_value(obj)
            .map_err(|e| ClusterError::Invalid(format!("{kind} {name}: {e}")))?;
        let params = PostParams {
            dry_run,
            ..PostParams::default()
        };
        api.create(&params, &dynamic)
            .await
            .map_err(|source| ClusterError::Api {
                what: format!("creating {kind} {name}"),
                source,
            })?;
        Ok(())
    }

    /// The API of the object `obj` names (found by discovery), its kind
    /// and its name.
    async fn api_of(
        &self,
        obj: &Value,
    ) -> Result<(Api<DynamicObject>, String, String), ClusterError> {
        let api_version = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("v1")
            .to_string();
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
        let gvk = GroupVersionKind::gvk(group, version, &kind);
        let (resource, caps) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|source| ClusterError::Api {
                what: format!("discovering {api_version} {kind}"),
                source,
            })?;
        let ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default");
        let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
            Api::namespaced_with(self.client.clone(), ns, &resource)
        } else {
            Api::all_with(self.client.clone(), &resource)
        };
        Ok((api, kind, name))
    }

    /// The waits check every `poll` of the cluster's time instead of every
    /// 250 ms: on paused time, a long poll costs nothing and a wait for
    /// thousands of pods lists them less often.
    pub fn poll_every(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }

    /// Waits until `check` returns `Ok(value)`, polling every 250 ms of the
    /// cluster's time (or as [`Cluster::poll_every`] says), for at most `timeout`. `check` returns `Err(seen)`
    /// describing what it saw, which the timeout error reports.
    pub async fn wait_until<T, F, Fut>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: F,
    ) -> Result<T, ClusterError>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, String>>,
    {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let seen = match check(self.client.clone()).await {
                Ok(v) => return Ok(v),
                Err(seen) => seen,
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(ClusterError::Timeout {
                    what: what.into(),
                    timeout,
                    seen,
                });
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    /// Waits until at least `count` pods matching `selector` (all
    /// namespaces) are Running and Ready and not being deleted; returns
    /// them.
    pub async fn wait_pods_running(
        &self,
        selector: &str,
        count: usize,
        timeout: Duration,
    ) -> Result<Vec<Pod>, ClusterError> {
        self.wait_running::<Pod>(selector, count, timeout, |p| p)
            .await
    }

    /// [`Self::wait_pods_running`] reading of each pod only what says it
    /// runs ([`SlimPod`]): for hundreds of thousands of pods. Returns how
    /// many run.
    pub async fn wait_pods_running_count(
        &self,
        selector: &str,
        count: usize,
        timeout: Duration,
    ) -> Result<usize, ClusterError> {
        let running = self
            .wait_running::<SlimPod>(selector, count, timeout, |p| p.0)
            .await?;
        Ok(running.len())
    }

    /// The running pods once there are `count`, each listed as `K`.
    async fn wait_running<K>(
        &self,
        selector: &str,
        count: usize,
        timeout: Duration,
        pod: fn(K) -> Pod,
    ) -> Result<Vec<Pod>, ClusterError>
    where
        K: kube::Resource<DynamicType = ()> + Clone + Debug + serde::de::DeserializeOwned,
    {
        let selector = selector.to_string();
        self.wait_until(
            &format!("{count} pods {selector:?} are Running"),
            timeout,
            |c| {
                let selector = selector.clone();
                async move {
                    let pods = list::<K>(&c, &selector).await?;
                    running_of(pods.into_iter().map(pod).collect(), count)
                }
            },
        )
        .await
    }

    /// Waits until `count` nodes are Ready.
    pub async fn wait_nodes_ready(
        &self,
        count: usize,
        timeout: Duration,
    ) -> Result<Vec<Node>, ClusterError> {
        self.wait_until(
            &format!("{count} nodes are Ready"),
            timeout,
            |c| async move {
                let nodes = list::<Node>(&c, "").await?;
                let ready: Vec<Node> = nodes.iter().filter(|n| node_ready(n)).cloned().collect();
                if ready.len() >= count {
                    Ok(ready)
                } else {
                    Err(format!("{} of {} nodes Ready", ready.len(), nodes.len()))
                }
            },
        )
        .await
    }

    /// Waits until a node no longer exists.
    pub async fn wait_node_gone(&self, name: &str, timeout: Duration) -> Result<(), ClusterError> {
        let name = name.to_string();
        self.wait_until(&format!("node {name} is gone"), timeout, |c| {
            let name = name.clone();
            async move {
                match Api::<Node>::all(c).get_opt(&name).await {
                    Ok(None) => Ok(()),
                    Ok(Some(n)) => Err(format!("node {name} exists (Ready: {})", node_ready(&n))),
                    Err(e) => Err(e.to_string()),
                }
            }
        })
        .await
    }
}

/// Objects per page of [`for_each_page`].
pub const PAGE: u32 = 2_000;

/// Hands the objects that `lp` selects to `each`, a page of [`PAGE`] at a
/// time (`limit` and `continue`), so that no more than a page is held at
/// once: 300,000 pods listed in one piece are gigabytes of JSON and objects.
/// Returns the list's resourceVersion (every page is of the first one's).
pub async fn for_each_page<K>(
    client: &Client,
    lp: ListParams,
    mut each: impl FnMut(Vec<K>),
) -> Result<Option<String>, String>
where
    K: kube::Resource<DynamicType = ()> + Clone + Debug + serde::de::DeserializeOwned,
{
    let api = Api::<K>::all(client.clone());
    let mut lp = lp.limit(PAGE);
    let mut version = None;
    loop {
        let page = api
            .list(&lp)
            .await
            .map_err(|e| format!("listing {}: {e}", K::kind(&())))?;
        if version.is_none() {
            version = page.metadata.resource_version.filter(|v| !v.is_empty());
        }
        let next = page.metadata.continue_.filter(|c| !c.is_empty());
        each(page.items);
        match next {
            Some(token) => lp = lp.continue_token(&token),
            None => return Ok(version),
        }
    }
}

/// Lists objects of a kind in all namespaces with a label selector.
pub async fn list<K>(client: &Client, selector: &str) -> Result<Vec<K>, String>
where
    K: kube::Resource<DynamicType = ()> + Clone + Debug + serde::de::DeserializeOwned,
{
    let lp = if selector.is_empty() {
        ListParams::default()
    } else {
        ListParams::default().labels(selector)
    };
    Api::<K>::all(client.clone())
        .list(&lp)
        .await
        .map(|l| l.items)
        .map_err(|e| format!("listing {}: {e}", K::kind(&())))
}

/// Whether a pod is Running and Ready.
pub fn pod_running(p: &Pod) -> bool {
    let s = p.status.as_ref();
    s.and_then(|s| s.phase.as_deref()) == Some("Running")
        && s.and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether a node's Ready condition is True.
pub fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The pods of `pods` that run (Running and Ready, not being deleted: a
/// terminating pod is on its way out), when there are `count` of them.
fn running_of(pods: Vec<Pod>, count: usize) -> Result<Vec<Pod>, String> {
    let runs = |p: &Pod| pod_running(p) && p.metadata.deletion_timestamp.is_none();
    let running = pods.iter().filter(|p| runs(p)).count();
    if running >= count {
        return Ok(pods.into_iter().filter(runs).collect());
    }
    Err(format!(
        "{running} Running of {} pods: {}",
        pods.len(),
        summarize(&pods)
    ))
}

/// `name: phase@node` for each pod, for failure messages.
pub fn summarize(pods: &[Pod]) -> String {
    let mut out: Vec<String> = pods
        .iter()
        .map(|p| {
            format!(
                "{}: {}@{}",
                p.metadata.name.as_deref().unwrap_or(""),
                p.status
                    .as_ref()
                    .and_then(|s| s.phase.as_deref())
                    .unwrap_or("?"),
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .unwrap_or("-")
            )
        })
        .collect();
    out.sort();
    if out.len() > 20 {
        let n = out.len() - 20;
        out.truncate(20);
        out.push(format!("... and {n} more"));
    }
    out.join(", ")
}
