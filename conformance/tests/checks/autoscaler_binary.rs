//! The `cluster-autoscaler` binary against the embedded cluster served over
//! TLS (as `testbed up` serves it), in real time: it scales up pending pods,
//! writes the status ConfigMap, answers `/metrics`, `/health-check` and
//! `/decisions`, and on SIGTERM deletes the status ConfigMap. Bad flags
//! exit before anything starts.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use harness::cluster::Cluster;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::Api;
use serde_json::json;

/// Our `cluster-autoscaler`, built beside this test (`target/<profile>/cluster-autoscaler`).
fn binary() -> std::path::PathBuf {
    conformance::binary::sibling_binary("autoscaler", "cluster-autoscaler").unwrap()
}

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn http_get(port: u16, path: &str) -> (u16, String) {
    harness::http_get(port, path)
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// The kwok provider's ConfigMaps: one group "pool" of 4-CPU nodes.
fn kwok_provider_objects() -> Vec<serde_json::Value> {
    let templates = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "pool", "labels": {"kwok-nodegroup": "pool"}},
         "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}, "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}}]});
    vec![
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kwok-provider-config", "namespace": "kube-system"},
            "data": {"config": "readNodesFrom: configmap\nnodegroups:\n  fromNodeLabelKey: kwok-nodegroup\nnodes:\n  skipTaint: true\nconfigmap:\n  name: kwok-provider-templates\n"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kwok-provider-templates", "namespace": "kube-system"},
            "data": {"templates": templates.to_string()}}),
    ]
}

/// An embedded cluster served over TLS, with its kubeconfig.
struct Served {
    cluster: Cluster,
    kubeconfig: std::path::PathBuf,
    _endpoint: harness::TlsEndpoint,
    _dir: tempfile::TempDir,
}

/// Starts a cluster holding `objects` and serves it over TLS.
async fn serve(objects: Vec<serde_json::Value>) -> Served {
    serve_with(Cluster::builder(), objects).await
}

/// A Cluster API cluster with one MachineDeployment of one machine.
fn clusterapi_objects() -> Vec<serde_json::Value> {
    use harness::controllers::capi;
    vec![
        capi::cluster_manifest("default", "testbed"),
        capi::template_manifest(
            "default",
            "pool",
            json!({"cpu": "4", "memory": "16Gi"}),
            json!({}),
            json!([]),
        ),
        capi::machine_deployment_manifest(
            "default",
            "pool",
            "testbed",
            1,
            "pool",
            json!({
                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1",
                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "3",
            }),
        ),
    ]
}

/// [`serve`] on the given builder.
async fn serve_with(
    builder: harness::cluster::ClusterBuilder,
    objects: Vec<serde_json::Value>,
) -> Served {
    let cluster = objects
        .into_iter()
        .fold(builder, |b, o| b.object(o))
        .start()
        .await
        .unwrap();
    let endpoint = cluster
        .api_server()
        .unwrap()
        .serve_tls("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    endpoint.write_kubeconfig(&kubeconfig).unwrap();
    Served {
        cluster,
        kubeconfig,
        _endpoint: endpoint,
        _dir: dir,
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_scales_up_over_tcp_and_serves_its_endpoints() {
    let mut objects = kwok_provider_objects();
    objects.push(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 5, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]}}}}));
    let served = serve(objects).await;
    let (cluster, kubeconfig) = (&served.cluster, &served.kubeconfig);
    let port = free_port();
    let mut child = Process(
        Command::new(binary())
            .args([
                "--cloud-provider=kwok",
                &format!("--kubeconfig={}", kubeconfig.display()),
                &format!("--address=127.0.0.1:{port}"),
                "--scan-interval=1s",
                "--v=0",
            ])
            .env("POD_NAMESPACE", "kube-system")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    // 5 pods of 1 CPU on 4-CPU nodes (3.9 left with kube-proxy): 2 nodes.
    cluster
        .wait_pods_running("app=web", 5, Duration::from_secs(60))
        .await
        .unwrap();
    let nodes = Api::<Node>::all(cluster.client())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    assert_eq!(
        nodes.len(),
        2,
        "{:?}",
        nodes
            .iter()
            .map(|n| n.metadata.name.clone())
            .collect::<Vec<_>>()
    );

    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "kube-system");
    let cm = cms.get("cluster-autoscaler-status").await.unwrap();
    let status: serde_json::Value = serde_saphyr::from_str(&cm.data.unwrap()["status"]).unwrap();
    assert_eq!(status["autoscalerStatus"], "Running");
    assert!(
        cm.metadata.annotations.unwrap()["cluster-autoscaler.kubernetes.io/last-updated"]
            .ends_with("+0000 UTC")
    );

    let (code, metrics) = http_get(port, "/metrics").await;
    assert_eq!(code, 200);
    assert!(metrics.contains("cluster_autoscaler_scaled_up_nodes_total{gpu_resource_name=\"\",gpu_name=\"\",dra_drivers=\"\"} 2"), "{metrics}");
    assert!(
        metrics.contains("cluster_autoscaler_cluster_safe_to_autoscale 1"),
        "{metrics}"
    );
    let (code, body) = http_get(port, "/health-check").await;
    assert_eq!((code, body.as_str()), (200, "OK"));
    let (code, body) = http_get(port, "/decisions").await;
    assert_eq!(code, 200);
    let decisions: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(decisions.get("scaleUp").is_some(), "{decisions}");

    // SIGTERM: a graceful exit deletes the status ConfigMap.
    Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        cms.get_opt("cluster-autoscaler-status")
            .await
            .unwrap()
            .is_none()
    );
}

fn help() -> String {
    let out = Command::new(binary()).arg("--help").output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// The providers the help names (`Implemented: a, b.`).
fn providers_in_help() -> Vec<String> {
    let text = help().split_whitespace().collect::<Vec<_>>().join(" ");
    let list = text
        .split_once("Implemented: ")
        .and_then(|(_, rest)| rest.split_once('.'))
        .map(|(list, _)| list.to_string())
        .unwrap_or_else(|| panic!("no provider list in the help:\n{text}"));
    list.split(", ").map(str::to_string).collect()
}

/// Every provider the help names starts against a cluster and writes its
/// status (a provider named there but not working fails here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_provider_named_in_the_help_starts() {
    let providers = providers_in_help();
    assert!(!providers.is_empty());
    for provider in providers {
        // The AWS emulator lives as long as its provider's turn.
        #[cfg(feature = "aws")]
        let mut emulator = None;
        // Only the aws provider adds to them.
        #[cfg_attr(not(feature = "aws"), allow(unused_mut))]
        let mut args: Vec<String> = Vec::new();
        #[cfg_attr(not(feature = "aws"), allow(unused_mut))]
        let mut env: Vec<(&str, String)> = Vec::new();
        let served = match provider.as_str() {
            "kwok" => serve(kwok_provider_objects()).await,
            "clusterapi" => serve_with(Cluster::builder().capi(), clusterapi_objects()).await,
            #[cfg(not(feature = "aws"))]
            "aws" => {
                println!(
                    "SKIPPED: --cloud-provider=aws needs the `aws` feature \
                     (cargo test -p conformance --features aws --test checks)"
                );
                continue;
            }
            #[cfg(feature = "aws")]
            "aws" => {
                let e = match harness::aws::Emulator::start().await {
                    Ok(e) => e,
                    Err(e @ harness::aws::EmulatorError::NotInstalled(_)) => {
                        println!("SKIPPED: --cloud-provider=aws: {e}");
                        continue;
                    }
                    Err(e) => panic!("{e}"),
                };
                let tags = [("k8s.io/cluster-autoscaler/enabled", "true")]
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                e.clients()
                    .create_asg(&harness::aws::AsgSpec {
                        name: "pool".into(),
                        instance_type: "m5.large".into(),
                        min: 0,
                        max: 3,
                        desired: 1,
                        zone: "us-east-1a".into(),
                        tags,
                    })
                    .await
                    .unwrap();
                args.push(
                    "--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled"
                        .to_string(),
                );
                env.extend([
                    ("AWS_ENDPOINT_URL", e.endpoint().to_string()),
                    ("AWS_REGION", harness::aws::REGION.to_string()),
                    ("AWS_ACCESS_KEY_ID", harness::aws::CREDENTIALS.0.to_string()),
                    (
                        "AWS_SECRET_ACCESS_KEY",
                        harness::aws::CREDENTIALS.1.to_string(),
                    ),
                ]);
                let builder = Cluster::builder().aws(e.endpoint());
                emulator = Some(e);
                serve_with(builder, Vec::new()).await
            }
            other => panic!("the help names provider {other:?}; add its set-up to this test"),
        };
        let (cluster, kubeconfig) = (&served.cluster, &served.kubeconfig);
        let mut child = Process(
            Command::new(binary())
                .args([
                    &format!("--cloud-provider={provider}"),
                    &format!("--kubeconfig={}", kubeconfig.display()),
                    &format!("--address=127.0.0.1:{}", free_port()),
                    "--scan-interval=1s",
                ])
                .args(&args)
                .envs(env)
                .env("POD_NAMESPACE", "kube-system")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "kube-system");
        let start = Instant::now();
        while cms
            .get_opt("cluster-autoscaler-status")
            .await
            .unwrap()
            .is_none()
        {
            if let Some(status) = child.0.try_wait().unwrap() {
                panic!("--cloud-provider={provider} exited: {status}");
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "--cloud-provider={provider}: no status ConfigMap after 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        #[cfg(feature = "aws")]
        drop(emulator);
    }
}

/// `--once` (ours, kube-aws-autoscaler's flag): one loop, its decision
/// record printed as JSON, and exit; the scale-up it decided is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_runs_one_loop_prints_its_decisions_and_exits() {
    let mut objects = kwok_provider_objects();
    objects.push(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 5, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]}}}}));
    let served = serve(objects).await;
    let (cluster, kubeconfig) = (&served.cluster, &served.kubeconfig);
    // Past upstream's 2 s wait for very new pods.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let port = free_port();
    let started = Instant::now();
    let out = tokio::task::spawn_blocking({
        let kubeconfig = kubeconfig.clone();
        move || {
            Command::new(binary())
                .args([
                    "--cloud-provider=kwok",
                    &format!("--kubeconfig={}", kubeconfig.display()),
                    &format!("--address=127.0.0.1:{port}"),
                    "--once",
                    "--v=0",
                ])
                .env("POD_NAMESPACE", "kube-system")
                .stderr(Stdio::inherit())
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert!(started.elapsed() < Duration::from_secs(60));
    let record: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = record.to_string();
    assert!(text.contains("pool"), "{record:#}");
    assert!(record.get("scaleUp").is_some(), "{record:#}");
    // The two nodes it asked for come, with no second loop.
    cluster
        .wait_pods_running("app=web", 5, Duration::from_secs(60))
        .await
        .unwrap();
}
