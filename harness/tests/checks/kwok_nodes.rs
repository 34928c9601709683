//! kwok in the embedded cluster, in virtual time: Stage objects added and
//! removed while the cluster runs, and lease gating between controllers.

use std::time::Duration;

use harness::cluster::{Cluster, NodeTemplate, node_ready};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node};
use kube::Api;
use kube::api::{DeleteParams, DynamicObject};
use serde_json::json;

const MINUTE: Duration = Duration::from_secs(60);

/// A Stage object in the `steps` form: an event, then a status patch that
/// makes nodes labelled `testbed.example/fail=true` NotReady.
fn failing_stage() -> serde_json::Value {
    json!({
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
        "metadata": {"name": "testbed-node-fails-now"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Node"},
            "selector": {"matchLabels": {"testbed.example/fail": "true"}},
            "weight": 10000,
            "steps": [
                {"event": {"type": "Warning", "reason": "TestbedNodeFailed", "message": "made NotReady by a stage"}},
                {"patch": {"subresource": "status", "root": "status", "template":
                    "conditions:\n- type: Ready\n  status: \"False\"\n  reason: TestbedNodeFailed\n  message: made NotReady by a stage\n"}},
            ],
        }
    })
}

#[tokio::test(start_paused = true)]
async fn a_stage_object_added_at_runtime_takes_effect_and_removing_it_undoes_it() {
    let failing = NodeTemplate {
        labels: [("testbed.example/fail".to_string(), "true".to_string())].into(),
        ..NodeTemplate::new("flaky", "4", "8Gi")
    };
    let cluster = Cluster::builder()
        .nodes(1, &NodeTemplate::new("healthy", "4", "8Gi"))
        .nodes(1, &failing)
        .start()
        .await
        .unwrap();
    cluster.wait_nodes_ready(2, MINUTE).await.unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());

    cluster.create(failing_stage()).await.unwrap();
    cluster
        .wait_until("flaky-0 NotReady", MINUTE, |client| async move {
            let n = Api::<Node>::all(client)
                .get("flaky-0")
                .await
                .map_err(|e| e.to_string())?;
            if node_ready(&n) {
                Err("flaky-0 Ready".to_string())
            } else {
                Ok(())
            }
        })
        .await
        .unwrap();
    // It stays so: the stage keeps matching, and its patch is a no-op now.
    cluster.advance(20 * MINUTE).await;
    let flaky = nodes.get("flaky-0").await.unwrap();
    assert!(!node_ready(&flaky), "{:?}", flaky.status);
    assert!(node_ready(&nodes.get("healthy-0").await.unwrap()));
    let events: Api<Event> = Api::namespaced(cluster.client(), "default");
    let recorded = events.list(&Default::default()).await.unwrap();
    assert!(
        recorded
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("TestbedNodeFailed")
                && e.involved_object.name.as_deref() == Some("flaky-0")
                && e.source.as_ref().and_then(|s| s.component.as_deref())
                    == Some("kwok_controller")),
        "the stage's event was recorded"
    );

    // Removing the Stage object lets node-initialize make the node Ready.
    let api = kube::discovery::pinned_kind(
        &cluster.client(),
        &kube::core::GroupVersionKind::gvk("kwok.x-k8s.io", "v1alpha1", "Stage"),
    )
    .await
    .unwrap()
    .0;
    let stages: Api<DynamicObject> = Api::all_with(cluster.client(), &api);
    stages
        .delete("testbed-node-fails-now", &DeleteParams::default())
        .await
        .unwrap();
    cluster.wait_nodes_ready(2, MINUTE).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_node_whose_lease_another_controller_holds_is_left_alone_until_it_expires() {
    let cluster = Cluster::builder().start().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(cluster.client(), "kube-node-lease");
    let renew = cluster.clock().rfc3339_micros();
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "shared-0", "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": "another-kwok", "leaseDurationSeconds": 120,
            "renewTime": renew},
    });
    cluster.create(lease).await.unwrap();
    cluster
        .create(NodeTemplate::new("shared", "4", "8Gi").node(0))
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());
    cluster.advance(MINUTE).await;
    let node = nodes.get("shared-0").await.unwrap();
    assert!(
        !node_ready(&node),
        "another controller's node must be left alone: {:?}",
        node.status
    );

    // The other holder stops renewing: after 120 s the lease is free.
    cluster.wait_nodes_ready(1, 3 * MINUTE).await.unwrap();
    let lease = leases.get("shared-0").await.unwrap().spec.unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some("kwok-controller"));
    assert_eq!(lease.lease_transitions, Some(1));
    assert_eq!(lease.lease_duration_seconds, Some(40));
}
