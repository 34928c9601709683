//! Fake pods (upstream's `simulator/fake`): pods that exist only in the
//! simulation, such as proactive scale-up's copies of a controller's
//! missing pods (`crate::processors::podinjection`). No event names them.

use k8s_openapi::api::core::v1::Pod;

/// The annotation that marks a fake pod, and its value.
pub const FAKE_POD_ANNOTATION: (&str, &str) = ("podtype", "fakepod");

/// Whether `pod` is a fake pod (upstream's `fake.IsFake`).
pub fn is_fake(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(FAKE_POD_ANNOTATION.0))
        .is_some_and(|v| v == FAKE_POD_ANNOTATION.1)
}
