//! Runs every feature in `features/` against the in-process autoscaler on
//! the embedded cluster, in virtual time (the same run as `testbed run`,
//! with the same flags after `--`), and the `@binary` scenarios in binary
//! mode. Undefined steps fail. Prints a `test result:` line per run and
//! exits non-zero when a scenario failed.
//!
//! Without arguments (as `cargo test` runs it), the work is spread over
//! child processes of this test, so that the machine's two cores are busy
//! and waits on real time overlap with work:
//!
//! - the `@scale-1000` examples (1,000 nodes × 30 pods, most of the CPU)
//!   in two children (`--shard 0/2` and `--shard 1/2`);
//! - binary mode ([`binary_mode`]): our `cluster-autoscaler` executable
//!   against the embedded API server over TLS, in real time at a scale of
//!   60, with kwok node groups and with Cluster API MachineDeployments
//!   (`--cloud-provider=clusterapi`, less the `@kwok-only` scenarios),
//!   each pass in [`BINARY_SHARES`] children. These mostly wait on real
//!   time (together about 5% of one core), so they press on no scenario's
//!   time window;
//! - this process runs the rest of the default selection.
//!
//! The children's reports follow this one's, each with its own `test
//! result:` line. Each in-process run is single-threaded in virtual time,
//! so the split changes no scenario's outcome, only the wall time. With
//! arguments, one process runs what they select (without `--tags`: the
//! default, `not @known-gap`), so flags such as `--cloud-provider` or
//! `--report-dir` apply to all of it; `-- --binary-mode` runs binary mode
//! alone (both passes, in children), `-- --binary-mode --shard K/N
//! [--cluster-api-pass]` one share of one pass.

use std::path::PathBuf;

use clap::Parser;
use conformance::child_run::ChildRun;
use conformance::runner::{self, RunArgs, Shard};
use conformance::world::Provider;

#[derive(Parser)]
#[command(name = "conformance")]
struct Cli {
    /// Run the `@binary` scenarios in binary mode: our
    /// `cluster-autoscaler` executable, built next to this test.
    #[arg(long)]
    binary_mode: bool,
    /// In binary mode, the pass with Cluster API node groups.
    #[arg(long, requires = "binary_mode")]
    cluster_api_pass: bool,
    #[command(flatten)]
    run: RunArgs,
}

/// The suite's default selection less the 1,000-node examples: what this
/// process runs when it splits the work.
const HERE_TAGS: &str = "not @known-gap and not @scale-1000";

/// The 1,000-node examples of the default selection: what the children run.
const SCALE_1000_TAGS: &str = "not @known-gap and @scale-1000";

/// How many children share the 1,000-node examples.
const SCALE_1000_SHARDS: usize = 2;

/// How many children share each binary-mode pass.
const BINARY_SHARES: usize = 2;

fn main() {
    let split = std::env::args_os().len() == 1;
    let mut cli = Cli::parse();
    let features = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../features"));
    if cli.binary_mode {
        std::process::exit(binary_mode(&cli, &features));
    }
    let mut children = Vec::new();
    if split {
        children.extend(binary_mode_children(None));
        for index in 0..SCALE_1000_SHARDS {
            let shard = Shard {
                index,
                count: SCALE_1000_SHARDS,
            };
            children.push(ChildRun::start(
                format!(
                    "the @scale-1000 examples, share {shard} (`-- --tags \"{SCALE_1000_TAGS}\" --shard {shard}`)"
                ),
                vec![
                    "--tags".into(),
                    SCALE_1000_TAGS.into(),
                    "--shard".into(),
                    shard.to_string(),
                ],
            ));
        }
        cli.run.tags = Some(HERE_TAGS.to_string());
    }
    let mut code = match runner::run(&cli.run, &[features]) {
        Ok(s) => runner::test_result(&s, "conformance scenarios"),
        Err(e) => {
            eprintln!("conformance: {e}");
            2
        }
    };
    for child in children {
        code = code.max(child.finish("conformance"));
    }
    std::process::exit(code);
}

/// Binary mode: one share of one pass, or (without `--shard`) every
/// share of both passes in children.
fn binary_mode(cli: &Cli, features: &std::path::Path) -> i32 {
    let Some(shard) = cli.run.shard else {
        let children = binary_mode_children(Some(cli.cluster_api_pass));
        return children
            .into_iter()
            .map(|c| c.finish("conformance"))
            .max()
            .unwrap_or(0);
    };
    let binary = match conformance::binary::sibling_autoscaler() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("conformance: binary mode: {e}");
            return 2;
        }
    };
    let (cloud_provider, tags, what) = pass(cli.cluster_api_pass);
    let args = RunArgs {
        tags: Some(tags.into()),
        autoscaler_binary: Some(binary),
        cloud_provider,
        time_scale: 60.0,
        shard: Some(shard),
        ..cli.run.clone()
    };
    match runner::run(&args, &[features.to_path_buf()]) {
        Ok(summary) => runner::test_result(&summary, &format!("{what}, share {shard}")),
        Err(e) => {
            eprintln!("conformance: binary mode: {e}");
            2
        }
    }
}

/// Children running every share of the binary-mode passes (both, or the
/// one asked for).
fn binary_mode_children(only_cluster_api: Option<bool>) -> Vec<ChildRun> {
    let mut children = Vec::new();
    for cluster_api in [false, true] {
        if only_cluster_api.is_some_and(|only| only != cluster_api) {
            continue;
        }
        for index in 0..BINARY_SHARES {
            let shard = Shard {
                index,
                count: BINARY_SHARES,
            };
            let mut args = vec![
                "--binary-mode".to_string(),
                "--shard".to_string(),
                shard.to_string(),
            ];
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
    children
}

/// The node group provider, the tags and the report's name of a
/// binary-mode pass.
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
