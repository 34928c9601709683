//! What the cache asks of a single pod: whether CA lists it at all, whether
//! the scheduler marked it Unschedulable (and how recently), and its node
//! (the compact copy the cache keeps is [`predicates::PodInfo::compact`]).

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Pod, PodCondition};

/// Whether a pod is listed by CA at all (not Succeeded or Failed).
pub fn is_active(pod: &Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Whether the scheduler marked the pod `PodScheduled=False/Unschedulable`.
pub fn is_unschedulable(pod: &Pod) -> bool {
    unschedulable_condition(pod).is_some()
}

/// The pod's `PodScheduled=False/Unschedulable` condition, if it has one.
fn unschedulable_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
    })
}

/// An unschedulable pod's change triggers a loop only this long after the
/// pod was marked (upstream's `maxPodChangeAge`).
pub const RECENT_UNSCHEDULABLE: Duration = Duration::from_secs(10);

/// Whether a change to `pod` should start a loop: it is active, unbound
/// and was marked Unschedulable no more than [`RECENT_UNSCHEDULABLE`] ago.
pub fn is_recent_unschedulable(pod: &Pod, now: SystemTime) -> bool {
    if !is_active(pod) || node_name(pod).is_some() {
        return false;
    }
    unschedulable_condition(pod).is_some_and(|c| {
        c.last_transition_time
            .as_ref()
            .is_some_and(|t| SystemTime::from(t.0) + RECENT_UNSCHEDULABLE >= now)
    })
}

/// The node the pod is bound to (none for an empty `nodeName`).
pub fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// Whether a pod is expendable: priority below the cutoff (a pod without
/// priority never is).
pub fn is_expendable(pod: &Pod, cutoff: i32) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.priority)
        .is_some_and(|p| p < cutoff)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_change_to_a_recently_unschedulable_unbound_pod_starts_a_loop() {
        let pod = |node: Option<&str>, marked: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "default"},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
                "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled",
                    "status": "False", "reason": "Unschedulable",
                    "lastTransitionTime": marked}]}}))
            .unwrap()
        };
        let now = SystemTime::from("2026-01-01T00:00:20Z".parse::<jiff::Timestamp>().unwrap());
        assert!(is_recent_unschedulable(
            &pod(None, "2026-01-01T00:00:10Z"),
            now
        ));
        assert!(!is_recent_unschedulable(
            &pod(None, "2026-01-01T00:00:09Z"),
            now
        ));
        assert!(!is_recent_unschedulable(
            &pod(Some("n1"), "2026-01-01T00:00:15Z"),
            now
        ));
        let mut scheduled = pod(None, "2026-01-01T00:00:15Z");
        scheduled
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()[0]
            .reason = Some("SchedulerError".into());
        assert!(!is_recent_unschedulable(&scheduled, now));
    }
}
