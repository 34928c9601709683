//! The suite's shards beyond one machine. `testbed run --emit-job FILE
//! --shards N` writes a ConfigMap of the feature files and a Kubernetes
//! Indexed Job of N completions: each pod runs `testbed run --shard
//! $(JOB_COMPLETION_INDEX)/N` on an embedded cluster of its own (the
//! kubelet expands the index the Job controller gives it) and writes its
//! reports under `/results/JOB/shard-INDEX` on a shared claim. `testbed
//! run merge` reads the shards' `summary.json` files and writes one
//! `junit.xml`, `cucumber.json` and `summary.json`, the scenarios in file
//! order, as one run of the whole suite would.

use std::path::{Path, PathBuf};

use harness::indexed_job::{INDEX, IndexedJob, JobError, JobInput, RESULTS_DIR, arg};

use super::{RunArgs, Shard, Summary};

/// Where the pods find the feature files.
const FEATURES_DIR: &str = "/features";

/// The Job's settings (`testbed run --emit-job`).
#[derive(Debug, Clone, clap::Args)]
pub struct JobArgs {
    /// Write a Kubernetes Indexed Job that runs the suite in `--shards`
    /// pods, each on an embedded cluster of its own, to FILE (YAML, with a
    /// ConfigMap of the feature files) instead of running it here. Each pod
    /// writes its reports under `/results/JOB/shard-INDEX` on the
    /// `--results-claim` volume; `testbed run merge` collects them.
    #[arg(long, value_name = "FILE")]
    pub emit_job: Option<PathBuf>,
    /// How many pods share the scenarios (`--emit-job`).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub shards: usize,
    /// The Job's name (`--emit-job`).
    #[arg(long, default_value = "conformance", value_name = "NAME")]
    pub job_name: String,
    /// The image the Job's pods run: one whose entrypoint is `testbed`,
    /// holding the `--autoscaler-binary` when one is given.
    #[arg(long, default_value = "localhost/testbed:dev", value_name = "IMAGE")]
    pub image: String,
    /// The PersistentVolumeClaim (ReadWriteMany) the pods write their
    /// reports to.
    #[arg(long, default_value = "conformance-results", value_name = "CLAIM")]
    pub results_claim: String,
}

/// Why a Job could not be written or shards not merged.
#[derive(Debug, thiserror::Error)]
pub enum ShardsError {
    /// A file could not be read.
    #[error("reading {file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// A bad setting.
    #[error("--emit-job: {0}")]
    Job(String),
    /// The Job could not be written.
    #[error("--emit-job: {0}")]
    Manifest(#[from] JobError),
    /// A path holds no summary.
    #[error(transparent)]
    Find(#[from] harness::indexed_job::FindError),
    /// A file that is not a run's summary.
    #[error("{file}: not a testbed run's summary.json: {why}")]
    NotSummary {
        /// The file.
        file: String,
        /// Why.
        why: String,
    },
    /// No path was given.
    #[error("no summary to merge")]
    Empty,
    /// A summary of a run that was not sharded.
    #[error("{0}: a run of the whole suite, not a shard (--shard K/N)")]
    NotShard(String),
    /// Shards of different splits, or one twice.
    #[error("{file}: shard {shard}, but {other} holds shard {other_shard}: not one run's shards")]
    Mixed {
        /// The file.
        file: String,
        /// Its shard.
        shard: Shard,
        /// Another file.
        other: String,
        /// Its shard.
        other_shard: Shard,
    },
    /// Shards missing.
    #[error("{found} of {count} shards found; missing: {missing}")]
    Missing {
        /// Found.
        found: usize,
        /// Of.
        count: usize,
        /// The shards missing.
        missing: String,
    },
}

/// The manifest (multi-document YAML): the ConfigMap of the feature files
/// under `paths` and the Job running `run` in `job.shards` pods.
pub fn manifest(run: &RunArgs, job: &JobArgs, paths: &[PathBuf]) -> Result<String, ShardsError> {
    let bad = |why: String| ShardsError::Job(why);
    if job.shards == 0 {
        return Err(bad("--shards 0: give at least 1".into()));
    }
    if run.cluster != "embedded" {
        return Err(bad(format!(
            "--cluster {}: each pod runs its own embedded cluster",
            run.cluster
        )));
    }
    if run.shard.is_some() {
        return Err(bad(
            "--shard: each pod takes its share from its index".into()
        ));
    }
    Ok(IndexedJob {
        name: job.job_name.clone(),
        app: "testbed-conformance",
        container: "conformance",
        image: job.image.clone(),
        args: container_args(run, job),
        completions: job.shards,
        parallelism: job.shards,
        // A shard is a test run: its failures are in its report, not retried.
        retries_per_index: 0,
        // The embedded cluster and the autoscaler: the 1,000-node examples
        // need a few GiB.
        memory: "4Gi",
        input: JobInput::Files {
            files: feature_files(paths)?,
            suffix: "features",
            hint: "",
        },
        input_dir: FEATURES_DIR,
        results_claim: job.results_claim.clone(),
    }
    .manifest()?)
}

/// The `.feature` files under `paths` (files, or directories read one
/// level deep), sorted.
fn feature_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ShardsError> {
    let mut out = Vec::new();
    for p in paths {
        if !p.is_dir() {
            out.push(p.clone());
            continue;
        }
        let read = std::fs::read_dir(p).map_err(|source| ShardsError::Read {
            file: p.display().to_string(),
            source,
        })?;
        let mut found: Vec<PathBuf> = read
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| f.extension().is_some_and(|x| x == "feature"))
            .collect();
        found.sort();
        out.extend(found);
    }
    if out.is_empty() {
        return Err(ShardsError::Job("no feature file to run".into()));
    }
    Ok(out)
}

/// The pod's `testbed` arguments: the run's own options, the features at
/// `/features`, the share and the reports' place from the index.
fn container_args(run: &RunArgs, job: &JobArgs) -> Vec<String> {
    let mut out = vec!["run".to_string(), FEATURES_DIR.to_string()];
    out.extend(run.tags.iter().map(|t| arg("tags", t)));
    if let Some(b) = &run.autoscaler_binary {
        out.push(arg("autoscaler-binary", &b.display().to_string()));
        out.push(arg("time-scale", &run.time_scale.to_string()));
        out.push(arg(
            "max-example-minutes",
            &run.max_example_minutes.to_string(),
        ));
    }
    out.extend(run.autoscaler_args.iter().map(|a| arg("autoscaler-arg", a)));
    out.push(arg("cloud-provider", run.cloud_provider.flag()));
    if run.verbose {
        out.push("--verbose".into());
    }
    out.push(format!("--shard={INDEX}/{}", job.shards));
    out.push(format!(
        "--report-dir={RESULTS_DIR}/{}/shard-{INDEX}",
        job.job_name
    ));
    out
}

fn read(file: &Path) -> Result<Summary, ShardsError> {
    let text = std::fs::read_to_string(file).map_err(|source| ShardsError::Read {
        file: file.display().to_string(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| ShardsError::NotSummary {
        file: file.display().to_string(),
        why: e.to_string(),
    })
}

/// One summary of the shards' summaries under `paths`: every shard of
/// one split, each once; the scenarios in file order, the lists without
/// repeats, the wall time the longest shard's (they run at once).
pub fn merge(paths: &[PathBuf]) -> Result<Summary, ShardsError> {
    let files = harness::indexed_job::reports_under(paths, "summary.json")?;
    let mut shards: Vec<(String, Shard, Summary)> = Vec::new();
    for f in &files {
        let summary = read(f)?;
        let name = f.display().to_string();
        let shard = summary
            .shard
            .ok_or_else(|| ShardsError::NotShard(name.clone()))?;
        if let Some((other, other_shard, _)) = shards
            .iter()
            .find(|(_, s, _)| s.count != shard.count || s.index == shard.index)
        {
            return Err(ShardsError::Mixed {
                file: name,
                shard,
                other: other.clone(),
                other_shard: *other_shard,
            });
        }
        shards.push((name, shard, summary));
    }
    let count = shards.first().map_or(0, |(_, s, _)| s.count);
    if count == 0 {
        return Err(ShardsError::Empty);
    }
    let missing: Vec<String> = (0..count)
        .filter(|i| !shards.iter().any(|(_, s, _)| s.index == *i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        return Err(ShardsError::Missing {
            found: shards.len(),
            count,
            missing: missing.join(", "),
        });
    }
    let mut merged = Summary::default();
    let add = |to: &mut Vec<String>, from: Vec<String>| {
        for x in from {
            if !to.contains(&x) {
                to.push(x);
            }
        }
    };
    for (_, _, s) in shards {
        merged.scenarios.extend(s.scenarios);
        add(&mut merged.parse_errors, s.parse_errors);
        add(&mut merged.filtered_out, s.filtered_out);
        add(&mut merged.left_out, s.left_out);
        for skipped in s.skipped {
            if !merged.skipped.contains(&skipped) {
                merged.skipped.push(skipped);
            }
        }
        merged.wall = merged.wall.max(s.wall);
    }
    merged
        .scenarios
        .sort_by(|a, b| (a.file.as_str(), a.line).cmp(&(b.file.as_str(), b.line)));
    Ok(merged)
}
