//! A recording replayed (`--recording`): the shop (`data/shop.json`) as
//! its starting state, then an hour of changes as `testbed record` writes
//! them. The Deployment's scale-up and scale-down and a cordon are made at
//! their times, a pod of the Deployment is left to the simulated
//! controllers, and the recorded autoscaler's node addition and removal
//! are left out and counted. A recording cut mid-line, out of order or of
//! a newer format is refused with the line's number.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use whatif::flags::Flags;
use whatif::recording::FORMAT;
use whatif::report::Report;
use whatif::{WhatIf, WhatIfError};

fn shop() -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/shop.json");
    let list: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the shop")).expect("JSON");
    list["items"].as_array().expect("items").clone()
}

fn find<'a>(items: &'a [Value], kind: &str, name: &str) -> &'a Value {
    items
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("the shop has {kind} {name}"))
}

/// The recording's lines: the shop, then an hour of changes.
fn lines() -> Vec<String> {
    let items = shop();
    let mut lines = vec![json!({"format": FORMAT, "start": "2026-11-30T08:00:00Z"})];
    for o in &items {
        lines.push(json!({"at": 0, "type": "initial", "object": o}));
    }
    let web = find(&items, "Deployment", "web");
    let scaled = |replicas: i64| {
        let mut d = web.clone();
        d["spec"]["replicas"] = json!(replicas);
        d
    };
    let mut new_node = find(&items, "Node", "ip-10-0-1-12").clone();
    new_node["metadata"]["name"] = json!("ip-10-0-1-99");
    let mut cordoned = find(&items, "Node", "ip-10-0-1-13").clone();
    cordoned["spec"]["unschedulable"] = json!(true);
    let mut web_pod = find(&items, "Pod", "web-7d4b9c8f6-a1").clone();
    web_pod["metadata"]["name"] = json!("web-7d4b9c8f6-x9");
    let nightly = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "nightly-29100", "namespace": "shop", "uid": "j-1", "resourceVersion": "77",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": "c-1"}]},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "200m"}}}]}}},
        "status": {"active": 1}});
    lines.extend([
        json!({"at": 600, "type": "modified", "object": scaled(30)}),
        json!({"at": 900.5, "type": "added", "object": new_node}),
        json!({"at": 1200, "type": "added", "object": web_pod}),
        json!({"at": 1500, "type": "modified", "object": cordoned}),
        json!({"at": 1800, "type": "added", "object": nightly}),
        json!({"at": 2400, "type": "modified", "object": scaled(4)}),
        json!({"at": 3000, "type": "deleted", "object": new_node}),
        json!({"at": 3600, "type": "end"}),
    ]);
    lines.iter().map(Value::to_string).collect()
}

fn write(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").expect("written");
    path
}

fn what_if(recording: PathBuf) -> WhatIf {
    WhatIf {
        inputs: Vec::new(),
        kubeconfig: None,
        recording: Some(recording),
        flags: Flags::default(),
        sides: Vec::new(),
        group_label: None,
        duration: std::time::Duration::from_secs(3600),
        seed: 5,
        timeline: Default::default(),
        prices: Default::default(),
        parallel: 1,
        sweep: Vec::new(),
        case: None,
    }
}

fn run(recording: PathBuf) -> Result<Report, WhatIfError> {
    whatif::run(&what_if(recording))
}

#[test]
fn a_recorded_hour_replays_its_workload_changes_and_counts_the_recorded_autoscalers_nodes() {
    let dir = tempfile::tempdir().expect("a directory");
    let report = run(write(dir.path(), "hour.jsonl", &lines())).expect("the recording replays");
    let recorded = report
        .recorded
        .as_ref()
        .expect("the report has the recording");
    assert_eq!((recorded.nodes_added, recorded.nodes_removed), (1, 1));
    assert_eq!(recorded.replayed, 4, "{recorded:?}");
    assert_eq!(recorded.by_controllers.get("Pod"), Some(&1), "{recorded:?}");
    assert!(recorded.complete);
    let steps: Vec<(u64, &str)> = report
        .timeline
        .iter()
        .map(|s| (s.at, s.action.as_str()))
        .collect();
    assert_eq!(
        steps,
        [
            (600, "scale Deployment shop/web to 30"),
            (1500, "cordon Node ip-10-0-1-13"),
            (1800, "create Job shop/nightly-29100"),
            (2400, "scale Deployment shop/web to 4"),
        ]
    );
    // The recording's state: the shop's four nodes, not the recorded 99th.
    let side = &report.sides[0];
    assert_eq!(side.summary.nodes_at_start, 4);
    // Twenty-six more web pods at 10 minutes need new nodes.
    let web_up = side
        .scale_ups
        .iter()
        .find(|s| s.at >= 600 && s.pods.iter().any(|p| p.starts_with("shop/web-")))
        .unwrap_or_else(|| panic!("a scale-up for the web pods: {:#?}", side.scale_ups));
    assert!(web_up.at < 900, "soon after the scale at 600 s: {web_up:?}");
    assert!(
        report
            .markdown()
            .contains("The recorded autoscaler added 1 nodes and removed 1")
    );
}

#[test]
fn a_bad_recording_is_refused_with_its_line() {
    let dir = tempfile::tempdir().expect("a directory");
    let refused = |name: &str, lines: Vec<String>| -> String {
        run(write(dir.path(), name, &lines))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let all = lines();
    let n = all.len();
    // Cut in the middle of the line before the end line.
    let mut cut = all[..n - 1].to_vec();
    let last = cut.pop().expect("a line");
    cut.push(last[..last.len() / 2].to_string());
    let error = refused("cut.jsonl", cut);
    assert!(
        error.contains(&format!("cut.jsonl:{}: cut mid-line", n - 1)),
        "{error}"
    );
    // Out of order: the scale-down before the nightly Job.
    let mut swapped = all.clone();
    swapped.swap(n - 4, n - 3);
    let error = refused("order.jsonl", swapped);
    assert!(
        error.contains(&format!(
            "order.jsonl:{}: at 1800 s is before the line before it (2400 s): out of order",
            n - 2
        )),
        "{error}"
    );
    // A newer format.
    let mut newer = all.clone();
    newer[0] = json!({"format": "testbed.recording/v2"}).to_string();
    let error = refused("newer.jsonl", newer);
    assert!(
        error.contains(
            "newer.jsonl:1: format testbed.recording/v2: this testbed reads testbed.recording/v1"
        ),
        "{error}"
    );
    // Not a recording.
    let error = refused("list.jsonl", vec![json!({"kind": "List"}).to_string()]);
    assert!(error.contains("list.jsonl:1: no \"format\""), "{error}");
    // A change without its object.
    let mut bare = all[..3].to_vec();
    bare.push(json!({"at": 10, "type": "modified"}).to_string());
    let error = refused("bare.jsonl", bare);
    assert!(error.contains("bare.jsonl:4: no object"), "{error}");
}

/// A recorded change to an object a side no longer has (a node its
/// autoscaler removed) is skipped and listed, not a failure of the side.
#[test]
fn a_recorded_change_to_a_node_the_side_removed_is_skipped_and_listed() {
    let dir = tempfile::tempdir().expect("a directory");
    let mut all = lines();
    // No scale-up: the idle third node is removed before its recorded cordon.
    all.retain(|l| !l.contains("\"at\":600,"));
    let report = run(write(dir.path(), "diverged.jsonl", &all)).expect("the recording replays");
    let side = &report.sides[0];
    let removed_at = side
        .nodes
        .iter()
        .find(|n| n.name == "ip-10-0-1-13")
        .and_then(|n| n.removed_at)
        .expect("the third node is removed");
    assert!(removed_at < 1500, "removed at {removed_at} s");
    assert_eq!(side.skipped_steps.len(), 1, "{:?}", side.skipped_steps);
    assert!(
        side.skipped_steps[0].starts_with("1500 s: cordon Node ip-10-0-1-13: "),
        "{:?}",
        side.skipped_steps
    );
    assert!(report.markdown().contains("Recorded changes skipped"));
}

#[test]
fn a_recording_replays_to_the_same_bytes_run_after_run() {
    let dir = tempfile::tempdir().expect("a directory");
    let hour = write(dir.path(), "hour.jsonl", &lines());
    let first = serde_json::to_string(&run(hour.clone()).expect("replays")).expect("serialises");
    for _ in 0..3 {
        let again =
            serde_json::to_string(&run(hour.clone()).expect("replays")).expect("serialises");
        assert_eq!(
            first, again,
            "a second replay of the same recording differs"
        );
    }
}
