//! `best-effort-atomic-scale-up.autoscaling.x-k8s.io` (upstream's
//! `provisioningrequest/besteffortatomic`): room for every pod of the
//! request, from the cluster as it is and one all-or-nothing scale-up. The
//! pods that fit are placed; for the others, scale-up plans with
//! all-or-nothing (an option must take every one of them, and no limit may
//! cap its increase) and asks for each increase in one piece
//! (`AtomicIncreaseSize`, a plain increase where the provider has none).
//! `Provisioned=True` once the increase is made ("best effort": the nodes
//! are not awaited), `Provisioned=False` otherwise, retried after a backoff.

use predicates::PodInfo;

use super::conditions::Verdict;
use super::types::ProvisioningClass;
use crate::clusterstate::ClusterStateRegistry;
use crate::context::AutoscalingContext;
use crate::processors::provreq::{ProvReqProcessing, place_all_that_fit};
use crate::scaleup::ScaleUpStatus;
use crate::scaleup::orchestrator::{ScaleUpInputs, ScaleUpOutcome, scale_up};
use crate::simulator::Snapshot;

/// Serves the first best-effort-atomic request among the pods' requests;
/// `None` when there is none. `inputs.pods` are the request's pods.
pub async fn provision(
    ctx: &AutoscalingContext,
    registry: &mut ClusterStateRegistry,
    snapshot: &mut Snapshot,
    mut inputs: ScaleUpInputs<'_>,
    p: &ProvReqProcessing,
) -> Option<ScaleUpOutcome> {
    if inputs.pods.is_empty() {
        return None;
    }
    let mut pr = p
        .requests_for_pods(&inputs.pods, ProvisioningClass::BestEffortAtomicScaleUp)
        .into_iter()
        .next()?;
    snapshot.fork();
    // The injected pods are all of the request's: some may fit already.
    let left: Vec<PodInfo> = place_all_that_fit(snapshot, std::mem::take(&mut inputs.pods));
    let (outcome, verdict) = if left.is_empty() {
        (
            ScaleUpOutcome::stopped(ScaleUpStatus::NotNeeded),
            Verdict::CapacityFound,
        )
    } else {
        let inputs = ScaleUpInputs {
            pods: left,
            all_or_nothing: true,
            ..inputs
        };
        let outcome = scale_up(ctx, registry, snapshot, inputs).await;
        let verdict = if outcome.status == ScaleUpStatus::Successful {
            Verdict::CapacityProvisioned
        } else {
            Verdict::CapacityNotFound
        };
        (outcome, verdict)
    };
    snapshot.revert();
    verdict.apply(&mut pr, p.clock_now());
    if let Err(e) = p.client.update_status(&pr).await {
        let (type_, status, ..) = verdict.parts();
        tracing::error!(
            "failed to add {type_}={} condition to ProvReq {}, err: {e}",
            if status { "true" } else { "false" },
            pr.key()
        );
        if verdict != Verdict::CapacityNotFound {
            return Some(ScaleUpOutcome {
                status: ScaleUpStatus::Error,
                ..outcome
            });
        }
    }
    Some(outcome)
}
