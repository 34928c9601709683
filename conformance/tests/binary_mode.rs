//! The scenarios tagged `@binary` in binary mode: our `cluster-autoscaler`
//! executable started against the embedded API server over TLS, in real
//! time at a scale of 60 (a scenario minute is one real second). The
//! whole suite runs this way with `testbed run --autoscaler-binary PATH`;
//! CI runs the tagged subset to keep its time down.
//!
//! Then it runs the same subset again with node groups as Cluster API
//! MachineDeployments and the binary started with
//! `--cloud-provider=clusterapi` (less the `@kwok-only` scenarios), in a
//! child process of its own: the node group provider is set once per
//! process.
//!
//! The executable is the one `cargo test --workspace` builds next to this
//! test (`target/<profile>/cluster-autoscaler`).

use std::path::PathBuf;

use conformance::runner::{self, RunArgs};
use conformance::world::Provider;

/// The argument that makes this process the Cluster API pass.
const CLUSTER_API_PASS: &str = "--cluster-api-pass";

fn main() {
    let binary = match conformance::binary::sibling_autoscaler() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("binary_mode: {e}");
            std::process::exit(2);
        }
    };
    let cluster_api = std::env::args().any(|a| a == CLUSTER_API_PASS);
    let (cloud_provider, tags, what) = if cluster_api {
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
    };
    let args = RunArgs {
        paths: Vec::new(),
        tags: Some(tags.into()),
        autoscaler_binary: Some(binary),
        autoscaler_args: Vec::new(),
        cloud_provider,
        time_scale: 60.0,
        cluster: "embedded".into(),
        cluster_image: None,
        report_dir: None,
        verbose: false,
        shard: None,
    };
    let features = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../features"));
    let summary = match runner::run(&args, &[features]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("binary_mode: {e}");
            std::process::exit(2);
        }
    };
    let code = runner::test_result(&summary, what);
    if cluster_api {
        std::process::exit(code);
    }
    let pass = std::env::current_exe().and_then(|exe| {
        std::process::Command::new(exe)
            .arg(CLUSTER_API_PASS)
            .status()
    });
    let cluster_api_code = match pass {
        Ok(status) => status.code().unwrap_or(1),
        Err(e) => {
            eprintln!("binary_mode: starting the Cluster API pass: {e}");
            2
        }
    };
    std::process::exit(code.max(cluster_api_code));
}
