//! The new-pod buffer (upstream's `allPodsAreNew` in
//! `core/static_autoscaler.go`): while every pending pod is very new, the
//! loop does not scale up ("Unschedulable pods are very new, waiting one
//! iteration for more"), so that one decision covers a burst of pods still
//! being created; it also skips scale-down for that loop.
//!
//! Two buffers, measured from the oldest pending pod's creation:
//!
//! - [`NEW_POD_BUFFER`], 2 s, for every pod: upstream's
//!   `unschedulablePodTimeBuffer`, applied by default as upstream does.
//!   With our `--very-new-pods-wait=false` (and `--frequent-loops-enabled`,
//!   on by default) we do not apply it (`docs/operators/migrate-from-upstream.md`,
//!   "Timings"). Upstream's buffer insures against acting on part of a burst
//!   when the rest would wait a whole `--scan-interval`. Our loop with
//!   frequent loops starts again for every new unschedulable pod and for
//!   every pod bound while nodes are upcoming, so the rest of a burst waits
//!   one loop (tens of milliseconds at 30,000 pods), and the buffer would
//!   only add its 2 s to the FAQ's scale-up latency of every pod of the
//!   burst's first second. It stays the default because a burst then gets
//!   one decision, as with upstream (the same increases and events).
//! - [`NEW_GPU_POD_BUFFER`], 30 s, when a pending pod requests any
//!   vendor's GPU ([`gpu::pod_requests_gpu`], init containers included):
//!   upstream's `unschedulablePodWithGpuTimeBuffer`
//!   ("nodes with GPU are very expensive and we're ready to sacrifice a bit
//!   more latency to wait for more pods and make a more informed scale-up
//!   decision"). That reason holds for us too, so it always applies.
//!
//! With `--bypassed-scheduler-names` set, neither applies (upstream: the
//! wait "only makes sense if CA is not trying to react quickly").

use std::time::{Duration, SystemTime};

use predicates::PodInfo;

use crate::gpu;

/// Pending pods younger than this are very new (upstream's
/// `unschedulablePodTimeBuffer`).
pub const NEW_POD_BUFFER: Duration = Duration::from_secs(2);

/// Pending GPU pods younger than this are very new (upstream's
/// `unschedulablePodWithGpuTimeBuffer`).
pub const NEW_GPU_POD_BUFFER: Duration = Duration::from_secs(30);

/// If every pending pod is very new at `now`, when the wait ends (the time
/// the next loop can scale up); `None` when the loop may scale up now.
/// A pod without a creation time counts as old, as in upstream (Go's zero
/// time).
pub fn very_new_until(
    pending: &[PodInfo],
    now: SystemTime,
    no_burst_wait: bool,
) -> Option<SystemTime> {
    let all = (!no_burst_wait)
        .then(|| pending.iter().map(created).min())
        .flatten()
        .map(|oldest| oldest + NEW_POD_BUFFER);
    let gpu = pending
        .iter()
        .filter(|p| gpu::pod_requests_gpu(&p.requests))
        .map(created)
        .min()
        .map(|oldest| oldest + NEW_GPU_POD_BUFFER);
    [all, gpu]
        .into_iter()
        .flatten()
        .filter(|&end| end > now)
        .max()
}

/// When a pod was created; the epoch when it has no creation time.
fn created(p: &PodInfo) -> SystemTime {
    p.pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(SystemTime::UNIX_EPOCH, |t| SystemTime::from(t.0))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::*;

    const T0: u64 = 1_800_000_000;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(T0 + secs)
    }

    fn pod(name: &str, created: Option<u64>, gpu: bool) -> PodInfo {
        let mut requests = json!({"cpu": "1"});
        if gpu {
            requests["nvidia.com/gpu"] = json!("1");
        }
        let mut p: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
        }))
        .expect("pod");
        p.metadata.creation_timestamp = created.map(|s| {
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                jiff::Timestamp::from_second(i64::try_from(T0 + s).expect("seconds"))
                    .expect("timestamp"),
            )
        });
        PodInfo::new(Arc::new(p))
    }

    #[test]
    fn pods_wait_until_the_oldest_is_two_seconds_old() {
        let pods = [pod("a", Some(10), false), pod("b", Some(11), false)];
        assert_eq!(very_new_until(&pods, at(10), false), Some(at(12)));
        assert_eq!(very_new_until(&pods, at(11), false), Some(at(12)));
        assert_eq!(very_new_until(&pods, at(12), false), None);
    }

    #[test]
    fn one_old_pod_ends_the_wait_for_all() {
        let pods = [pod("old", Some(0), false), pod("new", Some(10), false)];
        assert_eq!(very_new_until(&pods, at(10), false), None);
    }

    #[test]
    fn a_pod_without_a_creation_time_is_old() {
        let pods = [pod("a", None, false), pod("b", Some(10), false)];
        assert_eq!(very_new_until(&pods, at(10), false), None);
    }

    #[test]
    fn without_the_burst_wait_new_pods_do_not_wait() {
        let pods = [pod("a", Some(10), false)];
        assert_eq!(very_new_until(&pods, at(10), true), None);
    }

    #[test]
    fn gpu_pods_wait_thirty_seconds_with_the_burst_wait_or_not() {
        let pods = [pod("cpu", Some(0), false), pod("gpu", Some(10), true)];
        for no_wait in [false, true] {
            assert_eq!(very_new_until(&pods, at(10), no_wait), Some(at(40)));
            assert_eq!(very_new_until(&pods, at(39), no_wait), Some(at(40)));
            assert_eq!(very_new_until(&pods, at(40), no_wait), None);
        }
    }

    #[test]
    fn the_later_of_both_waits_counts() {
        let pods = [pod("cpu", Some(10), false), pod("gpu", Some(10), true)];
        assert_eq!(very_new_until(&pods, at(10), false), Some(at(40)));
    }
}
