//! The scale-up step with ProvisioningRequests (upstream's
//! `provisioningrequest/orchestrator`, the `WrapperOrchestrator`): the pods
//! to help are split into the injected pods of a request and the others.
//! When there are both, loops take turns: one serves the request (the
//! classes in order, check-capacity first), the next the other pods, so
//! neither starves the other. A request's simulation is forked and undone:
//! only the booking (`crate::processors::provreq`) holds its room in later
//! loops.

use predicates::PodInfo;

use super::types::CONSUME_ANNOTATION;
use super::{besteffortatomic, checkcapacity};
use crate::clusterstate::ClusterStateRegistry;
use crate::context::AutoscalingContext;
use crate::processors::provreq::ProvReqProcessing;
use crate::scaleup::ScaleUpStatus;
use crate::scaleup::orchestrator::{ScaleUpInputs, ScaleUpOutcome, scale_up};
use crate::simulator::Snapshot;

/// Whether the loop serves a request this time: kept across loops.
#[derive(Debug, Default)]
pub struct Turns {
    requests_next: bool,
}

/// Runs the loop's scale-up: a request's pods or the other pods, in turns.
pub async fn scale_up_with_requests(
    ctx: &AutoscalingContext,
    registry: &mut ClusterStateRegistry,
    snapshot: &mut Snapshot,
    mut inputs: ScaleUpInputs<'_>,
    p: &ProvReqProcessing,
    turns: &mut Turns,
) -> ScaleUpOutcome {
    let (requested, regular): (Vec<PodInfo>, Vec<PodInfo>) = std::mem::take(&mut inputs.pods)
        .into_iter()
        .partition(is_injected);
    if requested.is_empty() {
        turns.requests_next = false;
    } else if regular.is_empty() {
        turns.requests_next = true;
    }
    let serve_request = turns.requests_next;
    turns.requests_next = !turns.requests_next;
    if !serve_request {
        let inputs = ScaleUpInputs {
            pods: regular,
            ..inputs
        };
        return scale_up(ctx, registry, snapshot, inputs).await;
    }
    snapshot.fork();
    let outcome = provision(
        ctx,
        registry,
        snapshot,
        ScaleUpInputs {
            pods: requested,
            ..inputs
        },
        p,
    )
    .await;
    snapshot.revert();
    outcome
}

/// The classes in order; the first that finds a request of its own
/// answers.
async fn provision(
    ctx: &AutoscalingContext,
    registry: &mut ClusterStateRegistry,
    snapshot: &mut Snapshot,
    inputs: ScaleUpInputs<'_>,
    p: &ProvReqProcessing,
) -> ScaleUpOutcome {
    if let Some(combined) = checkcapacity::provision(snapshot, &inputs.pods, p).await
        && let Some(status) = combined.status
    {
        return ScaleUpOutcome::stopped(status);
    }
    match besteffortatomic::provision(ctx, registry, snapshot, inputs, p).await {
        Some(outcome) => outcome,
        None => ScaleUpOutcome::stopped(ScaleUpStatus::NotTried),
    }
}

/// Whether a pod was injected for a request (it carries the request's
/// annotation; pods of users that consume one were filtered out before).
fn is_injected(pod: &PodInfo) -> bool {
    pod.pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(CONSUME_ANNOTATION))
}
