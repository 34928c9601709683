//! The StatefulSet controller: pods named by ordinal, created in order,
//! and the StatefulSet's status.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use serde_json::json;

use super::controller::Controllers;
use super::pods::{CachedPod, owner_ref};

impl Controllers {
    pub(super) async fn reconcile_statefulset(&mut self, k: &str) {
        let Some(sts) = self.statefulsets.get(k).cloned() else {
            return;
        };
        if sts.metadata.deletion_timestamp.is_some() {
            return;
        }
        let ns = sts.metadata.namespace.clone().unwrap_or_default();
        let name = sts.name_any();
        let spec = sts.spec.clone().unwrap_or_default();
        let want = spec.replicas.unwrap_or(1);
        let parallel = spec.pod_management_policy.as_deref() == Some("Parallel");
        for ordinal in 0..want {
            let pod_name = format!("{name}-{ordinal}");
            let pod_key = format!("{ns}/{pod_name}");
            match self.pods.get(&pod_key) {
                Some(p) if p.is_active() => {
                    if !parallel && (p.phase() != "Running" || !p.ready) {
                        break;
                    }
                }
                Some(p) if !p.deleting => {
                    // A terminal pod is replaced.
                    self.delete_pod(&pod_key, Some(0)).await;
                    break;
                }
                Some(_) => break, // Still terminating: wait for it to go.
                None => {
                    let mut labels = BTreeMap::new();
                    labels.insert(
                        "statefulset.kubernetes.io/pod-name".to_string(),
                        pod_name.clone(),
                    );
                    labels.insert(
                        "apps.kubernetes.io/pod-index".to_string(),
                        ordinal.to_string(),
                    );
                    let mut t = spec.template.clone();
                    if let Some(s) = t.spec.as_mut() {
                        s.hostname = Some(pod_name.clone());
                        s.subdomain = Some(spec.service_name.clone().unwrap_or_default())
                            .filter(|s| !s.is_empty());
                    }
                    let meta = ObjectMeta {
                        name: Some(pod_name),
                        labels: Some(labels),
                        owner_references: Some(vec![owner_ref(&sts)]),
                        ..ObjectMeta::default()
                    };
                    self.create_pod(&ns, &t, meta).await;
                    if !parallel {
                        break;
                    }
                }
            }
        }
        // Scale down: highest ordinals first.
        let uid = sts.metadata.uid.clone().unwrap_or_default();
        let mut surplus: Vec<(i32, String)> = self
            .owned(&ns, &uid)
            .into_iter()
            .filter(|p| p.is_active())
            .filter_map(|p| {
                let ord: i32 = p.name.rsplit_once('-')?.1.parse().ok()?;
                (ord >= want).then(|| (ord, p.key()))
            })
            .collect();
        surplus.sort_by_key(|s| std::cmp::Reverse(s.0));
        if let Some((_, k)) = surplus.first() {
            self.delete_pod(k, None).await;
        }
        let owned: Vec<&CachedPod> = self
            .owned(&ns, &uid)
            .into_iter()
            .filter(|p| p.is_active())
            .collect();
        let ready = owned.iter().filter(|p| p.ready).count() as i32;
        let st = sts.status.clone().unwrap_or_default();
        if (
            st.replicas,
            st.ready_replicas.unwrap_or(0),
            st.observed_generation,
        ) != (owned.len() as i32, ready, sts.metadata.generation)
        {
            self.patch_status(
                &sts,
                json!({
                    "replicas": owned.len(), "readyReplicas": ready, "currentReplicas": owned.len(),
                    "updatedReplicas": owned.len(), "availableReplicas": ready,
                    "observedGeneration": sts.metadata.generation,
                }),
            )
            .await;
        }
    }
}
