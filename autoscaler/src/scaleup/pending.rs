//! Which pending pods count for scale-up (ca-compat §4.1): the scheduler's
//! unschedulable pods and those of bypassed schedulers, minus expendable,
//! nominated and too-young ones; then the pods that already fit on existing
//! or upcoming nodes are filtered out (upstream's `filter_out_schedulable`).

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use predicates::PodInfo;

use super::equivalence::equivalent;
use crate::cache::is_expendable;
use crate::simulator::Snapshot;
use crate::simulator::drainability::controller_of;

/// `cluster-autoscaler.kubernetes.io/pod-scale-up-delay`.
pub const POD_SCALE_UP_DELAY: &str = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay";

/// Pods the scheduler could not place, or that a bypassed scheduler owns
/// (ca-compat §4.1 classification), minus expendable and nominated ones.
pub fn pending_pods<'a>(
    unbound: impl Iterator<Item = &'a PodInfo>,
    expendable_cutoff: i32,
    bypassed_schedulers: &[String],
) -> Vec<PodInfo> {
    unbound
        .filter(|info| {
            let p = &info.pod;
            p.metadata.deletion_timestamp.is_none()
                && p.status
                    .as_ref()
                    .and_then(|s| s.nominated_node_name.as_deref())
                    .is_none_or(str::is_empty)
                && (crate::cache::is_unschedulable(p) || bypassed(p, bypassed_schedulers))
                && !is_expendable(p, expendable_cutoff)
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
/// smaller annotation is logged and the flag is used.
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
        .map_or(now, |t| SystemTime::from(t.0));
    created + d < now || (d.is_zero() && created <= now)
}

/// Drops the pods that fit on existing or upcoming nodes (ca-compat §4.1
/// step 6), placing them in the snapshot for the rest of the loop. Pods go
/// by priority, highest first; once a pod of an equivalence group fits
/// nowhere, its equals are not tried again.
pub fn filter_out_schedulable(snapshot: &mut Snapshot, pods: Vec<PodInfo>) -> Vec<PodInfo> {
    let mut pods = pods;
    pods.sort_by_key(|p| std::cmp::Reverse(p.priority));
    let mut failed: Vec<PodInfo> = Vec::new();
    let mut left = Vec::new();
    let mut hint = 0;
    for pod in pods {
        if failed.iter().any(|f| equivalent(f, &pod)) {
            left.push(pod);
            continue;
        }
        match snapshot.find_fit(&pod, hint, |_| true) {
            Some(i) => {
                snapshot.add_pod(i, pod);
                hint = i;
            }
            None => {
                if controller_of(&pod.pod).is_some() {
                    failed.push(pod.clone());
                }
                left.push(pod);
            }
        }
    }
    left
}
