//! A sweep run apart. `--emit-job` writes a ConfigMap of the input files
//! and an Indexed Job; the testbed's API server accepts both (a server dry
//! run, then a real create). Each pod's arguments, with the kubelet's
//! expansion of `$(JOB_COMPLETION_INDEX)` and the ConfigMap's files at
//! `/input`, run one case and give that case's side of the sweep run at
//! once; `testbed whatif merge` of the cases' reports is the sweep's
//! report, byte for byte. Bad merges and Jobs are refused with what is
//! wrong.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;

use harness::cluster::Cluster;

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    args: whatif::cli::Args,
}

fn shop() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/shop.json")
        .display()
        .to_string()
}

/// `testbed whatif ARGV...`: its exit status.
fn whatif(argv: &[String]) -> Result<ExitCode, String> {
    use clap::Parser;
    let cli =
        Cli::try_parse_from(std::iter::once("whatif".to_string()).chain(argv.iter().cloned()))
            .map_err(|e| e.to_string())?;
    Ok(whatif::cli::main(cli.args, None))
}

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The sweep of these tests: two cases.
const SWEEP: [&str; 4] = [
    "--for=1h",
    "--seed=7",
    "--sweep",
    "scale-down-unneeded-time=5m,20m",
];

/// The manifest's documents.
fn documents(file: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(file).expect("the manifest is written");
    serde_saphyr::from_multiple(&text).expect("the manifest is YAML")
}

/// `--emit-job` into `dir/job.yaml` with `more` arguments: the documents.
fn emit(dir: &Path, more: &[&str]) -> Result<Vec<Value>, String> {
    let job = dir.join("job.yaml");
    let mut argv = vec![shop()];
    argv.extend(words(&SWEEP));
    argv.extend(words(&["--emit-job", job.to_str().expect("UTF-8")]));
    argv.extend(words(more));
    match whatif(&argv)? {
        ExitCode::SUCCESS => Ok(documents(&job)),
        _ => Err("refused".into()),
    }
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("the manifest has a {kind}: {docs:?}"))
}

#[test]
fn an_emitted_job_runs_the_sweep_case_by_case_and_merges_to_the_same_report() {
    let dir = tempfile::tempdir().expect("a directory");
    let dir = dir.path();
    // The sweep at once.
    let local = dir.join("local");
    let mut argv = vec![shop()];
    argv.extend(words(&SWEEP));
    argv.push(format!("--out={}", local.display()));
    assert_eq!(whatif(&argv), Ok(ExitCode::SUCCESS));
    let at_once = std::fs::read_to_string(local.join("report.json")).expect("a report");

    let docs =
        emit(dir, &["--job-name=shop-sweep", "--parallelism=1"]).expect("the Job is written");
    // The ConfigMap's files, as the pods see them at /input.
    let input = dir.join("input");
    std::fs::create_dir_all(&input).expect("a directory");
    let data = kind(&docs, "ConfigMap")["data"]
        .as_object()
        .expect("the ConfigMap has data");
    assert_eq!(data.keys().collect::<Vec<_>>(), ["shop.json"]);
    for (name, text) in data {
        std::fs::write(input.join(name), text.as_str().expect("text")).expect("written");
    }
    let job = kind(&docs, "Job");
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    assert_eq!(job["spec"]["completions"], 2);
    assert_eq!(job["spec"]["parallelism"], 1);
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "localhost/testbed:dev");
    let args: Vec<String> = container["args"]
        .as_array()
        .expect("arguments")
        .iter()
        .map(|a| a.as_str().expect("a string").to_string())
        .collect();
    assert_eq!(args[0], "whatif");
    // Each pod, as the kubelet starts it: its index expanded, the volumes mounted.
    let results = dir.join("results");
    for index in 0..2 {
        let argv: Vec<String> = args[1..]
            .iter()
            .map(|a| {
                a.replace("$(JOB_COMPLETION_INDEX)", &index.to_string())
                    .replace("/input/", &format!("{}/", input.display()))
                    .replace("/results/", &format!("{}/", results.display()))
            })
            .collect();
        assert_eq!(
            whatif(&argv),
            Ok(ExitCode::SUCCESS),
            "case {index}: {argv:?}"
        );
    }
    // A case alone is that case's side of the sweep.
    let local: Value = serde_json::from_str(&at_once).expect("JSON");
    let case: Value = serde_json::from_str(
        &std::fs::read_to_string(results.join("shop-sweep/case-1/report.json")).expect("a report"),
    )
    .expect("JSON");
    assert_eq!(case["sides"].as_array().map(Vec::len), Some(1));
    assert_eq!(case["sides"][0], local["sides"][1]);
    assert_eq!(case["sweep"]["cases"][0]["index"], 1);
    // The merge is the sweep's report (the pods read the input at /input).
    let as_read_here =
        |report: String| report.replace(&format!("{}/shop.json", input.display()), &shop());
    let merged = whatif::merge::merge(&[results.join("shop-sweep")]).expect("the cases merge");
    let merged = as_read_here(serde_json::to_string_pretty(&merged).expect("JSON"));
    assert!(merged == at_once, "merged:\n{merged}\nat once:\n{at_once}");
    // The command writes the same.
    let out = dir.join("merged");
    let argv = words(&[
        "merge",
        results.join("shop-sweep").to_str().expect("UTF-8"),
        "--out",
        out.to_str().expect("UTF-8"),
    ]);
    assert_eq!(whatif(&argv), Ok(ExitCode::SUCCESS));
    assert!(
        as_read_here(std::fs::read_to_string(out.join("report.json")).expect("written")) == at_once
    );
    assert!(out.join("report.html").is_file());

    // Bad merges.
    let refused = |paths: &[PathBuf]| -> String {
        whatif::merge::merge(paths)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let case0 = results.join("shop-sweep/case-0");
    let case1 = results.join("shop-sweep/case-1");
    assert!(
        refused(std::slice::from_ref(&case0)).contains("1 of 2 cases found; missing: 1"),
        "{}",
        refused(std::slice::from_ref(&case0))
    );
    assert!(refused(&[case0.clone(), case0.clone(), case1.clone()]).contains("case 0 is in both"));
    assert!(
        refused(&[dir.join("local")]).is_empty(),
        "a whole sweep is a merge of its cases"
    );
    let other = dir.join("other");
    let mut argv = vec![input.join("shop.json").display().to_string()];
    argv.extend(words(&[
        "--for=1h",
        "--seed=8",
        "--sweep",
        "scale-down-unneeded-time=5m,20m",
        "--case=1",
    ]));
    argv.push(format!("--out={}", other.display()));
    assert_eq!(whatif(&argv), Ok(ExitCode::SUCCESS));
    assert!(
        refused(&[case0.clone(), other.clone()]).contains("its seed differs"),
        "{}",
        refused(&[case0.clone(), other])
    );
    let garbled = dir.join("garbled.json");
    std::fs::write(&garbled, "{\"schema\": \"testbed.whatif/v1\", \"sides\": [").expect("written");
    assert!(refused(std::slice::from_ref(&garbled)).contains("not a what-if report"));
    let newer = dir.join("newer.json");
    std::fs::write(&newer, "{\"schema\": \"testbed.whatif/v9\"}").expect("written");
    assert!(refused(std::slice::from_ref(&newer)).contains("schema testbed.whatif/v9"));
}

#[test]
fn the_testbed_accepts_the_emitted_job_in_a_dry_run_then_creates_it() {
    let dir = tempfile::tempdir().expect("a directory");
    let docs = emit(dir.path(), &[]).expect("the Job is written");
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
    let dir = dir.path();
    let error = |more: &[&str]| -> String {
        let mut argv = vec![shop()];
        argv.extend(words(&SWEEP));
        argv.extend(words(&[
            "--emit-job",
            dir.join("job.yaml").to_str().expect("UTF-8"),
        ]));
        argv.extend(words(more));
        let cli = {
            use clap::Parser;
            Cli::try_parse_from(std::iter::once("whatif".to_string()).chain(argv))
        };
        let args = match cli {
            Err(e) => return e.to_string(),
            Ok(c) => c.args,
        };
        let what = whatif::cli::request(&args, None).expect("the sweep is accepted");
        whatif::job::manifest(&args, what.sides.len())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(error(&["--job-name=Shop_Sweep"]).contains("\"Shop_Sweep\" is not a Kubernetes name"));
    assert!(error(&["--parallelism=0"]).contains("--parallelism 0"));
    assert!(error(&["--case=1"]).contains("cannot be used with"));
    // Over what a ConfigMap holds.
    let big = dir.join("big.json");
    let padding = "x".repeat(job_limit() + 1);
    std::fs::write(
        &big,
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "big", "namespace": "default"}, "data": {"pad": padding}})
        .to_string(),
    )
    .expect("written");
    let mut argv = vec![shop(), big.display().to_string()];
    argv.extend(words(&SWEEP));
    argv.extend(words(&[
        "--emit-job",
        dir.join("job.yaml").to_str().expect("UTF-8"),
    ]));
    let args = {
        use clap::Parser;
        Cli::try_parse_from(std::iter::once("whatif".to_string()).chain(argv))
            .expect("parsed")
            .args
    };
    let err = whatif::job::manifest(&args, 2)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("give --input-claim CLAIM"), "{err}");
    let with_claim = whatif::cli::Args {
        input_claim: Some("sweep-input".into()),
        ..args
    };
    let manifest = whatif::job::manifest(&with_claim, 2).expect("a claim takes any size");
    assert!(!manifest.contains("kind: ConfigMap"), "{manifest}");
    assert!(manifest.contains("claimName: sweep-input"), "{manifest}");
}

fn job_limit() -> usize {
    harness::indexed_job::CONFIG_MAP_LIMIT
}
