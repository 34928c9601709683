//! The `kwok` binary's command line, with no cluster: bad start-up
//! settings are refused before it connects. (Its runs against an API
//! server are in `conformance/tests/checks/kwok_binary.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn fails_with(args: &[&str], message: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_kwok"))
        .args(args)
        .env("HOME", "/nonexistent")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} should fail");
    assert!(stderr.contains(message), "{args:?}: {stderr}");
}

#[test]
fn bad_start_up_settings_are_refused_before_connecting() {
    fails_with(&[], "no nodes are managed");
    fails_with(
        &["--manage-all-nodes", "--manage-single-node=n1"],
        "conflicting node selection",
    );
    fails_with(
        &["--manage-all-nodes", "--cidr=10.0.0.0/99"],
        "--cidr=10.0.0.0/99: not an IPv4 CIDR",
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("stages.yaml");
    std::fs::write(&config, kwok::defaults::FAST_STAGES).unwrap();
    fails_with(
        &[
            "--manage-all-nodes",
            "--enable-crds=Stage",
            "--config",
            config.to_str().unwrap(),
        ],
        "use one or the other",
    );
}
