//! `--emit-job`: a sweep as a Kubernetes Indexed Job
//! ([`harness::indexed_job`]), for a sweep larger than one machine should
//! run. One completion per case: each pod's `JOB_COMPLETION_INDEX` is its
//! `--case`, so it runs one case with the same input, flags and seed as
//! the sweep run at once and writes its report under
//! `/results/JOB/case-INDEX` on a shared claim. `testbed whatif merge`
//! collects them into the sweep's table.
//!
//! The input files (and the timeline) go in a ConfigMap mounted at
//! `/input`, or, over the 1 MiB a ConfigMap holds, on a claim the operator
//! fills (`--input-claim`).

use std::path::PathBuf;

use harness::indexed_job::{INDEX, IndexedJob, JobError, JobInput, RESULTS_DIR, arg, at};

use crate::cli::Args;

/// Where the pods find the input files.
const INPUT_DIR: &str = "/input";

/// The manifest (multi-document YAML): the input's ConfigMap (unless
/// `--input-claim`) and the Job running `cases` cases.
pub fn manifest(args: &Args, cases: usize) -> Result<String, JobError> {
    let mut files: Vec<PathBuf> = args.inputs.clone();
    files.extend(args.recording.clone());
    files.extend(args.timeline.clone());
    let names = harness::indexed_job::file_names(&files)?;
    IndexedJob {
        name: args.job_name.clone(),
        app: "testbed-whatif",
        container: "whatif",
        image: args.image.clone(),
        args: container_args(args, &names),
        completions: cases,
        parallelism: args.parallelism.unwrap_or(cases),
        // A case that failed (a node lost) is tried once more.
        retries_per_index: 1,
        // One case is one thread; a 1,000-node case peaks near 1.5 GiB.
        memory: "2Gi",
        input: match &args.input_claim {
            Some(claim) => JobInput::Claim(claim.clone()),
            None => JobInput::Files {
                files,
                suffix: "input",
                hint: ": copy them to a volume and give --input-claim CLAIM",
            },
        },
        input_dir: INPUT_DIR,
        results_claim: args.results_claim.clone(),
    }
    .manifest()
}

/// The pod's `testbed` arguments: the sweep as given, the files at
/// `/input`, the case and the report's place from the completion index.
fn container_args(args: &Args, names: &[String]) -> Vec<String> {
    let mut out = vec!["whatif".to_string()];
    out.extend(
        names
            .iter()
            .take(args.inputs.len())
            .map(|n| at(INPUT_DIR, n)),
    );
    out.extend(args.sweeps.iter().map(|s| arg("sweep", s)));
    out.extend(args.flags.iter().map(|f| arg("flags", f)));
    out.extend(args.nodes.iter().map(|n| arg("nodes", n)));
    out.extend(args.group_label.iter().map(|l| arg("group-label", l)));
    out.push(arg("for", &format!("{}s", args.duration.as_secs())));
    // The names after the inputs': the recording's, then the timeline's.
    let mut rest = names.iter().skip(args.inputs.len());
    if let (Some(_), Some(name)) = (&args.recording, rest.next()) {
        out.push(arg("recording", &at(INPUT_DIR, name)));
    }
    if let (Some(_), Some(name)) = (&args.timeline, rest.next()) {
        out.push(arg("timeline", &at(INPUT_DIR, name)));
    }
    out.extend(args.prices.iter().map(|p| arg("price", p)));
    out.push(arg("seed", &args.seed.to_string()));
    out.push(format!("--case={INDEX}"));
    out.push(format!(
        "--out={RESULTS_DIR}/{}/case-{INDEX}",
        args.job_name
    ));
    out
}
