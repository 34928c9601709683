//! The suite's shards as a Kubernetes Job. `testbed run --emit-job`
//! writes a ConfigMap of the feature files and an Indexed Job that the
//! testbed's API server accepts (a server dry run, then a real create).
//! Each pod's arguments, with the kubelet's expansion of
//! `$(JOB_COMPLETION_INDEX)` and the ConfigMap's files at `/features`, run
//! one shard; `testbed run merge` of the shards' reports holds every
//! scenario of the whole run once, in file order, and fails as it would.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use harness::cluster::Cluster;

fn testbed(args: &[String]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_testbed"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("testbed runs")
}

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The feature files of these tests: four scenarios.
const FEATURES: [&str; 2] = [
    "../features/pdb.feature",
    "../features/user_example.feature",
];

fn emit(dir: &Path, more: &[&str]) -> (std::process::Output, Vec<Value>) {
    let file = dir.join("job.yaml");
    let mut argv = words(&["run"]);
    argv.extend(words(&FEATURES));
    argv.extend(words(&["--emit-job", file.to_str().expect("UTF-8")]));
    argv.extend(words(more));
    let out = testbed(&argv);
    let docs = std::fs::read_to_string(&file)
        .ok()
        .map(|t| serde_saphyr::from_multiple(&t).expect("YAML"))
        .unwrap_or_default();
    (out, docs)
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("the manifest has a {kind}: {docs:?}"))
}

fn summary(file: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(file).expect("a summary")).expect("JSON")
}

fn names(summary: &Value) -> Vec<String> {
    summary["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .map(|s| {
            let file = s["file"].as_str().expect("a file");
            let name = Path::new(file).file_name().expect("a file name");
            format!("{}:{}", name.to_string_lossy(), s["line"])
        })
        .collect()
}

#[test]
fn an_emitted_job_runs_the_suite_shard_by_shard_and_merges_to_the_whole_run() {
    let dir = tempfile::tempdir().expect("a directory");
    let dir = dir.path();
    let (out, docs) = emit(dir, &["--job-name=ca-1-31", "--shards=2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let features = dir.join("features");
    std::fs::create_dir_all(&features).expect("a directory");
    let data = kind(&docs, "ConfigMap")["data"].as_object().expect("data");
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["pdb.feature", "user_example.feature"]
    );
    for (name, text) in data {
        std::fs::write(features.join(name), text.as_str().expect("text")).expect("written");
    }
    let job = kind(&docs, "Job");
    assert_eq!(job["spec"]["completions"], 2);
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    let args: Vec<String> = job["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("arguments")
        .iter()
        .map(|a| a.as_str().expect("a string").to_string())
        .collect();
    let results = dir.join("results");
    for index in 0..2 {
        // The pod as the kubelet starts it.
        let argv: Vec<String> = args
            .iter()
            .map(|a| {
                a.replace("$(JOB_COMPLETION_INDEX)", &index.to_string())
                    .replace("/features", &features.display().to_string())
                    .replace("/results/", &format!("{}/", results.display()))
            })
            .collect();
        let out = testbed(&argv);
        assert!(
            out.status.success(),
            "shard {index}: {argv:?}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let shard = |i: usize| summary(&results.join(format!("ca-1-31/shard-{i}/summary.json")));
    let (first, second) = (names(&shard(0)), names(&shard(1)));
    assert!(
        !first.is_empty() && !second.is_empty(),
        "{first:?} {second:?}"
    );
    assert!(
        first.iter().all(|n| !second.contains(n)),
        "no scenario runs twice"
    );

    // The whole run, for comparison.
    let whole = dir.join("whole");
    let mut argv = words(&["run"]);
    argv.extend(words(&FEATURES));
    argv.push(format!("--report-dir={}", whole.display()));
    assert!(testbed(&argv).status.success());

    let merged = dir.join("merged");
    let out = testbed(&words(&[
        "run",
        "merge",
        results.join("ca-1-31").to_str().expect("UTF-8"),
        "--report-dir",
        merged.to_str().expect("UTF-8"),
    ]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut expected = names(&summary(&whole.join("summary.json")));
    expected.sort();
    let got = names(&summary(&merged.join("summary.json")));
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(got, expected, "every scenario once, in file order");
    let junit = std::fs::read_to_string(merged.join("junit.xml")).expect("JUnit");
    assert_eq!(junit.matches("<testcase ").count(), 4, "{junit}");

    // Bad merges.
    let refused = |paths: &[&Path]| -> String {
        let mut argv = words(&["run", "merge"]);
        argv.extend(paths.iter().map(|p| p.display().to_string()));
        argv.push(format!("--report-dir={}", dir.join("bad").display()));
        let out = testbed(&argv);
        assert_eq!(out.status.code(), Some(2));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let shard0 = results.join("ca-1-31/shard-0");
    assert!(refused(&[&shard0]).contains("1 of 2 shards found; missing: 1/2"));
    assert!(refused(&[&shard0, &shard0]).contains("not one run's shards"));
    assert!(refused(&[&whole]).contains("a run of the whole suite, not a shard"));
}

#[test]
fn the_testbed_accepts_the_emitted_job_in_a_dry_run_then_creates_it() {
    let dir = tempfile::tempdir().expect("a directory");
    let (out, docs) = emit(dir.path(), &["--shards=2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let cluster = Cluster::builder().start().await.expect("a cluster");
        let accepted = harness::indexed_job::accepted(&cluster, &docs).await;
        assert_eq!(accepted, Ok(()));
    });
}

#[test]
fn bad_jobs_are_refused_with_what_is_wrong() {
    let dir = tempfile::tempdir().expect("a directory");
    let refused = |more: &[&str]| -> String {
        let (out, _) = emit(dir.path(), more);
        assert_eq!(out.status.code(), Some(2), "{more:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    for (more, message) in [
        ("--shards=0", "--shards 0: give at least 1"),
        ("--job-name=CA_1.31", "\"CA_1.31\" is not a Kubernetes name"),
        ("--shard=0/2", "each pod takes its share from its index"),
        ("--cluster=kind", "each pod runs its own embedded cluster"),
    ] {
        let error = refused(&[more]);
        assert!(error.contains(message), "{more}: {error}");
    }
}
