//! The suite with node groups as Cluster API MachineDeployments, against
//! the in-process autoscaler with `--cloud-provider=clusterapi`, in virtual
//! time: the same run as `testbed run --cloud-provider clusterapi`. The
//! scenarios tagged `@kwok-only` (the kwok provider's fault injection) are
//! left out, and, without `--tags`, the 1,000-node examples of
//! `features/scalability.feature` too (`@scale-1000`: about 60 s each in a
//! debug build, 9 minutes in all; the `conformance` target runs them with
//! kwok node groups). Its 100-node examples run here (about 36 s).

use std::path::PathBuf;

use clap::Parser;
use conformance::runner::{self, RunArgs};
use conformance::world::Provider;

#[derive(Parser)]
#[command(name = "clusterapi_mode")]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

fn main() {
    let mut cli = Cli::parse();
    cli.run.cloud_provider = Provider::ClusterApi;
    if cli.run.tags.is_none() {
        println!(
            "SKIPPED: the @scale-1000 examples of features/scalability.feature with Cluster API \
             node groups (about 9 minutes in a debug build; the conformance target runs them with \
             kwok node groups); run them with `testbed run --cloud-provider clusterapi --tags \
             @scale-1000 features/scalability.feature`"
        );
        cli.run.tags = Some(format!("{} and not @scale-1000", runner::CAPI_DEFAULT_TAGS));
    }
    let features = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../features"));
    let summary = match runner::run(&cli.run, &[features]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("clusterapi_mode: {e}");
            std::process::exit(2);
        }
    };
    std::process::exit(runner::test_result(&summary, "Cluster API scenarios"));
}
