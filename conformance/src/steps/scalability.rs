//! The FAQ's service level objective, read from the cluster: "No more
//! than 30 sec latency on small clusters (less than 100 nodes with up to 30
//! pods each), with the average latency of about 5 sec. No more than 60 sec
//! latency on big clusters (100 to 1000 nodes), with average latency of
//! about 15 sec." How each pod's latency is measured: [`crate::latency`].
//! And the main loop's time, from the autoscaler's own metric, for the
//! idle large cluster.

use std::time::Duration;

use cucumber::then;

use crate::compare::LoopTime;
use crate::latency::{LatencySummary, scale_up_latencies};
use crate::world::{CaWorld, StepResult};

/// The objective's bound is on the slowest pod ("no more than"); its
/// averages are "about", so the step prints the mean and percentiles
/// rather than failing on them.
#[then(
    regex = r#"^every pod of "(\S+)" got a new node within (\d+) seconds? of being marked unschedulable$"#
)]
async fn scale_up_slo(w: &mut CaWorld, app: String, max: u64) -> StepResult {
    let client = w.running().await?.cluster.client();
    let latencies = scale_up_latencies(&client, &format!("app={app}")).await?;
    if let Some(first) = latencies.unplaced.first() {
        return Err(format!(
            "{} pods of {app} have no node yet (the first: {first})",
            latencies.unplaced.len()
        ));
    }
    let Some(summary) = LatencySummary::of(latencies.measured) else {
        return Err(format!(
            "no pod of {app} was ever marked unschedulable: nothing needed a scale-up"
        ));
    };
    let max = Duration::from_secs(max);
    if summary.max <= max {
        println!("      scale-up latency of {app}: {summary}");
        return Ok(());
    }
    Err(format!(
        "scale-up latency of {app} ({summary}) is over the objective of {} s",
        max.as_secs()
    ))
}

/// The mean of `cluster_autoscaler_function_duration_seconds{function="main"}`
/// since the autoscaler started (real time, in both modes).
#[then(regex = r#"^the autoscaler's main loop took (\d+) seconds? or less on average$"#)]
async fn main_loop_time(w: &mut CaWorld, max: u64) -> StepResult {
    let text = super::assertions::metrics_text(w).await?;
    let Some(loops) = LoopTime::from_metrics(&text) else {
        return Err(
            "the metrics have no cluster_autoscaler_function_duration_seconds{function=\"main\"} \
             with a loop counted"
                .into(),
        );
    };
    let mean = loops.mean.as_secs_f64();
    if loops.mean <= Duration::from_secs(max) {
        println!(
            "      main loop: mean {mean:.3} s over {} loops",
            loops.count
        );
        Ok(())
    } else {
        Err(format!(
            "the main loop took {mean:.3} s on average over {} loops, over {max} s",
            loops.count
        ))
    }
}
