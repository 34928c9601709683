//! The passing of scenario time.

use std::time::Duration;

use cucumber::{given, when};

use crate::world::{CaWorld, StepResult};

/// The autoscaler's machine's clock off the cluster's (in-process only:
/// a binary reads its own machine's clock, [`crate::binary::IN_PROCESS_STEPS`]).
#[given(
    regex = r"^the autoscaler's clock is (\d+) (second|minute|hour)s? (ahead of|behind) the cluster's$"
)]
fn clock_skew(w: &mut CaWorld, n: u64, unit: String, direction: String) -> StepResult {
    if w.running.is_some() {
        return Err("the autoscaler's clock is set before the cluster starts".into());
    }
    let seconds = match unit.as_str() {
        "second" => 1,
        "minute" => 60,
        _ => 3600,
    };
    w.clock_skew = Some((Duration::from_secs(n * seconds), direction == "ahead of"));
    Ok(())
}

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

/// The soft taint CA puts on the nodes it finds unneeded, in the loop that
/// finds them (`--max-bulk-soft-taint-count` at a time, 10 by default).
const DELETION_CANDIDATE_TAINT: &str = "DeletionCandidateOfClusterAutoscaler";

/// Waits (up to 5 minutes) for the first loop that finds a node of the
/// group unneeded, the start of its unneeded time: the loop that gives it
/// CA's `DeletionCandidateOfClusterAutoscaler` soft taint. (Every CA
/// release does; what it publishes besides, the unneeded-nodes gauge, does
/// not say which node.)
#[when(regex = r#"^the autoscaler finds a node of "(\S+)" unneeded$"#)]
async fn finds_unneeded(w: &mut CaWorld, group: String) -> StepResult {
    for _ in 0..300 {
        let nodes = w.group_nodes(&group).await?;
        let candidate = nodes.iter().any(|n| {
            n.spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|ts| ts.iter().any(|t| t.key == DELETION_CANDIDATE_TAINT))
        });
        if candidate {
            return Ok(());
        }
        w.pass(Duration::from_secs(1)).await?;
    }
    Err(format!(
        "no node of {group} got the {DELETION_CANDIDATE_TAINT} soft taint (found unneeded) in 5 minutes"
    ))
}

/// CA takes a node of a group as its template only once the node has been
/// Ready for a minute (upstream's `stabilizationDelay`, a constant): this
/// waits that minute and a second in the autoscaler's time, which for a
/// binary is real time whatever the scale (61 s, many scenario minutes).
#[when(regex = r#"^the nodes of "(\S+)" have been ready long enough to be its template$"#)]
async fn template_candidates(w: &mut CaWorld, group: String) -> StepResult {
    let r = w.running().await?;
    let real_minute = r.scenario(Duration::from_secs(61));
    w.pass(real_minute.max(Duration::from_secs(61))).await?;
    if w.group_nodes(&group).await?.is_empty() {
        return Err(format!("node group {group} has no node"));
    }
    Ok(())
}
