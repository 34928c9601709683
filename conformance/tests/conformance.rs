//! Runs every feature in `features/` against the in-process autoscaler on
//! the embedded cluster, in virtual time, one scenario at a time (the same
//! run as `testbed run`, with the same flags after `--`). Undefined steps
//! fail. Prints a `test result:` line with the scenario counts and exits
//! non-zero when a scenario failed.

use std::path::PathBuf;

use clap::Parser;
use conformance::runner::{self, RunArgs};

#[derive(Parser)]
#[command(name = "conformance")]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

fn main() {
    let cli = Cli::parse();
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
