//! What the controllers read off pods and owners: cache keys, whether a pod
//! is active or ready, its controller, and owner references to set.

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;

/// The cache key of an object: `namespace/name`.
pub(super) fn key<K: Resource>(o: &K) -> String {
    format!(
        "{}/{}",
        o.meta().namespace.as_deref().unwrap_or(""),
        o.meta().name.as_deref().unwrap_or("")
    )
}

/// Whether a pod is neither terminating nor finished.
pub(super) fn is_active(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && !matches!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
}

/// Whether a pod has condition Ready=True.
pub(super) fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A pod's phase (empty when unknown).
pub(super) fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// A pod's controller owner reference.
pub(super) fn controller_of(p: &Pod) -> Option<&OwnerReference> {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// A controller owner reference to `o`.
pub(super) fn owner_ref<K: Resource<DynamicType = ()>>(o: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).to_string(),
        kind: K::kind(&()).to_string(),
        name: o.meta().name.clone().unwrap_or_default(),
        uid: o.meta().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Keeps of a cached pod only what the controllers read: its name,
/// namespace, uid, labels, owners, creation and deletion times, its node
/// and affinity (a daemon pod's node), its phase and its Ready condition.
/// At 300,000 pods the cache is most of the controllers' memory, and a
/// running pod's containers, statuses, IPs and other conditions are most
/// of a pod.
pub(super) fn slim(p: &mut Pod) {
    let meta = &mut p.metadata;
    meta.managed_fields = None;
    meta.annotations = None;
    meta.generate_name = None;
    meta.finalizers = None;
    if let Some(spec) = p.spec.take() {
        p.spec = Some(PodSpec {
            node_name: spec.node_name,
            affinity: spec.affinity,
            ..PodSpec::default()
        });
    }
    if let Some(status) = p.status.take() {
        let ready = status
            .conditions
            .into_iter()
            .flatten()
            .filter(|c| c.type_ == "Ready")
            .collect::<Vec<_>>();
        p.status = Some(PodStatus {
            phase: status.phase,
            conditions: (!ready.is_empty()).then_some(ready),
            ..PodStatus::default()
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_slim_pod_keeps_what_the_controllers_read() {
        let mut p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "rs-1", "namespace": "ns", "uid": "u", "labels": {"app": "a"},
                "annotations": {"a": "b"}, "generateName": "rs-",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "o", "controller": true}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "c", "image": "i", "imageID": "x", "ready": true, "restartCount": 0}]}
        }))
        .unwrap();
        slim(&mut p);
        assert_eq!(key(&p), "ns/rs-1");
        assert_eq!(controller_of(&p).map(|o| o.uid.as_str()), Some("o"));
        assert!(is_active(&p) && is_ready(&p));
        assert_eq!(phase(&p), "Running");
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("n1"));
        assert!(spec.affinity.is_some(), "a daemon pod's node");
        assert!(spec.containers.is_empty());
        let status = p.status.as_ref().unwrap();
        assert_eq!(status.conditions.as_ref().map(Vec::len), Some(1));
        assert!(status.pod_ip.is_none() && status.container_statuses.is_none());
        assert!(p.metadata.annotations.is_none());
        assert_eq!(p.metadata.labels.as_ref().map(|l| l.len()), Some(1));
    }
}
