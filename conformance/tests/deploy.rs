//! `deploy/` applied with kubectl to the testbed, and our binary run with
//! only the RBAC given there: the ServiceAccount's token (from `kubectl
//! create token`, the TokenRequest API) in its kubeconfig, the Deployment's
//! own arguments, against an API server that enforces RBAC for that token.
//! It scales a group up for pending pods and back down when they go, with
//! no request refused; the same token is refused what the Roles do not
//! grant.
//!
//! The executable is the one `cargo test --workspace` builds next to this
//! test (`target/<profile>/cluster-autoscaler`). Without kubectl the test
//! prints SKIPPED.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use harness::cluster::{Cluster, ClusterError};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The autoscaler container's arguments in a manifest's Deployment.
fn deployment_args(manifest: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("the manifest has a Deployment");
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn autoscaler_nodes(client: kube::Client) -> Result<usize, String> {
    let nodes = Api::<Node>::all(client)
        .list(&ListParams::default().labels("kwok-nodegroup=small"))
        .await
        .map_err(|e| e.to_string())?;
    Ok(nodes.items.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployed_rbac_is_enough_for_the_binary_and_enforced() {
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        println!("SKIPPED: kubectl is not installed; deploy/ cannot be applied");
        return;
    }
    let cluster = Cluster::builder().start().await.unwrap();
    let endpoint = cluster
        .api_server()
        .unwrap()
        .serve_tls(([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let admin = dir.path().join("admin");
    endpoint.write_kubeconfig(&admin).unwrap();

    // What an operator does: the provider's ConfigMaps, then the manifests.
    let manifest = repo().join("deploy/manifests/kwok.yaml");
    kubectl(
        &admin,
        &[
            "apply",
            "-f",
            repo()
                .join("deploy/kwok-provider-configmaps.yaml")
                .to_str()
                .unwrap(),
            "-f",
            manifest.to_str().unwrap(),
        ],
    );
    let token = kubectl(
        &admin,
        &["-n", "kube-system", "create", "token", "cluster-autoscaler"],
    );
    let sa_kubeconfig = dir.path().join("sa");
    std::fs::write(&sa_kubeconfig, endpoint.kubeconfig_with_token(token.trim())).unwrap();

    // The token gets nothing the Roles do not give.
    let sa = endpoint.client_with_token(token.trim()).unwrap();
    match Api::<Secret>::all(sa.clone())
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{}", s.message),
        other => panic!("listing Secrets with the autoscaler's token: {other:?}"),
    }

    // The Deployment's own arguments, reaching the testbed through the
    // ServiceAccount's kubeconfig; quick scale-down to exercise it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut args: Vec<String> = deployment_args(&manifest)
        .into_iter()
        .map(|a| {
            if a.starts_with("--address=") {
                format!("--address=127.0.0.1:{port}")
            } else {
                a
            }
        })
        .collect();
    args.extend([
        format!("--kubeconfig={}", sa_kubeconfig.display()),
        "--scan-interval=1s".into(),
        "--scale-down-delay-after-add=0s".into(),
        "--scale-down-unneeded-time=2s".into(),
    ]);
    let log = dir.path().join("autoscaler.log");
    let log_file = std::fs::File::create(&log).unwrap();
    let _ca = Process(
        Command::new(conformance::binary::sibling_autoscaler().unwrap())
            .args(&args)
            .env("POD_NAMESPACE", "kube-system")
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .spawn()
            .unwrap(),
    );
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();

    // Scale-up: six 1-CPU pods need two 4-CPU nodes of "small".
    kubectl(
        &admin,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=6",
        ],
    );
    kubectl(
        &admin,
        &["set", "resources", "deployment", "web", "--requests=cpu=1"],
    );
    let running = cluster
        .wait_pods_running("app=web", 6, Duration::from_secs(120))
        .await;
    assert!(
        running.is_ok(),
        "{running:?}\nautoscaler log:\n{}",
        log_text()
    );
    let added = autoscaler_nodes(cluster.client()).await.unwrap();
    assert!(added >= 2, "{added} nodes of small");

    // Scale-down: the pods go, the empty nodes are tainted and deleted.
    kubectl(&admin, &["delete", "deployment", "web"]);
    let gone = cluster
        .wait_until(
            "the small nodes are removed",
            Duration::from_secs(120),
            |client| async move {
                match autoscaler_nodes(client).await {
                    Ok(0) => Ok(()),
                    Ok(n) => Err(format!("{n} nodes of small")),
                    Err(e) => Err(e),
                }
            },
        )
        .await;
    assert!(
        gone.is_ok(),
        "{:?}\nautoscaler log:\n{}",
        gone.map_err(|e: ClusterError| e.to_string()),
        log_text()
    );

    // It wrote its status, and the API server refused it nothing.
    Api::<ConfigMap>::namespaced(cluster.client(), "kube-system")
        .get("cluster-autoscaler-status")
        .await
        .unwrap();
    let text = log_text();
    assert!(
        !text.to_lowercase().contains("forbidden"),
        "the autoscaler was refused a request:\n{text}"
    );
}

/// The rules of the `kind` object in a manifest.
fn manifest_rules(manifest: &str, kind: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(manifest).unwrap();
    docs.into_iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))["rules"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The chart's rule files for `scope` and `provider`, in the chart's order.
fn chart_rules(scope: &str, provider: &str) -> Vec<Value> {
    let files = repo().join("deploy/helm/cluster-autoscaler/files");
    [
        format!("{scope}-rules.yaml"),
        format!("{scope}-rules-{provider}.yaml"),
    ]
    .iter()
    .flat_map(|f| {
        let text = std::fs::read_to_string(files.join(f)).unwrap();
        serde_saphyr::from_str::<Option<Vec<Value>>>(&text)
            .unwrap()
            .unwrap_or_default()
    })
    .collect()
}

/// Each provider's plain manifest grants exactly the chart's rules (one
/// place for them: the chart's `files/`), and, where helm is installed,
/// `helm template` renders the same.
#[test]
fn the_manifests_and_the_chart_grant_the_same_rules() {
    let helm = Command::new("helm")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !helm {
        println!("SKIPPED: helm is not installed: the chart is compared by its rule files only");
    }
    for provider in ["kwok", "clusterapi", "aws"] {
        let manifest =
            std::fs::read_to_string(repo().join(format!("deploy/manifests/{provider}.yaml")))
                .unwrap();
        for (scope, kind) in [("clusterrole", "ClusterRole"), ("role", "Role")] {
            let want = chart_rules(scope, provider);
            assert!(!want.is_empty() || scope == "role", "{scope} {provider}");
            assert_eq!(
                manifest_rules(&manifest, kind),
                want,
                "deploy/manifests/{provider}.yaml's {kind} differs from the chart's files \
                 (run deploy/manifests/generate.py)"
            );
            if helm {
                let out = Command::new("helm")
                    .args(["template", "ca"])
                    .arg(repo().join("deploy/helm/cluster-autoscaler"))
                    .args(["--namespace", "kube-system", "--set"])
                    .arg(format!("cloudProvider={provider}"))
                    .args(["--set", "autoDiscovery.clusterName=test"])
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let rendered = String::from_utf8_lossy(&out.stdout);
                assert_eq!(
                    manifest_rules(&rendered, kind),
                    want,
                    "helm template, {provider}"
                );
            }
        }
    }
}
