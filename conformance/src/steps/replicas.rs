//! The autoscaler as several replicas with leader election
//! ([`crate::replicas`]): starting them, killing the leader, and which
//! replicas acted, read from the embedded API server's log of writes.

use std::time::Duration;

use cucumber::{given, then, when};

use crate::world::{CaWorld, StepResult};

#[given(regex = r"^the autoscaler runs as (\d+) replicas with leader election$")]
fn replicas(w: &mut CaWorld, n: usize) -> StepResult {
    if w.running.is_some() {
        return Err("the replicas are set before the cluster starts".into());
    }
    if n < 2 {
        return Err(format!(
            "{n} replicas: leader election needs 2 or more (one autoscaler is the default)"
        ));
    }
    w.replicas = n;
    Ok(())
}

/// Waits up to a minute for a replica to hold the Lease, then kills it.
#[when("the leading replica is killed")]
async fn kill_leader(w: &mut CaWorld) -> StepResult {
    let killed = w
        .running()
        .await?
        .kill_leader(Duration::from_secs(60))
        .await?;
    eprintln!("killed the leading replica {killed}");
    Ok(())
}

#[then(regex = r"^(\d+) replicas? acted, one at a time$")]
async fn acted_one_at_a_time(w: &mut CaWorld, n: usize) -> StepResult {
    let writes = w.running().await?.writes()?;
    let turns = crate::replicas::turns(&writes)?;
    if turns.len() == n {
        return Ok(());
    }
    let seen: Vec<String> = turns
        .iter()
        .map(|t| format!("{} ({} writes)", t.client, t.writes))
        .collect();
    Err(format!(
        "{} replicas acted, one at a time, not {n}: {}",
        turns.len(),
        if seen.is_empty() {
            "none".to_string()
        } else {
            seen.join(", then ")
        }
    ))
}
