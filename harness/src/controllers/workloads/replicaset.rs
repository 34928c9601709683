//! The ReplicaSet controller: as many active pods as replicas, and the
//! ReplicaSet's status.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use serde_json::json;

use super::controller::{Controllers, Owner};
use super::pods::{CachedPod, owner_ref};

/// kube-controller-manager's `burstReplicas`: the most pods one sync of a
/// ReplicaSet creates or deletes. A larger difference is made up over
/// several syncs, the controller taking the changes delivered meanwhile
/// between them (and the other tasks running) rather than writing every
/// pod of a 300,000-replica scale-up in one go.
const BURST_REPLICAS: i32 = 500;

impl Controllers {
    pub(super) async fn reconcile_replicaset(&mut self, k: &str) {
        let Some(rs) = self.replicasets.get(k).cloned() else {
            return;
        };
        if rs.metadata.deletion_timestamp.is_some() {
            return;
        }
        let ns = rs.metadata.namespace.clone().unwrap_or_default();
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let spec = rs.spec.clone().unwrap_or_default();
        let want = spec.replicas.unwrap_or(1);
        let have = i32::try_from(self.owned_counts(&uid).0).unwrap_or(i32::MAX);
        if (have - want).abs() > BURST_REPLICAS {
            self.requeue(Owner::ReplicaSet(k.to_string()));
        }
        if have < want {
            let owner = owner_ref(&rs);
            for _ in have..want.min(have + BURST_REPLICAS) {
                let meta = ObjectMeta {
                    generate_name: Some(format!("{}-", rs.name_any())),
                    owner_references: Some(vec![owner.clone()]),
                    ..ObjectMeta::default()
                };
                self.create_pod(&ns, &spec.template.clone().unwrap_or_default(), meta)
                    .await;
            }
        } else if have > want {
            let mut active: Vec<&CachedPod> = self
                .owned(&ns, &uid)
                .into_iter()
                .filter(|p| p.is_active())
                .collect();
            // Delete the least useful first: unscheduled, pending, not ready, newest.
            active.sort_by_key(|p| {
                (
                    p.node_name.is_some(),
                    p.phase() == "Running",
                    p.ready,
                    std::cmp::Reverse(p.created.clone().map(|t| t.0)),
                )
            });
            let doomed: Vec<String> = active
                .iter()
                .take(usize::try_from((have - want).min(BURST_REPLICAS)).unwrap_or(0))
                .map(|p| p.key())
                .collect();
            for k in doomed {
                self.delete_pod(&k, None).await;
            }
        }
        let (active, ready) = self.owned_counts(&uid);
        let status = json!({
            "replicas": active, "fullyLabeledReplicas": active,
            "readyReplicas": ready, "availableReplicas": ready,
            "observedGeneration": rs.metadata.generation,
        });
        let current = rs.status.as_ref().map(|s| {
            (
                s.replicas,
                s.ready_replicas.unwrap_or(0),
                s.observed_generation,
            )
        });
        if current != Some((active as i32, ready as i32, rs.metadata.generation)) {
            self.patch_status(&rs, status).await;
        }
    }
}
