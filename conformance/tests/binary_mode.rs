//! The scenarios tagged `@binary` in binary mode: our `cluster-autoscaler`
//! executable started against the embedded API server over TLS, in real
//! time at a scale of 60 (a scenario minute is one real second). The
//! whole suite runs this way with `testbed run --autoscaler-binary PATH`;
//! CI runs the tagged subset to keep its time down.
//!
//! The subset runs twice: with kwok node groups, and with node groups as
//! Cluster API MachineDeployments and the binary started with
//! `--cloud-provider=clusterapi` (less the `@kwok-only` scenarios). Each
//! pass is split into [`SHARES`] shares (`--shard`), and all of them run at
//! once, each in a process of its own (the node group provider is set once
//! per process): this one runs the first share with kwok node groups, its
//! children the others. The passes mostly wait on real time (together
//! about 5% of one core), so running them side by side presses on no
//! scenario's time window. The children's reports follow this one's.
//!
//! The executable is the one `cargo test --workspace` builds next to this
//! test (`target/<profile>/cluster-autoscaler`).

use std::path::PathBuf;

use clap::Parser;
use conformance::child_run::ChildRun;
use conformance::runner::{self, RunArgs, Shard};
use conformance::world::Provider;

/// How many shares each pass is split into.
const SHARES: usize = 2;

#[derive(Parser)]
#[command(name = "binary_mode")]
struct Cli {
    /// Run the pass with Cluster API node groups (as this test's children do).
    #[arg(long)]
    cluster_api_pass: bool,
    /// Run only this share of the pass (as this test's children do).
    #[arg(long, value_name = "K/N")]
    shard: Option<Shard>,
}

fn main() {
    let binary = match conformance::binary::sibling_autoscaler() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("binary_mode: {e}");
            std::process::exit(2);
        }
    };
    let split = std::env::args_os().len() == 1;
    let mut cli = Cli::parse();
    let mut children = Vec::new();
    if split {
        let first = Shard {
            index: 0,
            count: SHARES,
        };
        for cluster_api in [false, true] {
            for index in 0..SHARES {
                let shard = Shard {
                    index,
                    count: SHARES,
                };
                if !cluster_api && shard == first {
                    continue;
                }
                let mut args = vec!["--shard".to_string(), shard.to_string()];
                if cluster_api {
                    args.push("--cluster-api-pass".into());
                }
                let what = format!(
                    "{}, share {shard} (`-- {}`)",
                    pass(cluster_api).2,
                    args.join(" ")
                );
                children.push(ChildRun::start(what, args));
            }
        }
        cli.shard = Some(first);
    }
    let (cloud_provider, tags, what) = pass(cli.cluster_api_pass);
    let what = match cli.shard {
        Some(shard) => format!("{what}, share {shard}"),
        None => what.to_string(),
    };
    let args = RunArgs {
        paths: Vec::new(),
        tags: Some(tags.into()),
        autoscaler_binary: Some(binary),
        autoscaler_args: Vec::new(),
        cloud_provider,
        time_scale: 60.0,
        max_example_minutes: conformance::runner::pace::DEFAULT_MAX_EXAMPLE_MINUTES,
        cluster: "embedded".into(),
        cluster_image: None,
        report_dir: None,
        verbose: false,
        shard: cli.shard,
    };
    let features = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../features"));
    let mut code = match runner::run(&args, &[features]) {
        Ok(summary) => runner::test_result(&summary, &what),
        Err(e) => {
            eprintln!("binary_mode: {e}");
            2
        }
    };
    for child in children {
        code = code.max(child.finish("binary_mode"));
    }
    std::process::exit(code);
}

/// The node group provider, the tags and the report's name of a pass.
fn pass(cluster_api: bool) -> (Provider, &'static str, &'static str) {
    if cluster_api {
        (
            Provider::ClusterApi,
            "@binary and not @known-gap and not @kwok-only",
            "binary-mode conformance scenarios, Cluster API node groups",
        )
    } else {
        (
            Provider::Kwok,
            "@binary and not @known-gap",
            "binary-mode conformance scenarios",
        )
    }
}
