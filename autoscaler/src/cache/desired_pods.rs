//! How many pods a controller wants to exist, for the kinds proactive
//! scale-up completes (`crate::processors::podinjection`; `None`: a kind or
//! a controller it leaves alone). Read when the cache keeps the controller.

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;

/// A ReplicaSet's replicas.
pub fn replica_set(rs: &ReplicaSet) -> Option<i32> {
    Some(rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0))
}

/// A Job's pods still to run: its parallelism for a work-queue Job
/// (completions unset) none of whose pods succeeded yet, else the
/// completions still missing, at most its parallelism (both 1 when
/// unset).
pub fn job(job: &Job) -> Option<i32> {
    let spec = job.spec.as_ref();
    let parallelism = spec.and_then(|s| s.parallelism);
    let completions = spec.and_then(|s| s.completions);
    let succeeded = job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
    if let (None, Some(p)) = (completions, parallelism)
        && p >= 0
        && succeeded == 0
    {
        return Some(p);
    }
    let incomplete = completions.unwrap_or(1) - succeeded;
    Some(incomplete.min(parallelism.unwrap_or(1)).max(0))
}

/// A StatefulSet's replicas, with `Parallel` pod management only.
pub fn stateful_set(sts: &StatefulSet) -> Option<i32> {
    let spec = sts.spec.as_ref()?;
    (spec.pod_management_policy.as_deref() == Some("Parallel")).then(|| spec.replicas.unwrap_or(0))
}
