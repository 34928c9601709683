//! Runs every feature in `features/` against the in-process autoscaler on
//! the embedded cluster, in virtual time, one scenario at a time (the same
//! run as `testbed run`, with the same flags after `--`). Undefined steps
//! fail. Prints a `test result:` line with the scenario counts and exits
//! non-zero when a scenario failed.
//!
//! Without `--tags`, the `@scale-1000` examples (1,000 nodes × 30 pods)
//! are left out with a printed reason: in a debug build each takes many
//! minutes. `testbed run` (release) runs them; so does
//! `-- --tags "not @known-gap"` here.

use std::path::PathBuf;

use clap::Parser;
use conformance::runner::{self, RunArgs};

#[derive(Parser)]
#[command(name = "conformance")]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

/// The tag filter without `--tags`: the suite's default, less the
/// 1,000-node examples.
const TEST_TAGS: &str = "not @known-gap and not @scale-1000";

fn main() {
    let mut cli = Cli::parse();
    if cli.run.tags.is_none() {
        println!(
            "SKIPPED: the @scale-1000 examples of features/scalability.feature (1,000 nodes x 30 pods \
             take minutes each in a debug build); run them with \
             `cargo run --release -p conformance --bin testbed -- run features/scalability.feature`"
        );
        cli.run.tags = Some(TEST_TAGS.to_string());
    }
    let features = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../features"));
    let summary = match runner::run(&cli.run, &[features]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("conformance: {e}");
            std::process::exit(2);
        }
    };
    std::process::exit(runner::test_result(&summary, "conformance scenarios"));
}
