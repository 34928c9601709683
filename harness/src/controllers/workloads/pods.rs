//! What the controllers read off pods and owners: cache keys, what they
//! keep of a pod ([`CachedPod`]: whether it is active or ready, its
//! controller, its node), and owner references to set.

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::Resource;

/// The cache key of an object: `namespace/name`.
pub(super) fn key<K: Resource>(o: &K) -> String {
    format!(
        "{}/{}",
        o.meta().namespace.as_deref().unwrap_or(""),
        o.meta().name.as_deref().unwrap_or("")
    )
}

/// What the controllers keep of a pod: what they read of it and nothing
/// else. At 300,000 pods the cache is most of the controllers' memory, and
/// a k8s-openapi `Pod` struct is about 2.3 KB before any of its parts (a
/// heap profile at 3,000 nodes), so a slimmed `Pod` for each would be
/// about 700 MB at 10,000 nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CachedPod {
    pub namespace: String,
    pub name: String,
    /// Its controller's uid (the `ownerReference` with `controller: true`).
    pub controller_uid: Option<String>,
    /// The name of the DaemonSet that controls it, if one does.
    pub daemon_set: Option<String>,
    pub created: Option<Time>,
    /// Whether it has a deletion timestamp.
    pub deleting: bool,
    /// The node it is bound to (`spec.nodeName`).
    pub node_name: Option<String>,
    /// The node a daemon pod is pinned to by its required node affinity
    /// on `metadata.name`, before it is bound.
    pub pinned_node: Option<String>,
    pub phase: Option<String>,
    /// Whether its Ready condition is True.
    pub ready: bool,
}

impl CachedPod {
    /// What the controllers read of `p`.
    pub fn of(p: &Pod) -> Self {
        let spec = p.spec.as_ref();
        let status = p.status.as_ref();
        Self {
            namespace: p.metadata.namespace.clone().unwrap_or_default(),
            name: p.metadata.name.clone().unwrap_or_default(),
            controller_uid: controller_of(p).map(|o| o.uid.clone()),
            daemon_set: controller_of(p)
                .filter(|o| o.kind == "DaemonSet")
                .map(|o| o.name.clone()),
            created: p.metadata.creation_timestamp.clone(),
            deleting: p.metadata.deletion_timestamp.is_some(),
            node_name: spec.and_then(|s| s.node_name.clone()),
            pinned_node: spec.and_then(pinned_node),
            phase: status.and_then(|s| s.phase.clone()),
            ready: status
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
        }
    }

    /// `namespace/name`, as [`key`] gives it for the pod.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether it is neither terminating nor finished.
    pub fn is_active(&self) -> bool {
        !self.deleting && !matches!(self.phase.as_deref(), Some("Succeeded" | "Failed"))
    }

    /// Its phase (empty when unknown).
    pub fn phase(&self) -> &str {
        self.phase.as_deref().unwrap_or("")
    }

    /// The node a daemon pod is for: its bound node, or the one it is
    /// pinned to.
    pub fn daemon_node(&self) -> Option<&str> {
        self.node_name.as_deref().or(self.pinned_node.as_deref())
    }

    /// The cache key of the DaemonSet that controls it, and the node it is
    /// for, when it is a daemon pod for a node.
    pub fn daemon_of(&self) -> Option<(String, &str)> {
        let ds = self.daemon_set.as_deref()?;
        Some((format!("{}/{ds}", self.namespace), self.daemon_node()?))
    }
}

/// The node named by a required node affinity's `metadata.name` field
/// (how the DaemonSet controller pins its pods).
fn pinned_node(spec: &PodSpec) -> Option<String> {
    spec.affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|f| f.key == "metadata.name")
        .and_then(|f| f.values.as_ref()?.first().cloned())
}

/// A pod's controller owner reference.
fn controller_of(p: &Pod) -> Option<&OwnerReference> {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cached_pod_keeps_what_the_controllers_read() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "rs-1", "namespace": "ns", "uid": "u", "labels": {"app": "a"},
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "o", "controller": true}]},
            "spec": {"containers": [{"name": "c", "image": "i"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
        let c = CachedPod::of(&p);
        assert_eq!(c.key(), key(&p));
        assert_eq!(c.key(), "ns/rs-1");
        assert_eq!(c.controller_uid.as_deref(), Some("o"));
        assert_eq!(c.daemon_of(), None, "a ReplicaSet's pod");
        assert!(c.is_active() && c.ready);
        assert_eq!(c.phase(), "Running");
        assert_eq!(c.node_name, None);
        assert_eq!(c.daemon_node(), Some("n1"), "pinned, not yet bound");
        assert!(c.created.is_some(), "a ReplicaSet deletes the newest first");
        let mut bound = p.clone();
        bound.spec.as_mut().unwrap().node_name = Some("n2".into());
        bound.status.as_mut().unwrap().conditions = None;
        let b = CachedPod::of(&bound);
        assert_eq!(b.daemon_node(), Some("n2"));
        assert!(!b.ready, "no Ready condition");
        let mut daemon = p.clone();
        daemon.metadata.owner_references.as_mut().unwrap()[0].kind = "DaemonSet".into();
        let d = CachedPod::of(&daemon);
        assert_eq!(d.daemon_of(), Some(("ns/rs".to_string(), "n1")));
        let mut gone = p;
        gone.metadata.deletion_timestamp = gone.metadata.creation_timestamp.clone();
        assert!(!CachedPod::of(&gone).is_active(), "terminating");
    }
}
