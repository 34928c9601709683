//! Running the suite: the options shared by `testbed run` and the
//! `conformance` test target, the readable report printed while the
//! scenarios run (a line per scenario, the failing step and its message, a
//! summary table at the end), and the JUnit XML and cucumber JSON files.
//!
//! Scenarios run one at a time. A step that fails, panics, is ambiguous or
//! matches no step definition fails its scenario; so does a failing hook or
//! a feature file that does not parse.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cucumber::event::{self, Cucumber, Feature, Hook, Rule, Scenario, Step};
use cucumber::gherkin::tagexpr::TagOperation;
use cucumber::tag::Ext as _;
use cucumber::{World as _, Writer, WriterExt as _, cli, parser};
use serde_json::{Value, json};

use crate::binary::BinaryInfo;
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
    /// run].
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
    #[arg(long, default_value_t = 60.0)]
    pub time_scale: f64,
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
    /// Print every step as it finishes, not only the failing ones.
    #[arg(long, short)]
    pub verbose: bool,
    /// Run only share K of N (0-based) of the scenarios the tags select:
    /// the K-th, (K+N)-th, ... in file order. N processes with shares 0 to
    /// N-1 run them all between them (the conformance test splits the
    /// 1,000-node examples so over the machine's cores).
    #[arg(long, value_name = "K/N")]
    pub shard: Option<Shard>,
}

/// One share of the selected scenarios ([`RunArgs::shard`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// The outcome of a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// It passed.
    Passed,
    /// It failed, with the message.
    Failed(String),
    /// It did not run (an earlier step failed).
    Skipped,
}

/// One step of a finished scenario.
#[derive(Debug, Clone)]
pub struct StepRecord {
    /// `Given `, `When `...
    pub keyword: String,
    /// The step text.
    pub text: String,
    /// Line in the feature file.
    pub line: usize,
    /// Outcome.
    pub status: Status,
    /// Wall time.
    pub wall: Duration,
}

/// One finished scenario.
#[derive(Debug, Clone, Default)]
pub struct ScenarioRecord {
    /// Feature name.
    pub feature: String,
    /// Feature file.
    pub file: String,
    /// Feature tags (without `@`).
    pub feature_tags: Vec<String>,
    /// Feature description.
    pub feature_description: String,
    /// Feature line.
    pub feature_line: usize,
    /// Scenario name.
    pub name: String,
    /// Scenario line.
    pub line: usize,
    /// Scenario tags (without `@`).
    pub tags: Vec<String>,
    /// Steps, background first.
    pub steps: Vec<StepRecord>,
    /// Scenario time simulated (virtual in-process, scaled real in binary
    /// mode).
    pub scenario_time: Duration,
    /// Wall time.
    pub wall: Duration,
    /// Why the scenario failed, if it did.
    pub failure: Option<String>,
}

/// The results of a run.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Finished scenarios in order.
    pub scenarios: Vec<ScenarioRecord>,
    /// Feature files that did not parse.
    pub parse_errors: Vec<String>,
    /// Scenarios the tag filter left out.
    pub filtered_out: Vec<String>,
    /// Scenarios left out because the binary under test lacks a flag or
    /// a version they need, with the reasons.
    pub skipped: Vec<(String, Vec<String>)>,
    /// Wall time of the whole run.
    pub wall: Duration,
}

impl Summary {
    /// Scenarios that passed.
    pub fn passed(&self) -> usize {
        self.scenarios
            .iter()
            .filter(|s| s.failure.is_none())
            .count()
    }

    /// Scenarios that failed, plus unparsable files.
    pub fn failed(&self) -> usize {
        self.scenarios.len() - self.passed() + self.parse_errors.len()
    }
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
pub fn run(args: &RunArgs, default_paths: &[PathBuf]) -> Result<Summary, String> {
    std::thread::scope(|scope| {
        let runner = std::thread::Builder::new()
            .name("conformance".into())
            .stack_size(RUNNER_STACK_BYTES)
            .spawn_scoped(scope, || run_here(args, default_paths))
            .map_err(|e| format!("starting the scenario thread: {e}"))?;
        runner
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// [`run`], on the calling thread.
fn run_here(args: &RunArgs, default_paths: &[PathBuf]) -> Result<Summary, String> {
    let expr = args.tags.as_deref().unwrap_or(match args.cloud_provider {
        Provider::Kwok => DEFAULT_TAGS,
        Provider::ClusterApi => CAPI_DEFAULT_TAGS,
        Provider::Aws => AWS_DEFAULT_TAGS,
    });
    let tags = expr
        .parse::<TagOperation>()
        .map_err(|e| format!("--tags {expr:?}: {e}"))?;
    let under_test = match &args.autoscaler_binary {
        Some(path) => {
            if !(args.time_scale.is_finite() && args.time_scale > 0.0) {
                return Err(format!(
                    "--time-scale {}: must be a positive number",
                    args.time_scale
                ));
            }
            if !path.is_file() {
                return Err(format!(
                    "--autoscaler-binary {}: no such file",
                    path.display()
                ));
            }
            let info = BinaryInfo::probe(path, args.cloud_provider)?;
            UnderTest::Binary {
                info: Box::new(info),
                args: args.autoscaler_args.clone(),
                time_scale: args.time_scale,
            }
        }
        None => UnderTest::InProcess,
    };
    match args.cloud_provider {
        Provider::ClusterApi => {
            println!("Node groups: Cluster API MachineDeployments (--cloud-provider=clusterapi)")
        }
        Provider::Aws => {
            println!("Node groups: Auto Scaling groups of the AWS emulator (--cloud-provider=aws)")
        }
        Provider::Kwok => {}
    }
    let binary = matches!(under_test, UnderTest::Binary { .. });
    let backend = harness::backend::by_name(&args.cluster, args.cluster_image.as_deref())?;
    if !backend.in_process() {
        if !binary {
            return Err(format!(
                "--cluster {}: a cluster in a container runs in real time, so the autoscaler runs as a binary: give --autoscaler-binary",
                args.cluster
            ));
        }
        println!("Cluster: the {} backend, in a container", backend.name());
    }
    world::configure_backend(world::BackendChoice {
        name: args.cluster.clone(),
        image: args.cluster_image.clone(),
    });
    world::configure(under_test.clone());
    world::configure_provider(args.cloud_provider);
    let runtime = if binary {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    } else {
        // Virtual time: sleeps complete as soon as every task waits.
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
    }
    .map_err(|e| format!("building the runtime: {e}"))?;
    if !backend.in_process() {
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
    match &under_test {
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
    let started = Instant::now();
    let state = Arc::new(Mutex::new(State::default()));
    // Counts the scenarios the tags select, across paths, for `--shard`.
    let selected = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for path in &paths {
        if !path.exists() {
            return Err(format!(
                "{}: no such feature file or directory",
                path.display()
            ));
        }
        let report = Report {
            state: state.clone(),
            verbose: args.verbose,
        };
        let after_state = state.clone();
        let filter_state = state.clone();
        let tags = tags.clone();
        let selected = selected.clone();
        let shard = args.shard;
        let binary_info = match &under_test {
            UnderTest::Binary { info, .. } => Some(info.clone()),
            UnderTest::InProcess => None,
        };
        runtime.block_on(
            CaWorld::cucumber()
                .with_writer(report.assert_normalized())
                .with_cli(cli::Opts::<_, _, _, cli::Empty>::default())
                .max_concurrent_scenarios(1)
                .after(move |feature, rule, scenario, finished, world| {
                    if let Some(w) = world {
                        let failed = !matches!(finished, event::ScenarioFinished::StepPassed);
                        let violation = extension_violation(
                            all_tags(feature, rule, scenario),
                            &w.extensions.used(),
                        );
                        if let Ok(mut s) = after_state.lock() {
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
                    Box::pin(async {})
                })
                .filter_run(path, move |feature, rule, scenario| {
                    let all = all_tags(feature, rule, scenario);
                    let run = tags.eval(all.clone());
                    let name = format!("{} › {}", feature.name, scenario.name);
                    if !run {
                        if let Ok(mut s) = filter_state.lock() {
                            s.summary.filtered_out.push(name);
                        }
                        return false;
                    }
                    let nth = selected.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if shard.is_some_and(|shard| !shard.holds(nth)) {
                        // Another share runs it.
                        return false;
                    }
                    let Some(info) = &binary_info else {
                        return true;
                    };
                    let steps = feature
                        .background
                        .iter()
                        .chain(rule.iter().flat_map(|r| r.background.iter()))
                        .flat_map(|b| b.steps.iter())
                        .chain(scenario.steps.iter())
                        .map(|s| s.value.as_str());
                    let steps: Vec<&str> = steps.collect();
                    let mut unmet = info.unmet(all, steps.iter().copied());
                    unmet.extend(world::backend_unmet(steps.iter().copied()));
                    if unmet.is_empty() {
                        return true;
                    }
                    if let Ok(mut s) = filter_state.lock() {
                        s.summary.skipped.push((name, unmet));
                    }
                    false
                }),
        );
    }
    let mut summary = state
        .lock()
        .map(|s| s.summary.clone())
        .map_err(|e| e.to_string())?;
    summary.wall = started.elapsed();
    print!("{}", table(&summary));
    if !summary.skipped.is_empty() {
        println!(
            "Skipped ({} scenarios: the autoscaler under test lacks what they need):",
            summary.skipped.len()
        );
        for (name, why) in &summary.skipped {
            println!("  - {name}: {}", why.join("; "));
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
    if let Some(dir) = &args.report_dir {
        write_reports(dir, &summary)?;
        println!(
            "Reports: {} and {}",
            dir.join("junit.xml").display(),
            dir.join("cucumber.json").display()
        );
    }
    Ok(summary)
}

/// What the writer accumulates.
#[derive(Default)]
struct State {
    summary: Summary,
    current: Option<(ScenarioRecord, Instant)>,
    step_started: Option<Instant>,
    /// Set by the after hook, read when the scenario finishes.
    scenario_time: Duration,
    /// The autoscaler binary's log, when the scenario failed.
    log: Option<PathBuf>,
    /// Set by the after hook when the scenario used an extension of ours
    /// without the tag that says so.
    extension_violation: Option<String>,
}

/// The cucumber writer: progress lines and the records.
struct Report {
    state: Arc<Mutex<State>>,
    verbose: bool,
}

impl Writer<CaWorld> for Report {
    type Cli = cli::Empty;

    async fn handle_event(
        &mut self,
        ev: parser::Result<event::Event<Cucumber<CaWorld>>>,
        _: &Self::Cli,
    ) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let ev = match ev {
            Ok(ev) => ev.value,
            Err(e) => {
                println!("✘ {e}");
                state.summary.parse_errors.push(e.to_string());
                return;
            }
        };
        let Cucumber::Feature(feature, ev) = ev else {
            return;
        };
        match ev {
            Feature::Started => {
                let file = feature
                    .path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                println!("\nFeature: {}  ({file})", feature.name);
            }
            Feature::Scenario(scenario, ev) => {
                self.scenario(&mut state, &feature, &scenario, ev.event);
            }
            Feature::Rule(_, Rule::Scenario(scenario, ev)) => {
                self.scenario(&mut state, &feature, &scenario, ev.event);
            }
            _ => {}
        }
    }
}

impl Report {
    fn scenario(
        &self,
        state: &mut State,
        feature: &cucumber::gherkin::Feature,
        scenario: &cucumber::gherkin::Scenario,
        ev: Scenario<CaWorld>,
    ) {
        match ev {
            Scenario::Started => {
                let record = ScenarioRecord {
                    feature: feature.name.clone(),
                    file: feature
                        .path
                        .as_ref()
                        .map(|p| display_path(p))
                        .unwrap_or_default(),
                    feature_tags: feature.tags.clone(),
                    feature_description: feature.description.clone().unwrap_or_default(),
                    feature_line: feature.position.line,
                    name: scenario.name.clone(),
                    line: scenario.position.line,
                    tags: scenario.tags.clone(),
                    steps: Vec::new(),
                    scenario_time: Duration::ZERO,
                    wall: Duration::ZERO,
                    failure: None,
                };
                state.current = Some((record, Instant::now()));
                state.scenario_time = Duration::ZERO;
            }
            Scenario::Step(step, ev) | Scenario::Background(step, ev) => {
                let status = match ev {
                    Step::Started => {
                        state.step_started = Some(Instant::now());
                        return;
                    }
                    Step::Passed(..) => Status::Passed,
                    Step::Skipped => Status::Failed(
                        "no step definition matches this step (see conformance/README.md for the step library)"
                            .into(),
                    ),
                    Step::Failed(_, _, _, err) => Status::Failed(step_error(&err)),
                };
                let wall = state
                    .step_started
                    .take()
                    .map(|t| t.elapsed())
                    .unwrap_or_default();
                let record = StepRecord {
                    keyword: step.keyword.clone(),
                    text: step.value.clone(),
                    line: step.position.line,
                    status,
                    wall,
                };
                if self.verbose {
                    let mark = if record.status == Status::Passed {
                        "✔"
                    } else {
                        "✘"
                    };
                    println!("      {mark} {}{}", record.keyword, record.text);
                }
                if let Some((current, _)) = &mut state.current {
                    if let Status::Failed(msg) = &record.status
                        && current.failure.is_none()
                    {
                        current.failure = Some(format!(
                            "step \"{}{}\" (line {}): {msg}",
                            record.keyword, record.text, record.line
                        ));
                    }
                    current.steps.push(record);
                }
            }
            Scenario::Hook(kind, Hook::Failed(_, info)) => {
                if let Some((current, _)) = &mut state.current {
                    current.failure.get_or_insert_with(|| {
                        format!("{kind:?} hook failed: {}", panic_message(&info))
                    });
                }
            }
            Scenario::Finished => {
                let Some((mut record, started)) = state.current.take() else {
                    return;
                };
                record.wall = started.elapsed();
                record.scenario_time = state.scenario_time;
                if let Some(violation) = state.extension_violation.take() {
                    record.failure = Some(match record.failure.take() {
                        Some(step) => format!("{violation}\n{step}"),
                        None => violation,
                    });
                }
                // Steps after a failure did not run.
                let listed = record.steps.len();
                let background = feature.background.iter().flat_map(|b| b.steps.iter());
                for step in background.chain(scenario.steps.iter()).skip(listed) {
                    record.steps.push(StepRecord {
                        keyword: step.keyword.clone(),
                        text: step.value.clone(),
                        line: step.position.line,
                        status: Status::Skipped,
                        wall: Duration::ZERO,
                    });
                }
                let times = format!(
                    "{} scenario time, {:.2}s wall",
                    format_duration(record.scenario_time),
                    record.wall.as_secs_f64()
                );
                match &record.failure {
                    None => println!("  ✔ {}  ({times})", record.name),
                    Some(why) => {
                        println!("  ✘ {}  ({times})", record.name);
                        for line in why.lines() {
                            println!("      {line}");
                        }
                        if let Some(log) = state.log.take() {
                            println!("      autoscaler log: {}", log.display());
                        }
                    }
                }
                state.summary.scenarios.push(record);
            }
            _ => {}
        }
    }
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

fn step_error(err: &event::StepError) -> String {
    match err {
        event::StepError::Panic(info) => panic_message(info),
        other => other.to_string(),
    }
}

fn panic_message(info: &event::Info) -> String {
    if let Some(s) = info.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = info.downcast_ref::<&str>() {
        (*s).to_string()
    } else {
        "(no message)".into()
    }
}

fn display_path(p: &Path) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    let shown = p.strip_prefix(&cwd).unwrap_or(p);
    shown.display().to_string()
}

/// `1h02m03s`, `4m05s`, `12.3s`.
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 3600 {
        format!("{}h{:02}m{:02}s", secs / 3600, secs % 3600 / 60, secs % 60)
    } else if secs >= 60 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// The summary table printed at the end of a run.
pub fn table(summary: &Summary) -> String {
    let mut out = String::new();
    let width = summary
        .scenarios
        .iter()
        .map(|s| s.feature.chars().count() + s.name.chars().count() + 3)
        .max()
        .unwrap_or(8)
        .clamp(8, 110);
    let _ = writeln!(
        out,
        "\n{:<6}  {:<width$}  {:>13}  {:>9}",
        "Result", "Scenario", "Scenario time", "Wall"
    );
    let mut total = Duration::ZERO;
    for s in &summary.scenarios {
        total += s.scenario_time;
        let mut name = format!("{} › {}", s.feature, s.name);
        if name.chars().count() > width {
            name = name.chars().take(width - 1).collect::<String>() + "…";
        }
        let _ = writeln!(
            out,
            "{:<6}  {:<width$}  {:>13}  {:>8.2}s",
            if s.failure.is_none() { "ok" } else { "FAILED" },
            name,
            format_duration(s.scenario_time),
            s.wall.as_secs_f64()
        );
    }
    for e in &summary.parse_errors {
        let _ = writeln!(out, "FAILED  {e}");
    }
    let _ = writeln!(
        out,
        "\n{} scenarios: {} passed, {} failed; {} of scenario time in {:.1}s of wall time",
        summary.scenarios.len(),
        summary.passed(),
        summary.failed(),
        format_duration(total),
        summary.wall.as_secs_f64()
    );
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// JUnit XML: a test suite per feature, a test case per scenario.
pub fn junit(summary: &Summary) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"conformance\" tests=\"{}\" failures=\"{}\" time=\"{:.3}\">",
        summary.scenarios.len() + summary.parse_errors.len(),
        summary.failed(),
        summary.wall.as_secs_f64()
    );
    let mut features: Vec<&str> = Vec::new();
    for s in &summary.scenarios {
        if !features.contains(&s.file.as_str()) {
            features.push(&s.file);
        }
    }
    for file in features {
        let cases: Vec<&ScenarioRecord> = summary
            .scenarios
            .iter()
            .filter(|s| s.file == file)
            .collect();
        let failures = cases.iter().filter(|s| s.failure.is_some()).count();
        let time: f64 = cases.iter().map(|s| s.wall.as_secs_f64()).sum();
        let name = cases.first().map(|s| s.feature.as_str()).unwrap_or("");
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" file=\"{}\" tests=\"{}\" failures=\"{failures}\" time=\"{time:.3}\">",
            xml_escape(name),
            xml_escape(file),
            cases.len()
        );
        for s in cases {
            let _ = write!(
                out,
                "    <testcase name=\"{}\" classname=\"{}\" file=\"{}\" line=\"{}\" time=\"{:.3}\"",
                xml_escape(&s.name),
                xml_escape(&s.feature),
                xml_escape(file),
                s.line,
                s.wall.as_secs_f64()
            );
            match &s.failure {
                None => out.push_str("/>\n"),
                Some(why) => {
                    let first = why.lines().next().unwrap_or("");
                    let _ = writeln!(
                        out,
                        ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>",
                        xml_escape(first),
                        xml_escape(why)
                    );
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    if !summary.skipped.is_empty() {
        let _ = writeln!(
            out,
            "  <testsuite name=\"skipped: the autoscaler under test lacks what they need\" tests=\"{n}\" failures=\"0\" skipped=\"{n}\">",
            n = summary.skipped.len()
        );
        for (name, why) in &summary.skipped {
            let _ = writeln!(
                out,
                "    <testcase name=\"{}\"><skipped message=\"{}\"/></testcase>",
                xml_escape(name),
                xml_escape(&why.join("; "))
            );
        }
        out.push_str("  </testsuite>\n");
    }
    for e in &summary.parse_errors {
        let _ = writeln!(
            out,
            "  <testsuite name=\"parse errors\" tests=\"1\" failures=\"1\">\n    <testcase name=\"parse\"><failure message=\"{}\"/></testcase>\n  </testsuite>",
            xml_escape(e)
        );
    }
    out.push_str("</testsuites>\n");
    out
}

fn slug(s: &str) -> String {
    s.to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { '-' })
        .collect()
}

fn tag_list(tags: &[String], line: usize) -> Value {
    Value::Array(
        tags.iter()
            .map(|t| json!({"name": format!("@{t}"), "line": line}))
            .collect(),
    )
}

/// Cucumber JSON (the format of cucumber-jvm and cucumber-js reporters).
pub fn cucumber_json(summary: &Summary) -> Value {
    let mut features: Vec<Value> = Vec::new();
    let mut files: Vec<&str> = Vec::new();
    for s in &summary.scenarios {
        if !files.contains(&s.file.as_str()) {
            files.push(&s.file);
        }
    }
    for file in files {
        let cases: Vec<&ScenarioRecord> = summary
            .scenarios
            .iter()
            .filter(|s| s.file == file)
            .collect();
        let Some(first) = cases.first() else { continue };
        let fid = slug(&first.feature);
        let elements: Vec<Value> = cases
            .iter()
            .map(|s| {
                let steps: Vec<Value> = s
                    .steps
                    .iter()
                    .map(|st| {
                        let mut result = json!({"duration": u64::try_from(st.wall.as_nanos()).unwrap_or(u64::MAX)});
                        match &st.status {
                            Status::Passed => result["status"] = json!("passed"),
                            Status::Skipped => result["status"] = json!("skipped"),
                            Status::Failed(msg) => {
                                result["status"] = json!("failed");
                                result["error_message"] = json!(msg);
                            }
                        }
                        json!({"keyword": st.keyword, "name": st.text, "line": st.line, "result": result})
                    })
                    .collect();
                json!({"id": format!("{fid};{}", slug(&s.name)), "keyword": "Scenario", "type": "scenario",
                    "name": s.name, "line": s.line, "description": "", "tags": tag_list(&s.tags, s.line),
                    "steps": steps})
            })
            .collect();
        features.push(
            json!({"uri": file, "id": fid, "keyword": "Feature", "name": first.feature,
            "description": first.feature_description, "line": first.feature_line,
            "tags": tag_list(&first.feature_tags, first.feature_line), "elements": elements}),
        );
    }
    Value::Array(features)
}

/// Writes `junit.xml` and `cucumber.json` into `dir`.
pub fn write_reports(dir: &Path, summary: &Summary) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let junit_path = dir.join("junit.xml");
    std::fs::write(&junit_path, junit(summary))
        .map_err(|e| format!("writing {}: {e}", junit_path.display()))?;
    let json_path = dir.join("cucumber.json");
    let text = serde_json::to_string_pretty(&cucumber_json(summary))
        .map_err(|e| format!("encoding {}: {e}", json_path.display()))?;
    std::fs::write(&json_path, text).map_err(|e| format!("writing {}: {e}", json_path.display()))
}

/// Each failed scenario and why, a line each (empty when none failed).
fn failures(summary: &Summary) -> String {
    let mut out = String::new();
    for s in &summary.scenarios {
        if let Some(why) = &s.failure {
            let _ = writeln!(out, "FAILED {} › {}: {why}", s.feature, s.name);
        }
    }
    out
}

/// Prints the `test result:` line that `.ci/run` counts and returns the
/// exit code: 1 when a scenario failed or none ran. Each failure's step
/// and message come again just above it: a CI log cut to its tail still
/// says why.
pub fn test_result(summary: &Summary, what: &str) -> i32 {
    print!("{}", failures(summary));
    let failed = summary.failed();
    let verdict = if failed > 0 { "FAILED" } else { "ok" };
    println!(
        "test result: {verdict}. {} passed; {failed} failed; 0 ignored ({what})",
        summary.passed()
    );
    i32::from(failed > 0 || summary.scenarios.is_empty())
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

    #[test]
    fn failures_name_the_scenario_and_say_why() {
        let scenario = |name: &str, failure: Option<&str>| ScenarioRecord {
            feature: "Faults".into(),
            name: name.into(),
            failure: failure.map(String::from),
            ..ScenarioRecord::default()
        };
        let summary = Summary {
            scenarios: vec![
                scenario("passes", None),
                scenario("fails", Some("step \"Then x\" (line 3): no x")),
            ],
            ..Summary::default()
        };
        assert_eq!(
            failures(&summary),
            "FAILED Faults › fails: step \"Then x\" (line 3): no x\n"
        );
    }
}
