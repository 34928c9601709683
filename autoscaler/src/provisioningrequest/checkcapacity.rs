//! `check-capacity.autoscaling.x-k8s.io` (upstream's
//! `provisioningrequest/checkcapacity`): is there room for every pod of the
//! request in the cluster as it is? Never a scale-up. A request that fits is
//! `Provisioned=True` and its pods stay placed for the rest of the check, so
//! that the next request of a batch cannot count on the same room; one that
//! does not is `Provisioned=False` (retried after a backoff), or `Failed`
//! with the `noRetry: "true"` parameter.
//!
//! One request a loop, the one whose pods were injected; with
//! `--check-capacity-batch-processing`, up to
//! `--check-capacity-provisioning-request-max-batch-size` due requests, until
//! `--check-capacity-provisioning-request-batch-timebox` runs out.

use std::time::Instant;

use predicates::PodInfo;

use super::conditions::Verdict;
use super::types::{NO_RETRY_PARAMETER, ProvisioningClass, ProvisioningRequest};
use crate::processors::provreq::ProvReqProcessing;
use crate::scaleup::ScaleUpStatus;
use crate::simulator::Snapshot;

/// The best of several results (upstream's `combinedStatusSet`): a success
/// anywhere wins, then an error, then no options.
#[derive(Debug, Default)]
pub struct Combined {
    /// The best so far; `None` is "not tried".
    pub status: Option<ScaleUpStatus>,
}

impl Combined {
    fn rank(s: ScaleUpStatus) -> u8 {
        match s {
            ScaleUpStatus::Successful => 3,
            ScaleUpStatus::Error => 2,
            ScaleUpStatus::NoOptionsAvailable => 1,
            _ => 0,
        }
    }

    /// Adds a result.
    pub fn add(&mut self, s: ScaleUpStatus) {
        if self
            .status
            .is_none_or(|cur| Self::rank(s) > Self::rank(cur))
        {
            self.status = Some(s);
        }
    }
}

/// Checks the capacity of the requests to serve; `None` when there is none
/// of this class.
pub async fn provision(
    snapshot: &mut Snapshot,
    pods: &[PodInfo],
    p: &ProvReqProcessing,
) -> Option<Combined> {
    let started = Instant::now();
    let batch_enabled = p.settings.batch && p.settings.max_batch > 1;
    let batch: Vec<(ProvisioningRequest, Vec<PodInfo>)> = if batch_enabled {
        let batch = p.due_requests(Some(ProvisioningClass::CheckCapacity), p.settings.max_batch);
        tracing::info!(
            "Processing provisioning requests as batch of size {}",
            batch.len()
        );
        batch
            .into_iter()
            .map(|(req, pods)| (req.pr, pods))
            .collect()
    } else {
        tracing::info!("Processing single provisioning request (non-batch)");
        let first = p
            .requests_for_pods(pods, ProvisioningClass::CheckCapacity)
            .into_iter()
            .next();
        first.map(|pr| (pr, pods.to_vec())).into_iter().collect()
    };
    if batch.is_empty() {
        return None;
    }
    p.mark_processed();
    let now = p.clock_now();
    let mut combined = Combined::default();
    let mut checked = Vec::new();
    for (mut pr, pods) in batch {
        Verdict::Accepted.apply(&mut pr, now);
        let verdict = check(snapshot, &pods, &pr);
        combined.add(if verdict == Verdict::CapacityFound {
            ScaleUpStatus::Successful
        } else {
            ScaleUpStatus::NoOptionsAvailable
        });
        verdict.apply(&mut pr, now);
        checked.push(pr);
        if batch_enabled && started.elapsed() > p.settings.batch_timebox {
            tracing::info!(
                "Batch timebox exceeded, processed {} check capacity provisioning requests this iteration",
                checked.len()
            );
            break;
        }
    }
    let writes = checked.iter().map(|pr| p.client.update_status(pr));
    for (pr, result) in checked.iter().zip(futures::future::join_all(writes).await) {
        if let Err(e) = result {
            tracing::error!("failed to update ProvReq {}, err: {e}", pr.key());
            combined.add(ScaleUpStatus::Error);
        }
    }
    Some(combined)
}

/// Whether every pod fits, all or none placed (upstream's `checkCapacity`).
fn check(snapshot: &mut Snapshot, pods: &[PodInfo], pr: &ProvisioningRequest) -> Verdict {
    snapshot.fork();
    let mut hint = 0;
    let all = pods
        .iter()
        .all(|pod| match snapshot.find_fit(pod, hint, |_| true) {
            Some(i) => {
                snapshot.add_pod(i, pod.clone());
                hint = i;
                true
            }
            None => false,
        });
    if all {
        snapshot.commit();
        return Verdict::CapacityFound;
    }
    snapshot.revert();
    match pr.parameter(NO_RETRY_PARAMETER) {
        Some("true") => Verdict::CapacityNotFoundNoRetry,
        Some("false") | None => Verdict::CapacityNotFound,
        Some(other) => {
            tracing::error!(
                "Ignoring Parameter {NO_RETRY_PARAMETER} with invalid value: {other} in ProvisioningRequest: {}. Supported values are: \"true\", \"false\"",
                pr.name()
            );
            Verdict::CapacityNotFound
        }
    }
}
