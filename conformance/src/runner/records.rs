//! What a run found: each step's and scenario's outcome, and the
//! [`Summary`] of the run.

use std::time::Duration;

/// The outcome of a step.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Status {
    /// It passed.
    Passed,
    /// It failed, with the message.
    Failed(String),
    /// It did not run (an earlier step failed).
    Skipped,
}

/// One step of a finished scenario.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
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
    /// Binary mode: the time scale it ran at ([`super::pace`]).
    pub time_scale: Option<f64>,
    /// Wall time.
    pub wall: Duration,
    /// Why the scenario failed, if it did.
    pub failure: Option<String>,
}

/// The results of a run.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    /// Finished scenarios in order.
    pub scenarios: Vec<ScenarioRecord>,
    /// Feature files that did not parse.
    pub parse_errors: Vec<String>,
    /// Scenarios the tag filter left out.
    pub filtered_out: Vec<String>,
    /// Examples over 100 nodes that a run without `--tags` leaves out
    /// ([`super::pace`]).
    pub left_out: Vec<String>,
    /// Scenarios left out because the binary under test lacks a flag or
    /// a version they need, with the reasons.
    pub skipped: Vec<(String, Vec<String>)>,
    /// Wall time of the whole run.
    pub wall: Duration,
    /// The share of the scenarios run (`--shard`), none for all.
    pub shard: Option<super::Shard>,
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
