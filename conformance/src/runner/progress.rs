//! The cucumber writer ([`Report`]): a line per scenario as it finishes,
//! the failing step and its message, and the records of the run.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cucumber::event::{self, Cucumber, Feature, Hook, Rule, Scenario, Step};
use cucumber::{Writer, cli, parser};

use super::records::{ScenarioRecord, Status, StepRecord, Summary};
use super::report::format_duration;
use crate::world::CaWorld;

/// What the writer accumulates.
#[derive(Default)]
pub(super) struct State {
    pub(super) summary: Summary,
    current: Option<(ScenarioRecord, Instant)>,
    step_started: Option<Instant>,
    /// Set by the after hook, read when the scenario finishes.
    pub(super) scenario_time: Duration,
    /// Set by the before hook in binary mode: the example's time scale.
    pub(super) time_scale: Option<f64>,
    /// The autoscaler binary's log, when the scenario failed.
    pub(super) log: Option<PathBuf>,
    /// Set by the after hook when the scenario used an extension of ours
    /// without the tag that says so.
    pub(super) extension_violation: Option<String>,
}

/// The cucumber writer: progress lines and the records.
pub(super) struct Report {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) verbose: bool,
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
                    time_scale: None,
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
                        "no step definition matches this step (docs/reference/steps.md lists every step)"
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
                record.time_scale = state.time_scale.take();
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
                let scale = record
                    .time_scale
                    .map_or_else(String::new, |s| format!(" at time scale {s}"));
                let times = format!(
                    "{} scenario time{scale}, {:.2}s wall",
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
