//! Cluster API in the embedded cluster, in virtual time: MachineDeployment
//! → MachineSet → Machines → kwok Nodes, scaling through the `scale`
//! subresource and the delete-machine annotation.

use std::time::Duration;

use harness::cluster::{Cluster, list, node_ready};
use harness::controllers::capi::{
    self, DELETE_MACHINE_ANNOTATION, cluster_manifest, machine_deployment_manifest,
    template_manifest,
};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::json;

const MINUTE: Duration = Duration::from_secs(60);

async fn machines(cluster: &Cluster) -> Vec<DynamicObject> {
    Api::<DynamicObject>::namespaced_with(cluster.client(), "default", &capi::resource("Machine"))
        .list(&Default::default())
        .await
        .unwrap()
        .items
}

async fn wait_nodes(cluster: &Cluster, count: usize) -> Vec<Node> {
    cluster
        .wait_until(&format!("{count} ready nodes"), MINUTE, |c| async move {
            let nodes = list::<Node>(&c, "").await.map_err(|e| e.to_string())?;
            let ready: Vec<Node> = nodes.into_iter().filter(node_ready).collect();
            if ready.len() == count {
                Ok(ready)
            } else {
                Err(format!("{} ready", ready.len()))
            }
        })
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_machine_deployment_makes_machines_and_nodes_and_scales_down_the_annotated_machine() {
    let cluster = Cluster::builder()
        .capi()
        .object(cluster_manifest("default", "testbed"))
        .object(template_manifest(
            "default",
            "big",
            json!({"cpu": "8", "memory": "32Gi"}),
            json!({"pool": "big"}),
            json!([{"key": "dedicated", "value": "big", "effect": "NoSchedule"}]),
        ))
        .object(machine_deployment_manifest(
            "default",
            "md",
            "testbed",
            3,
            "big",
            json!({}),
        ))
        .start()
        .await
        .unwrap();
    let nodes = wait_nodes(&cluster, 3).await;
    let node = &nodes[0];
    let labels = node.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["pool"], "big");
    let spec = node.spec.as_ref().unwrap();
    assert_eq!(spec.taints.as_ref().unwrap()[0].key, "dedicated");
    assert_eq!(
        node.status.as_ref().unwrap().capacity.as_ref().unwrap()["cpu"].0,
        "8"
    );
    let name = node.metadata.name.clone().unwrap();
    assert_eq!(
        spec.provider_id.as_deref(),
        Some(&*format!("kwok://{name}"))
    );

    // Every machine has its node, its providerID and the Running phase.
    let ms = cluster
        .wait_until("3 machines Running", MINUTE, |_| {
            let cluster = &cluster;
            async move {
                let ms = machines(cluster).await;
                let running = ms
                    .iter()
                    .filter(|m| m.data["status"]["phase"] == "Running")
                    .count();
                if running == 3 {
                    Ok(ms)
                } else {
                    Err(format!("{running} Running"))
                }
            }
        })
        .await
        .unwrap();
    for m in &ms {
        let n = m.metadata.name.clone().unwrap();
        assert_eq!(m.data["spec"]["providerID"], format!("kwok://{n}"));
        assert_eq!(m.data["status"]["nodeRef"]["name"], n);
    }

    // Annotate one machine and scale the deployment to 2 through `scale`.
    let victim = ms[1].metadata.name.clone().unwrap();
    let machine_api = Api::<DynamicObject>::namespaced_with(
        cluster.client(),
        "default",
        &capi::resource("Machine"),
    );
    machine_api
        .patch(
            &victim,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {DELETE_MACHINE_ANNOTATION: "2026-01-01T00:00:00Z"}}})),
        )
        .await
        .unwrap();
    let mds = Api::<DynamicObject>::namespaced_with(
        cluster.client(),
        "default",
        &capi::resource("MachineDeployment"),
    );
    let scale = mds.get_scale("md").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    mds.patch_scale(
        "md",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .unwrap();
    let nodes = wait_nodes(&cluster, 2).await;
    let names: Vec<String> = nodes
        .iter()
        .map(|n| n.metadata.name.clone().unwrap())
        .collect();
    assert!(
        !names.contains(&victim),
        "{victim} should be gone: {names:?}"
    );
    cluster
        .wait_until("the annotated machine is gone", MINUTE, |_| {
            let cluster = &cluster;
            let victim = victim.clone();
            async move {
                let ms = machines(cluster).await;
                if ms
                    .iter()
                    .any(|m| m.metadata.name.as_deref() == Some(&victim))
                {
                    Err(format!("{} machines", ms.len()))
                } else {
                    Ok(())
                }
            }
        })
        .await
        .unwrap();
    let scale = mds.get_scale("md").await.unwrap();
    assert_eq!(scale.status.unwrap().replicas, 2);
}
