//! `testbed compare`: one scale scenario against one or two autoscaler
//! binaries, each on a fresh embedded cluster, one after the other, and
//! what a user feels: time until every node is requested and until every
//! pod runs, the autoscaler's main-loop time (its own metric), CPU time
//! and peak memory, the events it wrote and the API requests it made; with
//! the ratio of the second binary to the first.
//!
//! The scenario is a backlog: one node group of `--pods-per-node`-CPU
//! nodes with one Ready node, then a Deployment of `nodes × pods-per-node`
//! pods requesting one CPU each, so exactly `--nodes` nodes are needed.
//! Time is real; CPU and memory are read from `/proc` (Linux). A pod's
//! latency is the FAQ's: from when the scheduler first marked it
//! unschedulable to the increase that covers it, the creation of the node
//! holding its slot in first-marked, first-covered order (the kwok
//! providers create the Node when the group is increased), in the API's
//! whole seconds ([`crate::latency`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use apiserver::timings::{KindSummary, RequestKind};
use harness::cluster::{Cluster, for_each_page, list};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams};
use serde_json::json;

use crate::binary::{self, BinaryInfo};
use crate::latency::{Latencies, LatencySummary, workload_pods};
use crate::watch_check::{WatchCheck, WatchReport};
use crate::world::{
    GroupSpec, Served, provider_config_map, serve_for_binary, templates_config_map,
};

/// The flags every binary gets (as in the reference run): client
/// rate limits that do not throttle a 1,000-node scale-up, one scale-up may
/// add every node, and no scale-down; plus upstream's own
/// `--frequent-loops-enabled` (CA 1.29+), which starts a loop when a pod
/// becomes unschedulable instead of waiting out `--scan-interval`: the
/// setting for scale-up latency, on both binaries. `--autoscaler-arg` adds more
/// (`--autoscaler-arg=--frequent-loops-enabled=false` measures the timer alone).
pub const SCENARIO_FLAGS: [&str; 5] = [
    "--kube-client-qps=1000",
    "--kube-client-burst=2000",
    "--max-nodes-per-scaleup=10000",
    "--scale-down-enabled=false",
    "--frequent-loops-enabled=true",
];

/// The backlog scenario's shape and limits, shared by `testbed compare`
/// and `testbed bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct ScenarioArgs {
    /// Pods per node: each node has this many CPUs, each pod asks one.
    #[arg(long, default_value_t = 30)]
    pub pods_per_node: usize,
    /// An extra flag for every binary (repeatable).
    #[arg(long = "autoscaler-arg", allow_hyphen_values = true)]
    pub extra: Vec<String>,
    /// Give up on a binary after this many seconds.
    #[arg(long, default_value_t = 900)]
    pub timeout: u64,
    /// Keep a CapacityBuffer of this percentage of the backlog Deployment
    /// (`scalableRef`), with the buffer controller and pod injection on:
    /// the backlog then needs that many more pods' worth of nodes. Needs a
    /// binary with the CapacityBuffer API (ours; upstream 1.34 and later).
    #[arg(long)]
    pub buffer_percentage: Option<usize>,
    /// Split the backlog over this many node groups, a Deployment each
    /// (pinned by nodeSelector), so that one loop has several groups to
    /// scale (what `--salvo-scale-up` acts on).
    #[arg(long, default_value_t = 1)]
    pub groups: usize,
    /// With `--groups`: one Deployment over all the groups, not one pinned
    /// to each. With `--balance-similar-node-groups
    /// --balancing-ignore-label=kwok-nodegroup` one scale-up then resizes
    /// every group (what `--parallel-scale-up` acts on).
    #[arg(long)]
    pub unpinned: bool,
    /// This percentage of the backlog's pods ask for a device each through
    /// a ResourceClaimTemplate (the Deployment `backlog-claims`); every node
    /// publishes one device per pod slot (kwok's fake DRA driver), so the
    /// same nodes are needed.
    #[arg(long)]
    pub claims_percentage: Option<usize>,
}

impl ScenarioArgs {
    /// The nodes a backlog of `nodes` full nodes needs, with the buffer's
    /// pods (rounded down, as upstream's percentage) on nodes of their own.
    pub fn nodes_needed(&self, nodes: usize) -> usize {
        let pods = nodes * self.pods_per_node;
        let buffer = self.buffer_percentage.map_or(0, |p| pods * p / 100);
        nodes + buffer.div_ceil(self.pods_per_node)
    }
}

/// `testbed compare` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// An autoscaler binary with the kwok provider; give it twice to
    /// compare two (the ratios are second / first).
    #[arg(long = "autoscaler-binary", required = true)]
    pub binaries: Vec<PathBuf>,
    /// Nodes the backlog needs.
    #[arg(long, default_value_t = 1000)]
    pub nodes: usize,
    /// Pods per node, extra flags, timeout.
    #[command(flatten)]
    pub scenario: ScenarioArgs,
}

/// What one binary did.
#[derive(Debug, Clone)]
pub struct Row {
    /// The binary.
    pub binary: PathBuf,
    /// Its version line.
    pub version: String,
    /// From the Deployment's creation until all its pods existed (the
    /// controllers' pace, the same for every binary).
    pub all_pods: Option<Duration>,
    /// From the Deployment's creation until every node existed.
    pub all_nodes: Option<Duration>,
    /// Until every pod of the Deployment was ready.
    pub all_running: Option<Duration>,
    /// User + system CPU time of the autoscaler process.
    pub cpu: Duration,
    /// Peak resident memory (`VmHWM`), KiB.
    pub peak_rss_kib: u64,
    /// The FAQ's per-pod latency ([`crate::latency`]: first marked
    /// unschedulable → the node of the slot that covers it created; whole
    /// seconds, the API's timestamps), p50 and p99.
    pub latency: Option<(Duration, Duration)>,
    /// The autoscaler's main loop over the run, from its own
    /// `cluster_autoscaler_function_duration_seconds{function="main"}`.
    pub loops: Option<LoopTime>,
    /// Events whose source is `cluster-autoscaler`.
    pub events: usize,
    /// API requests the binary made.
    pub requests: u64,
    /// Peak resident memory of this process (the embedded cluster) from
    /// the backlog's creation until the report's own reads are done, KiB
    /// (0 where `/proc` cannot say).
    pub testbed_peak_rss_kib: u64,
    /// The API server's answer times and its own 5xx from the backlog's
    /// creation until the autoscaler stopped, every client's requests.
    pub api: ApiFigures,
    /// The watch checks on Pods and Nodes over the run
    /// ([`crate::watch_check`]).
    pub watches: Vec<WatchReport>,
    /// The scheduler's pace: when the last pod was created and when the
    /// last pod was first marked unschedulable, from the Deployment's
    /// creation (the API's timestamps).
    pub marks: Option<MarkTimes>,
}

/// The embedded API server's side of a run ([`apiserver::timings`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiFigures {
    /// Creates, updates, patches and deletes.
    pub writes: Option<KindSummary>,
    /// Lists.
    pub lists: Option<KindSummary>,
    /// 5xx answered by the server itself (no fault is injected here).
    pub server_errors: u64,
}

impl ApiFigures {
    fn of(timings: &apiserver::timings::Timings) -> Self {
        Self {
            writes: timings.summary(RequestKind::Write),
            lists: timings.summary(RequestKind::List),
            server_errors: timings.server_errors(),
        }
    }
}

/// The backlog a run waits for.
struct Backlog {
    started: Instant,
    deadline: Instant,
    nodes: usize,
    pods: usize,
}

/// Since the start: all pods created, all nodes, all pods running.
type Milestones = (Option<Duration>, Option<Duration>, Option<Duration>);

impl Backlog {
    /// Polls until every node exists and every pod runs, or the deadline;
    /// fails with `exited` if the autoscaler exits first.
    async fn wait(
        &self,
        cluster: &Cluster,
        child: &mut tokio::process::Child,
        exited: impl Fn(std::process::ExitStatus) -> String,
    ) -> Result<Milestones, String> {
        let (mut all_pods, mut all_nodes, mut all_running) = (None, None, None);
        while Instant::now() < self.deadline && (all_nodes.is_none() || all_running.is_none()) {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(exited(status));
            }
            if all_nodes.is_none() && count_nodes(cluster).await? >= self.nodes {
                all_nodes = Some(self.started.elapsed());
            }
            let (created, ready) = replica_counts(cluster).await?;
            if all_pods.is_none() && created >= self.pods {
                all_pods = Some(self.started.elapsed());
            }
            if all_running.is_none() && ready >= self.pods {
                all_running = Some(self.started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Ok((all_pods, all_nodes, all_running))
    }
}

/// When the backlog's last pod was created and its last pod first marked
/// unschedulable, from the Deployment's creation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MarkTimes {
    /// The last pod's creation.
    pub last_created: Duration,
    /// The last first mark.
    pub last_marked: Duration,
}

impl MarkTimes {
    /// How long after the last pod's creation the scheduler marked the
    /// last pod: its lag behind the burst.
    pub fn lag(&self) -> Duration {
        self.last_marked.saturating_sub(self.last_created)
    }
}

/// The main loop's count and mean duration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoopTime {
    /// Loops the histogram counted.
    pub count: u64,
    /// Their mean duration.
    pub mean: Duration,
}

impl LoopTime {
    /// From a `/metrics` text: the `function="main"` series of
    /// `cluster_autoscaler_function_duration_seconds` (`None` if absent or
    /// empty).
    pub fn from_metrics(text: &str) -> Option<Self> {
        let value = |suffix: &str| {
            harness::metric_value(
                text,
                &format!("cluster_autoscaler_function_duration_seconds_{suffix}"),
                "function=\"main\"",
            )
        };
        let count = value("count")?;
        let sum = value("sum")?;
        (count >= 1.0).then(|| Self {
            count: count as u64,
            mean: Duration::from_secs_f64(sum / count),
        })
    }
}

/// Runs the scenario against every binary, one after the other.
pub async fn run(args: &CompareArgs) -> Result<Vec<Row>, String> {
    if args.binaries.len() > 2 {
        return Err("give --autoscaler-binary once or twice".into());
    }
    if args.nodes == 0 || args.scenario.pods_per_node == 0 {
        return Err("--nodes and --pods-per-node must be at least 1".into());
    }
    let mut rows = Vec::new();
    for path in &args.binaries {
        let info =
            BinaryInfo::probe(path, crate::world::Provider::Kwok).map_err(|e| e.to_string())?;
        eprintln!(
            "compare: {} ({}), {} nodes x {} pods{}",
            path.display(),
            version_of(&info),
            args.nodes,
            args.scenario.pods_per_node,
            args.scenario
                .buffer_percentage
                .map_or(String::new(), |p| format!(
                    ", a {p}% CapacityBuffer: {} nodes in all",
                    args.scenario.nodes_needed(args.nodes)
                ))
        );
        rows.push(measure(&info, args.nodes, &args.scenario).await?);
    }
    Ok(rows)
}

fn version_of(info: &BinaryInfo) -> String {
    info.version
        .as_ref()
        .map_or_else(|| "version unknown".into(), ToString::to_string)
}

/// The scenario against one binary on a fresh cluster: a backlog that
/// needs `nodes` nodes.
pub async fn measure(
    info: &BinaryInfo,
    nodes: usize,
    scenario: &ScenarioArgs,
) -> Result<Row, String> {
    let needed = scenario.nodes_needed(nodes);
    let groups = backlog_groups(scenario, nodes)?;
    let k = groups.len();
    let cluster = Cluster::builder()
        .object(provider_config_map())
        .object(templates_config_map(&groups))
        .object(groups[0].starting_node(0))
        .start()
        .await
        .map_err(|e| format!("starting the cluster: {e}"))?;
    cluster
        .wait_nodes_ready(1, Duration::from_secs(60))
        .await
        .map_err(|e| format!("the starting node: {e}"))?;
    let api = cluster
        .api_server()
        .ok_or("compare needs the embedded API server")?;
    let Served {
        endpoint: _endpoint,
        dir: _dir,
        kubeconfig,
        port,
    } = serve_for_binary(&cluster)
        .await
        .map_err(|e| e.to_string())?;
    // Kept for reading afterwards: `target/compare/<binary name>.log`.
    let logs = PathBuf::from("target/compare");
    std::fs::create_dir_all(&logs).map_err(|e| format!("creating {}: {e}", logs.display()))?;
    let name = info
        .path
        .file_name()
        .map_or_else(|| "autoscaler".into(), |n| n.to_string_lossy().to_string());
    let log = logs.join(format!("{name}.log"));
    eprintln!("compare: {} logs to {}", info.path.display(), log.display());
    let log_file =
        std::fs::File::create(&log).map_err(|e| format!("creating {}: {e}", log.display()))?;
    let mut flags: Vec<String> = SCENARIO_FLAGS.iter().map(|f| f.to_string()).collect();
    if let Some(p) = scenario.buffer_percentage {
        let crd = serde_json::from_str(crate::capacity::BUFFER_CRD)
            .map_err(|e| format!("the CapacityBuffer CRD: {e}"))?;
        cluster
            .create(crd)
            .await
            .map_err(|e| format!("installing the CapacityBuffer CRD: {e}"))?;
        flags.push("--capacity-buffer-controller-enabled".into());
        flags.push("--capacity-buffer-pod-injection-enabled".into());
        cluster
            .create(json!({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
                "metadata": {"name": "backlog-headroom", "namespace": "default"},
                "spec": {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "backlog"},
                    "percentage": p}}))
            .await
            .map_err(|e| format!("creating the CapacityBuffer: {e}"))?;
    }
    let mut child = binary::command(
        info,
        crate::world::Provider::Kwok,
        &kubeconfig,
        port,
        &flags,
        &scenario.extra,
        1.0,
    )
    .map_err(|e| e.to_string())?
    .stdout(log_file.try_clone().map_err(|e| format!("log file: {e}"))?)
    .stderr(log_file)
    .spawn()
    .map_err(|e| format!("starting {}: {e}", info.path.display()))?;
    let pid = child.id().ok_or("the autoscaler exited at once")?;
    // Let it finish its first loop on the idle cluster.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let replicas = nodes * scenario.pods_per_node;
    let requests_before = api.tls_requests();
    let pod_check = WatchCheck::<Pod>::start(&cluster.client()).await?;
    let node_check = WatchCheck::<Node>::start(&cluster.client()).await?;
    reset_peak_rss();
    api.server().timings.reset();
    let started = Instant::now();
    let started_at = std::time::SystemTime::now();
    match scenario.claims_percentage {
        Some(p) if k == 1 => create_claims_backlog(&cluster, replicas, p).await?,
        Some(_) => return Err("--claims-percentage takes one group".into()),
        None => create_backlog(&cluster, &groups, replicas, scenario.unpinned).await?,
    }
    let deadline = started + Duration::from_secs(scenario.timeout);
    let backlog = Backlog {
        started,
        deadline,
        nodes: needed,
        pods: replicas,
    };
    let (all_pods, all_nodes, all_running) = backlog
        .wait(&cluster, &mut child, |status| {
            let path = info.path.display();
            format!("{path} exited ({status}); its log: {}", tail(&log))
        })
        .await?;
    let (cpu, peak_rss_kib) = process_usage(pid);
    let api_figures = ApiFigures::of(&api.server().timings);
    let requests = api.tls_requests() - requests_before;
    let loops = match harness::http_get(port, "/metrics").await {
        Ok((200, text)) => LoopTime::from_metrics(&text),
        _ => None,
    };
    let _ = child.kill().await;
    // The cluster is quiet once the autoscaler has stopped: the views the
    // checks built must now equal a list.
    let watches = vec![
        pod_check.finish(Duration::from_secs(2)).await?,
        node_check.finish(Duration::from_secs(2)).await?,
    ];
    let events = count_events(&cluster, &logs.join(format!("{name}.events.csv"))).await?;
    let (latency, marks) = pod_latencies(
        &cluster,
        &logs.join(format!("{name}.latency.csv")),
        started_at,
    )
    .await?;
    // After the report's reads: the process's peak as `/usr/bin/time` sees it.
    let (_, testbed_peak_rss_kib) = process_usage(std::process::id());
    Ok(Row {
        binary: info.path.clone(),
        version: version_of(info),
        all_pods,
        all_nodes,
        all_running,
        cpu,
        peak_rss_kib,
        latency,
        loops,
        events,
        requests,
        testbed_peak_rss_kib,
        api: api_figures,
        watches,
        marks,
    })
}

/// Resets this process's peak resident memory (`VmHWM`) to its current
/// size, so that a scale's figure is its own (Linux; elsewhere nothing).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The backlog's node groups: `pool`, or `pool-<i>` with `--groups`, the
/// first with one Ready node, each with devices with `--claims-percentage`.
fn backlog_groups(scenario: &ScenarioArgs, nodes: usize) -> Result<Vec<GroupSpec>, String> {
    let cpu = scenario.pods_per_node.to_string();
    let needed = scenario.nodes_needed(nodes);
    let k = scenario.groups.max(1);
    if k > 1 && (scenario.buffer_percentage.is_some() || !nodes.is_multiple_of(k)) {
        return Err(format!(
            "--groups {k}: the backlog's {nodes} nodes must split evenly, without a buffer"
        ));
    }
    Ok((0..k)
        .map(|i| {
            let name = if k == 1 {
                "pool".to_string()
            } else {
                format!("pool-{i}")
            };
            let mut g = GroupSpec::new(&name, &cpu, "256Gi", usize::from(i == 0), needed / k);
            g.initial = usize::from(i == 0);
            if scenario.claims_percentage.is_some() {
                g.devices = Some(crate::world::groups::Devices {
                    driver: DEVICE_DRIVER.into(),
                    count: scenario.pods_per_node,
                    model: None,
                    publish_delay: None,
                });
            }
            g
        })
        .collect())
}

/// The driver of the devices `--claims-percentage` gives the nodes.
const DEVICE_DRIVER: &str = "gpu.example.com";

/// The backlog with `percentage` of its `replicas` pods asking for a device
/// each: the Deployments `backlog` and `backlog-claims` (label
/// `app: backlog` both), a DeviceClass and a ResourceClaimTemplate.
async fn create_claims_backlog(
    cluster: &Cluster,
    replicas: usize,
    percentage: usize,
) -> Result<(), String> {
    let with_claims = replicas * percentage / 100;
    cluster
        .create(json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{DEVICE_DRIVER}'")}}]}}))
        .await
        .map_err(|e| format!("creating the DeviceClass: {e}"))?;
    cluster
        .create(
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-device", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [{"name": "device",
                "exactly": {"deviceClassName": "gpu"}}]}}}}),
        )
        .await
        .map_err(|e| format!("creating the ResourceClaimTemplate: {e}"))?;
    for (name, count, claims) in [
        ("backlog", replicas - with_claims, false),
        ("backlog-claims", with_claims, true),
    ] {
        let mut container = json!({"name": "c", "image": "pause",
            "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}});
        let mut spec = json!({"containers": []});
        if claims {
            container["resources"]["claims"] = json!([{"name": "device"}]);
            spec["resourceClaims"] =
                json!([{"name": "device", "resourceClaimTemplateName": "one-device"}]);
        }
        spec["containers"] = json!([container]);
        let labels = json!({"app": "backlog", "part": name});
        cluster
            .create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": "default", "labels": {"app": "backlog"}},
                "spec": {"replicas": count, "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": spec}}}))
            .await
            .map_err(|e| format!("creating the Deployment {name}: {e}"))?;
    }
    Ok(())
}

/// The backlog: `replicas` pods of 1 CPU, as the Deployment `backlog`
/// (one group, or `unpinned`), or one Deployment `backlog-<i>` pinned to
/// each group.
async fn create_backlog(
    cluster: &Cluster,
    groups: &[GroupSpec],
    replicas: usize,
    unpinned: bool,
) -> Result<(), String> {
    let k = if unpinned { 1 } else { groups.len() };
    for (i, g) in groups.iter().take(k).enumerate() {
        // One group: the Deployment `backlog`, anywhere; several: one
        // Deployment each, on its group.
        let (name, part, selector) = if k == 1 {
            ("backlog".to_string(), json!({}), json!({}))
        } else {
            (
                format!("backlog-{i}"),
                json!({"part": i.to_string()}),
                json!({"kwok-nodegroup": g.name}),
            )
        };
        let mut labels = json!({"app": "backlog"});
        if let (Some(l), Some(p)) = (labels.as_object_mut(), part.as_object()) {
            l.extend(p.clone());
        }
        cluster
            .create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": "default", "labels": {"app": "backlog"}},
                "spec": {"replicas": replicas / k, "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels},
                        "spec": {"nodeSelector": selector, "containers": [{"name": "c", "image": "pause",
                            "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}]}}}}))
            .await
            .map_err(|e| format!("creating the Deployment {name}: {e}"))?;
    }
    Ok(())
}

/// p50 and p99 of the pods' scale-up latency ([`crate::latency`]), and
/// the scheduler's [`MarkTimes`]; each pod's creation, mark (empty if
/// never marked) and its node's creation, in seconds from the
/// Deployment's creation, go to `csv` for reading afterwards.
async fn pod_latencies(
    cluster: &Cluster,
    csv: &std::path::Path,
    started: std::time::SystemTime,
) -> Result<(Option<(Duration, Duration)>, Option<MarkTimes>), String> {
    let pods = workload_pods(&cluster.client(), "app=backlog").await?;
    let origin = started
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let secs = |ms: i64| format!("{:.3}", (ms - origin) as f64 / 1000.0);
    let mut text = String::from("pod,created_s,marked_s,node_created_s\n");
    for p in &pods {
        let node = p.node_created_ms.map(secs).unwrap_or_default();
        let created = p.created_ms.map(secs).unwrap_or_default();
        let marked = p.marked_ms.map(secs).unwrap_or_default();
        text.push_str(&format!("{},{created},{marked},{node}\n", p.pod));
    }
    std::fs::write(csv, text).map_err(|e| format!("writing {}: {e}", csv.display()))?;
    let since = |ms: i64| Duration::from_millis(u64::try_from(ms - origin).unwrap_or(0));
    let last = |f: fn(&crate::latency::WorkloadPod) -> Option<i64>| pods.iter().filter_map(f).max();
    let marks = match (last(|p| p.created_ms), last(|p| p.marked_ms)) {
        (Some(c), Some(m)) => Some(MarkTimes {
            last_created: since(c),
            last_marked: since(m),
        }),
        _ => None,
    };
    Ok((
        LatencySummary::of(Latencies::of(&pods).measured).map(|s| (s.p50, s.p99)),
        marks,
    ))
}

/// The Nodes in the cluster, from a one-item page and its
/// `remainingItemCount`: polled four times a second, a whole list of
/// 10,000 Nodes would take the testbed's CPU from what it measures.
async fn count_nodes(cluster: &Cluster) -> Result<usize, String> {
    let page = Api::<Node>::all(cluster.client())
        .list(&ListParams::default().limit(1))
        .await
        .map_err(|e| format!("counting the Nodes: {e}"))?;
    let more = page
        .metadata
        .continue_
        .as_deref()
        .is_some_and(|c| !c.is_empty());
    match page.metadata.remaining_item_count {
        Some(n) => Ok(page.items.len() + usize::try_from(n).unwrap_or(0)),
        None if !more => Ok(page.items.len()),
        // A server that does not count what is left: list them all.
        None => Ok(list::<Node>(&cluster.client(), "").await?.len()),
    }
}

/// The backlog Deployments' pods created so far, and those ready.
async fn replica_counts(cluster: &Cluster) -> Result<(usize, usize), String> {
    let deployments = list::<Deployment>(&cluster.client(), "app=backlog").await?;
    let count = |n: Option<i32>| usize::try_from(n.unwrap_or(0)).unwrap_or(0);
    Ok(deployments.iter().fold((0, 0), |(created, ready), d| {
        let s = d.status.clone().unwrap_or_default();
        (created + count(s.replicas), ready + count(s.ready_replicas))
    }))
}

/// The events the autoscaler wrote; their count per reason goes to `csv`.
async fn count_events(cluster: &Cluster, csv: &Path) -> Result<usize, String> {
    let mut by_reason: std::collections::BTreeMap<String, usize> = Default::default();
    // A page at a time: the scheduler writes an event per pod it marks.
    for_each_page::<Event>(&cluster.client(), ListParams::default(), |events| {
        for e in events.into_iter().filter(|e| {
            e.source.as_ref().and_then(|s| s.component.as_deref()) == Some("cluster-autoscaler")
        }) {
            *by_reason.entry(e.reason.unwrap_or_default()).or_default() += 1;
        }
    })
    .await?;
    let mut text = String::from("reason,events\n");
    for (reason, n) in &by_reason {
        text.push_str(&format!("{reason},{n}\n"));
    }
    std::fs::write(csv, text).map_err(|e| format!("writing {}: {e}", csv.display()))?;
    Ok(by_reason.values().sum())
}

/// CPU time and peak RSS of a live process, from `/proc` (zero elsewhere).
fn process_usage(pid: u32) -> (Duration, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 of stat; 12 and 13 after ')'.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    // The kernel's USER_HZ is 100 on Linux.
    let cpu = Duration::from_millis(ticks * 10);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let peak = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    (cpu, peak)
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// A latency pair as a table cell: `p50 s / p99 s`.
pub(crate) fn latency_cell(latency: Option<(Duration, Duration)>) -> String {
    latency.map_or_else(
        || "-".into(),
        |(p50, p99)| format!("{} s / {} s", p50.as_secs(), p99.as_secs()),
    )
}

/// The cells every report shows for a run: all pods created, all nodes,
/// all running, latency, loop time, CPU, peak RSS (joined by ` | `).
pub(crate) fn measured_cells(r: &Row) -> String {
    format!(
        "{} | {} | {} | {} | {} | {:.1} s | {} MiB",
        secs(r.all_pods),
        secs(r.all_nodes),
        secs(r.all_running),
        latency_cell(r.latency),
        loops_cell(r.loops),
        r.cpu.as_secs_f64(),
        r.peak_rss_kib / 1024
    )
}

/// Loop time as a table cell: `mean s (loops)`.
pub(crate) fn loops_cell(loops: Option<LoopTime>) -> String {
    loops.map_or_else(
        || "-".into(),
        |l| format!("{:.2} s ({})", l.mean.as_secs_f64(), l.count),
    )
}

/// A duration as a table cell (`timeout` when there is none).
pub(crate) fn secs(d: Option<Duration>) -> String {
    d.map_or_else(|| "timeout".into(), |d| format!("{:.1} s", d.as_secs_f64()))
}

/// The report: a row per binary and, for two, the ratio second / first
/// (below 1: the second is faster or leaner).
pub fn render(rows: &[Row]) -> String {
    let mut out = String::new();
    let header = [
        "binary",
        "all pods created",
        "all nodes",
        "all running",
        "pod latency p50 / p99",
        "loop mean (loops)",
        "CPU",
        "peak RSS",
        "events",
        "API requests",
    ];
    out.push_str(&format!("| {} |\n", header.join(" | ")));
    out.push_str(&format!("|{}\n", " --- |".repeat(header.len())));
    for r in rows {
        out.push_str(&format!(
            "| {} ({}) | {} | {} | {} |\n",
            r.binary.display(),
            r.version,
            measured_cells(r),
            r.events,
            r.requests
        ));
    }
    if let [a, b] = rows {
        let ratio = |x: f64, y: f64| {
            if x > 0.0 {
                format!("{:.2}", y / x)
            } else {
                "-".into()
            }
        };
        let dur = |d: Option<Duration>| d.map_or(0.0, |d| d.as_secs_f64());
        out.push_str(&format!(
            "| second / first | | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            ratio(dur(a.all_nodes), dur(b.all_nodes)),
            ratio(dur(a.all_running), dur(b.all_running)),
            ratio(
                a.latency.map_or(0.0, |l| l.1.as_secs_f64()),
                b.latency.map_or(0.0, |l| l.1.as_secs_f64())
            ),
            ratio(
                a.loops.map_or(0.0, |l| l.mean.as_secs_f64()),
                b.loops.map_or(0.0, |l| l.mean.as_secs_f64())
            ),
            ratio(a.cpu.as_secs_f64(), b.cpu.as_secs_f64()),
            ratio(a.peak_rss_kib as f64, b.peak_rss_kib as f64),
            ratio(a.events as f64, b.events as f64),
            ratio(a.requests as f64, b.requests as f64),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(nodes: u64, events: usize) -> Row {
        Row {
            binary: PathBuf::from("ca"),
            version: "1.30.7".into(),
            all_pods: Some(Duration::from_secs(5)),
            all_nodes: Some(Duration::from_secs(nodes)),
            all_running: None,
            cpu: Duration::from_secs(4),
            peak_rss_kib: 2048,
            latency: Some((Duration::from_secs(2), Duration::from_secs(8))),
            loops: Some(LoopTime {
                count: 4,
                mean: Duration::from_millis(250),
            }),
            events,
            requests: 10,
            testbed_peak_rss_kib: 0,
            api: ApiFigures::default(),
            watches: Vec::new(),
            marks: None,
        }
    }

    #[test]
    fn the_report_has_a_row_each_and_the_ratio() {
        let text = render(&[row(100, 2000), row(10, 1000)]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(
            lines[2].contains(
                "| 5.0 s | 100.0 s | timeout | 2 s / 8 s | 0.25 s (4) | 4.0 s | 2 MiB | 2000 | 10 |"
            ),
            "{text}"
        );
        assert_eq!(
            lines[4],
            "| second / first | | 0.10 | - | 1.00 | 1.00 | 1.00 | 1.00 | 0.50 | 1.00 |"
        );
    }

    #[test]
    fn loop_time_is_the_main_series_mean() {
        let text = "# TYPE cluster_autoscaler_function_duration_seconds histogram\n\
            cluster_autoscaler_function_duration_seconds_sum{function=\"scaleUp\"} 9.0\n\
            cluster_autoscaler_function_duration_seconds_count{function=\"scaleUp\"} 1\n\
            cluster_autoscaler_function_duration_seconds_sum{function=\"main\"} 3.0\n\
            cluster_autoscaler_function_duration_seconds_count{function=\"main\"} 12\n";
        assert_eq!(
            LoopTime::from_metrics(text),
            Some(LoopTime {
                count: 12,
                mean: Duration::from_millis(250)
            })
        );
        assert_eq!(LoopTime::from_metrics("up 1\n"), None);
        let none = "cluster_autoscaler_function_duration_seconds_sum{function=\"main\"} 0\n\
            cluster_autoscaler_function_duration_seconds_count{function=\"main\"} 0\n";
        assert_eq!(LoopTime::from_metrics(none), None);
    }

    #[test]
    fn process_usage_reads_this_process() {
        let (_, peak) = process_usage(std::process::id());
        if std::path::Path::new("/proc/self/status").exists() {
            assert!(peak > 0, "VmHWM of a live process");
        }
    }
}
