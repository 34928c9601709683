//! The autoscaler in-process with `--cloud-provider=clusterapi` on the
//! embedded cluster serving Cluster API, in virtual time: node groups are
//! MachineDeployments, scale from zero follows the "Opt-in Autoscaling from
//! Zero" proposal, and bad annotations are reported on their object.

use std::time::Duration;

use harness::cluster::Cluster;
use harness::controllers::capi::{
    self, cluster_manifest, machine_deployment_manifest, template_manifest,
};
use k8s_openapi::api::core::v1::{Event, Node};
use kube::Api;
use kube::api::DynamicObject;
use serde_json::{Value, json};

const MINUTE: Duration = Duration::from_secs(60);
const MIN_SIZE: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";
const MAX_SIZE: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";
const CAPACITY: &str = "capacity.cluster-autoscaler.kubernetes.io";

fn deployment(name: &str, replicas: i32, cpu: &str, extra_spec: Value) -> Value {
    let mut spec = json!({"containers": [{"name": "c", "image": "pause",
        "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra_spec.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}})
}

/// A node group: a MachineDeployment of `replicas` machines from a
/// template whose nodes have `cpu` CPUs (and `status` as given), with the
/// size annotations and `annotations`.
fn group(name: &str, replicas: usize, cpu: &str, status: Value, annotations: Value) -> Vec<Value> {
    let mut labels = json!({"pool": name});
    if let Some(arch) = status.pointer("/nodeInfo/architecture") {
        labels["kubernetes.io/arch"] = arch.clone();
    }
    let mut template = template_manifest(
        "default",
        name,
        json!({"cpu": cpu, "memory": "16Gi", "pods": "110"}),
        labels,
        json!([]),
    );
    if !status.is_null() {
        template["status"] = status;
    }
    // The nodes' labels, told to the autoscaler as a user would.
    let mut all =
        json!({MIN_SIZE: "0", MAX_SIZE: "5", format!("{CAPACITY}/labels"): format!("pool={name}")});
    for (k, v) in annotations.as_object().into_iter().flatten() {
        all[k] = v.clone();
    }
    vec![
        template,
        machine_deployment_manifest("default", name, "testbed", replicas, name, all),
    ]
}

async fn start(groups: Vec<Vec<Value>>, flags: &[&str]) -> (Cluster, tokio::task::JoinHandle<()>) {
    let mut builder = Cluster::builder()
        .capi()
        .object(cluster_manifest("default", "testbed"));
    for o in groups.into_iter().flatten() {
        builder = builder.object(o);
    }
    let cluster = builder.start().await.unwrap();
    let args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    let built = autoscaler::inprocess::clusterapi(cluster.client(), cluster.clock().clone(), &args)
        .await
        .unwrap();
    let task = tokio::spawn(built.autoscaler.run());
    (cluster, task)
}

async fn pool_nodes(cluster: &Cluster, pool: &str) -> Vec<Node> {
    harness::cluster::list(&cluster.client(), &format!("pool={pool}"))
        .await
        .unwrap()
}

async fn replicas(cluster: &Cluster, md: &str) -> Option<i32> {
    Api::<DynamicObject>::namespaced_with(
        cluster.client(),
        "default",
        &capi::resource("MachineDeployment"),
    )
    .get_scale(md)
    .await
    .unwrap()
    .spec
    .unwrap()
    .replicas
}

async fn events(cluster: &Cluster, reason: &str) -> Vec<(String, String)> {
    Api::<Event>::namespaced(cluster.client(), "default")
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| {
            (
                format!(
                    "{}/{}",
                    e.involved_object.kind.unwrap_or_default(),
                    e.involved_object.name.unwrap_or_default()
                ),
                e.message.unwrap_or_default(),
            )
        })
        .collect()
}

async fn wait_for<T, F, Fut>(cluster: &Cluster, what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    cluster
        .wait_until(what, timeout, |_| check())
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_group_at_zero_scales_up_from_its_capacity_annotations_and_back_to_zero() {
    let (cluster, _task) = start(
        vec![group(
            "gpu",
            0,
            "4",
            Value::Null,
            json!({format!("{CAPACITY}/cpu"): "4", format!("{CAPACITY}/memory"): "16Gi"}),
        )],
        &[
            "--scale-down-unneeded-time=1m",
            "--scale-down-delay-after-add=0s",
        ],
    )
    .await;
    cluster
        .create(deployment("web", 3, "3", json!({})))
        .await
        .unwrap();
    cluster
        .wait_pods_running("app=web", 3, 5 * MINUTE)
        .await
        .unwrap();
    assert_eq!(pool_nodes(&cluster, "gpu").await.len(), 3);
    assert_eq!(replicas(&cluster, "gpu").await, Some(3));

    // The pods go; the nodes go after a minute, each Machine marked for
    // deletion and the replicas lowered, down to zero.
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(cluster.client(), "default")
        .delete("web", &Default::default())
        .await
        .unwrap();
    wait_for(&cluster, "the group back at 0", 10 * MINUTE, || async {
        let n = pool_nodes(&cluster, "gpu").await.len();
        let r = replicas(&cluster, "gpu").await;
        if n == 0 && r == Some(0) {
            Ok(())
        } else {
            Err(format!("{n} nodes, replicas {r:?}"))
        }
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn template_status_gives_the_capacity_and_annotations_win_over_it() {
    let status = json!({"capacity": {"cpu": "8", "memory": "32Gi"},
        "nodeInfo": {"architecture": "arm64", "operatingSystem": "linux"}});
    let (cluster, _task) = start(
        vec![
            // Nodes of 8 CPUs, told by the template's status.
            group("big", 0, "8", status.clone(), json!({})),
            // The same template, but the annotation says 2 CPUs: the
            // annotation wins, so a 6-CPU pod does not fit it.
            group(
                "small",
                0,
                "8",
                status,
                json!({format!("{CAPACITY}/cpu"): "2"}),
            ),
        ],
        &[],
    )
    .await;
    cluster
        .create(deployment(
            "arm",
            2,
            "6",
            json!({"nodeSelector": {"kubernetes.io/arch": "arm64", "pool": "big"}}),
        ))
        .await
        .unwrap();
    cluster
        .create(deployment(
            "narrow",
            1,
            "6",
            json!({"nodeSelector": {"pool": "small"}}),
        ))
        .await
        .unwrap();
    cluster
        .wait_pods_running("app=arm", 2, 5 * MINUTE)
        .await
        .unwrap();
    assert_eq!(pool_nodes(&cluster, "big").await.len(), 2);
    wait_for(&cluster, "the narrow pod told why", 5 * MINUTE, || async {
        let e = events(&cluster, "NotTriggerScaleUp").await;
        if e.is_empty() {
            Err("no NotTriggerScaleUp".to_string())
        } else {
            Ok(())
        }
    })
    .await;
    assert_eq!(replicas(&cluster, "small").await, Some(0));
    assert!(pool_nodes(&cluster, "small").await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_malformed_annotation_is_reported_on_its_object_and_the_other_groups_work() {
    let (cluster, _task) = start(
        vec![
            group(
                "bad",
                0,
                "4",
                Value::Null,
                json!({MAX_SIZE: "five",
                format!("{CAPACITY}/cpu"): "4", format!("{CAPACITY}/memory"): "16Gi"}),
            ),
            group("mute", 0, "4", Value::Null, json!({})),
            group(
                "good",
                0,
                "4",
                Value::Null,
                json!({
                format!("{CAPACITY}/cpu"): "4", format!("{CAPACITY}/memory"): "16Gi"}),
            ),
        ],
        &[],
    )
    .await;
    cluster
        .create(deployment("web", 2, "3", json!({})))
        .await
        .unwrap();
    cluster
        .wait_pods_running("app=web", 2, 5 * MINUTE)
        .await
        .unwrap();
    assert_eq!(pool_nodes(&cluster, "good").await.len(), 2);
    assert_eq!(replicas(&cluster, "bad").await, Some(0));
    assert_eq!(replicas(&cluster, "mute").await, Some(0));

    let invalid = events(&cluster, "InvalidNodeGroupAnnotation").await;
    assert_eq!(invalid.len(), 1, "{invalid:?}");
    assert_eq!(invalid[0].0, "MachineDeployment/bad");
    assert!(
        invalid[0].1.contains(MAX_SIZE) && invalid[0].1.contains("\"five\""),
        "{invalid:?}"
    );
    let unavailable = events(&cluster, "ScaleFromZeroUnavailable").await;
    assert_eq!(unavailable.len(), 1, "{unavailable:?}");
    assert_eq!(unavailable[0].0, "MachineDeployment/mute");
}
