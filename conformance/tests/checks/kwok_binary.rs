//! The `kwok` binary against an API server over TLS, in real time: config
//! files, flags, Stage objects from the cluster, start-up errors.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

/// Our `kwok`, built beside this test (`target/<profile>/kwok`).
fn binary() -> std::path::PathBuf {
    conformance::binary::sibling_binary("kwok", "kwok").unwrap()
}

/// The child process, killed when the test ends (also on panic).
struct Kwok(Child);

impl Drop for Kwok {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn kwok(args: &[&str]) -> Kwok {
    Kwok(
        Command::new(binary())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    )
}

async fn serve(
    dir: &Path,
) -> (
    apiserver::ApiServer,
    apiserver::TlsEndpoint,
    PathBuf,
    Client,
) {
    let api = apiserver::ApiServer::start(simclock::Clock::new()).unwrap();
    let endpoint = api.serve_tls("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let kubeconfig = dir.join("kubeconfig");
    endpoint.write_kubeconfig(&kubeconfig).unwrap();
    let client = api.client();
    (api, endpoint, kubeconfig, client)
}

async fn create(client: &Client, obj: Value) {
    let api_version = obj["apiVersion"].as_str().unwrap().to_string();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    let gvk = kube::core::GroupVersionKind::gvk(group, version, obj["kind"].as_str().unwrap());
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
        Api::namespaced_with(client.clone(), "default", &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    api.create(
        &PostParams::default(),
        &serde_json::from_value(obj).unwrap(),
    )
    .await
    .unwrap();
}

fn node(name: &str, annotated: bool) -> Value {
    let annotations = if annotated {
        json!({"kwok.x-k8s.io/node": "fake"})
    } else {
        json!({})
    };
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": annotations},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                   "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
}

fn ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Polls `check` (None: done; Some: what was seen) every 100 ms for up to
/// 30 s of real time.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<String>>,
{
    let start = Instant::now();
    loop {
        match check().await {
            None => return,
            Some(seen) if start.elapsed() > Duration::from_secs(30) => {
                panic!("timed out waiting for {what}; last seen: {seen}")
            }
            Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_and_flags_drive_nodes_pods_and_leases() {
    let dir = tempfile::tempdir().unwrap();
    let (_api, _ep, kubeconfig, client) = serve(dir.path()).await;
    let config = dir.path().join("kwok.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions:\n  cidr: 10.5.0.0/16\n  manageAllNodes: true\n  nodeLeaseDurationSeconds: 40\n  nodeIP: 10.9.9.9\n---\n{}",
            kwok::defaults::FAST_STAGES
        ),
    )
    .unwrap();
    let _kwok = kwok(&[
        "--config",
        config.to_str().unwrap(),
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--node-ip",
        "192.168.9.9",
    ]);
    create(&client, node("n1", false)).await;
    create(
        &client,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "default"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]}}),
    )
    .await;
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    eventually("n1 Ready and p1 Running", || async {
        let n = nodes.get("n1").await.ok()?;
        let p = pods.get("p1").await.ok()?;
        let status = p.status.clone().unwrap_or_default();
        if ready(&n) && status.phase.as_deref() == Some("Running") {
            None
        } else {
            Some(format!("{:?} / {:?}", n.status, status))
        }
    })
    .await;
    let p = pods.get("p1").await.unwrap().status.unwrap();
    assert_eq!(
        p.pod_ip.as_deref(),
        Some("10.5.0.1"),
        "from the config's cidr"
    );
    assert_eq!(
        p.host_ip.as_deref(),
        Some("192.168.9.9"),
        "--node-ip overrides the config"
    );
    let lease = Api::<Lease>::namespaced(client.clone(), "kube-node-lease")
        .get("n1")
        .await
        .unwrap();
    let spec = lease.spec.unwrap();
    assert!(
        spec.holder_identity.as_deref().unwrap().contains('_'),
        "identity is <hostname>_<uuid>: {:?}",
        spec.holder_identity
    );
    assert_eq!(spec.lease_duration_seconds, Some(40));
    assert_eq!(lease.metadata.owner_references.unwrap()[0].name, "n1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_objects_from_the_cluster_drive_annotated_nodes_only() {
    let dir = tempfile::tempdir().unwrap();
    let (_api, _ep, kubeconfig, client) = serve(dir.path()).await;
    create(&client, kwok::stage_crd()).await;
    let _kwok = kwok(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        "--enable-crds=Stage",
    ]);
    create(&client, node("fake", true)).await;
    create(&client, node("real", false)).await;
    // No Stage objects yet: nothing happens.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let nodes: Api<Node> = Api::all(client.clone());
    assert!(!ready(&nodes.get("fake").await.unwrap()));
    let stages: Api<DynamicObject> =
        Api::all_with(client.clone(), &kwok::controller::stage_resource());
    let docs: Vec<Value> = serde_saphyr::from_multiple(kwok::defaults::FAST_STAGES).unwrap();
    for doc in docs {
        stages
            .create(
                &PostParams::default(),
                &serde_json::from_value(doc).unwrap(),
            )
            .await
            .unwrap();
    }
    eventually("the annotated node Ready", || async {
        let n = nodes.get("fake").await.ok()?;
        (!ready(&n)).then(|| format!("{:?}", n.status))
    })
    .await;
    assert!(
        !ready(&nodes.get("real").await.unwrap()),
        "a node without the annotation is not managed"
    );
}
