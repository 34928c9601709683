//! `kwok`: the fake-kubelet controller, against any API server reachable
//! through a kubeconfig (or in-cluster config). Flags and config file follow
//! upstream kwok v0.8 (docs/reference/kwok-rules.md §1.1); see `kwok --help`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use apimachinery::labels::LabelSelector;
use clap::Parser;
use kwok::controller::NodeSelection;
use kwok::{Compiled, Config, Controller};
use serde_json::Value;

#[derive(Parser, Debug)]
#[command(
    name = "kwok",
    version,
    about = "Fake kubelet: drives nodes and pods through kwok Stages"
)]
struct Cli {
    /// Config files (multi-document YAML: one KwokConfiguration and any
    /// number of Stages) [default: ~/.kwok/kwok.yaml when it exists].
    #[arg(short = 'c', long = "config")]
    config: Vec<PathBuf>,
    /// Kubeconfig [default: $KUBECONFIG, ~/.kube/config, or in-cluster].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// API server address, overriding the kubeconfig's.
    #[arg(long)]
    master: Option<String>,
    /// CIDR pod IPs are taken from [default: 10.0.0.0/24].
    #[arg(long)]
    cidr: Option<String>,
    /// Node InternalIP written by node-initialize and used as host IP.
    #[arg(long)]
    node_ip: Option<String>,
    /// Node Hostname address written by node-initialize.
    #[arg(long)]
    node_name: Option<String>,
    /// Kubelet port written to the node's daemonEndpoints.
    #[arg(long)]
    node_port: Option<u16>,
    /// Address of kwok's HTTP server (not served by this kwok; accepted).
    #[arg(long)]
    server_address: Option<String>,
    /// Manage every node.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    manage_all_nodes: Option<bool>,
    /// Manage nodes whose annotations match this selector.
    #[arg(long)]
    manage_nodes_with_annotation_selector: Option<String>,
    /// Manage nodes whose labels match this selector.
    #[arg(long)]
    manage_nodes_with_label_selector: Option<String>,
    /// Manage only the node with this name.
    #[arg(long)]
    manage_single_node: Option<String>,
    /// Node lease duration in seconds; 0 turns leases off.
    #[arg(long)]
    node_lease_duration_seconds: Option<u64>,
    /// Kinds read from the cluster as custom resources (only `Stage` is
    /// supported; others are ignored with a warning).
    #[arg(long, value_delimiter = ',')]
    enable_crds: Option<Vec<String>>,
    /// Log verbosity (0 info, 1 debug, 2+ trace).
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    verbosity: u8,
}

/// The `options` of a `KwokConfiguration` that this kwok reads.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Options {
    cidr: Option<String>,
    #[serde(rename = "nodeIP")]
    node_ip: Option<String>,
    node_name: Option<String>,
    node_port: Option<u16>,
    server_address: Option<String>,
    manage_all_nodes: Option<bool>,
    manage_nodes_with_annotation_selector: Option<String>,
    manage_nodes_with_label_selector: Option<String>,
    manage_single_node: Option<String>,
    node_lease_duration_seconds: Option<u64>,
    #[serde(rename = "enableCRDs")]
    enable_crds: Option<Vec<String>>,
}

/// What the config files hold.
#[derive(Default)]
struct Files {
    options: Options,
    stages: Vec<Compiled>,
}

fn read_files(paths: &[PathBuf]) -> Result<Files, String> {
    let mut files = Files::default();
    for path in paths {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading config {}: {e}", path.display()))?;
        let name = path.display().to_string();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
            .map_err(|e| format!("config {name}: not YAML: {e}"))?;
        for doc in docs {
            if doc.get("kind").and_then(Value::as_str) == Some("KwokConfiguration") {
                let options = doc.get("options").cloned().unwrap_or(Value::Null);
                if !options.is_null() {
                    files.options = serde_json::from_value(options)
                        .map_err(|e| format!("config {name}: KwokConfiguration options: {e}"))?;
                }
            }
        }
        files
            .stages
            .extend(kwok::parse_stages(&text, &name).map_err(|e| e.to_string())?);
    }
    Ok(files)
}

/// Flags override the config file; then the start-up rules of docs/reference/kwok-rules.md §1.1
/// (one node-selection mode, stages from files xor from the cluster).
fn build_config(cli: &Cli, files: Files) -> Result<(Config, Vec<Compiled>), String> {
    let o = files.options;
    let all = cli.manage_all_nodes.or(o.manage_all_nodes).unwrap_or(false);
    let single = cli
        .manage_single_node
        .clone()
        .or(o.manage_single_node)
        .unwrap_or_default();
    let annotation = cli
        .manage_nodes_with_annotation_selector
        .clone()
        .or(o.manage_nodes_with_annotation_selector)
        .unwrap_or_default();
    let label = cli
        .manage_nodes_with_label_selector
        .clone()
        .or(o.manage_nodes_with_label_selector)
        .unwrap_or_default();
    let selectors = !annotation.is_empty() || !label.is_empty();
    let nodes = match (all, single.is_empty(), selectors) {
        (true, true, false) => NodeSelection::All,
        (false, false, false) => NodeSelection::Single(single),
        (false, true, true) => {
            let annotation = LabelSelector::parse(&annotation).map_err(|e| {
                format!("--manage-nodes-with-annotation-selector {annotation:?}: {e}")
            })?;
            LabelSelector::parse(&label)
                .map_err(|e| format!("--manage-nodes-with-label-selector {label:?}: {e}"))?;
            NodeSelection::Selectors { annotation, label }
        }
        (false, true, false) => {
            return Err("no nodes are managed: pass --manage-all-nodes, --manage-single-node, or --manage-nodes-with-annotation-selector / --manage-nodes-with-label-selector".into());
        }
        _ => {
            return Err("conflicting node selection: --manage-single-node, --manage-all-nodes and the --manage-nodes-with-*-selector flags exclude each other".into());
        }
    };
    let crds = cli
        .enable_crds
        .clone()
        .or(o.enable_crds)
        .unwrap_or_default();
    let mut stages_from_cluster = false;
    for kind in crds.iter().map(|k| k.trim()).filter(|k| !k.is_empty()) {
        if kind == "Stage" {
            stages_from_cluster = true;
        } else {
            eprintln!(
                "kwok: warning: --enable-crds={kind}: this kwok only supports Stage; ignored"
            );
        }
    }
    let mut stages = files.stages;
    if stages_from_cluster && !stages.is_empty() {
        return Err(format!(
            "Stage {:?} is in --config, but --enable-crds=Stage reads stages from the cluster: use one or the other",
            stages[0].name()
        ));
    }
    if !stages_from_cluster && stages.is_empty() {
        eprintln!(
            "kwok: no Stage in --config: using the built-in fast stages (node-initialize, node-heartbeat-with-lease, pod-ready, pod-complete, pod-delete)"
        );
        stages = kwok::default_stages();
    }
    if let Some(addr) = cli.server_address.clone().or(o.server_address) {
        eprintln!(
            "kwok: warning: --server-address={addr}: this kwok has no HTTP server (logs, exec, metrics); ignored"
        );
    }
    let config = Config {
        nodes,
        cidr: cli
            .cidr
            .clone()
            .or(o.cidr)
            .unwrap_or_else(|| "10.0.0.0/24".into()),
        node_ip: cli.node_ip.clone().or(o.node_ip).unwrap_or_default(),
        node_name: cli.node_name.clone().or(o.node_name).unwrap_or_default(),
        node_port: cli.node_port.or(o.node_port).unwrap_or(0),
        node_lease_duration: Duration::from_secs(
            cli.node_lease_duration_seconds
                .or(o.node_lease_duration_seconds)
                .unwrap_or(0),
        ),
        identity: apimachinery::rand::holder_identity("kwok"),
        stages_from_cluster,
    };
    if !valid_cidr(&config.cidr) {
        return Err(format!(
            "--cidr={}: not an IPv4 CIDR like 10.0.0.0/24",
            config.cidr
        ));
    }
    Ok((config, stages))
}

/// Whether `s` is an IPv4 CIDR like `10.0.0.0/24`.
fn valid_cidr(s: &str) -> bool {
    s.split_once('/').is_some_and(|(ip, bits)| {
        ip.parse::<std::net::Ipv4Addr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= 32)
    })
}

async fn client(cli: &Cli) -> Result<kube::Client, String> {
    let path = cli.kubeconfig.clone().or_else(|| {
        std::env::var_os("KUBECONFIG")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".kube/config")))
            .filter(|p| p.exists())
    });
    let mut config = match &path {
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(p)
                .map_err(|e| format!("kubeconfig {}: {e}", p.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(|e| format!("kubeconfig {}: {e}", p.display()))?
        }
        None => kube::Config::incluster()
            .map_err(|e| format!("no kubeconfig found and no in-cluster config: {e}"))?,
    };
    if let Some(master) = &cli.master {
        config.cluster_url = master
            .parse()
            .map_err(|e| format!("--master={master}: {e}"))?;
    }
    // The controller retries failed calls itself (1 s doubling, resuming at
    // the failed step); kube's own retry layer would stack on top of it.
    config.default_retry = false;
    kube::Client::try_from(config).map_err(|e| format!("building the API client: {e}"))
}

/// Polls `GET /api/v1/nodes?limit=1`: 1 s, doubling, 5 tries.
async fn wait_for_api(client: &kube::Client) -> Result<(), String> {
    let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    let mut delay = Duration::from_secs(1);
    let mut last = String::new();
    for _ in 0..5 {
        match api.list(&kube::api::ListParams::default().limit(1)).await {
            Ok(_) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(delay).await;
        delay *= 2;
    }
    Err(format!(
        "the API server does not answer GET /api/v1/nodes: {last}"
    ))
}

async fn run(cli: Cli) -> Result<(), String> {
    let paths = if cli.config.is_empty() {
        std::env::var_os("HOME")
            .map(|h| Path::new(&h).join(".kwok/kwok.yaml"))
            .filter(|p| p.exists())
            .into_iter()
            .collect()
    } else {
        cli.config.clone()
    };
    let files = read_files(&paths)?;
    let (config, stages) = build_config(&cli, files)?;
    let client = client(&cli).await?;
    wait_for_api(&client).await?;
    tracing::info!(
        "kwok {} managing {} with {} stage(s){}",
        env!("CARGO_PKG_VERSION"),
        config.nodes,
        stages.len(),
        if config.stages_from_cluster {
            " plus Stage objects from the cluster"
        } else {
            ""
        }
    );
    let controller = Controller::new(client, simclock::Clock::new(), config, stages);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("installing the SIGTERM handler: {e}"))?;
    tokio::select! {
        _ = controller.run() => Err("the watches ended".into()),
        _ = tokio::signal::ctrl_c() => Ok(()),
        _ = term.recv() => Ok(()),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let level = match cli.verbosity {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("kwok={level}"))),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kwok: {e}");
            ExitCode::FAILURE
        }
    }
}
