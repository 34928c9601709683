//! The container backend for real: our testbed's image (`TESTBED_IMAGE`,
//! default `localhost/testbed:dev`, which `.ci/run` builds from the
//! `testbed` binary with `deploy/image-from-binary.sh`) started through the
//! Docker API of Docker or podman, its kubeconfig read out of the container,
//! and the `@binary` scenarios of the scale-up and status features run
//! against it with our `cluster-autoscaler` binary. Then no container of
//! this process may remain.
//!
//! Without an engine or without the image it prints SKIPPED and why. The
//! kwok and kind backends are the same code with another image; they run
//! where those images can be pulled (`testbed run --cluster kwok|kind`).

use std::path::PathBuf;

use conformance::runner::{self, RunArgs};
use conformance::world::Provider;
use harness::container::Engine;

fn main() {
    let binary = match conformance::binary::sibling_autoscaler() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("container_backend: {e}");
            std::process::exit(2);
        }
    };
    let image = std::env::var("TESTBED_IMAGE")
        .unwrap_or_else(|_| harness::backend::DEFAULT_TESTBED_IMAGE.to_string());
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("container_backend: starting a runtime: {e}");
            std::process::exit(2);
        }
    };
    let engine = match runtime.block_on(Engine::discover()) {
        Ok(engine) => engine,
        Err(e) => {
            println!("SKIPPED: container backend test: {e}");
            return;
        }
    };
    match runtime.block_on(engine.has_image(&image)) {
        Ok(true) => {}
        Ok(false) => {
            println!(
                "SKIPPED: container backend test: image {image} is not in the engine at {} \
                 (build it: deploy/image-from-binary.sh target/debug/testbed {image})",
                engine.address
            );
            return;
        }
        Err(e) => {
            eprintln!("container_backend: {e}");
            std::process::exit(2);
        }
    }
    println!("Container engine: {}; image {image}", engine.address);
    let features = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../features"));
    let args = RunArgs {
        paths: vec![
            features.join("scale_up.feature"),
            features.join("status.feature"),
        ],
        tags: Some("@binary and not @known-gap".into()),
        autoscaler_binary: Some(binary),
        autoscaler_args: Vec::new(),
        cloud_provider: Provider::Kwok,
        time_scale: 60.0,
        max_example_minutes: conformance::runner::pace::DEFAULT_MAX_EXAMPLE_MINUTES,
        cluster: "testbed".into(),
        cluster_image: Some(image),
        report_dir: None,
        verbose: false,
        shard: None,
    };
    let summary = match runner::run(&args, &[]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("container_backend: {e}");
            std::process::exit(2);
        }
    };
    let mut code = runner::test_result(&summary, "scenarios on the testbed in a container");
    let left = runtime
        .block_on(engine.containers_of(std::process::id()))
        .unwrap_or_else(|e| vec![format!("(listing failed: {e})")]);
    if !left.is_empty() {
        eprintln!("container_backend: containers left behind: {left:?}");
        code = code.max(1);
    }
    std::process::exit(code);
}
