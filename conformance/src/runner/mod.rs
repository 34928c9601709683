//! Running the suite: the options shared by `testbed run` and the
//! `conformance` test target, the readable report printed while the
//! scenarios run (a line per scenario, the failing step and its message, a
//! summary table at the end), and the JUnit XML and cucumber JSON files.
//!
//! The parts: the records of a run ([`records`]), the progress lines as
//! scenarios finish (`progress.rs`, the cucumber writer), and the report
//! files and summary ([`report`]).
//!
//! Scenarios run one at a time. A step that fails, panics, is ambiguous or
//! matches no step definition fails its scenario; so does a failing hook or
//! a feature file that does not parse.

pub mod pace;
mod progress;
pub mod records;
pub mod report;
pub mod shards;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cucumber::event;
use cucumber::gherkin::tagexpr::TagOperation;
use cucumber::tag::Ext as _;
use cucumber::{World as _, WriterExt as _, cli};

use self::progress::{Report, State};
pub use self::records::{ScenarioRecord, Status, StepRecord, Summary};
pub use self::report::{
    ReportError, cucumber_json, format_duration, junit, table, test_result, write_reports,
};
use crate::binary::{BinaryInfo, ProbeError};
use crate::steps::EXTENSION_TAG;
use crate::world::{self, CaWorld, Provider, UnderTest};

/// The tag filter without `--tags`.
pub const DEFAULT_TAGS: &str = "not @known-gap";

/// The tag filter without `--tags` with `--cloud-provider clusterapi`: the
/// suite less the scenarios that need the kwok provider
/// (`@kwok-only`: its fault injection, or instances that are Nodes).
pub const CAPI_DEFAULT_TAGS: &str = "not @known-gap and not @kwok-only";

/// The tag filter without `--tags` with `--cloud-provider aws`: as
/// [`CAPI_DEFAULT_TAGS`], less the scenarios that delete a Node whose
/// instance, still running, registers it again, or that time a scale-up
/// to the second by its Nodes' creation, which on AWS comes when the
/// instance registers (`@not-aws`).
pub const AWS_DEFAULT_TAGS: &str = "not @known-gap and not @kwok-only and not @not-aws";

/// What to run and how (the flags of `testbed run`; the test target takes
/// the same ones after `--`).
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Feature files or directories [default: the suite's `features/`].
    pub paths: Vec<PathBuf>,
    /// Run only the scenarios whose tags (with their feature's) match this
    /// expression, e.g. `@binary and not @slow` [default: `not @known-gap`:
    /// scenarios that show a known gap of our autoscaler are listed, not
    /// run; so are the examples over 100 nodes (`@scale-1000`), with the
    /// `--tags` that runs them].
    #[arg(long)]
    pub tags: Option<String>,
    /// Test this CA-compatible executable (started with
    /// `--cloud-provider=kwok` against the embedded API server) instead of
    /// the in-process autoscaler.
    #[arg(long, value_name = "PATH")]
    pub autoscaler_binary: Option<PathBuf>,
    /// An extra argument for the autoscaler binary (repeatable).
    #[arg(
        long = "autoscaler-arg",
        value_name = "ARG",
        allow_hyphen_values = true
    )]
    pub autoscaler_args: Vec<String>,
    /// Binary mode: scenario time per real time (60: a scenario minute
    /// lasts one real second). Step durations and the autoscaler's timing
    /// flags are divided by it.
    /// Examples over 100 nodes (`@scale-N`) run slower, at the scale
    /// where a binary's computation fits their windows ([`pace`]).
    #[arg(long, default_value_t = 60.0)]
    pub time_scale: f64,
    /// Binary mode: skip an example that would last longer than this many
    /// real minutes at its pace (examples over 100 nodes run slower than
    /// `--time-scale`; [`pace`]).
    #[arg(long, value_name = "MINUTES", default_value_t = pace::DEFAULT_MAX_EXAMPLE_MINUTES)]
    pub max_example_minutes: f64,
    /// The node groups' provider: kwok template nodes, Cluster API
    /// MachineDeployments served by the testbed (the autoscaler runs with
    /// `--cloud-provider=clusterapi`), or Auto Scaling groups of an AWS
    /// emulator (moto, `--cloud-provider=aws`); with either of the last
    /// two and without `--tags`, the scenarios not tagged `@kwok-only` run.
    #[arg(long, value_enum, default_value_t = Provider::Kwok)]
    pub cloud_provider: Provider,
    /// Where the clusters run: `embedded` (this process, virtual time
    /// in-process), or in a container through Docker or podman: `testbed`
    /// (our testbed's image, built locally), `kwok` (kwok's cluster image),
    /// `kind` (a kind node image with our kwok controller). The container
    /// backends run in real time and need `--autoscaler-binary`.
    #[arg(long, default_value = "embedded", value_name = "BACKEND")]
    pub cluster: String,
    /// The container backend's image instead of its default.
    #[arg(long, value_name = "IMAGE")]
    pub cluster_image: Option<String>,
    /// Where to write `junit.xml` and `cucumber.json`.
    #[arg(long, value_name = "DIR")]
    pub report_dir: Option<PathBuf>,
    /// Print every step as it finishes, not only the failing ones, and the
    /// autoscaler's and the cluster's warnings (RUST_LOG sets any level).
    #[arg(long, short)]
    pub verbose: bool,
    /// Run only share K of N (0-based) of the scenarios the tags select:
    /// the K-th, (K+N)-th, ... in file order. N processes with shares 0 to
    /// N-1 run them all between them (the conformance test splits the
    /// 1,000-node examples so over the machine's cores).
    #[arg(long, value_name = "K/N")]
    pub shard: Option<Shard>,
}

/// One share of the selected scenarios ([`RunArgs::shard`]); `K/N` in a
/// run's `summary.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct Shard {
    /// Which share, from 0.
    pub index: usize,
    /// How many shares.
    pub count: usize,
}

impl Shard {
    /// Whether the `nth` selected scenario (from 0) is in this share.
    pub fn holds(self, nth: usize) -> bool {
        nth % self.count == self.index
    }
}

impl std::fmt::Display for Shard {
    /// `K/N`, as `--shard` takes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl From<Shard> for String {
    fn from(s: Shard) -> String {
        s.to_string()
    }
}

impl TryFrom<String> for Shard {
    type Error = String;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("--shard {s:?}: want K/N with 0 <= K < N, e.g. 0/2");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = k.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

/// Why a run did not start, or its reports were not written. Failing
/// scenarios are not errors: they are in the [`Summary`].
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// `--tags` does not parse.
    #[error("--tags {expr:?}: {reason}")]
    Tags {
        /// The expression.
        expr: String,
        /// Why.
        reason: String,
    },
    /// `--time-scale` is not a positive number.
    #[error("--time-scale {0}: must be a positive number")]
    TimeScale(f64),
    /// `--max-example-minutes` is not a positive number.
    #[error("--max-example-minutes {0}: must be a positive number")]
    MaxExampleMinutes(f64),
    /// `--autoscaler-binary` names no file.
    #[error("--autoscaler-binary {}: no such file", .0.display())]
    NoBinary(PathBuf),
    /// The binary could not be probed.
    #[error(transparent)]
    Probe(#[from] ProbeError),
    /// `--cluster` names no backend.
    #[error("--cluster {name}: {reason}")]
    Backend {
        /// The backend's name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A container backend without a binary.
    #[error(
        "--cluster {0}: a cluster in a container runs in real time, so the autoscaler runs as a binary: give --autoscaler-binary"
    )]
    ContainerNeedsBinary(String),
    /// A feature path does not exist.
    #[error("{}: no such feature file or directory", .0.display())]
    NoFeatures(PathBuf),
    /// The scenario thread or the runtime did not start.
    #[error("{what}: {source}")]
    Start {
        /// `starting the scenario thread`, `building the runtime`.
        what: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The report's state was poisoned by a panic.
    #[error("reading the run's records: {0}")]
    Records(String),
    /// The report files could not be written.
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// The stack of the thread the scenarios run on. Their futures nest deeply
/// (cucumber, the steps, the embedded cluster) and the in-process runtime
/// polls them on its own thread, so that thread must not be a test
/// harness's 2 MiB one.
const RUNNER_STACK_BYTES: usize = 64 << 20;

/// Runs the suite and prints the report; `default_paths` when `args.paths`
/// is empty. Errors are bad options or unwritable report files; failing
/// scenarios are in the summary. It runs on a thread of its own with a
/// [`RUNNER_STACK_BYTES`] stack, whichever thread calls it.
pub fn run(args: &RunArgs, default_paths: &[PathBuf]) -> Result<Summary, RunError> {
    std::thread::scope(|scope| {
        let runner = std::thread::Builder::new()
            .name("conformance".into())
            .stack_size(RUNNER_STACK_BYTES)
            .spawn_scoped(scope, || run_here(args, default_paths))
            .map_err(|source| RunError::Start {
                what: "starting the scenario thread",
                source,
            })?;
        runner
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// [`run`], on the calling thread: checks the options, configures the
/// world, runs every path's features and prints the summary.
fn run_here(args: &RunArgs, default_paths: &[PathBuf]) -> Result<Summary, RunError> {
    let expr = args.tags.as_deref().unwrap_or(match args.cloud_provider {
        Provider::Kwok => DEFAULT_TAGS,
        Provider::ClusterApi => CAPI_DEFAULT_TAGS,
        Provider::Aws => AWS_DEFAULT_TAGS,
    });
    let tags = expr.parse::<TagOperation>().map_err(|e| RunError::Tags {
        expr: expr.to_string(),
        reason: e.to_string(),
    })?;
    let under_test = under_test(args)?;
    announce_provider(args.cloud_provider);
    let binary = matches!(under_test, UnderTest::Binary { .. });
    let in_process_cluster = check_backend(args, binary)?;
    world::configure_backend(world::BackendChoice {
        name: args.cluster.clone(),
        image: args.cluster_image.clone(),
    });
    world::configure(under_test.clone());
    world::configure_provider(args.cloud_provider);
    let runtime = runtime(binary)?;
    if !in_process_cluster {
        // No destructor runs on Ctrl-C: the containers are removed here.
        runtime.spawn(async {
            if tokio::signal::ctrl_c().await.is_ok() {
                let removed = harness::container::remove_all().await;
                eprintln!("interrupted: removed {removed} container(s)");
                std::process::exit(130);
            }
        });
    }
    let paths: Vec<PathBuf> = if args.paths.is_empty() {
        default_paths.to_vec()
    } else {
        args.paths.clone()
    };
    announce_under_test(&under_test);
    let started = Instant::now();
    let state = Arc::new(Mutex::new(State::default()));
    let selection = Selection {
        tags,
        selected: Arc::new(AtomicUsize::new(0)),
        shard: args.shard,
        binary_info: match &under_test {
            UnderTest::Binary { info, .. } => Some(info.clone()),
            UnderTest::InProcess => None,
        },
        leave_out_large: args.tags.is_none(),
        time_scale: args.time_scale,
        max_example_minutes: args.max_example_minutes,
        state: state.clone(),
    };
    for path in &paths {
        if !path.exists() {
            return Err(RunError::NoFeatures(path.clone()));
        }
        runtime.block_on(run_features(path, &state, &selection, args.verbose));
        world::set_example_time_scale(None);
    }
    let mut summary = state
        .lock()
        .map(|s| s.summary.clone())
        .map_err(|e| RunError::Records(e.to_string()))?;
    summary.wall = started.elapsed();
    summary.shard = args.shard;
    print_summary(&summary, expr);
    if let Some(dir) = &args.report_dir {
        write_reports(dir, &summary)?;
        println!(
            "Reports: {}, {} and {}",
            dir.join("junit.xml").display(),
            dir.join("cucumber.json").display(),
            dir.join("summary.json").display()
        );
    }
    Ok(summary)
}

/// The autoscaler under test the options ask for: a binary (checked and
/// probed) or the in-process one.
fn under_test(args: &RunArgs) -> Result<UnderTest, RunError> {
    let Some(path) = &args.autoscaler_binary else {
        return Ok(UnderTest::InProcess);
    };
    if !(args.time_scale.is_finite() && args.time_scale > 0.0) {
        return Err(RunError::TimeScale(args.time_scale));
    }
    if !(args.max_example_minutes.is_finite() && args.max_example_minutes > 0.0) {
        return Err(RunError::MaxExampleMinutes(args.max_example_minutes));
    }
    if !path.is_file() {
        return Err(RunError::NoBinary(path.clone()));
    }
    let info = BinaryInfo::probe(path, args.cloud_provider)?;
    Ok(UnderTest::Binary {
        info: Box::new(info),
        args: args.autoscaler_args.clone(),
        time_scale: args.time_scale,
    })
}

/// Says what the node groups are, unless kwok's template nodes.
fn announce_provider(provider: Provider) {
    match provider {
        Provider::ClusterApi => {
            println!("Node groups: Cluster API MachineDeployments (--cloud-provider=clusterapi)")
        }
        Provider::Aws => {
            println!("Node groups: Auto Scaling groups of the AWS emulator (--cloud-provider=aws)")
        }
        Provider::Kwok => {}
    }
}

/// Checks `--cluster`: a known backend, and a binary under test for a
/// cluster in a container. Returns whether the cluster runs in this
/// process.
fn check_backend(args: &RunArgs, binary: bool) -> Result<bool, RunError> {
    let backend =
        harness::backend::by_name(&args.cluster, args.cluster_image.as_deref()).map_err(|e| {
            RunError::Backend {
                name: args.cluster.clone(),
                reason: e.to_string(),
            }
        })?;
    if !backend.in_process() {
        if !binary {
            return Err(RunError::ContainerNeedsBinary(args.cluster.clone()));
        }
        println!("Cluster: the {} backend, in a container", backend.name());
    }
    Ok(backend.in_process())
}

/// The runtime the scenarios run on: two real-time workers for a binary,
/// else one thread on virtual time (sleeps complete as soon as every task
/// waits).
fn runtime(binary: bool) -> Result<tokio::runtime::Runtime, RunError> {
    if binary {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
    }
    .map_err(|source| RunError::Start {
        what: "building the runtime",
        source,
    })
}

/// Says which autoscaler is under test, and on what time.
fn announce_under_test(under_test: &UnderTest) {
    match under_test {
        UnderTest::InProcess => println!("Autoscaler under test: in-process (virtual time)"),
        UnderTest::Binary {
            info, time_scale, ..
        } => println!(
            "Autoscaler under test: {} ({}, {} flags; real time, scale {time_scale}: 1 scenario minute = {:.2} s)",
            info.path.display(),
            info.version
                .map_or("version unknown".to_string(), |v| format!(
                    "Cluster Autoscaler {v}"
                )),
            info.flags.len(),
            60.0 / time_scale
        ),
    }
}

/// Runs the selected scenarios of the features at `path`, one at a time,
/// recording them in `state`.
async fn run_features(
    path: &Path,
    state: &Arc<Mutex<State>>,
    selection: &Selection,
    verbose: bool,
) {
    let report = Report {
        state: state.clone(),
        verbose,
    };
    let after_state = state.clone();
    let pacing = selection.clone();
    let before_state = state.clone();
    let selection = selection.clone();
    CaWorld::cucumber()
        .with_writer(report.assert_normalized())
        .with_cli(cli::Opts::<_, _, _, cli::Empty>::default())
        .max_concurrent_scenarios(1)
        .before(move |feature, rule, scenario, _world| {
            // The example's own time scale, before its cluster starts.
            let scale = match pacing.pace(feature, rule, scenario) {
                Some(pace::Pace::Run { scale }) => Some(scale),
                _ => None,
            };
            world::set_example_time_scale(scale);
            if let Ok(mut s) = before_state.lock() {
                s.time_scale = scale;
            }
            Box::pin(async {})
        })
        .after(move |feature, rule, scenario, finished, world| {
            if let Some(w) = world {
                let failed = !matches!(finished, event::ScenarioFinished::StepPassed);
                after_scenario(&after_state, all_tags(feature, rule, scenario), w, failed);
            }
            Box::pin(async {})
        })
        .filter_run(path, move |feature, rule, scenario| {
            selection.runs(feature, rule, scenario)
        })
        .await;
}

/// After a scenario: records what the report prints with it (the
/// extension check, scenario time, the binary's log when it failed), then
/// stops its cluster and autoscaler.
fn after_scenario<'a>(
    state: &Mutex<State>,
    tags: impl IntoIterator<Item = &'a String>,
    w: &mut CaWorld,
    failed: bool,
) {
    let violation = extension_violation(tags, &w.extensions.used());
    if let Ok(mut s) = state.lock() {
        s.extension_violation = violation;
        s.scenario_time = w.scenario_time();
        s.log = w
            .running
            .as_ref()
            .and_then(|r| r.log())
            .filter(|_| failed)
            .map(Path::to_path_buf);
    }
    // The cluster and the autoscaler stop here.
    w.running = None;
}

/// Which scenarios run: those the tags select, in this share, that the
/// binary under test and the backend can run; the others are recorded as
/// filtered out or skipped.
#[derive(Clone)]
struct Selection {
    tags: TagOperation,
    /// Counts the scenarios the tags select, across paths, for `--shard`.
    selected: Arc<AtomicUsize>,
    shard: Option<Shard>,
    binary_info: Option<Box<BinaryInfo>>,
    /// No `--tags`: the examples over 100 nodes are left out
    /// ([`pace::is_large`]).
    leave_out_large: bool,
    /// `--time-scale` and `--max-example-minutes`, for [`pace::pace`].
    time_scale: f64,
    max_example_minutes: f64,
    state: Arc<Mutex<State>>,
}

impl Selection {
    /// Whether the scenario runs here.
    fn runs(
        &self,
        feature: &cucumber::gherkin::Feature,
        rule: Option<&cucumber::gherkin::Rule>,
        scenario: &cucumber::gherkin::Scenario,
    ) -> bool {
        let all = all_tags(feature, rule, scenario);
        let run = self.tags.eval(all.clone());
        let name = format!("{} › {}", feature.name, scenario.name);
        if !run {
            if let Ok(mut s) = self.state.lock() {
                s.summary.filtered_out.push(name);
            }
            return false;
        }
        if self.leave_out_large && pace::is_large(pace::example_nodes(all.clone())) {
            if let Ok(mut s) = self.state.lock() {
                s.summary.left_out.push(name);
            }
            return false;
        }
        let nth = self.selected.fetch_add(1, Ordering::Relaxed);
        if self.shard.is_some_and(|shard| !shard.holds(nth)) {
            // Another share runs it.
            return false;
        }
        let Some(info) = &self.binary_info else {
            // In-process: ours, which behaves as one release.
            let ours = crate::binary::CaVersion::parse(autoscaler::CA_VERSION);
            let unmet = crate::binary::version_tags_unmet(all, ours);
            if unmet.is_empty() {
                return true;
            }
            if let Ok(mut s) = self.state.lock() {
                s.summary.skipped.push((name, unmet));
            }
            return false;
        };
        let steps = step_texts(feature, rule, scenario);
        let scale = match self.pace(feature, rule, scenario) {
            Some(pace::Pace::Run { scale }) => scale,
            Some(pace::Pace::Skip(why)) => {
                if let Ok(mut s) = self.state.lock() {
                    s.summary.skipped.push((name, vec![why]));
                }
                return false;
            }
            None => self.time_scale,
        };
        let mut unmet = info.unmet(all, steps.iter().copied());
        unmet.extend(world::backend_unmet(steps.iter().copied()));
        unmet.extend(crate::binary::fixed_wait_unmet(
            steps.iter().copied(),
            scale,
        ));
        if unmet.is_empty() {
            return true;
        }
        if let Ok(mut s) = self.state.lock() {
            s.summary.skipped.push((name, unmet));
        }
        false
    }

    /// The example's pace in binary mode ([`pace::pace`]); `None`
    /// in-process (virtual time).
    fn pace(
        &self,
        feature: &cucumber::gherkin::Feature,
        rule: Option<&cucumber::gherkin::Rule>,
        scenario: &cucumber::gherkin::Scenario,
    ) -> Option<pace::Pace> {
        self.binary_info.as_ref()?;
        Some(pace::pace(
            pace::example_nodes(all_tags(feature, rule, scenario)),
            &pace::step_durations(step_texts(feature, rule, scenario)),
            self.time_scale,
            self.max_example_minutes,
        ))
    }
}

/// Prints the summary table, then the scenarios skipped and those the tag
/// filter `expr` left out.
fn print_summary(summary: &Summary, expr: &str) {
    print!("{}", table(summary));
    if !summary.skipped.is_empty() {
        println!(
            "Skipped ({} scenarios: the autoscaler under test lacks what they need, or they would last too long at their time scale):",
            summary.skipped.len()
        );
        for (name, why) in &summary.skipped {
            println!("  - {name}: {}", why.join("; "));
        }
    }
    if !summary.left_out.is_empty() {
        println!(
            "Left out ({} examples over {} nodes; `testbed run --tags {:?}` runs them, as the conformance test does):",
            summary.left_out.len(),
            pace::SMALL_EXAMPLE_NODES,
            pace::LARGE_EXAMPLES_TAGS
        );
        for name in &summary.left_out {
            println!("  - {name}");
        }
    }
    if !summary.filtered_out.is_empty() {
        println!(
            "Not run ({} scenarios, tag filter {expr:?}):",
            summary.filtered_out.len()
        );
        for name in &summary.filtered_out {
            println!("  - {name}");
        }
    }
}

/// The texts of a scenario's steps, its backgrounds' first.
fn step_texts<'a>(
    feature: &'a cucumber::gherkin::Feature,
    rule: Option<&'a cucumber::gherkin::Rule>,
    scenario: &'a cucumber::gherkin::Scenario,
) -> Vec<&'a str> {
    feature
        .background
        .iter()
        .chain(rule.iter().flat_map(|r| r.background.iter()))
        .flat_map(|b| b.steps.iter())
        .chain(scenario.steps.iter())
        .map(|s| s.value.as_str())
        .collect()
}

/// A scenario's tags with those of its feature and rule.
fn all_tags<'a>(
    feature: &'a cucumber::gherkin::Feature,
    rule: Option<&'a cucumber::gherkin::Rule>,
    scenario: &'a cucumber::gherkin::Scenario,
) -> impl Iterator<Item = &'a String> + Clone {
    feature
        .tags
        .iter()
        .chain(rule.into_iter().flat_map(|r| r.tags.iter()))
        .chain(scenario.tags.iter())
}

/// Why a scenario that used `used` (extensions of ours) fails the tag
/// check: it is not tagged `@extension`, so an upstream binary would run it
/// and fail for a reason that is not a difference in behaviour.
pub fn extension_violation<'a>(
    tags: impl IntoIterator<Item = &'a String>,
    used: &[&str],
) -> Option<String> {
    let tagged = tags
        .into_iter()
        .any(|t| t.trim_start_matches('@') == EXTENSION_TAG);
    (!used.is_empty() && !tagged).then(|| {
        format!(
            "the scenario uses {} but is not tagged @{EXTENSION_TAG}: an upstream Cluster Autoscaler cannot pass it",
            used.join(" and ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_the_selected_scenarios_between_them() {
        let shards: Vec<Shard> = ["0/2", "1/2"].iter().map(|s| s.parse().unwrap()).collect();
        for nth in 0..7 {
            let holders = shards.iter().filter(|s| s.holds(nth)).count();
            assert_eq!(holders, 1, "scenario {nth} is in {holders} shares");
        }
        assert!(shards[0].holds(0) && shards[1].holds(1) && shards[0].holds(2));
        assert_eq!(shards[1].to_string(), "1/2");
        for bad in ["2/2", "1", "a/2", "0/0", "-1/2"] {
            let err = bad.parse::<Shard>().unwrap_err();
            assert!(err.contains("K/N"), "{bad}: {err}");
        }
    }
}
