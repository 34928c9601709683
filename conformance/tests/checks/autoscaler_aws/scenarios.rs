//! The scenarios, built with the `aws` feature.

use std::collections::BTreeMap;
use std::time::Duration;

use autoscaler::cloudprovider::aws::Connection;
use harness::aws::{AsgSpec, CREDENTIALS, Emulator, EmulatorError, REGION};
use harness::cluster::Cluster;
use k8s_openapi::api::core::v1::{Event, Node};
use kube::Api;
use serde_json::json;

const MINUTE: Duration = Duration::from_secs(60);
const ENABLED: &str = "k8s.io/cluster-autoscaler/enabled";
const CLUSTER: &str = "k8s.io/cluster-autoscaler/testbed";
const DISCOVERY: &str = "--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/testbed";

async fn emulator() -> Option<Emulator> {
    match Emulator::start().await {
        Ok(e) => Some(e),
        Err(e @ EmulatorError::NotInstalled(_)) => {
            println!("SKIPPED: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

fn asg(name: &str, instance_type: &str, desired: usize, tags: &[(&str, &str)]) -> AsgSpec {
    let mut all: BTreeMap<String, String> = [(ENABLED, "true"), (CLUSTER, "owned")]
        .iter()
        .chain(tags)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    all.insert(
        "k8s.io/cluster-autoscaler/node-template/label/pool".into(),
        name.into(),
    );
    AsgSpec {
        name: name.into(),
        instance_type: instance_type.into(),
        min: 0,
        max: 5,
        desired,
        zone: "us-east-1a".into(),
        tags: all,
    }
}

async fn start(
    emulator: &Emulator,
    groups: &[AsgSpec],
    flags: &[&str],
) -> (Cluster, tokio::task::JoinHandle<()>) {
    let clients = emulator.clients();
    for g in groups {
        clients.create_asg(g).await.unwrap();
    }
    let cluster = Cluster::builder()
        .aws(emulator.endpoint())
        .start()
        .await
        .unwrap();
    let args: Vec<String> = flags
        .iter()
        .chain(&[DISCOVERY])
        .map(|s| s.to_string())
        .collect();
    let connection = Connection {
        region: Some(REGION.into()),
        endpoint: Some(emulator.endpoint().into()),
        credentials: Some((CREDENTIALS.0.into(), CREDENTIALS.1.into())),
    };
    let built =
        autoscaler::inprocess::aws(cluster.client(), cluster.clock().clone(), connection, &args)
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

fn deployment(name: &str, replicas: i32, cpu: &str) -> serde_json::Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "pause",
                "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]}}}})
}

#[tokio::test(start_paused = true)]
async fn an_asg_at_zero_scales_up_from_its_launch_template_and_back_to_zero() {
    let Some(emulator) = emulator().await else {
        return;
    };
    // m5.xlarge: 4 vCPUs, 16 GiB. A 3-CPU pod fits one per node.
    let (cluster, _task) = start(
        &emulator,
        &[asg("pool-a", "m5.xlarge", 0, &[])],
        &[
            "--scale-down-unneeded-time=1m",
            "--scale-down-delay-after-add=0s",
        ],
    )
    .await;
    cluster.create(deployment("web", 3, "3")).await.unwrap();
    cluster
        .wait_pods_running("app=web", 3, 5 * MINUTE)
        .await
        .unwrap();
    let nodes = pool_nodes(&cluster, "pool-a").await;
    assert_eq!(nodes.len(), 3);
    for n in &nodes {
        let id = n.spec.as_ref().unwrap().provider_id.as_deref().unwrap();
        assert!(id.starts_with("aws:///us-east-1a/i-"), "{id}");
    }
    let (desired, instances) = emulator.clients().asg_size("pool-a").await.unwrap();
    assert_eq!((desired, instances.len()), (3, 3));

    // The pods go; each instance is terminated with a decrement, down to 0.
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(cluster.client(), "default")
        .delete("web", &Default::default())
        .await
        .unwrap();
    let clients = emulator.clients();
    cluster
        .wait_until("the ASG back at 0", 10 * MINUTE, |_| async {
            let (desired, instances) = clients
                .asg_size("pool-a")
                .await
                .map_err(|e| e.to_string())?;
            let nodes = pool_nodes(&cluster, "pool-a").await.len();
            if desired == 0 && instances.is_empty() && nodes == 0 {
                Ok(())
            } else {
                Err(format!(
                    "desired {desired}, {} instances, {nodes} nodes",
                    instances.len()
                ))
            }
        })
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_asg_with_a_bad_tag_is_left_alone_and_reported_while_the_others_scale() {
    let Some(emulator) = emulator().await else {
        return;
    };
    let taint = "k8s.io/cluster-autoscaler/node-template/taint/dedicated";
    // The bad ASG has an empty node: were it a node group, it would be
    // removed after a minute.
    let (cluster, _task) = start(
        &emulator,
        &[
            asg("a-bad", "m5.xlarge", 1, &[(taint, "gpu")]),
            asg("b-good", "m5.xlarge", 0, &[]),
        ],
        &[
            "--scale-down-unneeded-time=1m",
            "--scale-down-delay-after-add=0s",
        ],
    )
    .await;
    let mut web = deployment("web", 2, "3");
    web["spec"]["template"]["spec"]["nodeSelector"] = json!({"pool": "b-good"});
    cluster.create(web).await.unwrap();
    cluster
        .wait_pods_running("app=web", 2, 5 * MINUTE)
        .await
        .unwrap();
    assert_eq!(pool_nodes(&cluster, "b-good").await.len(), 2);
    cluster.advance(5 * MINUTE).await;
    let (desired, instances) = emulator.clients().asg_size("a-bad").await.unwrap();
    assert_eq!(
        (desired, instances.len()),
        (1, 1),
        "the bad ASG was resized"
    );
    assert_eq!(pool_nodes(&cluster, "a-bad").await.len(), 1);
    let events: Vec<String> = Api::<Event>::namespaced(cluster.client(), "kube-system")
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("InvalidNodeGroupTag"))
        .filter_map(|e| e.message)
        .collect();
    assert_eq!(
        events,
        vec![format!(
            "ASG a-bad: tag {taint}=\"gpu\": expected <value>:<effect>, like true:NoSchedule"
        )]
    );
}
