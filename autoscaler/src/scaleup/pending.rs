//! Which pending pods count for scale-up (docs/reference/ca-rules.md §4.1): the
//! scheduler's unschedulable pods and those of bypassed schedulers
//! ([`pending_pods`], before the pod-list processors of
//! `crate::processors::pods`), and, after them, those old enough
//! ([`old_enough`]).

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use predicates::PodInfo;

/// `cluster-autoscaler.kubernetes.io/pod-scale-up-delay`.
pub const POD_SCALE_UP_DELAY: &str = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay";

/// Pods the scheduler could not place, or that a bypassed scheduler owns
/// (docs/reference/ca-rules.md §4.1 classification), not being deleted (upstream's
/// unschedulable pod lister).
pub fn pending_pods<'a>(
    unbound: impl Iterator<Item = &'a PodInfo>,
    bypassed_schedulers: &[String],
) -> Vec<PodInfo> {
    unbound
        .filter(|info| {
            let p = &info.pod;
            p.metadata.deletion_timestamp.is_none()
                && (crate::cache::is_unschedulable(p) || bypassed(p, bypassed_schedulers))
        })
        .cloned()
        .collect()
}

/// Whether a bypassed scheduler owns the pod and has not processed it.
fn bypassed(p: &Pod, bypassed_schedulers: &[String]) -> bool {
    let scheduler = p
        .spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or("default-scheduler");
    let unprocessed = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
        .is_none_or(|c| c.status == "False" && c.reason.as_deref().unwrap_or("").is_empty());
    bypassed_schedulers.iter().any(|b| b == scheduler) && unprocessed
}

/// Whether a pod is old enough to count: older than `--new-pod-scale-up-delay`
/// or its own (larger) `pod-scale-up-delay` annotation. An unparsable or
/// smaller annotation is logged and the flag is used. A pod without a
/// creation time (a CapacityBuffer's fake pod) is old, as Go's zero time.
pub fn old_enough(pod: &Pod, delay: Duration, now: SystemTime) -> bool {
    let mut d = delay;
    if let Some(v) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_SCALE_UP_DELAY))
    {
        match simclock::parse_go_duration(v) {
            Some(own) if own >= delay => d = own,
            _ => tracing::error!(
                "pod {}/{}: annotation {POD_SCALE_UP_DELAY}={v:?} is not a Go duration at least --new-pod-scale-up-delay ({}); using the flag",
                pod.metadata.namespace.as_deref().unwrap_or(""),
                pod.metadata.name.as_deref().unwrap_or(""),
                simclock::format_go_duration(delay)
            ),
        }
    }
    let created = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(SystemTime::UNIX_EPOCH, |t| SystemTime::from(t.0));
    created + d < now || (d.is_zero() && created <= now)
}
