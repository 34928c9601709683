//! What the controllers read off pods and owners: cache keys, whether a pod
//! is active or ready, its controller, and owner references to set.

use k8s_openapi::api::core::v1::Pod;
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

/// Drops what no controller reads from a cached pod (its containers,
/// volumes, tolerations, container statuses, managed fields): at 300,000
/// pods the cache is most of the controllers' memory. Kept: metadata,
/// the node, affinity (a daemon pod's node), phase and conditions.
pub(super) fn slim(p: &mut Pod) {
    p.metadata.managed_fields = None;
    if let Some(spec) = p.spec.as_mut() {
        spec.containers = Vec::new();
        spec.init_containers = None;
        spec.ephemeral_containers = None;
        spec.volumes = None;
        spec.tolerations = None;
    }
    if let Some(status) = p.status.as_mut() {
        status.container_statuses = None;
        status.init_container_statuses = None;
        status.ephemeral_container_statuses = None;
    }
}
