//! The passing of scenario time.

use std::time::Duration;

use cucumber::when;

use super::{node_names, watch_decisions};
use crate::world::{CaWorld, StepResult};

#[when(regex = r"^(\d+) minutes? pass(?:es)?$")]
async fn minutes_pass(w: &mut CaWorld, minutes: u64) -> StepResult {
    w.pass(Duration::from_secs(60 * minutes)).await
}

#[when(regex = r"^(\d+) seconds? pass(?:es)?$")]
async fn seconds_pass(w: &mut CaWorld, seconds: u64) -> StepResult {
    w.pass(Duration::from_secs(seconds)).await
}

#[when(regex = r"^(\d+) minutes? and (\d+) seconds? pass$")]
async fn minutes_and_seconds_pass(w: &mut CaWorld, minutes: u64, seconds: u64) -> StepResult {
    w.pass(Duration::from_secs(60 * minutes + seconds)).await
}

/// Waits (up to 5 minutes) for the first loop that finds a node of the
/// group unneeded: the start of its unneeded time.
#[when(regex = r#"^the autoscaler finds a node of "(\S+)" unneeded$"#)]
async fn finds_unneeded(w: &mut CaWorld, group: String) -> StepResult {
    let names = node_names(w, &group).await?;
    let found = watch_decisions(w, 300, |d| d.unneeded.keys().any(|n| names.contains(n))).await?;
    found.map_err(|d| {
        format!(
            "no node of {group} became unneeded in 5 minutes; unremovable: {:?}",
            d.unremovable
        )
    })
}
