//! The suite's scale-up, scale-down and node group size scenarios with node
//! groups as Auto Scaling groups of an AWS emulator (moto's server mode,
//! started by the run), against the in-process autoscaler with
//! `--cloud-provider=aws`, in virtual time: the same run as `testbed run
//! --cloud-provider aws features/scale_up.feature
//! features/scale_down.feature features/node_group_size.feature`. Without
//! moto (`pip install 'moto[server]'`), or built without the `aws` feature
//! (`cargo test -p conformance --features aws --test aws_mode`), it prints
//! SKIPPED and why.

#[cfg(not(feature = "aws"))]
fn main() {
    println!(
        "SKIPPED: the suite against the aws provider: {}",
        conformance::aws::NOT_BUILT
    );
}

#[cfg(feature = "aws")]
use std::path::PathBuf;

#[cfg(feature = "aws")]
use clap::Parser;
#[cfg(feature = "aws")]
use conformance::runner::{self, RunArgs};
#[cfg(feature = "aws")]
use conformance::world::Provider;

#[cfg(feature = "aws")]
#[derive(Parser)]
#[command(name = "aws_mode")]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

#[cfg(feature = "aws")]
fn main() {
    let mut cli = Cli::parse();
    cli.run.cloud_provider = Provider::Aws;
    let probe = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|rt| {
            rt.block_on(harness::aws::Emulator::start())
                .map_err(|e| e.to_string())
        });
    if let Err(e) = probe {
        println!("SKIPPED: the suite against the aws provider: {e}");
        return;
    }
    let features = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../features"));
    let paths = if cli.run.paths.is_empty() {
        ["scale_up", "scale_down", "node_group_size"]
            .iter()
            .map(|f| features.join(format!("{f}.feature")))
            .collect()
    } else {
        Vec::new()
    };
    let summary = match runner::run(&cli.run, &paths) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("aws_mode: {e}");
            std::process::exit(2);
        }
    };
    std::process::exit(runner::test_result(&summary, "AWS scenarios"));
}
