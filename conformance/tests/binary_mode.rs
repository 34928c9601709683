//! The scenarios tagged `@binary` in binary mode: our `cluster-autoscaler`
//! executable started against the embedded API server over TLS, in real
//! time at a scale of 60 (a scenario minute is one real second). The
//! whole suite runs this way with `testbed run --autoscaler-binary PATH`;
//! CI runs the tagged subset to keep its time down.
//!
//! The executable is the one `cargo test --workspace` builds next to this
//! test (`target/<profile>/cluster-autoscaler`).

use std::path::PathBuf;

use conformance::runner::{self, RunArgs};

fn main() {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent().map(|d| d.join("cluster-autoscaler")))
        .filter(|p| p.is_file());
    let Some(binary) = binary else {
        eprintln!(
            "binary_mode: target/<profile>/cluster-autoscaler is missing; build it first \
             (cargo build -p autoscaler --bin cluster-autoscaler, or run cargo test --workspace)"
        );
        std::process::exit(2);
    };
    let args = RunArgs {
        paths: Vec::new(),
        tags: Some("@binary and not @known-gap".into()),
        autoscaler_binary: Some(binary),
        autoscaler_args: Vec::new(),
        time_scale: 60.0,
        report_dir: None,
        verbose: false,
    };
    let features = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../features"));
    let summary = match runner::run(&args, &[features]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("binary_mode: {e}");
            std::process::exit(2);
        }
    };
    std::process::exit(runner::test_result(
        &summary,
        "binary-mode conformance scenarios",
    ));
}
