//! The `cluster-autoscaler` binary's command line, with no cluster: bad
//! flags are refused before anything starts, and `--help` stays as compact
//! as upstream's. (Its runs against a cluster are in
//! `conformance/tests/checks/autoscaler_binary.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn fails(args: &[&str], message: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(message), "{args:?}: {stderr}");
}

#[test]
fn bad_flags_exit_before_starting() {
    fails(
        &["--cloud-provider=kwok", "--scan-interval=10"],
        "--scan-interval",
    );
    fails(
        &["--cloud-provider=kwok", "--nodes=3:1:g"],
        "invalid value for --nodes: \"3:1:g\": max 1 is below min 3",
    );
    fails(
        &["--cloud-provider=kwok", "--expander=fastest"],
        "Expander fastest not supported",
    );
    fails(
        &["--cloud-provider=gce"],
        "--cloud-provider=gce: not supported by this autoscaler (implemented: kwok, clusterapi, aws)",
    );
    fails(
        &["--cloud-provider=nimbus"],
        "Unknown cloud provider: nimbus",
    );
    fails(
        &["--cloud-provider=kwok", "--expander=price"],
        "no pricing model",
    );
}

fn help() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// Upstream's `--help` has about 2 lines a flag (CA 1.29.5: 255 lines for
/// 126 flags); ours, in a pipe, at most 1.8, and no line over 100 columns.
#[test]
fn help_in_a_pipe_is_as_compact_as_upstreams() {
    let text = help();
    let long: Vec<&str> = text.lines().filter(|l| l.len() > 100).collect();
    assert!(long.is_empty(), "lines over 100 columns: {long:#?}");
    let flags = text
        .lines()
        .filter(|l| l.trim_start().starts_with("--") || l.trim_start().starts_with("-h,"))
        .count();
    let lines = text.lines().count();
    assert!(flags > 150, "{flags} flags in:\n{text}");
    assert!(
        lines * 5 <= flags * 9,
        "{lines} lines for {flags} flags, more than 1.8 a flag"
    );
}

#[test]
fn a_scheduler_configuration_the_framework_cannot_run_stops_the_start() {
    let dir = std::env::temp_dir().join(format!("ca-scheduler-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        format!("--scheduler-config-file={}", path.display())
    };
    const HEAD: &str =
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
    let two = write(
        "two.yaml",
        &format!("{HEAD}profiles:\n- schedulerName: a\n- schedulerName: b\n"),
    );
    fails(
        &["--cloud-provider=kwok", &two],
        "expected one scheduler profile only (found 2 profiles)",
    );
    let custom = write(
        "custom.yaml",
        &format!(
            "{HEAD}profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: MyPlugin\n"
        ),
    );
    fails(
        &["--cloud-provider=kwok", &custom],
        "plugin \"MyPlugin\" does not exist",
    );
    fails(
        &[
            "--cloud-provider=kwok",
            "--scheduler-config-file=/nonexistent.yaml",
        ],
        "couldn't load scheduler config",
    );
    let _ = std::fs::remove_dir_all(&dir);
}
