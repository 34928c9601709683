//! Pods as the in-cluster controllers and the what-if's observer read them
//! off the API. [`SlimPod`]: its metadata, the node it is bound or pinned
//! to, its resource claims, phase and conditions; [`BarePod`]: fewer still,
//! for watchers of every pod that keep few. Every other field (containers,
//! volumes, tolerations...) is skipped while decoding: at 300,000 pods a
//! full `Pod` for each list and watch event is most of their work, and they
//! read nothing else. The pod is a k8s-openapi `Pod` with those fields set
//! and the others empty: it is read, never written back.

use std::borrow::Cow;

use k8s_openapi::api::core::v1::{
    Affinity, Pod, PodCondition, PodResourceClaim, PodResourceClaimStatus, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Resource;
use kube::runtime::watcher::Event;
use serde::{Deserialize, Deserializer};

/// A pod with the fields the controllers read (see the module).
#[derive(Debug, Clone)]
pub struct SlimPod(pub Pod);

/// The fields decoded.
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<WireSpec>,
    #[serde(default)]
    status: Option<WireStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    #[serde(default)]
    node_name: Option<String>,
    #[serde(default)]
    affinity: Option<Affinity>,
    #[serde(default)]
    resource_claims: Option<Vec<PodResourceClaim>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireStatus {
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    conditions: Option<Vec<PodCondition>>,
    #[serde(default)]
    resource_claim_statuses: Option<Vec<PodResourceClaimStatus>>,
}

impl<'de> Deserialize<'de> for SlimPod {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = Wire::deserialize(d)?;
        Ok(SlimPod(Pod {
            metadata: w.metadata,
            spec: w.spec.map(|s| PodSpec {
                node_name: s.node_name,
                affinity: s.affinity,
                resource_claims: s.resource_claims,
                ..PodSpec::default()
            }),
            status: w.status.map(WireStatus::into_status),
        }))
    }
}

impl WireStatus {
    fn into_status(self) -> PodStatus {
        PodStatus {
            phase: self.phase,
            conditions: self.conditions,
            resource_claim_statuses: self.resource_claim_statuses,
            ..PodStatus::default()
        }
    }
}

/// `kube::Resource` for a pod read with some of its fields: the pod's
/// type, its metadata.
macro_rules! pod_resource {
    ($t:ty) => {
        impl Resource for $t {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;

            fn kind(dt: &()) -> Cow<'_, str> {
                Pod::kind(dt)
            }

            fn group(dt: &()) -> Cow<'_, str> {
                Pod::group(dt)
            }

            fn version(dt: &()) -> Cow<'_, str> {
                Pod::version(dt)
            }

            fn plural(dt: &()) -> Cow<'_, str> {
                Pod::plural(dt)
            }

            fn meta(&self) -> &ObjectMeta {
                &self.0.metadata
            }

            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.0.metadata
            }
        }
    };
}

pod_resource!(SlimPod);
pod_resource!(BarePod);

impl From<SlimPod> for Pod {
    fn from(p: SlimPod) -> Pod {
        p.0
    }
}

impl From<BarePod> for Pod {
    fn from(p: BarePod) -> Pod {
        p.0
    }
}

/// A pod as the resourceclaim controller and the what-if's observer read
/// it: its name, namespace, uid, resourceVersion and deletion, the node it
/// is bound to, its resource claims, phase and conditions. Narrower than
/// [`SlimPod`] (no labels, owners or affinity): they watch every pod and
/// keep few.
#[derive(Debug, Clone)]
pub struct BarePod(pub Pod);

#[derive(Deserialize)]
struct BareWire {
    #[serde(default)]
    metadata: BareMeta,
    #[serde(default)]
    spec: Option<BareSpec>,
    #[serde(default)]
    status: Option<WireStatus>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct BareMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    deletion_timestamp: Option<Time>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BareSpec {
    #[serde(default)]
    node_name: Option<String>,
    #[serde(default)]
    resource_claims: Option<Vec<PodResourceClaim>>,
}

impl<'de> Deserialize<'de> for BarePod {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = BareWire::deserialize(d)?;
        let m = w.metadata;
        Ok(BarePod(Pod {
            metadata: ObjectMeta {
                name: m.name,
                namespace: m.namespace,
                uid: m.uid,
                resource_version: m.resource_version,
                deletion_timestamp: m.deletion_timestamp,
                ..ObjectMeta::default()
            },
            spec: w.spec.map(|s| PodSpec {
                node_name: s.node_name,
                resource_claims: s.resource_claims,
                ..PodSpec::default()
            }),
            status: w.status.map(WireStatus::into_status),
        }))
    }
}

/// The watch event with the pod it carries.
pub fn into_pod_event<P: Into<Pod>>(e: Event<P>) -> Event<Pod> {
    match e {
        Event::Apply(p) => Event::Apply(p.into()),
        Event::Delete(p) => Event::Delete(p.into()),
        Event::InitApply(p) => Event::InitApply(p.into()),
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn full() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "agent-x", "namespace": "kube-system", "uid": "u-1",
                "resourceVersion": "7", "creationTimestamp": "2026-01-02T03:04:05Z",
                "labels": {"app": "agent"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                    "name": "agent", "uid": "ds-1", "controller": true}]
            },
            "spec": {
                "nodeName": "node-1",
                "containers": [{"name": "c", "image": "i",
                    "resources": {"requests": {"cpu": "100m"}}}],
                "tolerations": [{"operator": "Exists"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name",
                        "operator": "In", "values": ["node-1"]}]}]}}},
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-t"}]
            },
            "status": {
                "phase": "Running",
                "podIP": "10.0.0.1",
                "conditions": [{"type": "Ready", "status": "True"}],
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "agent-x-gpu-abcde"}]
            }
        })
    }

    #[test]
    fn keeps_what_the_controllers_read_and_skips_the_rest() {
        let slim: SlimPod = serde_json::from_value(full()).unwrap();
        let pod: Pod = serde_json::from_value(full()).unwrap();
        assert_eq!(slim.0.metadata, pod.metadata, "the whole metadata");
        let (s, p) = (slim.0.spec.unwrap(), pod.spec.unwrap());
        assert_eq!(s.node_name, p.node_name);
        assert_eq!(s.affinity, p.affinity);
        assert_eq!(s.resource_claims, p.resource_claims);
        assert!(
            s.containers.is_empty() && s.tolerations.is_none(),
            "skipped"
        );
        let (s, p) = (slim.0.status.unwrap(), pod.status.unwrap());
        assert_eq!(s.phase, p.phase);
        assert_eq!(s.conditions, p.conditions);
        assert_eq!(s.resource_claim_statuses, p.resource_claim_statuses);
        assert!(s.pod_ip.is_none(), "skipped");
    }

    #[test]
    fn a_bare_pod_keeps_its_identity_node_claims_and_state() {
        let mut v = full();
        v["metadata"]["deletionTimestamp"] = json!("2026-01-02T03:05:00Z");
        let bare: BarePod = serde_json::from_value(v.clone()).unwrap();
        let pod: Pod = serde_json::from_value(v).unwrap();
        let (b, p) = (&bare.0.metadata, &pod.metadata);
        assert_eq!(
            (&b.name, &b.namespace, &b.uid, &b.resource_version),
            (&p.name, &p.namespace, &p.uid, &p.resource_version)
        );
        assert_eq!(b.deletion_timestamp, p.deletion_timestamp);
        assert!(b.deletion_timestamp.is_some());
        assert!(
            b.labels.is_none() && b.owner_references.is_none(),
            "skipped"
        );
        let (s, p) = (bare.0.spec.unwrap(), pod.spec.unwrap());
        assert_eq!(s.node_name, p.node_name);
        assert_eq!(s.resource_claims, p.resource_claims);
        assert!(s.affinity.is_none() && s.containers.is_empty(), "skipped");
        let (s, p) = (bare.0.status.unwrap(), pod.status.unwrap());
        assert_eq!(s.phase, p.phase);
        assert_eq!(s.conditions, p.conditions);
        assert_eq!(s.resource_claim_statuses, p.resource_claim_statuses);
    }

    #[test]
    fn a_pod_without_spec_or_status_decodes() {
        let slim: SlimPod =
            serde_json::from_value(json!({"metadata": {"name": "p"}, "status": null})).unwrap();
        assert!(slim.0.spec.is_none() && slim.0.status.is_none());
        assert_eq!(slim.meta().name.as_deref(), Some("p"));
    }

    #[test]
    fn events_carry_the_pod() {
        let slim: SlimPod = serde_json::from_value(full()).unwrap();
        match into_pod_event(Event::Delete(slim)) {
            Event::Delete(p) => assert_eq!(p.metadata.name.as_deref(), Some("agent-x")),
            other => panic!("{other:?}"),
        }
    }
}
