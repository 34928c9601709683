//! The Deployment controller: one ReplicaSet per pod template, scaled by
//! the rollout, and the Deployment's status.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::controller::Controllers;
use super::pods::{key, owner_ref};

impl Controllers {
    pub(super) async fn reconcile_deployment(&mut self, k: &str) {
        let Some(d) = self.deployments.get(k).cloned() else {
            return;
        };
        if d.metadata.deletion_timestamp.is_some() {
            return;
        }
        let ns = d.metadata.namespace.clone().unwrap_or_default();
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let spec = d.spec.clone().unwrap_or_default();
        let want = spec.replicas.unwrap_or(1);
        let hash = template_hash(&spec.template);
        let owned: Vec<ReplicaSet> = self
            .replicasets
            .values()
            .filter(|rs| {
                rs.metadata.namespace.as_deref() == Some(&ns)
                    && rs
                        .metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.uid == uid)
            })
            .cloned()
            .collect();
        // The ReplicaSet of the current template is the one whose template
        // equals the Deployment's but for the hash label, as the Deployment
        // controller finds it: a ReplicaSet made elsewhere (restored from
        // another cluster) with another hash is adopted, not replaced.
        let is_current = |rs: &ReplicaSet| {
            rs.spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .is_some_and(|t| equal_ignoring_hash(t, &spec.template))
        };
        let current = owned.iter().find(|rs| is_current(rs));
        let rs_api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &ns);
        match current {
            None => {
                let mut template = spec.template.clone();
                let mut meta = template.metadata.clone().unwrap_or_default();
                meta.labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert("pod-template-hash".into(), hash.clone());
                template.metadata = Some(meta);
                let mut selector: LabelSelector = spec.selector.clone();
                selector
                    .match_labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert("pod-template-hash".into(), hash.clone());
                let rs = json!({
                    "apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": format!("{}-{hash}", d.name_any()), "namespace": ns,
                        "labels": template.metadata.as_ref().and_then(|m| m.labels.clone()),
                        "annotations": {"deployment.kubernetes.io/revision": (owned.len() + 1).to_string()},
                        "ownerReferences": [owner_ref(&d)]},
                    "spec": {"replicas": want, "selector": selector, "template": template},
                });
                match serde_json::from_value::<ReplicaSet>(rs) {
                    Ok(rs) => match rs_api.create(&PostParams::default(), &rs).await {
                        Ok(created) => {
                            self.replicasets.insert(key(&created), created);
                        }
                        Err(e) => tracing::debug!("creating the ReplicaSet of deployment {k}: {e}"),
                    },
                    Err(e) => tracing::debug!("building the ReplicaSet of deployment {k}: {e}"),
                }
            }
            Some(rs) if rs.spec.as_ref().and_then(|s| s.replicas) != Some(want) => {
                let patch = Patch::Merge(json!({"spec": {"replicas": want}}));
                if let Err(e) = rs_api
                    .patch(&rs.name_any(), &PatchParams::default(), &patch)
                    .await
                {
                    tracing::debug!("scaling ReplicaSet {}: {e}", key(rs));
                }
            }
            Some(_) => {}
        }
        // Older templates are scaled down (no rolling update).
        for old in owned.iter().filter(|rs| !is_current(rs)) {
            if old.spec.as_ref().and_then(|s| s.replicas) != Some(0) {
                let patch = Patch::Merge(json!({"spec": {"replicas": 0}}));
                if let Err(e) = rs_api
                    .patch(&old.name_any(), &PatchParams::default(), &patch)
                    .await
                {
                    tracing::debug!("scaling down ReplicaSet {}: {e}", key(old));
                }
            }
        }
        let sum = |f: fn(&ReplicaSet) -> i32| owned.iter().map(f).sum::<i32>();
        let replicas = sum(|rs| rs.status.as_ref().map_or(0, |s| s.replicas));
        let ready = sum(|rs| {
            rs.status
                .as_ref()
                .and_then(|s| s.ready_replicas)
                .unwrap_or(0)
        });
        let updated = owned
            .iter()
            .filter(|rs| is_current(rs))
            .map(|rs| rs.status.as_ref().map_or(0, |s| s.replicas))
            .sum::<i32>();
        let available = if ready >= want { "True" } else { "False" };
        let st = d.status.clone().unwrap_or_default();
        let same = st.replicas == Some(replicas)
            && st.ready_replicas.unwrap_or(0) == ready
            && st.updated_replicas == Some(updated)
            && st.observed_generation == d.metadata.generation;
        if !same {
            let now = self.clock.rfc3339();
            self.patch_status(&d, json!({
                "replicas": replicas, "readyReplicas": ready, "availableReplicas": ready,
                "updatedReplicas": updated, "unavailableReplicas": (want - ready).max(0),
                "observedGeneration": d.metadata.generation,
                "conditions": [{"type": "Available", "status": available,
                    "reason": if available == "True" { "MinimumReplicasAvailable" } else { "MinimumReplicasUnavailable" },
                    "message": if available == "True" { "Deployment has minimum availability." } else { "Deployment does not have minimum availability." },
                    "lastUpdateTime": now, "lastTransitionTime": now}],
            })).await;
        }
    }
}

/// Whether two pod templates are equal once the `pod-template-hash` label
/// is left out of both (client-go's `EqualIgnoreHash`). Only the
/// metadata is copied to compare; the specs are compared in place.
fn equal_ignoring_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    let without_hash = |m: &Option<ObjectMeta>| {
        let mut m = m.clone();
        if let Some(meta) = m.as_mut() {
            if let Some(labels) = meta.labels.as_mut() {
                labels.remove("pod-template-hash");
            }
            if meta.labels.as_ref().is_some_and(BTreeMap::is_empty) {
                meta.labels = None;
            }
        }
        m
    };
    a.spec == b.spec && without_hash(&a.metadata) == without_hash(&b.metadata)
}

/// A short stable hash of a pod template (the `pod-template-hash` label).
fn template_hash(t: &PodTemplateSpec) -> String {
    let text = serde_json::to_string(t).unwrap_or_default();
    // FNV-1a, printed in the alphabet Kubernetes uses for safe names.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut out = String::new();
    for _ in 0..10 {
        out.push(char::from(ALPHABET[(h % 27) as usize]));
        h /= 27;
    }
    out
}
