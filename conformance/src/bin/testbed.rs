//! `testbed`: the kwok-backed Kubernetes testbed.
//!
//! `testbed run [FEATURE or DIR...]` runs the conformance suite (the
//! FAQ's promises as Gherkin features) on the embedded cluster against the
//! in-process autoscaler, or a CA-compatible binary with
//! `--autoscaler-binary`; it prints a line per scenario and a summary table
//! and writes `junit.xml` and `cucumber.json` under `target/conformance/`.
//!
//! `testbed compare --autoscaler-binary A [--autoscaler-binary B]` runs a
//! scale-up from a backlog (`--nodes` × `--pods-per-node` pods) against
//! each binary on a fresh cluster and prints a row each with the ratios.
//!
//! `testbed bench [--autoscaler-binary B] [--nodes 100,1000,5000]` runs that
//! scenario for one binary at each scale and writes `target/bench/scale.md`
//! and `target/bench/scale.svg`.
//!
//! `testbed whatif FILE... [--side NAME=FLAGS]...` loads a real cluster's
//! state (`kubectl get -o json|yaml` dumps, an autoscaler's `/snapshotz`)
//! into the embedded cluster and runs our autoscaler on it in virtual
//! time, one run per flag set, and reports what each would do (crate
//! `whatif`).
//!
//! `testbed up` starts the embedded cluster (API server, scheduler,
//! workload controllers, kwok) with optional fake nodes, serves it over TLS
//! on 127.0.0.1, writes a kubeconfig and prints `kubeconfig: PATH` once it
//! is ready; it serves until SIGINT or SIGTERM. With `--capi` it serves
//! Cluster API too (MachineDeployments become Machines and kwok Nodes);
//! with `--aws URL` the running instances of that AWS API's Auto Scaling
//! groups become kwok Nodes. It runs in real time: its
//! clients (kubectl, an autoscaler binary) live outside the process.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use conformance::runner::{self, RunArgs};
use harness::cluster::{Cluster, NodeTemplate};
use harness::{Clock, EmbeddedApiServer};

/// mimalloc instead of glibc's malloc: at 30,000 pods, allocation was a
/// third of the testbed's CPU (perf), much of it contended arena locks.
/// The `system-allocator` feature keeps glibc's, for a heap profiler
/// (`heaptrack`) that sees only what goes through `malloc`.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "testbed",
    version,
    about = "A kwok-backed Kubernetes testbed for cluster autoscalers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the conformance suite and print a report.
    #[command(args_conflicts_with_subcommands = true)]
    Run {
        /// Work on the reports of shards run apart instead of running.
        #[command(subcommand)]
        command: Option<RunCommand>,
        #[command(flatten)]
        args: RunArgs,
        #[command(flatten)]
        job: runner::shards::JobArgs,
    },
    /// Start the embedded cluster and serve it until interrupted.
    Up(UpArgs),
    /// Run a scale scenario against one or two autoscaler binaries and
    /// compare them (time to all nodes and to all pods running, CPU, peak
    /// memory, events, API requests).
    Compare(conformance::compare::CompareArgs),
    /// Run the compare scenario for one binary at several scales and write
    /// a table and an SVG plot (`target/bench/scale.md`, `scale.svg`).
    Bench(conformance::bench::BenchArgs),
    /// Load a real cluster's state (kubectl dumps, /snapshotz) and show
    /// what the autoscaler would do to it in virtual time, flag sets side
    /// by side.
    Whatif(whatif::cli::Args),
    /// Record a live cluster's changes (list and watch only) for `testbed
    /// whatif --recording`.
    Record(whatif::cli::RecordArgs),
    /// Write a synthetic cluster dump (a kubectl List) of any size, or a
    /// recording of a day of it with hourly ramps, for the what-if's
    /// benchmarks.
    Synthetic(whatif::cli::SyntheticArgs),
}

/// `testbed run`'s subcommands.
#[derive(Subcommand)]
enum RunCommand {
    /// Make one report of the shards' reports (`--shard K/N` runs, the
    /// pods of an `--emit-job` Job): `junit.xml`, `cucumber.json` and
    /// `summary.json` of the whole suite, and its table.
    Merge {
        /// The shards' report directories (`summary.json` in each), or a
        /// directory of them (`/results/JOB`).
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Where to write the merged reports.
        #[arg(long, default_value = "target/conformance", value_name = "DIR")]
        report_dir: PathBuf,
    },
}

#[derive(clap::Args)]
struct UpArgs {
    /// Where to write the kubeconfig [default: <tmp>/testbed/kubeconfig].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Address to listen on (0.0.0.0 in a container, whose published port
    /// reaches it; the certificate is for 127.0.0.1 and localhost).
    #[arg(long, default_value = "127.0.0.1")]
    address: IpAddr,
    /// For an autoscaler whose timing flags are divided by this scale: the
    /// cluster's own waits (scheduler backoff) are divided too.
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Where the cluster runs: `embedded` (this process), or in a container
    /// through Docker or podman: `testbed` (our image), `kwok` (kwok's
    /// cluster image) or `kind` (a kind node image with our kwok). The
    /// kubeconfig written reaches it; the container goes on Ctrl-C.
    #[arg(long, default_value = "embedded", value_name = "BACKEND")]
    cluster: String,
    /// The container backend's image instead of its default.
    #[arg(long, value_name = "IMAGE")]
    cluster_image: Option<String>,
    /// Number of fake (kwok) nodes to create at start.
    #[arg(long, default_value_t = 0)]
    nodes: usize,
    /// CPU capacity of each fake node.
    #[arg(long, default_value = "4")]
    node_cpu: String,
    /// Memory capacity of each fake node.
    #[arg(long, default_value = "16Gi")]
    node_memory: String,
    /// Pod capacity of each fake node.
    #[arg(long, default_value_t = 110)]
    node_pods: u32,
    /// A Node manifest (YAML or JSON) used as the template of the fake
    /// nodes instead of --node-cpu/--node-memory; node i is named
    /// `<metadata.name>-<i>`.
    #[arg(long)]
    node_template: Option<PathBuf>,
    /// Custom kwok Stage files (repeatable), added to the default stages.
    #[arg(long = "stages")]
    stages: Vec<PathBuf>,
    /// Serve only the API server (no scheduler, controllers or kwok).
    #[arg(long)]
    api_only: bool,
    /// Serve Cluster API too: its CRDs (and a `KwokMachineTemplate`
    /// infrastructure kind) and the controllers that turn
    /// MachineDeployments into Machines and kwok Nodes.
    #[arg(long)]
    capi: bool,
    /// Bridge the AWS API at this endpoint (an emulator such as moto's
    /// server): its Auto Scaling groups' running instances become kwok
    /// Nodes with `aws:///<zone>/<id>` provider IDs, for the autoscaler's
    /// `--cloud-provider=aws`.
    #[arg(long, value_name = "URL")]
    aws: Option<String>,
    /// Install upstream's ProvisioningRequest CRD
    /// (`autoscaling.x-k8s.io` v1 and v1beta1, with its schema and CEL
    /// rules), for `cluster-autoscaler --enable-provisioning-requests`.
    #[arg(long)]
    provisioning_request_crd: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run {
            command: Some(RunCommand::Merge { paths, report_dir }),
            ..
        } => merge_shards(&paths, &report_dir),
        Command::Run { args, job, .. } if job.emit_job.is_some() => emit_job(&args, &job),
        Command::Run { mut args, .. } => {
            // The report is the output: the autoscaler's and the cluster's
            // logs (scenarios feed them bad input on purpose) only with
            // `-v` or RUST_LOG.
            init_logging_at(if args.verbose { "warn" } else { "off" });
            args.report_dir
                .get_or_insert_with(|| PathBuf::from("target/conformance"));
            let defaults = [PathBuf::from("features")];
            match runner::run(&args, &defaults) {
                Ok(summary) if summary.failed() == 0 && !summary.scenarios.is_empty() => {
                    ExitCode::SUCCESS
                }
                Ok(summary) if summary.scenarios.is_empty() => {
                    eprintln!("testbed run: no scenario matched");
                    ExitCode::FAILURE
                }
                Ok(_) => ExitCode::FAILURE,
                Err(e) => {
                    eprintln!("testbed run: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Bench(args) => {
            init_logging();
            report(
                "testbed bench",
                conformance::bench::run(&args),
                |(_, table)| table,
            )
        }
        Command::Compare(args) => {
            init_logging();
            report(
                "testbed compare",
                conformance::compare::run(&args),
                |rows| conformance::compare::render(&rows),
            )
        }
        Command::Record(args) => {
            init_logging_at("off");
            whatif::cli::record(&args)
        }
        Command::Whatif(args) => {
            init_logging_at("off");
            whatif::cli::main(
                args,
                Some(std::sync::Arc::new(
                    conformance::binary_side::BinaryLauncher,
                )),
            )
        }
        Command::Synthetic(args) => whatif::cli::synthetic(&args),
        Command::Up(up) => match tokio::runtime::Runtime::new() {
            Ok(rt) => rt.block_on(serve(up)),
            Err(e) => {
                eprintln!("testbed: starting the runtime: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

/// Runs `job` on a fresh runtime and prints what `render` makes of its
/// result, or its error prefixed with `what`.
/// `testbed run --emit-job`: the Job of the suite's shards.
fn emit_job(args: &RunArgs, job: &runner::shards::JobArgs) -> ExitCode {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from("features")]
    } else {
        args.paths.clone()
    };
    let file = job.emit_job.as_deref().unwrap_or(Path::new("-"));
    let written = runner::shards::manifest(args, job, &paths)
        .map_err(|e| e.to_string())
        .and_then(|m| {
            std::fs::write(file, m).map_err(|e| format!("writing {}: {e}", file.display()))
        });
    match written {
        Ok(()) => {
            println!(
                "{}: Job {} runs the suite in {} shards; reports under /results/{} on claim {}; then `testbed run merge DIR`",
                file.display(),
                job.job_name,
                job.shards,
                job.job_name,
                job.results_claim
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("testbed run: {e}");
            ExitCode::from(2)
        }
    }
}

/// `testbed run merge`: one report of the shards' reports; fails as the
/// whole run would.
fn merge_shards(paths: &[PathBuf], dir: &Path) -> ExitCode {
    let summary = match runner::shards::merge(paths) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("testbed run merge: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{}", runner::table(&summary));
    if let Err(e) = runner::write_reports(dir, &summary) {
        eprintln!("testbed run merge: {e}");
        return ExitCode::from(2);
    }
    println!(
        "Reports: {}, {} and {}",
        dir.join("junit.xml").display(),
        dir.join("cucumber.json").display(),
        dir.join("summary.json").display()
    );
    if summary.failed() == 0 && !summary.scenarios.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn report<T>(
    what: &str,
    job: impl std::future::Future<Output = Result<T, String>>,
    render: impl FnOnce(T) -> String,
) -> ExitCode {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{what}: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(job) {
        Ok(out) => {
            print!("{}", render(out));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{what}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging() {
    init_logging_at("warn");
}

/// Logs to standard error at `RUST_LOG`'s level, else at `default`.
fn init_logging_at(default: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default.into()),
        )
        .with_writer(std::io::stderr)
        .init();
}

async fn serve(args: UpArgs) -> ExitCode {
    init_logging();
    {
        let UpArgs {
            kubeconfig,
            port,
            address,
            time_scale,
            cluster,
            cluster_image,
            nodes,
            node_cpu,
            node_memory,
            node_pods,
            node_template,
            stages,
            api_only,
            capi,
            provisioning_request_crd,
            aws,
        } = args;
        {
            let path = kubeconfig.unwrap_or_else(harness::default_kubeconfig_path);
            let addr = SocketAddr::new(address, port);
            if !(time_scale.is_finite() && time_scale >= 1.0) {
                eprintln!("testbed up: --time-scale {time_scale}: must be a number of at least 1");
                return ExitCode::FAILURE;
            }
            let backend = match harness::backend::by_name(&cluster, cluster_image.as_deref()) {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("testbed up: {e}");
                    return ExitCode::FAILURE;
                }
            };
            if api_only && !backend.in_process() {
                eprintln!("testbed up: --api-only is for the embedded cluster");
                return ExitCode::FAILURE;
            }
            if api_only {
                let server = match EmbeddedApiServer::start(Clock::new(), addr, &path).await {
                    Ok(c) => c,
                    Err(e) => {
                        eprintln!("testbed up: {e}");
                        return ExitCode::FAILURE;
                    }
                };
                println!("kubeconfig: {}", server.kubeconfig.display());
                eprintln!(
                    "API server listening on {}; press Ctrl-C to stop",
                    server.endpoint.url
                );
                wait_for_signal().await;
                server.endpoint.shutdown();
                return ExitCode::SUCCESS;
            }
            let template = NodeShape {
                nodes,
                node_cpu,
                node_memory,
                node_pods,
                node_template,
            };
            let options = UpOptions {
                capi,
                provisioning_request_crd,
                aws,
                time_scale,
            };
            match up(&path, addr, &template, &stages, &options, &*backend).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("testbed up: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

struct UpOptions {
    capi: bool,
    provisioning_request_crd: bool,
    aws: Option<String>,
    time_scale: f64,
}

struct NodeShape {
    nodes: usize,
    node_cpu: String,
    node_memory: String,
    node_pods: u32,
    node_template: Option<PathBuf>,
}

async fn up(
    path: &Path,
    addr: SocketAddr,
    shape: &NodeShape,
    stage_files: &[PathBuf],
    options: &UpOptions,
    backend: &dyn harness::backend::ClusterBackend,
) -> Result<(), String> {
    let mut builder = Cluster::builder().time_scale(options.time_scale);
    if options.capi {
        builder = builder.capi();
    }
    if let Some(endpoint) = &options.aws {
        builder = builder.aws(endpoint);
    }
    if options.provisioning_request_crd {
        builder = builder.object(conformance::provreq::crd()?);
    }
    for f in stage_files {
        let text = std::fs::read_to_string(f)
            .map_err(|e| format!("reading stage file {}: {e}", f.display()))?;
        kwok::parse_stages(&text, &f.display().to_string()).map_err(|e| e.to_string())?;
        builder = builder.stages(&text);
    }
    match &shape.node_template {
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("reading node template {}: {e}", file.display()))?;
            let node: serde_json::Value = serde_saphyr::from_str(&text)
                .map_err(|e| format!("node template {}: {e}", file.display()))?;
            if node.get("kind").and_then(|k| k.as_str()) != Some("Node") {
                return Err(format!(
                    "node template {}: kind must be Node",
                    file.display()
                ));
            }
            for i in 0..shape.nodes {
                builder = builder.object(NodeTemplate::from_node(&node, i));
            }
        }
        None => {
            let template = NodeTemplate {
                pods: shape.node_pods,
                ..NodeTemplate::new("kwok-node", &shape.node_cpu, &shape.node_memory)
            };
            builder = builder.nodes(shape.nodes, &template);
        }
    }
    let cluster = backend.start(builder).await.map_err(|e| e.to_string())?;
    if let Some(kubeconfig) = cluster.kubeconfig() {
        // A cluster in a container: its kubeconfig, copied where asked.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        }
        std::fs::copy(kubeconfig, path)
            .map_err(|e| format!("writing the kubeconfig to {}: {e}", path.display()))?;
        println!("kubeconfig: {}", path.display());
        eprintln!(
            "cluster running in a container ({} backend); press Ctrl-C to stop and remove it",
            backend.name()
        );
        wait_for_signal().await;
        drop(cluster);
        return Ok(());
    }
    let api = cluster.api_server().ok_or("no embedded API server")?;
    let endpoint = api.serve_tls(addr).await.map_err(|e| e.to_string())?;
    endpoint.write_kubeconfig(path).map_err(|e| e.to_string())?;
    println!("kubeconfig: {}", path.display());
    eprintln!(
        "cluster listening on {}; press Ctrl-C to stop",
        endpoint.url
    );
    wait_for_signal().await;
    endpoint.shutdown();
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
