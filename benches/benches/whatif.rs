//! The what-if at scale: a synthetic cluster dump written as `testbed
//! synthetic` writes it (four EKS node groups, 30 pods per node from
//! Deployments of 50 with their ReplicaSets, a PDB per ten, a DaemonSet,
//! a tenth of the nodes lightly used, one pod in 300 pending), then
//! `testbed whatif` on it with frozen workloads, each run in a process of
//! its own so that its peak memory is its own:
//!
//! - one side (the input's flags);
//! - two sides at once (the same, and a utilization threshold of 0.6),
//!   and the ratio of the two wall times.
//!
//! Prints the wall time and peak resident memory of each and what the
//! first side did (nodes removed, evictions, loops). Targets: 24 h of
//! 1,000 nodes in 60 s and 2 GiB, two sides within twice one side.
//!
//! `cargo bench -p benches --bench whatif` (`-- NODES HOURS` to resize;
//! 1,000 nodes and 24 h by default).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use whatif::flags::Flags;
use whatif::{SideSpec, WhatIf};

/// The allocator `testbed` runs with: the figures are the command's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Pods per node in the dump.
const PODS_PER_NODE: usize = 30;

/// The argument that makes this process one measured run.
const CHILD: &str = "--measured-run";

fn side(name: &str, flags: &[&str]) -> SideSpec {
    let tokens: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    SideSpec {
        name: name.into(),
        flags: Flags::parse(name, &tokens).unwrap(),
        binary: None,
    }
}

/// One run of the what-if on `dump` for `hours` with `sides` sides; prints
/// one line: seconds, peak MiB, and the first side's totals.
fn measured_run(dump: &Path, hours: u64, sides: usize) {
    let mut specs = vec![side("base", &[])];
    if sides > 1 {
        specs.push(side(
            "threshold-0.6",
            &["--scale-down-utilization-threshold=0.6"],
        ));
    }
    let what = WhatIf {
        inputs: vec![dump.to_path_buf()],
        kubeconfig: None,
        recording: None,
        flags: Flags::default(),
        sides: specs,
        group_label: None,
        duration: Duration::from_secs(hours * 3600),
        timeline: Default::default(),
        prices: Default::default(),
        seed: 1,
        parallel: sides,
        sweep: Vec::new(),
        case: None,
    };
    let started = Instant::now();
    let report = whatif::run(&what).expect("the what-if runs");
    let seconds = started.elapsed().as_secs_f64();
    let json = serde_json::to_value(&report).unwrap();
    let summary = &json["sides"][0]["summary"];
    println!(
        "{seconds:.1} {:.0} {} {} {}",
        benches::peak_rss_mib(),
        summary["nodesRemoved"],
        summary["evictions"],
        summary["loops"]
    );
}

/// Runs this benchmark again as one measured run; its line, split.
fn child(dump: &Path, hours: u64, sides: usize) -> Vec<String> {
    benches::measured_child(&[
        CHILD.to_string(),
        dump.display().to_string(),
        hours.to_string(),
        sides.to_string(),
    ])
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == CHILD) {
        let dump = PathBuf::from(&args[i + 1]);
        let hours = args[i + 2].parse().unwrap();
        let sides = args[i + 3].parse().unwrap();
        measured_run(&dump, hours, sides);
        return;
    }
    let numbers: Vec<u64> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let nodes = numbers.first().copied().unwrap_or(1000) as usize;
    let hours = numbers.get(1).copied().unwrap_or(24);
    let dir = std::env::temp_dir().join(format!("whatif-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dump = dir.join(format!("s{nodes}.json"));
    let cluster = whatif::synthetic::cluster(nodes, PODS_PER_NODE);
    std::fs::write(&dump, serde_json::to_vec(&cluster).unwrap()).unwrap();
    println!(
        "what-if: {nodes} nodes x {PODS_PER_NODE} pods, {hours} h of virtual time, frozen workloads"
    );
    println!("| sides | wall time (s) | peak memory (MiB) | removed | evictions | loops |");
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut times = Vec::new();
    for sides in [1, 2] {
        let r = child(&dump, hours, sides);
        println!(
            "| {sides} | {} | {} | {} | {} | {} |",
            r[0], r[1], r[2], r[3], r[4]
        );
        times.push(r[0].parse::<f64>().unwrap_or(f64::NAN));
    }
    println!("two sides / one side: {:.2}", times[1] / times[0]);
    let _ = std::fs::remove_dir_all(&dir);
}
