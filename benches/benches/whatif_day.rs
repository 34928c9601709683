//! The what-if over a day and across flag values, each run in a process of
//! its own so that its peak memory is its own:
//!
//! - **a recorded day**: a recording as `testbed synthetic
//!   --recording-hours` writes one (the synthetic cluster, then every hour
//!   10,000 pods of Deployments scaled up and, half an hour later, down; the
//!   nodes' spare room holds about a third of them), replayed by the
//!   what-if. Prints the wall time, the peak memory, the nodes the
//!   simulated autoscaler added and removed beside those the recording's
//!   autoscaler did, and the evictions. Target: a day of 1,000 nodes in
//!   5 minutes.
//! - **a sweep**: `--sweep scale-down-utilization-threshold=0.4..0.8/0.05
//!   --sweep expander=least-waste,priority,random` (27 cases) on the
//!   synthetic dump with frozen workloads: its first case alone, the
//!   sweep one case at a time, and the sweep on as many threads as the
//!   machine has cores. Prints the three times, the speed-up of the
//!   parallel sweep over the serial one, and the parallel sweep's time
//!   against 27 × the first case / cores (the cases differ: a higher
//!   threshold removes more nodes, and costs more, than the first).
//!
//! `cargo bench -p benches --bench whatif_day` (`-- NODES HOURS` to resize,
//! 1,000 nodes and 24 h by default; `recorded` or `sweep` for one part).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use whatif::WhatIf;
use whatif::flags::Flags;
use whatif::sweep::Dimension;
use whatif::synthetic::Ramp;

/// The allocator `testbed` runs with: the figures are the command's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Pods per node in the dump.
const PODS_PER_NODE: usize = 30;

/// Pods each hourly ramp adds.
const RAMP_PODS: usize = 10_000;

/// The argument that makes this process one measured run.
const CHILD: &str = "--measured-run";

/// The sweep measured.
const SWEEP: [&str; 2] = [
    "scale-down-utilization-threshold=0.4..0.8/0.05",
    "expander=least-waste,priority,random",
];

/// What one measured run does.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Run {
    /// Replays the recording.
    Recorded,
    /// Runs the sweep's first case alone.
    OneCase,
    /// Runs every case of the sweep, one at a time.
    SweepSerial,
    /// Runs every case of the sweep, as many at a time as there are cores.
    Sweep,
}

impl Run {
    fn name(self) -> &'static str {
        match self {
            Run::Recorded => "recorded",
            Run::OneCase => "one-case",
            Run::SweepSerial => "sweep-serial",
            Run::Sweep => "sweep",
        }
    }

    fn of(name: &str) -> Run {
        [Run::Recorded, Run::OneCase, Run::SweepSerial, Run::Sweep]
            .into_iter()
            .find(|r| r.name() == name)
            .unwrap()
    }
}

/// One measured run; prints one line: seconds, peak MiB, then what the
/// first side did (added, removed, evictions, other pod deletions) and
/// what the recording's autoscaler did (added, removed).
fn measured_run(run: Run, input: &Path, hours: u64) {
    let sweep: Vec<Dimension> = SWEEP.iter().map(|s| Dimension::parse(s).unwrap()).collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (recording, inputs, sides, parallel) = match run {
        Run::Recorded => (Some(input.to_path_buf()), vec![], vec![], 1),
        Run::OneCase => (
            None,
            vec![input.to_path_buf()],
            whatif::sweep::sides(&sweep, Some(0)).unwrap(),
            1,
        ),
        Run::SweepSerial | Run::Sweep => (
            None,
            vec![input.to_path_buf()],
            whatif::sweep::sides(&sweep, None).unwrap(),
            if run == Run::Sweep { cores } else { 1 },
        ),
    };
    let what = WhatIf {
        inputs,
        kubeconfig: None,
        recording,
        flags: Flags::default(),
        sides,
        group_label: None,
        duration: Duration::from_secs(hours * 3600),
        timeline: Default::default(),
        prices: Default::default(),
        seed: 1,
        parallel,
        sweep: if matches!(run, Run::Sweep | Run::SweepSerial) {
            sweep
        } else {
            vec![]
        },
        case: None,
    };
    let started = Instant::now();
    let report = whatif::run(&what).expect("the what-if runs");
    let seconds = started.elapsed().as_secs_f64();
    let json = serde_json::to_value(&report).unwrap();
    let summary = &json["sides"][0]["summary"];
    let recorded = &json["recorded"];
    println!(
        "{seconds:.1} {:.0} {} {} {} {} {} {}",
        benches::peak_rss_mib(),
        summary["nodesAdded"],
        summary["nodesRemoved"],
        summary["evictions"],
        summary["podsDeleted"],
        recorded["nodesAdded"],
        recorded["nodesRemoved"],
    );
}

/// Runs this benchmark again as one measured run; its line, split.
fn child(run: Run, input: &Path, hours: u64) -> Vec<String> {
    benches::measured_child(&[
        CHILD.to_string(),
        run.name().to_string(),
        input.display().to_string(),
        hours.to_string(),
    ])
}

fn recorded_day(dir: &Path, nodes: usize, hours: u64) {
    let path = dir.join(format!("day{nodes}.jsonl"));
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let ramp = Ramp {
        hours: hours as usize,
        pods: RAMP_PODS,
    };
    let lines = whatif::synthetic::recording(&mut out, nodes, PODS_PER_NODE, ramp).unwrap();
    drop(out);
    let mib = std::fs::metadata(&path).map_or(0, |m| m.len()) / (1 << 20);
    println!(
        "recorded day: {nodes} nodes x {PODS_PER_NODE} pods, {hours} h with a ramp of {RAMP_PODS} pods an hour; the recording: {} objects at the start, {} changes, {mib} MiB",
        lines.initial, lines.changes
    );
    let r = child(Run::Recorded, &path, hours);
    println!(
        "| wall time (s) | peak memory (MiB) | added | removed | evictions | other pod deletions | recorded: added | recorded: removed |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {} | {} | {} | {} | {} | {} | {} | {} |",
        r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]
    );
}

fn sweep(dir: &Path, nodes: usize, hours: u64) {
    let dump = dir.join(format!("s{nodes}.json"));
    let cluster = whatif::synthetic::cluster(nodes, PODS_PER_NODE);
    std::fs::write(&dump, serde_json::to_vec(&cluster).unwrap()).unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cases = whatif::sweep::sides(
        &SWEEP
            .iter()
            .map(|s| Dimension::parse(s).unwrap())
            .collect::<Vec<_>>(),
        None,
    )
    .unwrap()
    .len();
    println!(
        "sweep: {nodes} nodes x {PODS_PER_NODE} pods, {hours} h, frozen workloads, --sweep '{}' --sweep '{}' ({cases} cases) on {cores} cores",
        SWEEP[0], SWEEP[1]
    );
    let one = child(Run::OneCase, &dump, hours);
    let serial = child(Run::SweepSerial, &dump, hours);
    let all = child(Run::Sweep, &dump, hours);
    println!("| run | wall time (s) | peak memory (MiB) |");
    println!("|---|---:|---:|");
    println!("| the first case alone | {} | {} |", one[0], one[1]);
    println!(
        "| the sweep, one case at a time | {} | {} |",
        serial[0], serial[1]
    );
    println!("| the sweep, {cores} at a time | {} | {} |", all[0], all[1]);
    let seconds = |r: &[String]| r[0].parse::<f64>().unwrap_or(f64::NAN);
    let (one, serial, all) = (seconds(&one), seconds(&serial), seconds(&all));
    println!("serial / parallel: {:.2} on {cores} cores", serial / all);
    println!(
        "parallel / ({cases} x the first case / {cores} cores): {:.2}",
        all / (cases as f64 * one / cores as f64)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == CHILD) {
        let run = Run::of(&args[i + 1]);
        let input = PathBuf::from(&args[i + 2]);
        let hours = args[i + 3].parse().unwrap();
        measured_run(run, &input, hours);
        return;
    }
    let numbers: Vec<u64> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let nodes = numbers.first().copied().unwrap_or(1000) as usize;
    let hours = numbers.get(1).copied().unwrap_or(24);
    let only = |part: &str| {
        let named = ["recorded", "sweep"];
        !args.iter().any(|a| named.contains(&a.as_str())) || args.iter().any(|a| a == part)
    };
    let dir = std::env::temp_dir().join(format!("whatif-day-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    if only("recorded") {
        recorded_day(&dir, nodes, hours);
    }
    if only("sweep") {
        sweep(&dir, nodes, hours);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
