//! Runs every feature in `features/` against the in-process autoscaler on
//! the embedded cluster, in virtual time (the same run as `testbed run`,
//! with the same flags after `--`). Undefined steps fail. Prints a
//! `test result:` line with the scenario counts and exits non-zero when a
//! scenario failed.
//!
//! Without arguments (as `cargo test` runs it), the suite's default
//! selection runs on both of the machine's cores: the `@scale-1000` examples (1,000 nodes × 30 pods, most
//! of the work) are split between two child processes of this test
//! (`--shard 0/2` and `--shard 1/2`) while this process runs the rest. The
//! children's reports follow this one's, each with its own `test result:`
//! line. Each run is single-threaded in virtual time, so the split changes
//! no scenario's outcome, only the wall time. With arguments, one process
//! runs what they select (without `--tags`: the default, `not @known-gap`),
//! so flags such as `--cloud-provider` or `--report-dir` apply to all of it.

use std::path::PathBuf;

use clap::Parser;
use conformance::child_run::ChildRun;
use conformance::runner::{self, RunArgs, Shard};

#[derive(Parser)]
#[command(name = "conformance")]
struct Cli {
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

fn main() {
    let split = std::env::args_os().len() == 1;
    let mut cli = Cli::parse();
    let mut children = Vec::new();
    if split {
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
    let features = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../features"));
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
