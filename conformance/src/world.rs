//! The scenario state: the declared node groups, flags and workloads, then
//! the running cluster and the autoscaler under test.
//!
//! The autoscaler under test is chosen once per run ([`configure`]):
//! in-process on the cluster's virtual clock, or a CA-compatible binary
//! started against the embedded API server over TLS, in real time scaled by
//! [`UnderTest::Binary::time_scale`]. Steps never sleep or read clocks
//! themselves: they go through [`Running::pass`] and [`Running::real`], so
//! "10 minutes" means 10 virtual minutes in-process and 10 s of real time
//! at a scale of 60.

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use autoscaler::decisions::Decisions;
use autoscaler::server::Endpoints;
use harness::cluster::Cluster;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::Api;
use serde_json::{Value, json};

use crate::binary::{self, BinaryInfo};

/// The kwok provider's configuration, as the harness prepares it for every
/// scenario (in-process or binary).
const KWOK_PROVIDER_CONFIG: &str = "readNodesFrom: configmap\nnodegroups:\n  fromNodeLabelKey: kwok-nodegroup\nnodes:\n  skipTaint: true\nconfigmap:\n  name: kwok-provider-templates\n";

/// Name of the ConfigMap holding the node group templates.
pub const TEMPLATES_CONFIG_MAP: &str = "kwok-provider-templates";

/// How the autoscaler under test runs.
#[derive(Debug, Clone, Default)]
pub enum UnderTest {
    /// Our autoscaler as a library, on the cluster's virtual clock.
    #[default]
    InProcess,
    /// A CA-compatible executable against the embedded API server over TLS.
    Binary {
        /// The executable, its version and flags.
        info: Box<BinaryInfo>,
        /// Extra arguments, passed after the harness's own.
        args: Vec<String>,
        /// Scenario time per real time: 60 makes a scenario minute one real
        /// second. Durations in steps and the timing flags are divided by it.
        time_scale: f64,
    },
}

static UNDER_TEST: OnceLock<UnderTest> = OnceLock::new();

/// The cloud provider the suite's node groups are made for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Provider {
    /// kwok's provider: groups are template nodes in a ConfigMap.
    #[default]
    Kwok,
    /// Cluster API: groups are MachineDeployments ([`crate::capi`]).
    #[value(name = "clusterapi")]
    ClusterApi,
    /// AWS: groups are Auto Scaling groups of an AWS emulator
    /// ([`crate::aws`]).
    Aws,
}

impl Provider {
    /// The `--cloud-provider` value.
    pub fn flag(self) -> &'static str {
        match self {
            Self::Kwok => "kwok",
            Self::ClusterApi => "clusterapi",
            Self::Aws => "aws",
        }
    }
}

static PROVIDER: OnceLock<Provider> = OnceLock::new();

/// Sets the provider of this process's scenarios (once; later calls are
/// ignored and return false). A scenario may still ask for Cluster API
/// itself (`Given node groups are Cluster API MachineDeployments`).
pub fn configure_provider(provider: Provider) -> bool {
    PROVIDER.set(provider).is_ok()
}

/// The provider configured for this run.
pub fn configured_provider() -> Provider {
    PROVIDER.get().copied().unwrap_or_default()
}

/// Sets the autoscaler under test for this process's scenarios (once;
/// later calls are ignored and return false).
pub fn configure(under_test: UnderTest) -> bool {
    UNDER_TEST.set(under_test).is_ok()
}

fn under_test() -> UnderTest {
    UNDER_TEST.get().cloned().unwrap_or_default()
}

/// Where this run's clusters run: a [`harness::backend`] name and an image
/// for the container backends.
#[derive(Debug, Clone, Default)]
pub struct BackendChoice {
    /// `embedded`, `testbed`, `kwok` or `kind`.
    pub name: String,
    /// The image, instead of the backend's default.
    pub image: Option<String>,
}

static BACKEND: OnceLock<BackendChoice> = OnceLock::new();

/// Sets where this process's clusters run (once; later calls are ignored
/// and return false). Without it: the embedded cluster.
pub fn configure_backend(choice: BackendChoice) -> bool {
    BACKEND.set(choice).is_ok()
}

/// The backend configured for this run.
pub fn backend() -> Result<Box<dyn harness::backend::ClusterBackend>, String> {
    match BACKEND.get() {
        Some(c) => harness::backend::by_name(&c.name, c.image.as_deref()),
        None => Ok(Box::new(harness::backend::Embedded)),
    }
}

/// Steps that need this suite's kwok Stages ([`not_ready_stage`],
/// [`graceful_termination_stage`]), which only our kwok reads from the
/// cluster (embedded and testbed image); on another backend a scenario with
/// one is skipped with this reason.
pub const STAGE_STEPS: [(&str, &str); 2] = [
    (
        r#"^new nodes of "\S+" never become ready$"#,
        "keeps nodes NotReady through a kwok Stage of the suite's, which only the testbed's kwok reads",
    ),
    (
        r#"^\d+ nodes? of "\S+" becomes? NotReady$"#,
        "makes nodes NotReady through a kwok Stage of the suite's, which only the testbed's kwok reads",
    ),
];

/// Steps that need the embedded API server in this process (its fault
/// rules, [`crate::steps::faults`]; its log of writes, [`crate::replicas`]);
/// on any other backend a scenario with one is skipped with this reason.
pub const EMBEDDED_STEPS: [(&str, &str); 2] = [
    (
        r"^the API server (answers|times out|adds|stalls|cuts|injects|injected)",
        "injects API faults, which only the embedded API server can",
    ),
    (
        r"replicas? (with leader election|is killed|acted)",
        "tells replicas apart by the embedded API server's log of writes",
    ),
];

/// Why the configured backend cannot run a scenario of these steps (none: it can).
pub fn backend_unmet<'a>(step_texts: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let name = BACKEND.get().map_or("embedded", |c| c.name.as_str());
    let mut rules: Vec<(&str, &str)> = Vec::new();
    if !backend_reads_stages() {
        rules.extend(STAGE_STEPS);
    }
    if name != "embedded" {
        rules.extend(EMBEDDED_STEPS);
    }
    let mut unmet = Vec::new();
    for text in step_texts {
        for &(pattern, why) in &rules {
            if regex::Regex::new(pattern).is_ok_and(|re| re.is_match(text)) {
                unmet.push(format!("the {name} backend: {why}"));
            }
        }
    }
    unmet.dedup();
    unmet
}

/// Whether the configured backend's kwok reads Stage objects from the cluster.
pub fn backend_reads_stages() -> bool {
    BACKEND
        .get()
        .is_none_or(|c| matches!(c.name.as_str(), "embedded" | "testbed"))
}

/// Scenario time per real time of this run (1 in-process).
pub fn time_scale() -> f64 {
    match under_test() {
        UnderTest::InProcess => 1.0,
        UnderTest::Binary { time_scale, .. } => time_scale,
    }
}

/// The label that makes kwok keep a node NotReady ([`not_ready_stage`]).
pub const NOT_READY_LABEL: &str = "testbed.conformance/not-ready";

/// A kwok Stage that makes nodes labelled [`NOT_READY_LABEL`] NotReady
/// (before or after they were Ready) and keeps them so.
pub fn not_ready_stage() -> Value {
    json!({
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
        "metadata": {"name": "conformance-node-not-ready"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Node"},
            "selector": {"matchLabels": {NOT_READY_LABEL: "true"}},
            "weight": 10000,
            "steps": [
                // As the node lifecycle controller does for NotReady nodes.
                {"patch": {"root": "spec", "type": "merge", "template":
                    "taints:\n- key: node.kubernetes.io/not-ready\n  effect: NoSchedule\n"}},
                {"patch": {"subresource": "status", "root": "status", "template":
                    "conditions:\n- type: Ready\n  status: \"False\"\n  reason: KubeletNotReady\n  message: made NotReady by the conformance suite\n"}},
            ],
        }
    })
}

/// The label of pods that take their grace period to terminate
/// ([`graceful_termination_stage`]).
pub const GRACEFUL_TERMINATION_LABEL: &str = "testbed.conformance/graceful-termination";

/// A kwok Stage that deletes terminating pods labelled
/// [`GRACEFUL_TERMINATION_LABEL`] only when their grace period is over
/// (at `deletionTimestamp`), as a kubelet does; other pods go at once.
pub fn graceful_termination_stage() -> Value {
    json!({
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
        "metadata": {"name": "conformance-graceful-termination"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchLabels": {GRACEFUL_TERMINATION_LABEL: "true"},
                "matchExpressions": [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}],
            },
            "weight": 10000,
            "delay": {"durationFrom": {"expressionFrom": ".metadata.deletionTimestamp"}},
            "next": {"delete": true},
        }
    })
}

/// A node group declared by a scenario.
#[derive(Debug, Clone)]
pub struct GroupSpec {
    /// Group name (the `kwok-nodegroup` label value).
    pub name: String,
    /// CPU per node.
    pub cpu: String,
    /// Memory per node.
    pub memory: String,
    /// Min size.
    pub min: usize,
    /// Max size.
    pub max: usize,
    /// Nodes at start.
    pub initial: usize,
    /// Extra node labels.
    pub labels: serde_json::Map<String, Value>,
    /// Node taints (`key=value:Effect`).
    pub taints: Vec<Value>,
    /// Extra template annotations (faults, ...).
    pub annotations: serde_json::Map<String, Value>,
    /// Extra allocatable resources (GPUs, ...).
    pub resources: serde_json::Map<String, Value>,
    /// Cluster API mode: where the group advertises its capacity.
    pub zero_capacity: crate::capi::ZeroCapacity,
    /// Cluster API mode: the scenario's own MachineDeployment annotations.
    pub machine_deployment_annotations: serde_json::Map<String, Value>,
}

impl GroupSpec {
    /// A group of `cpu`/`memory` nodes sized `min..=max`, starting at min.
    pub fn new(name: &str, cpu: &str, memory: &str, min: usize, max: usize) -> Self {
        Self {
            name: name.into(),
            cpu: cpu.into(),
            memory: memory.into(),
            min,
            max,
            initial: 0,
            labels: Default::default(),
            taints: Vec::new(),
            annotations: Default::default(),
            resources: Default::default(),
            zero_capacity: Default::default(),
            machine_deployment_annotations: Default::default(),
        }
    }

    /// The `i`th starting node: the template with a name and a provider
    /// ID, and the annotations the kwok providers give their nodes.
    pub fn starting_node(&self, i: usize) -> Value {
        let mut node = self.template();
        let name = format!("{}-start{i}", self.name);
        node["metadata"]["name"] = json!(name);
        node["metadata"]["labels"]["kubernetes.io/hostname"] = json!(name);
        node["metadata"]["annotations"]["kwok.x-k8s.io/node"] = json!("fake");
        node["spec"]["providerID"] = json!(format!("kwok:{name}"));
        node
    }

    /// The group's template node, as the kwok provider reads it.
    pub fn template(&self) -> Value {
        let mut labels = self.labels.clone();
        labels.insert("kwok-nodegroup".into(), json!(self.name));
        let mut annotations = self.annotations.clone();
        // The group's name as given: without it upstream's kwok provider
        // names the group `<label value>-<unix seconds>`.
        annotations.insert(
            "cluster-autoscaler.kwok.nodegroup/name".into(),
            json!(self.name),
        );
        for (k, v) in [
            ("min-count", self.min),
            ("max-count", self.max),
            ("desired-count", self.initial.max(self.min)),
        ] {
            // A scenario's own value (a malformed one, say) stays.
            annotations
                .entry(format!("cluster-autoscaler.kwok.nodegroup/{k}"))
                .or_insert_with(|| json!(v.to_string()));
        }
        let mut resources = self.resources.clone();
        resources.insert("cpu".into(), json!(self.cpu));
        resources.insert("memory".into(), json!(self.memory));
        resources.insert("pods".into(), json!("110"));
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.name, "labels": labels, "annotations": annotations},
            "spec": {"taints": self.taints},
            "status": {"capacity": resources, "allocatable": resources}})
    }
}

/// The kwok provider's configuration ConfigMap: groups by the
/// `kwok-nodegroup` label, templates from [`TEMPLATES_CONFIG_MAP`].
pub fn provider_config_map() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kwok-provider-config", "namespace": "kube-system"},
        "data": {"config": KWOK_PROVIDER_CONFIG}})
}

/// The node group templates as the kwok provider's templates ConfigMap.
pub fn templates_config_map(groups: &[GroupSpec]) -> Value {
    let templates: Vec<Value> = groups.iter().map(GroupSpec::template).collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": templates});
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": TEMPLATES_CONFIG_MAP, "namespace": "kube-system"},
        "data": {"templates": list.to_string()}})
}

/// What a scenario used beyond what every Cluster Autoscaler offers (our
/// decision record, the kwok provider's fault annotation): a scenario that
/// uses any must be tagged `@extension` ([`crate::steps::EXTENSION_TAG`]),
/// which the runner checks after every scenario.
#[derive(Debug, Clone, Default)]
pub struct Extensions(Arc<Mutex<BTreeSet<&'static str>>>);

impl Extensions {
    /// Records that the scenario uses `what`.
    pub fn record(&self, what: &'static str) {
        if let Ok(mut used) = self.0.lock() {
            used.insert(what);
        }
    }

    /// What the scenario used.
    pub fn used(&self) -> Vec<&'static str> {
        self.0
            .lock()
            .map(|u| u.iter().copied().collect())
            .unwrap_or_default()
    }
}

/// The autoscaler process or task of a scenario.
enum Autoscaler {
    InProcess {
        endpoints: Endpoints,
        task: tokio::task::JoinHandle<()>,
    },
    Binary(Box<BinaryProcess>),
    /// Replicas with leader election ([`crate::replicas`]), by the name
    /// the API server's log of writes gives their clients.
    Replicas(Vec<(Arc<str>, Replica)>),
}

/// Why a step that reads the autoscaler's endpoints (`/decisions`,
/// `/metrics`, `/health-check`) fails with several replicas.
const REPLICAS_ENDPOINTS: &str = "this step reads the autoscaler's endpoints, and a scenario with several replicas has no one autoscaler to read";

/// One replica of several.
enum Replica {
    InProcess(tokio::task::JoinHandle<()>),
    Binary(Box<BinaryProcess>),
}

impl Replica {
    /// The hostname of a binary replica's UTS namespace.
    fn hostname(&self) -> Option<&str> {
        match self {
            Replica::InProcess(_) => None,
            Replica::Binary(b) => b.hostname.as_deref(),
        }
    }

    fn kill(&mut self) {
        match self {
            Replica::InProcess(task) => task.abort(),
            Replica::Binary(b) => {
                let _ = b.child.start_kill();
            }
        }
    }
}

impl Autoscaler {
    /// When the binary has exited: its exit status and the tail of its log.
    fn exited(&mut self) -> Option<String> {
        match self {
            Autoscaler::Binary(b) => b.exited(),
            Autoscaler::InProcess { .. } => None,
            Autoscaler::Replicas(replicas) => replicas.iter_mut().find_map(|(_, r)| match r {
                Replica::Binary(b) => b.exited(),
                Replica::InProcess(_) => None,
            }),
        }
    }
}

impl BinaryProcess {
    /// When the binary has exited: its exit status and the tail of its log.
    fn exited(&mut self) -> Option<String> {
        let status = self.child.try_wait().ok()??;
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Some(format!(
            "the autoscaler binary exited ({status}); last log lines:\n{}",
            tail.join("\n")
        ))
    }
}

/// An autoscaler binary and what it needs kept alive.
struct BinaryProcess {
    child: tokio::process::Child,
    port: u16,
    log: PathBuf,
    /// The embedded API server served for it alone (none for a cluster in
    /// a container): its address names the binary in the log of writes.
    served: Option<Served>,
    /// The hostname of its UTS namespace, for a replica.
    hostname: Option<String>,
}

/// The running cluster and autoscaler of a scenario.
pub struct Running {
    /// The cluster.
    pub cluster: Cluster,
    autoscaler: Autoscaler,
    started: tokio::time::Instant,
    time_scale: f64,
    flags: Vec<String>,
    extensions: Extensions,
    provider: Provider,
    /// The safety invariants' observer, when the scenario asked for it.
    pub observer: Option<crate::invariants::Observer>,
    /// The in-process autoscaler's clock (the cluster's, or skewed).
    clock: simclock::Clock,
}

impl Drop for Running {
    fn drop(&mut self) {
        match &mut self.autoscaler {
            Autoscaler::InProcess { task, .. } => task.abort(),
            Autoscaler::Binary(b) => {
                let _ = b.child.start_kill();
            }
            Autoscaler::Replicas(replicas) => replicas.iter_mut().for_each(|(_, r)| r.kill()),
        }
    }
}

impl Running {
    /// The real duration of `scenario` time.
    pub fn real(&self, scenario: Duration) -> Duration {
        scenario.div_f64(self.time_scale)
    }

    /// How long a step waits for something that should happen `within`
    /// scenario time: `within`, plus in binary mode CA's fixed real-time
    /// waits ([`binary::FIXED_REAL_WAITS`]) expressed in scenario time.
    pub fn window(&self, within: Duration) -> Duration {
        if self.time_scale == 1.0 {
            within
        } else {
            within + binary::FIXED_REAL_WAITS.mul_f64(self.time_scale)
        }
    }

    /// Scenario time since the autoscaler started.
    pub fn scenario_time(&self) -> Duration {
        self.started.elapsed().mul_f64(self.time_scale)
    }

    /// Lets `d` of scenario time pass while everything runs; fails when the
    /// autoscaler process has exited.
    pub async fn pass(&mut self, d: Duration) -> Result<(), String> {
        tokio::time::sleep(self.real(d)).await;
        self.check_alive()
    }

    /// The autoscaler binary's log file.
    pub fn log(&self) -> Option<&std::path::Path> {
        match &self.autoscaler {
            Autoscaler::Binary(b) => Some(&b.log),
            Autoscaler::InProcess { .. } | Autoscaler::Replicas(_) => None,
        }
    }

    /// Fails with the tail of its log when the autoscaler binary exited.
    pub fn check_alive(&mut self) -> Result<(), String> {
        self.autoscaler.exited().map_or(Ok(()), Err)
    }

    /// Stops the autoscaler and starts it again with the same flags, as a
    /// new pod of the Deployment would.
    pub async fn restart(&mut self) -> StepResult {
        self.autoscaler = match &mut self.autoscaler {
            Autoscaler::InProcess { task, .. } => {
                task.abort();
                start_in_process(&self.cluster, &self.clock, self.provider, &self.flags).await?
            }
            Autoscaler::Binary(b) => {
                b.child
                    .kill()
                    .await
                    .map_err(|e| format!("stopping the autoscaler binary: {e}"))?;
                let UnderTest::Binary { info, args, .. } = under_test() else {
                    return Err("binary mode is not configured".into());
                };
                Autoscaler::Binary(
                    start_binary(
                        &self.cluster,
                        &info,
                        self.provider,
                        &self.flags,
                        &args,
                        self.time_scale,
                        None,
                    )
                    .await?,
                )
            }
            Autoscaler::Replicas(_) => {
                return Err(
                    "with several replicas, kill one: \"When the leading replica is killed\""
                        .into(),
                );
            }
        };
        Ok(())
    }

    /// The writes of the autoscaler under test so far, by client (the
    /// embedded API server's log).
    pub fn writes(&self) -> Result<Vec<apiserver::writes::Write>, String> {
        self.cluster
            .api_server()
            .map(apiserver::ApiServer::writes)
            .ok_or_else(|| "the log of writes needs the embedded API server".into())
    }

    /// Kills the replica that holds the Lease (waiting up to `within` of
    /// scenario time for one to), as `kubectl delete pod --force` or a node
    /// failure would: no graceful shutdown. Returns its name.
    pub async fn kill_leader(&mut self, within: Duration) -> Result<String, String> {
        let deadline = self.window(within);
        let mut waited = Duration::ZERO;
        loop {
            let leader = crate::replicas::leader(&self.writes()?);
            if let Autoscaler::Replicas(replicas) = &mut self.autoscaler {
                if let Some(i) = leader.and_then(|l| replicas.iter().position(|(n, _)| *n == l)) {
                    let hosts: Vec<Option<&str>> =
                        replicas.iter().map(|(_, r)| r.hostname()).collect();
                    match check_holder_identity(&self.cluster.client(), &hosts, i).await? {
                        Holder::Leader => {
                            let (name, mut replica) = replicas.remove(i);
                            replica.kill();
                            return Ok(name.to_string());
                        }
                        // The Lease changed hands since the log was read.
                        Holder::Moved => {}
                    }
                }
            } else {
                return Err(
                    "no replicas: start them with \"Given the autoscaler runs as 2 replicas with leader election\"".into(),
                );
            }
            if waited >= deadline {
                return Err(format!(
                    "no live replica renewed the lease {}/{} within {within:?}",
                    crate::replicas::LEASE.0,
                    crate::replicas::LEASE.1
                ));
            }
            let step = Duration::from_secs(1);
            self.pass(step).await?;
            waited += step;
        }
    }

    /// The autoscaler's last decision record (`/decisions` for a binary).
    pub async fn decisions(&self) -> Result<Decisions, String> {
        self.extensions.record("the decision record (/decisions)");
        match &self.autoscaler {
            Autoscaler::InProcess { endpoints, .. } => Ok(endpoints.decisions()),
            Autoscaler::Replicas(_) => Err(REPLICAS_ENDPOINTS.into()),
            Autoscaler::Binary(b) => {
                let (code, body) = http_get(b.port, "/decisions").await?;
                if code != 200 {
                    return Err(format!(
                        "the autoscaler under test publishes no decision record (GET /decisions: {code}); this step needs it"
                    ));
                }
                serde_json::from_str(&body).map_err(|e| format!("GET /decisions: {e}: {body}"))
            }
        }
    }

    /// The autoscaler's `/metrics` text.
    pub async fn metrics(&self) -> Result<String, String> {
        match &self.autoscaler {
            Autoscaler::InProcess { endpoints, .. } => Ok(endpoints.metrics.encode()),
            Autoscaler::Replicas(_) => Err(REPLICAS_ENDPOINTS.into()),
            Autoscaler::Binary(b) => match http_get(b.port, "/metrics").await? {
                (200, body) => Ok(body),
                (code, body) => Err(format!("GET /metrics: {code}: {body}")),
            },
        }
    }

    /// The autoscaler's `/health-check` answer: status code and body.
    pub async fn health(&self) -> Result<(u16, String), String> {
        match &self.autoscaler {
            Autoscaler::Replicas(_) => Err(REPLICAS_ENDPOINTS.into()),
            Autoscaler::InProcess { endpoints, .. } => Ok(match endpoints.health() {
                Ok(()) => (200, "OK".into()),
                Err(e) => (500, e.to_string()),
            }),
            Autoscaler::Binary(b) => http_get(b.port, "/health-check").await,
        }
    }
}

/// A plain HTTP/1.0 GET on 127.0.0.1.
async fn http_get(port: u16, path: &str) -> Result<(u16, String), String> {
    harness::http_get(port, path)
        .await
        .map_err(|e| format!("GET http://127.0.0.1:{port}{path}: {e}"))
}

/// The cucumber world.
#[derive(Default, cucumber::World)]
pub struct CaWorld {
    /// Declared node groups.
    pub groups: Vec<GroupSpec>,
    /// Extra autoscaler flags (CA syntax, scenario time).
    pub flags: Vec<String>,
    /// Objects to create before the autoscaler starts.
    pub objects: Vec<Value>,
    /// The priority expander's priorities: value → group name regexes.
    pub expander_priorities: std::collections::BTreeMap<i64, Vec<String>>,
    /// The cluster, once started.
    pub running: Option<Running>,
    /// What the scenario used beyond CA's own interfaces.
    pub extensions: Extensions,
    /// The scenario asked for Cluster API whatever the run's provider.
    pub cluster_api: bool,
    /// Watch the safety invariants from the start ([`crate::invariants`]).
    pub observe: bool,
    /// Replicas of the autoscaler with leader election ([`crate::replicas`]);
    /// 0 or 1: one autoscaler, without.
    pub replicas: usize,
    /// How far the in-process autoscaler's clock is off the cluster's:
    /// the offset, and whether ahead.
    pub clock_skew: Option<(Duration, bool)>,
}

impl fmt::Debug for CaWorld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaWorld")
            .field("groups", &self.groups)
            .field("flags", &self.flags)
            .field("started", &self.running.is_some())
            .finish()
    }
}

/// Why a step failed (printed by cucumber).
pub type StepResult = Result<(), String>;

impl CaWorld {
    /// Starts the cluster and the autoscaler, once.
    pub async fn running(&mut self) -> Result<&mut Running, String> {
        if self.running.is_none() {
            self.running = Some(self.start().await?);
        }
        self.running
            .as_mut()
            .ok_or_else(|| "the cluster did not start".to_string())
    }

    /// The declared group `name`.
    pub fn group_mut(&mut self, name: &str) -> Result<&mut GroupSpec, String> {
        self.groups
            .iter_mut()
            .find(|g| g.name == name)
            .ok_or_else(|| format!("no node group {name:?} declared"))
    }

    /// The provider this scenario's node groups are made for.
    pub fn provider(&self) -> Provider {
        if self.cluster_api {
            Provider::ClusterApi
        } else {
            configured_provider()
        }
    }

    /// The id under which the autoscaler names group `name` (in events and
    /// the status ConfigMap).
    pub fn group_id(&self, name: &str) -> String {
        match self.provider() {
            Provider::Kwok | Provider::Aws => name.to_string(),
            Provider::ClusterApi => crate::capi::group_id(name),
        }
    }

    /// `text` with the declared groups named by their ids where CA's
    /// messages name a group (`{pool 0->3 (max: 10)}`, `setting group pool
    /// size`).
    pub fn with_group_ids(&self, text: &str) -> String {
        let mut out = text.to_string();
        for g in &self.groups {
            let id = self.group_id(&g.name);
            for (before, after) in [("{", " "), ("group ", " ")] {
                out = out.replace(
                    &format!("{before}{}{after}", g.name),
                    &format!("{before}{id}{after}"),
                );
            }
        }
        out
    }

    /// Scenario time since the autoscaler started (zero before).
    pub fn scenario_time(&self) -> Duration {
        self.running
            .as_ref()
            .map(Running::scenario_time)
            .unwrap_or_default()
    }

    async fn start(&self) -> Result<Running, String> {
        let provider = self.provider();
        let mut builder = Cluster::builder().time_scale(time_scale());
        builder = match provider {
            Provider::Kwok => builder
                .object(provider_config_map())
                .object(templates_config_map(&self.groups)),
            Provider::ClusterApi => {
                let objects = self.groups.iter().flat_map(crate::capi::group_objects);
                builder
                    .capi()
                    .objects(std::iter::once(crate::capi::cluster()).chain(objects))
            }
            Provider::Aws => builder.aws(&crate::aws::create_groups(&self.groups).await?),
        };
        let backend = backend()?;
        let cluster = backend
            .start(builder)
            .await
            .map_err(|e| format!("starting the cluster ({} backend): {e}", backend.name()))?;
        let observer = self.observe.then(|| {
            let bounds = self
                .groups
                .iter()
                .map(|g| {
                    let b = crate::invariants::Bounds {
                        min: g.min,
                        max: g.max,
                    };
                    (g.name.clone(), b)
                })
                .collect();
            crate::invariants::Observer::start(cluster.client(), bounds)
        });
        let stages = if backend_reads_stages() {
            vec![not_ready_stage(), graceful_termination_stage()]
        } else {
            Vec::new()
        };
        for stage in stages {
            let name = stage["metadata"]["name"].clone();
            cluster
                .create(stage)
                .await
                .map_err(|e| format!("creating the kwok stage {name}: {e}"))?;
        }
        // The starting nodes exist, Ready, before the autoscaler starts, as
        // in a running cluster (upstream's kwok provider creates none: it
        // only takes its target sizes from the templates). In Cluster API
        // mode the MachineDeployments' replicas make them.
        for g in self.groups.iter().filter(|_| provider == Provider::Kwok) {
            for i in 0..g.initial.max(g.min) {
                cluster
                    .create(g.starting_node(i))
                    .await
                    .map_err(|e| format!("creating a starting node of {}: {e}", g.name))?;
            }
        }
        let clock = match self.clock_skew {
            Some((skew, ahead)) => cluster.clock().skewed(skew, ahead),
            None => cluster.clock().clone(),
        };
        let (autoscaler, time_scale) = match under_test() {
            UnderTest::InProcess => {
                wait_initial_nodes(&cluster, &self.groups, Duration::from_secs(120)).await?;
                let autoscaler = if self.replicas > 1 {
                    let replicas = (0..self.replicas).map(|i| {
                        let name: Arc<str> = format!("replica-{i}").into();
                        let task = crate::replicas::spawn_in_process(
                            &cluster,
                            &clock,
                            provider,
                            self.flags.clone(),
                            name.to_string(),
                        );
                        (name, Replica::InProcess(task))
                    });
                    Autoscaler::Replicas(replicas.collect())
                } else {
                    start_in_process(&cluster, &clock, provider, &self.flags).await?
                };
                (autoscaler, 1.0)
            }
            UnderTest::Binary {
                info,
                args,
                time_scale,
            } => {
                wait_initial_nodes(&cluster, &self.groups, Duration::from_secs(60)).await?;
                // Replicas ask for leader election, and get a hostname each.
                let replicas = self.replicas.max(1);
                let mut args = args.clone();
                if replicas > 1 {
                    args.extend(crate::replicas::BINARY_FLAGS.map(String::from));
                }
                let mut started = Vec::new();
                for i in 0..replicas {
                    let hostname = (replicas > 1).then(|| format!("replica-{i}"));
                    let b = start_binary(
                        &cluster,
                        &info,
                        provider,
                        &self.flags,
                        &args,
                        time_scale,
                        hostname.as_deref(),
                    )
                    .await?;
                    started.push(b);
                }
                let mut binary = if replicas == 1
                    && let Some(b) = started.pop()
                {
                    Autoscaler::Binary(b)
                } else {
                    let named = started.into_iter().map(|b| {
                        let name: Arc<str> = b.served.as_ref().map_or_else(
                            || "a binary on a cluster in a container".into(),
                            |s| s.endpoint.addr.to_string().into(),
                        );
                        (name, Replica::Binary(b))
                    });
                    Autoscaler::Replicas(named.collect())
                };
                wait_first_loop(&cluster, &mut binary, Duration::from_secs(30)).await?;
                (binary, time_scale)
            }
        };
        if !self.expander_priorities.is_empty() {
            // The expander matches group ids: `^pool$` is
            // `^MachineDeployment/default/pool$` in Cluster API mode.
            let priorities = self
                .expander_priorities
                .iter()
                .map(|(value, patterns)| {
                    let patterns = patterns
                        .iter()
                        .map(|p| match p.strip_prefix('^') {
                            Some(rest) => format!("^{}{rest}", self.group_id("")),
                            None => p.clone(),
                        })
                        .collect();
                    (*value, patterns)
                })
                .collect();
            cluster
                .create(priority_expander_config_map(&priorities))
                .await
                .map_err(|e| e.to_string())?;
        }
        for o in &self.objects {
            create_object(&cluster, o.clone()).await?;
        }
        Ok(Running {
            cluster,
            autoscaler,
            started: tokio::time::Instant::now(),
            time_scale,
            flags: self.flags.clone(),
            extensions: self.extensions.clone(),
            provider,
            observer,
            clock,
        })
    }

    /// Creates an object now if the cluster runs, else before it starts.
    pub async fn create(&mut self, obj: Value) -> StepResult {
        match &self.running {
            Some(r) => create_object(&r.cluster, obj).await,
            None => {
                self.objects.push(obj);
                Ok(())
            }
        }
    }

    /// Writes the node group templates again (a fault or label changed):
    /// the kwok provider reads them every loop.
    pub async fn update_templates(&mut self) -> StepResult {
        let Some(r) = &self.running else {
            return Ok(());
        };
        match self.provider() {
            Provider::ClusterApi => {
                return crate::capi::update_templates(&r.cluster, &self.groups).await;
            }
            Provider::Aws => return crate::aws::update_templates(&self.groups).await,
            Provider::Kwok => {}
        }
        let cm = templates_config_map(&self.groups);
        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(r.cluster.client(), "kube-system")
            .patch(
                TEMPLATES_CONFIG_MAP,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"data": cm["data"]})),
            )
            .await
            .map(|_| ())
            .map_err(|e| format!("updating the node group templates: {e}"))
    }

    /// Lets `d` of scenario time pass (starting the cluster first).
    pub async fn pass(&mut self, d: Duration) -> StepResult {
        self.running().await?.pass(d).await
    }

    /// The nodes of a group.
    pub async fn group_nodes(&mut self, group: &str) -> Result<Vec<Node>, String> {
        let r = self.running().await?;
        let nodes = Api::<Node>::all(r.cluster.client())
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(nodes
            .items
            .into_iter()
            .filter(|n| node_group_of(n) == Some(group))
            .collect())
    }
}

/// Creates `obj`, and its namespace first when that does not exist yet: a
/// scenario that names a namespace expects the suite to make it, as
/// kube-system and default already are.
async fn create_object(cluster: &Cluster, obj: Value) -> StepResult {
    if let Some(ns) = obj.pointer("/metadata/namespace").and_then(Value::as_str) {
        ensure_namespace(cluster, ns).await?;
    }
    cluster.create(obj).await.map_err(|e| e.to_string())
}

/// Creates namespace `name` unless it exists.
async fn ensure_namespace(cluster: &Cluster, name: &str) -> StepResult {
    let api = Api::<Namespace>::all(cluster.client());
    let exists = api
        .get_opt(name)
        .await
        .map_err(|e| format!("reading namespace {name:?}: {e}"))?
        .is_some();
    if exists {
        return Ok(());
    }
    let ns = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&Default::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(format!("creating namespace {name:?}: {e}")),
    }
}

/// Checks a namespace named in a step: a DNS-1123 label (lower-case
/// letters, digits and '-', starting and ending with a letter or digit, at
/// most 63 characters), as the API server requires.
pub fn namespace_name(name: &str) -> Result<String, String> {
    let valid = apimachinery::validation::is_dns_label(name);
    if valid {
        Ok(name.to_string())
    } else {
        Err(format!(
            "namespace {name:?} is not a valid namespace name (a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)"
        ))
    }
}

/// The group label of a node.
pub fn node_group_of(n: &Node) -> Option<&str> {
    n.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("kwok-nodegroup"))
        .map(String::as_str)
}

/// The priority expander's ConfigMap (`cluster-autoscaler-priority-expander`).
pub fn priority_expander_config_map(
    priorities: &std::collections::BTreeMap<i64, Vec<String>>,
) -> Value {
    let mut text = String::new();
    for (value, patterns) in priorities {
        text.push_str(&format!("{value}:\n"));
        for p in patterns {
            text.push_str(&format!(
                "  - {}\n",
                serde_json::to_string(p).unwrap_or_default()
            ));
        }
    }
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cluster-autoscaler-priority-expander", "namespace": "kube-system"},
        "data": {"priorities": text}})
}

async fn start_in_process(
    cluster: &Cluster,
    clock: &simclock::Clock,
    provider: Provider,
    flags: &[String],
) -> Result<Autoscaler, String> {
    let built = build_in_process(cluster.client_under_test(), clock, provider, flags).await?;
    let endpoints = built.endpoints;
    let task = tokio::spawn(built.autoscaler.run());
    Ok(Autoscaler::InProcess { endpoints, task })
}

/// Builds our autoscaler on `client` for the scenario's provider, as the
/// binary wires it.
pub(crate) async fn build_in_process(
    client: kube::Client,
    clock: &simclock::Clock,
    provider: Provider,
    flags: &[String],
) -> Result<autoscaler::inprocess::InProcess, String> {
    let clock = clock.clone();
    match provider {
        Provider::Kwok => autoscaler::inprocess::kwok(client, clock, flags).await,
        Provider::ClusterApi => autoscaler::inprocess::clusterapi(client, clock, flags).await,
        Provider::Aws => {
            let endpoint = crate::aws::emulator().await?.endpoint().to_string();
            let mut flags = flags.to_vec();
            flags.push(crate::aws::DISCOVERY.to_string());
            autoscaler::inprocess::aws(client, clock, crate::aws::connection(&endpoint), &flags)
                .await
        }
    }
    .map_err(|e| e.to_string())
}

/// Waits until the autoscaler binary has finished its first loop: every
/// CA writes its status ConfigMap at the end of each loop. Until then a
/// scenario's first step could race the binary's start-up (its cloud
/// provider reading the cluster, its HTTP endpoints opening). Fails when the
/// binary exits; after `timeout` the scenario goes on, as an autoscaler
/// that does not write the status (`--write-status-configmap=false`) may.
async fn wait_first_loop(
    cluster: &Cluster,
    autoscaler: &mut Autoscaler,
    timeout: Duration,
) -> StepResult {
    let api =
        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(cluster.client(), "kube-system");
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if let Some(exited) = autoscaler.exited() {
            return Err(exited);
        }
        if matches!(api.get_opt("cluster-autoscaler-status").await, Ok(Some(_))) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

async fn wait_initial_nodes(
    cluster: &Cluster,
    groups: &[GroupSpec],
    timeout: Duration,
) -> StepResult {
    // Groups whose nodes never become ready are not waited for.
    let initial: usize = groups
        .iter()
        .filter(|g| !g.labels.contains_key(NOT_READY_LABEL))
        .map(|g| g.initial.max(g.min))
        .sum();
    cluster
        .wait_nodes_ready(initial, timeout)
        .await
        .map(|_| ())
        .map_err(|e| format!("the initial nodes: {e}"))
}

/// The embedded API server served over TLS for an autoscaler binary: its
/// kubeconfig in a temp dir, and a free port for its `--address`.
pub struct Served {
    /// The TLS endpoint (served while held).
    pub endpoint: harness::TlsEndpoint,
    /// Holds the kubeconfig.
    pub dir: tempfile::TempDir,
    /// The kubeconfig's path.
    pub kubeconfig: std::path::PathBuf,
    /// A free port on 127.0.0.1.
    pub port: u16,
}

/// A free port on 127.0.0.1, for a binary's `--address`.
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("picking a port for --address: {e}"))
}

/// Serves the cluster's API server over TLS for a binary.
pub async fn serve_for_binary(cluster: &Cluster) -> Result<Served, String> {
    let api = cluster
        .api_server()
        .ok_or("an autoscaler binary needs the embedded API server")?;
    let endpoint = api
        .serve_tls(([127, 0, 0, 1], 0).into())
        .await
        .map_err(|e| format!("serving the API server over TLS: {e}"))?;
    let dir = tempfile::tempdir().map_err(|e| format!("creating a temp dir: {e}"))?;
    let kubeconfig = dir.path().join("kubeconfig");
    endpoint
        .write_kubeconfig(&kubeconfig)
        .map_err(|e| e.to_string())?;
    let port = free_port()?;
    Ok(Served {
        endpoint,
        dir,
        kubeconfig,
        port,
    })
}

async fn start_binary(
    cluster: &Cluster,
    info: &BinaryInfo,
    provider: Provider,
    flags: &[String],
    extra: &[String],
    time_scale: f64,
    hostname: Option<&str>,
) -> Result<Box<BinaryProcess>, String> {
    info.check_provider(provider)?;
    // A cluster in a container comes with its kubeconfig; the embedded one
    // is served over TLS for the binary.
    let (served, kubeconfig, port) = match cluster.kubeconfig() {
        Some(path) => (None, path.to_path_buf(), free_port()?),
        None => {
            let s = serve_for_binary(cluster).await?;
            let (kubeconfig, port) = (s.kubeconfig.clone(), s.port);
            (Some(s), kubeconfig, port)
        }
    };
    // Kept after the scenario, for failures: the runner prints the path.
    static LOGS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = LOGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let logs = std::env::temp_dir().join(format!("conformance-logs-{}", std::process::id()));
    std::fs::create_dir_all(&logs).map_err(|e| format!("creating {}: {e}", logs.display()))?;
    let log = logs.join(format!("autoscaler-{n}.log"));
    let log_file =
        std::fs::File::create(&log).map_err(|e| format!("creating {}: {e}", log.display()))?;
    let mut command = binary::command(info, provider, &kubeconfig, port, flags, extra, time_scale)?;
    // A replica gets a hostname of its own, as a pod has.
    if let Some(name) = hostname {
        command = binary::with_hostname(&command, name);
    }
    if provider == Provider::Aws {
        command.envs(crate::aws::environment(
            crate::aws::emulator().await?.endpoint(),
        ));
    }
    let child = command
        .stdout(log_file.try_clone().map_err(|e| format!("log file: {e}"))?)
        .stderr(log_file)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", info.path.display()))?;
    Ok(Box::new(BinaryProcess {
        child,
        port,
        log,
        served,
        hostname: hostname.map(String::from),
    }))
}

/// Who holds the Lease, against the replica the log of writes names.
enum Holder {
    /// The leading replica (or a replica without a hostname of its own).
    Leader,
    /// Another live replica: the Lease changed hands since the log was read.
    Moved,
}

/// The Lease's holder must be the leading replica (`hosts[leader]`) under
/// its own name: its hostname, alone (CA 1.30: `os.Hostname()`) or with a
/// uniquifier after `_` (client-go's `<hostname>_<UUID>`). Replicas that
/// all took one name (an inherited `$HOSTNAME`, say) would each believe
/// they hold the Lease.
async fn check_holder_identity(
    client: &kube::Client,
    hosts: &[Option<&str>],
    leader: usize,
) -> Result<Holder, String> {
    let Some(Some(hostname)) = hosts.get(leader) else {
        return Ok(Holder::Leader);
    };
    let (ns, name) = crate::replicas::LEASE;
    let lease =
        kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), ns)
            .get(name)
            .await
            .map_err(|e| format!("reading the Lease {ns}/{name}: {e}"))?;
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    if holder_is_host(&holder, hostname) {
        Ok(Holder::Leader)
    } else if hosts.iter().flatten().any(|h| holder_is_host(&holder, h)) {
        Ok(Holder::Moved)
    } else {
        Err(format!(
            "the Lease {ns}/{name} is held as {holder:?}, but its holder is the replica whose hostname is {hostname:?}: a leader election identity is the hostname, or the hostname, `_` and a uniquifier"
        ))
    }
}

/// Whether a holder identity names the host `hostname`.
fn holder_is_host(holder: &str, hostname: &str) -> bool {
    holder == hostname
        || holder
            .strip_prefix(hostname)
            .is_some_and(|rest| rest.starts_with('_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_identity_is_the_hostname_alone_or_with_a_uniquifier() {
        assert!(holder_is_host("replica-0", "replica-0"));
        assert!(holder_is_host(
            "replica-0_0f8fad5b-d9cb-469f-a165-70867728950e",
            "replica-0"
        ));
        assert!(!holder_is_host(
            "vm_0f8fad5b-d9cb-469f-a165-70867728950e",
            "replica-0"
        ));
        assert!(!holder_is_host("replica-01", "replica-0"));
    }

    #[test]
    fn namespace_names_are_dns_labels() {
        for good in ["fresh-ns", "team-a", "a", "ns1"] {
            assert_eq!(namespace_name(good).as_deref(), Ok(good));
        }
        for bad in ["Team_A", "-ns", "ns-", "", "a.b", &"x".repeat(64)] {
            let err = namespace_name(bad).expect_err(bad);
            assert!(err.contains("is not a valid namespace name"), "{err}");
        }
    }
}
