//! The suite with node groups as Cluster API MachineDeployments, against
//! the in-process autoscaler with `--cloud-provider=clusterapi`, in virtual
//! time: the same run as `testbed run --cloud-provider clusterapi`. The
//! scenarios tagged `@kwok-only` (the kwok provider's fault injection) are
//! left out, and, without `--tags`, `features/scalability.feature` too
//! (`@scale`: minutes in a debug build; the `conformance` target runs its
//! 100-node examples with kwok node groups).

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
            "SKIPPED: features/scalability.feature (@scale) with Cluster API node groups (minutes \
             in a debug build; the conformance target runs it with kwok node groups); run it with \
             `testbed run --cloud-provider clusterapi features/scalability.feature`"
        );
        cli.run.tags = Some(format!("{} and not @scale", runner::CAPI_DEFAULT_TAGS));
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
