//! The `pods/eviction` subresource through kube's client: budgets,
//! graceful deletion, and the `DisruptionTarget` mark an eviction leaves.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{Eviction, PodDisruptionBudget};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Error};
use serde_json::{Value, json};

use crate::kube_client::{api_code, pod, start};

/// A ReplicaSet of `n` Ready, bound pods labelled app=guarded.
async fn guarded_pods(client: &Client, n: usize) {
    let rs_api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apps", "v1", "ReplicaSet"),
            "replicasets",
        ),
    );
    let rs: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "guarded"},
        "spec": {"replicas": n, "selector": {"matchLabels": {"app": "guarded"}},
                 "template": {"metadata": {"labels": {"app": "guarded"}}, "spec": {"containers": [{"name": "c", "image": "pause"}]}}}
    }))
    .unwrap();
    let rs = rs_api.create(&PostParams::default(), &rs).await.unwrap();
    let uid = rs.metadata.uid.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    for i in 0..n {
        let mut p = pod(&format!("guarded-{i}"), json!({"app": "guarded"}));
        p.metadata.owner_references = Some(vec![serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "guarded", "uid": uid, "controller": true
        }))
        .unwrap()]);
        p.spec.as_mut().unwrap().node_name = Some("node-a".into());
        pods.create(&PostParams::default(), &p).await.unwrap();
        pods.patch_status(
            &format!("guarded-{i}"),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await
        .unwrap();
    }
}

async fn evictions_allowed(budget: Value, replicas: usize) -> (usize, String) {
    let (_s, client) = start();
    guarded_pods(&client, replicas).await;
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(client.clone());
    let mut spec = json!({"selector": {"matchLabels": {"app": "guarded"}}});
    for (k, v) in budget.as_object().unwrap() {
        spec[k] = v.clone();
    }
    let pdb: PodDisruptionBudget =
        serde_json::from_value(json!({"metadata": {"name": "budget"}, "spec": spec})).unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let mut allowed = 0;
    for i in 0..replicas {
        match pods
            .evict(&format!("guarded-{i}"), &Default::default())
            .await
        {
            Ok(_) => allowed += 1,
            Err(Error::Api(s)) => {
                assert_eq!((s.code, s.reason.as_str()), (429, "TooManyRequests"));
                let raw = format!("{s:?}");
                return (allowed, raw);
            }
            Err(e) => panic!("{e}"),
        }
    }
    (allowed, String::new())
}

#[tokio::test]
async fn eviction_honours_pod_disruption_budgets() {
    // (budget, replicas, evictions allowed)
    let cases = [
        (json!({"minAvailable": 2}), 3, 1),
        (json!({"minAvailable": 0}), 3, 3),
        (json!({"minAvailable": "50%"}), 3, 1),
        (json!({"minAvailable": "100%"}), 3, 0),
        (json!({"maxUnavailable": 1}), 4, 1),
        (json!({"maxUnavailable": 0}), 3, 0),
        (json!({"maxUnavailable": "34%"}), 3, 2),
        (json!({"maxUnavailable": "50%"}), 4, 2),
    ];
    for (budget, replicas, want) in cases {
        let (allowed, err) = evictions_allowed(budget.clone(), replicas).await;
        assert_eq!(allowed, want, "{budget} over {replicas} pods");
        if want < replicas {
            assert!(err.contains("budget"), "the 429 names the budget: {err}");
        }
    }
}

/// The reason of the pod's `DisruptionTarget` condition, if it has one.
fn disruption_target(p: &Pod) -> Option<String> {
    let conditions = p.status.as_ref()?.conditions.as_ref()?;
    let c = conditions.iter().find(|c| c.type_ == "DisruptionTarget")?;
    assert_eq!(c.status, "True");
    c.reason.clone()
}

#[tokio::test]
async fn eviction_deletes_gracefully_and_unguarded_pods_go_at_once() {
    let (_s, client) = start();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.create(&PostParams::default(), &pod("free", json!({})))
        .await
        .unwrap();
    // An unbound pod has no grace period: eviction removes it.
    pods.evict("free", &Default::default()).await.unwrap();
    assert_eq!(api_code(&pods.get("free").await.unwrap_err()).0, 404);
    // A bound pod is marked for deletion with its grace period.
    let mut bound = pod("bound", json!({}));
    bound.spec.as_mut().unwrap().node_name = Some("node-a".into());
    pods.create(&PostParams::default(), &bound).await.unwrap();
    pods.evict("bound", &kube::api::EvictParams::default())
        .await
        .unwrap();
    let p = pods.get("bound").await.unwrap();
    assert!(p.metadata.deletion_timestamp.is_some());
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(30));
    // Marked as the eviction's, before its deletion.
    assert_eq!(
        disruption_target(&p).as_deref(),
        Some("EvictionByEvictionAPI")
    );
    // The kubelet's final delete (grace 0) removes it.
    pods.delete("bound", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert_eq!(api_code(&pods.get("bound").await.unwrap_err()).0, 404);
    // A plain deletion leaves no such mark.
    let mut plain = pod("plain", json!({}));
    plain.spec.as_mut().unwrap().node_name = Some("node-a".into());
    pods.create(&PostParams::default(), &plain).await.unwrap();
    pods.delete("plain", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(disruption_target(&pods.get("plain").await.unwrap()), None);
    let e = Eviction::default();
    assert_eq!(
        api_code(&pods.evict("bound", &Default::default()).await.unwrap_err()).0,
        404,
        "{e:?}"
    );
}
