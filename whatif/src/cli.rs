//! `testbed whatif FILE... [--side NAME=FLAGS]... [--binary NAME=PATH]...
//! [--sweep FLAG=VALUES]...`:
//! the command line of the what-if. It prints the coverage and the outcome, writes the whole
//! report as `report.json`, `report.md` and `report.html` (with SVG
//! timelines) under `--out`, and exits 3 when
//! a side's pending pod-minutes pass `--max-pending-pod-minutes` (a gate
//! for CI). A sweep's cases can run apart: `--case I` runs one,
//! `--emit-job FILE` writes a Kubernetes Indexed Job that runs each in a
//! pod of its own ([`crate::job`]), and `testbed whatif merge` makes one
//! report of their reports ([`crate::merge`]).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::binary::{BinarySide, Launcher};
use crate::flags::Flags;
use crate::{SideSpec, WhatIf};

/// The exit status when a gate fails.
const GATE_FAILED: u8 = 3;

/// `testbed whatif`'s arguments.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    /// Work on a sweep's case reports instead of running.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The cluster's state: `kubectl get ... -A -o json|yaml` output,
    /// multi-document YAML, or an autoscaler's `/snapshotz` answer.
    #[arg(required_unless_present_any = ["kubeconfig", "recording"], value_name = "FILE")]
    pub inputs: Vec<PathBuf>,
    /// Replay a recording (`testbed.recording/v1`, JSON Lines): its
    /// starting state is read with the files, and its workload changes
    /// (scales, cordons, workloads and lone pods created and deleted) are
    /// made at their times on every side. Nodes the recorded autoscaler
    /// added and removed are left out and counted beside the simulation's.
    #[arg(long, value_name = "FILE")]
    pub recording: Option<PathBuf>,
    /// Read a live cluster through this kubeconfig (its current context):
    /// list calls only, never a write.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// A side to run, `NAME=FLAGS` (repeatable): the autoscaler's flags
    /// over the input's, e.g. `--side 'strict=--scale-down-utilization-threshold=0.3'`.
    /// Without any, one side runs with the input's flags.
    #[arg(long = "side", value_name = "NAME=FLAGS")]
    pub sides: Vec<String>,
    /// Run side NAME with this autoscaler binary instead of ours
    /// in-process, `NAME=PATH` (repeatable): upstream CA built with its
    /// kwok cloud provider, say. NAME is a `--side` (its flags apply) or a
    /// side of its own with the input's flags. A binary side runs in real
    /// time divided by `--time-scale`; its log is written under `--out`.
    #[arg(long = "binary", value_name = "NAME=PATH")]
    pub binaries: Vec<String>,
    /// Sweep a flag over values, `FLAG=VALUES` (repeatable): one side per
    /// combination of the values of every `--sweep`, e.g. `--sweep
    /// 'scale-down-utilization-threshold=0.4..0.8/0.05' --sweep
    /// 'expander=least-waste,priority,random'` (27 cases). VALUES is a
    /// list or `LOW..HIGH/STEP`. The cases run in parallel, one per core,
    /// and the report adds a row per case and the Pareto front of
    /// node-hours against pending pod-minutes. Flags common to every case
    /// go in `--flags`.
    #[arg(long = "sweep", value_name = "FLAG=VALUES", conflicts_with_all = ["sides", "binaries"])]
    pub sweeps: Vec<String>,
    /// Run only this case of the sweep (from 0, in the order of the
    /// sweep's table): what each pod of an `--emit-job` Job runs, its
    /// `JOB_COMPLETION_INDEX` given here. `testbed whatif merge` makes one
    /// report of the cases' reports.
    #[arg(long, value_name = "INDEX", requires = "sweeps")]
    pub case: Option<usize>,
    /// Write a Kubernetes Indexed Job that runs the sweep's cases, one per
    /// completion, to FILE (YAML, with a ConfigMap holding the input files)
    /// instead of running them here. Each pod writes its case's report
    /// under `/results/JOB/case-INDEX` on the `--results-claim` volume;
    /// `testbed whatif merge` collects them.
    #[arg(long, value_name = "FILE", requires = "sweeps", conflicts_with_all = ["case", "kubeconfig"])]
    pub emit_job: Option<PathBuf>,
    /// The Job's name (`--emit-job`).
    #[arg(long, default_value = "whatif-sweep", value_name = "NAME")]
    pub job_name: String,
    /// The image the Job's pods run: one whose entrypoint is `testbed`
    /// (`deploy/image-from-binary.sh target/dist/testbed IMAGE`, or
    /// `deploy/Dockerfile`).
    #[arg(long, default_value = "localhost/testbed:dev", value_name = "IMAGE")]
    pub image: String,
    /// How many of the Job's pods run at once (default: every case).
    #[arg(long, value_name = "N")]
    pub parallelism: Option<usize>,
    /// The PersistentVolumeClaim (ReadWriteMany) the Job's pods write
    /// their reports to.
    #[arg(long, default_value = "whatif-results", value_name = "CLAIM")]
    pub results_claim: String,
    /// A PersistentVolumeClaim holding the input files (by their file
    /// names) instead of the ConfigMap, for inputs over the 1 MiB a
    /// ConfigMap holds.
    #[arg(long, value_name = "CLAIM")]
    pub input_claim: Option<String>,
    /// Cluster time per real time for binary sides: 60 runs a simulated
    /// hour in a real minute.
    #[arg(long, default_value_t = 60.0, value_name = "SCALE")]
    pub time_scale: f64,
    /// Flags for every side, over those of the Cluster Autoscaler
    /// Deployment in the input (or its defaults when there is none).
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub flags: Option<String>,
    /// A node group's bounds, `MIN:MAX:GROUP` (repeatable; over the
    /// input autoscaler's `--nodes`).
    #[arg(long = "nodes", value_name = "MIN:MAX:GROUP")]
    pub nodes: Vec<String>,
    /// Group nodes by this label's value instead of the platforms' labels.
    #[arg(long, value_name = "KEY")]
    pub group_label: Option<String>,
    /// How long the autoscaler runs, in virtual time (`90m`, `24h`).
    #[arg(long = "for", default_value = "24h", value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Duration,
    /// Changes to make during the run, the same on every side: a YAML
    /// list of steps (`- {at: 30m, scale: Deployment shop/web, replicas:
    /// 12}`; also cordon, uncordon, delete and create). Without it the
    /// workloads stay as the input had them.
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// An instance type's hourly price, `TYPE=PRICE` (repeatable), e.g.
    /// `--price m5.large=0.096`: the report then gives each side's cost
    /// (node-hours by the nodes' `node.kubernetes.io/instance-type`).
    #[arg(long = "price", value_name = "TYPE=PRICE")]
    pub prices: Vec<String>,
    /// The seed of node names and the random expander: the same inputs
    /// and seed give the same report.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where `report.json`, `report.md` and `report.html` are written.
    #[arg(long, default_value = "target/whatif", value_name = "DIR")]
    pub out: PathBuf,
    /// Exit with status 3 when a side's pending pod-minutes pass this.
    #[arg(long, value_name = "MINUTES")]
    pub max_pending_pod_minutes: Option<f64>,
    /// Exit with status 3 when a binary side's process grew over the run:
    /// hour 2 against the last hour, its memory, loop time or tasks more
    /// than flat allows (a run of three hours or more; `report.md` says
    /// what grew).
    #[arg(long)]
    pub require_flat: bool,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    simclock::parse_go_duration(s)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{s:?} is not a duration such as 90m or 24h"))
}

/// `testbed whatif`'s subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Make one report of a sweep's case reports (`--case`, the pods of an
    /// `--emit-job` Job): the same table, plot and Pareto front as the
    /// sweep run at once.
    Merge(MergeArgs),
}

/// `testbed whatif merge`'s arguments.
#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// Case reports: `report.json` files, directories holding one, or
    /// directories whose subdirectories do (`/results/JOB`).
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Where `report.json`, `report.md` and `report.html` are written.
    #[arg(long, default_value = "target/whatif", value_name = "DIR")]
    pub out: PathBuf,
}

/// Runs the command; its exit status. `launcher` starts the binaries of
/// binary sides (none: `--binary` is refused).
pub fn main(args: Args, launcher: Option<Arc<dyn Launcher>>) -> ExitCode {
    let result = match &args.command {
        Some(Command::Merge(m)) => merge(m),
        None if args.emit_job.is_some() => emit_job(&args),
        None => what_if(&args, launcher),
    };
    match result {
        Ok(status) => status,
        Err(e) => {
            eprintln!("testbed whatif: {e}");
            ExitCode::FAILURE
        }
    }
}

fn what_if(args: &Args, launcher: Option<Arc<dyn Launcher>>) -> Result<ExitCode, String> {
    let what = request(args, launcher).map_err(|e| e.to_string())?;
    let report = crate::run(&what).map_err(|e| e.to_string())?;
    write(&report, &args.out)?;
    if let Some(max) = args.max_pending_pod_minutes {
        let over: Vec<String> = report
            .sides
            .iter()
            .filter(|s| s.summary.pending_pod_minutes > max)
            .map(|s| format!("{} ({})", s.name, s.summary.pending_pod_minutes))
            .collect();
        if !over.is_empty() {
            eprintln!(
                "testbed whatif: pending pod-minutes over {max}: {}",
                over.join(", ")
            );
            return Ok(ExitCode::from(GATE_FAILED));
        }
    }
    if args.require_flat {
        let mut grew = Vec::new();
        for s in report.sides.iter().filter(|s| s.binary.is_some()) {
            match &s.health_verdict {
                Some(v) if v.grew.is_empty() => {}
                Some(v) => grew.push(format!("{}: {}", s.name, v.grew.join("; "))),
                None => grew.push(format!(
                    "{}: no verdict (a run of three hours or more, sampled, is needed)",
                    s.name
                )),
            }
        }
        if !grew.is_empty() {
            eprintln!("testbed whatif: --require-flat: {}", grew.join(" | "));
            return Ok(ExitCode::from(GATE_FAILED));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `report.json`, `report.md` and `report.html` under `out` and
/// prints the input and the outcome (the sides' details are in the
/// files).
fn write(report: &crate::report::Report, out: &std::path::Path) -> Result<(), String> {
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    let markdown = report.markdown();
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let html = crate::html::page(report);
    for (name, text) in [
        ("report.json", &json),
        ("report.md", &markdown),
        ("report.html", &html),
    ] {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let short = markdown
        .split("\n## Side ")
        .next()
        .unwrap_or(&markdown)
        .to_string();
    print!("{short}");
    println!(
        "\nreport: {}, {} and {}",
        out.join("report.json").display(),
        out.join("report.md").display(),
        out.join("report.html").display()
    );
    Ok(())
}

/// `--emit-job`: checks the sweep as a run would, then writes the Job.
fn emit_job(args: &Args) -> Result<ExitCode, String> {
    let what = request(args, None).map_err(|e| e.to_string())?;
    crate::check(&what).map_err(|e| e.to_string())?;
    let path = args
        .emit_job
        .as_deref()
        .unwrap_or(std::path::Path::new("-"));
    let manifest =
        crate::job::manifest(args, what.sides.len()).map_err(|e| format!("--emit-job: {e}"))?;
    std::fs::write(path, &manifest).map_err(|e| format!("writing {}: {e}", path.display()))?;
    println!(
        "{}: Job {} runs {} cases; results under /results/{} on claim {}; then `testbed whatif merge DIR`",
        path.display(),
        args.job_name,
        what.sides.len(),
        args.job_name,
        args.results_claim
    );
    Ok(ExitCode::SUCCESS)
}

/// `testbed whatif merge`.
fn merge(args: &MergeArgs) -> Result<ExitCode, String> {
    let report = crate::merge::merge(&args.paths).map_err(|e| e.to_string())?;
    write(&report, &args.out)?;
    Ok(ExitCode::SUCCESS)
}

/// The what-if the arguments ask for.
pub fn request(
    args: &Args,
    launcher: Option<Arc<dyn Launcher>>,
) -> Result<WhatIf, crate::WhatIfError> {
    let words = |s: &str| -> Vec<String> { s.split_whitespace().map(str::to_string).collect() };
    let mut flags = match &args.flags {
        Some(f) => Flags::parse("--flags", &words(f))?,
        None => Flags::default(),
    };
    flags.nodes.extend(crate::nodes_flags(&args.nodes)?);
    let mut sides = args
        .sides
        .iter()
        .map(|s| {
            let (name, text) = s.split_once('=').ok_or_else(|| {
                crate::WhatIfError::Sides(format!(
                    "--side {s:?}: expected NAME=FLAGS, e.g. 'strict=--scale-down-utilization-threshold=0.3'"
                ))
            })?;
            if name.trim().is_empty() {
                return Err(crate::WhatIfError::Sides(format!(
                    "--side {s:?}: the side has no name"
                )));
            }
            Ok(SideSpec {
                name: name.trim().to_string(),
                flags: Flags::parse(&format!("side {name}"), &words(text))?,
                binary: None,
            })
        })
        .collect::<Result<Vec<_>, crate::WhatIfError>>()?;
    let sweep = args
        .sweeps
        .iter()
        .map(|a| crate::sweep::Dimension::parse(a))
        .collect::<Result<Vec<_>, _>>()?;
    if !sweep.is_empty() {
        sides.extend(crate::sweep::sides(&sweep, args.case)?);
    }
    // Binaries alone are compared with ours on the input's flags.
    if sides.is_empty() && !args.binaries.is_empty() {
        sides.push(SideSpec {
            name: "ours".into(),
            flags: Flags::default(),
            binary: None,
        });
    }
    for b in &args.binaries {
        let (name, path) = b
            .split_once('=')
            .filter(|(n, p)| !n.trim().is_empty() && !p.is_empty())
            .ok_or_else(|| {
                crate::WhatIfError::Sides(format!(
                    "--binary {b:?}: expected NAME=PATH, e.g. upstream=/tmp/ca-1.31.5"
                ))
            })?;
        let launcher = launcher.clone().ok_or_else(|| {
            crate::WhatIfError::Sides("--binary: this build cannot start binaries".into())
        })?;
        if !(args.time_scale.is_finite() && args.time_scale >= 1.0) {
            return Err(crate::WhatIfError::Sides(format!(
                "--time-scale {}: give a scale of 1 or more",
                args.time_scale
            )));
        }
        let binary = BinarySide {
            path: PathBuf::from(path),
            time_scale: args.time_scale,
            dir: args.out.clone(),
            launcher,
        };
        let name = name.trim();
        match sides.iter_mut().find(|s| s.name == name) {
            Some(side) if side.binary.is_some() => {
                return Err(crate::WhatIfError::Sides(format!(
                    "--binary {b:?}: side {name} has a binary already"
                )));
            }
            Some(side) => side.binary = Some(binary),
            None => sides.push(SideSpec {
                name: name.to_string(),
                flags: Flags::default(),
                binary: Some(binary),
            }),
        }
    }
    Ok(WhatIf {
        inputs: args.inputs.clone(),
        kubeconfig: args.kubeconfig.clone(),
        recording: args.recording.clone(),
        flags,
        sides,
        group_label: args.group_label.clone(),
        duration: args.duration,
        timeline: match &args.timeline {
            Some(path) => crate::timeline::Timeline::read(path)?,
            None => crate::timeline::Timeline::default(),
        },
        seed: args.seed,
        prices: prices(&args.prices).map_err(crate::WhatIfError::Price)?,
        parallel: std::thread::available_parallelism().map_or(1, |n| n.get()),
        sweep,
        case: args.case,
    })
}

/// `--price TYPE=PRICE` values.
fn prices(values: &[String]) -> Result<std::collections::BTreeMap<String, f64>, String> {
    values
        .iter()
        .map(|v| {
            let bad = || {
                format!(
                    "--price {v:?}: expected TYPE=PRICE, an hourly price such as m5.large=0.096"
                )
            };
            let (t, p) = v.split_once('=').ok_or_else(bad)?;
            let price: f64 = p.trim().parse().map_err(|_| bad())?;
            if t.trim().is_empty() || !price.is_finite() || price < 0.0 {
                return Err(bad());
            }
            Ok((t.trim().to_string(), price))
        })
        .collect()
}

/// `testbed record`'s arguments.
#[derive(clap::Args, Debug)]
pub struct RecordArgs {
    /// The cluster to record (the kubeconfig's current context): list and
    /// watch only, never a write.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: PathBuf,
    /// Where to write the recording (`testbed.recording/v1`, JSON Lines).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// How long to record (`90m`, `24h`); without it, until Ctrl-C.
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
}

/// Records a cluster's changes ([`crate::record`]) until `--for` has
/// passed or Ctrl-C.
pub fn record(args: &RecordArgs) -> ExitCode {
    let file = args.out.display().to_string();
    let run = || -> Result<crate::record::Written, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| format!("starting the runtime: {e}"))?;
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(&args.out).map_err(|e| format!("creating {file}: {e}"))?,
        );
        runtime.block_on(async {
            let client = crate::live::client(&args.kubeconfig)
                .await
                .map_err(|e| e.to_string())?;
            let stop = async {
                let _ = tokio::signal::ctrl_c().await;
            };
            crate::record::record(client, &mut out, &file, args.duration, stop)
                .await
                .map_err(|e| e.to_string())
        })
    };
    match run() {
        Ok(w) => {
            println!(
                "{file}: {} objects at the start, {} changes, {} relists",
                w.initial, w.changes, w.relists
            );
            for (kind, why) in &w.unreadable {
                println!("not recorded: {kind}s, which the cluster would not list ({why})");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("testbed record: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `testbed synthetic`'s arguments.
#[derive(clap::Args, Debug)]
pub struct SyntheticArgs {
    /// Nodes.
    #[arg(long, default_value_t = 1000)]
    pub nodes: usize,
    /// Pods per node (besides one DaemonSet pod each).
    #[arg(long, default_value_t = 30)]
    pub pods_per_node: usize,
    /// Write a recording (`testbed.recording/v1`) of this many hours
    /// instead: the dump as its start, then an hourly ramp of pods.
    #[arg(long, value_name = "HOURS")]
    pub recording_hours: Option<usize>,
    /// The pods each hourly ramp adds (with `--recording-hours`).
    #[arg(long, default_value_t = 10_000, requires = "recording_hours")]
    pub ramp_pods: usize,
    /// Where to write the dump (JSON) or the recording (JSON Lines).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// Writes a synthetic cluster dump or recording ([`crate::synthetic`]).
pub fn synthetic(args: &SyntheticArgs) -> ExitCode {
    let written = match args.recording_hours {
        None => {
            let dump = crate::synthetic::cluster(args.nodes, args.pods_per_node);
            std::fs::write(&args.out, dump.to_string())
        }
        Some(hours) => std::fs::File::create(&args.out).and_then(|f| {
            let mut out = std::io::BufWriter::new(f);
            let ramp = crate::synthetic::Ramp {
                hours,
                pods: args.ramp_pods,
            };
            crate::synthetic::recording(&mut out, args.nodes, args.pods_per_node, ramp)?;
            out.flush()
        }),
    };
    match written {
        Ok(()) => {
            println!("{}", args.out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("testbed synthetic: writing {}: {e}", args.out.display());
            ExitCode::FAILURE
        }
    }
}
