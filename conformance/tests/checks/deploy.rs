//! `deploy/` applied with kubectl to the testbed, and our binary run with
//! only the RBAC given there: the ServiceAccount's token (from `kubectl
//! create token`, the TokenRequest API) in its kubeconfig, the Deployment's
//! own arguments, against an API server that enforces RBAC for that token.
//! It scales a group up for pending pods and back down when they go, with
//! no request refused, for the kwok provider and for Cluster API (on the
//! testbed's CAPI controllers); the same token is refused what the Roles do
//! not grant. The aws manifest is applied in a server-side dry run.
//!
//! The executable is the one `cargo test --workspace` builds next to this
//! test (`target/<profile>/cluster-autoscaler`). Without kubectl the test
//! prints SKIPPED.

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

/// The workload: six pods of one CPU each.
const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 6
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx
        resources: {requests: {cpu: '1'}}
";

/// One provider's deployment: what to apply before the manifest, how the
/// testbed serves it, and the label of the nodes its scale-up adds.
struct Case {
    provider: &'static str,
    /// Applied with the manifest (the provider's own objects).
    objects: &'static str,
    /// The label selector of the nodes the autoscaler adds.
    nodes: &'static str,
    capi: bool,
    /// Also apply `deploy/manifests/provisioning-requests.yaml` and the
    /// CRD, run with `--enable-provisioning-requests`, and check that a
    /// request gets its condition.
    provisioning_requests: bool,
}

/// A check-capacity request for a pod that fits no node, and its template.
const REQUEST: &str = "apiVersion: v1
kind: PodTemplate
metadata: {name: huge, namespace: default}
template:
  spec:
    containers: [{name: c, image: i, resources: {requests: {cpu: '100'}}}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: batch, namespace: default}
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: huge}, count: 1}]
";

async fn count_nodes(client: kube::Client, selector: &str) -> Result<usize, String> {
    let nodes = Api::<Node>::all(client)
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|e| e.to_string())?;
    Ok(nodes.items.len())
}

/// Prints why a check is skipped where the test harness does not capture
/// it (straight to stderr, not through `eprintln!`), so that CI shows it.
fn skipped(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED: {why}");
}

fn kubectl_present() -> bool {
    Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// A testbed (with Cluster API when `capi`) served over TLS, and the
/// administrator's kubeconfig.
async fn served(capi: bool) -> (Cluster, harness::TlsEndpoint, tempfile::TempDir, PathBuf) {
    let mut builder = Cluster::builder();
    if capi {
        builder = builder.capi();
    }
    let cluster = builder.start().await.unwrap();
    let endpoint = cluster
        .api_server()
        .unwrap()
        .serve_tls(([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let admin = dir.path().join("admin");
    endpoint.write_kubeconfig(&admin).unwrap();
    (cluster, endpoint, dir, admin)
}

/// Applies `deploy/manifests/<provider>.yaml` with its provider's objects,
/// runs our binary with the Deployment's arguments and only the
/// ServiceAccount's token, and checks a scale-up for six 1-CPU pods, the
/// scale-down once they go, and that nothing was refused.
async fn deploy_and_run(case: Case) {
    if !kubectl_present() {
        skipped("kubectl is not installed; deploy/ cannot be applied");
        return;
    }
    let (cluster, endpoint, dir, admin) = served(case.capi).await;

    // What an operator does: the provider's objects, then the manifest.
    let manifest = repo().join(format!("deploy/manifests/{}.yaml", case.provider));
    kubectl(
        &admin,
        &[
            "apply",
            "-f",
            repo().join(case.objects).to_str().unwrap(),
            "-f",
            manifest.to_str().unwrap(),
        ],
    );
    if case.provisioning_requests {
        let crd = dir.path().join("crd.json");
        std::fs::write(&crd, conformance::provreq::CRD).unwrap();
        let addon = repo().join("deploy/manifests/provisioning-requests.yaml");
        kubectl(
            &admin,
            &[
                "apply",
                "-f",
                crd.to_str().unwrap(),
                "-f",
                addon.to_str().unwrap(),
            ],
        );
    }
    // The Deployment's pod is played by the process below (on kwok's nodes
    // a pod only pretends to run): none of its own, which would hold a node.
    kubectl(
        &admin,
        &[
            "-n",
            "kube-system",
            "scale",
            "deployment",
            "cluster-autoscaler",
            "--replicas=0",
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
        // A node seen busy is looked at again after this (default 5 min).
        "--unremovable-node-recheck-timeout=1s".into(),
    ]);
    if case.provisioning_requests {
        args.push("--enable-provisioning-requests".into());
    }
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
    // On failure: the autoscaler's log, and what the cluster looked like.
    let log_text = || {
        let mut text = std::fs::read_to_string(&log).unwrap_or_default();
        for what in [
            &["get", "nodes,pods", "-A", "-o", "wide"][..],
            &[
                "-n",
                "kube-system",
                "get",
                "configmap",
                "cluster-autoscaler-status",
                "-o",
                "jsonpath={.data.status}",
            ][..],
        ] {
            text.push_str(&format!("\n$ kubectl {}\n", what.join(" ")));
            if let Ok(out) = Command::new("kubectl")
                .env("KUBECONFIG", &admin)
                .args(what)
                .output()
            {
                text.push_str(&String::from_utf8_lossy(&out.stdout));
                text.push_str(&String::from_utf8_lossy(&out.stderr));
            }
        }
        if let Ok(out) = Command::new("curl")
            .arg("-s")
            .arg(format!("http://127.0.0.1:{port}/decisions"))
            .output()
        {
            text.push_str("\n$ curl /decisions\n");
            text.push_str(&String::from_utf8_lossy(&out.stdout));
        }
        text
    };

    // Scale-up: six 1-CPU pods need two 4-CPU nodes.
    let web = dir.path().join("web.yaml");
    std::fs::write(&web, WEB).unwrap();
    kubectl(&admin, &["apply", "-f", web.to_str().unwrap()]);
    let running = cluster
        .wait_pods_running("app=web", 6, Duration::from_secs(120))
        .await;
    assert!(
        running.is_ok(),
        "{}: {running:?}\nautoscaler log:\n{}",
        case.provider,
        log_text()
    );
    let added = count_nodes(cluster.client(), case.nodes).await.unwrap();
    assert!(
        added >= 2,
        "{}: {added} nodes {}",
        case.provider,
        case.nodes
    );

    // Scale-down: the pods go, the empty nodes are tainted and removed.
    kubectl(&admin, &["delete", "deployment", "web"]);
    let selector = case.nodes;
    let gone = cluster
        .wait_until(
            "the added nodes are removed",
            Duration::from_secs(120),
            |client| async move {
                match count_nodes(client, selector).await {
                    Ok(0) => Ok(()),
                    Ok(n) => Err(format!("{n} nodes {selector}")),
                    Err(e) => Err(e),
                }
            },
        )
        .await;
    assert!(
        gone.is_ok(),
        "{}: {:?}\nautoscaler log:\n{}",
        case.provider,
        gone.map_err(|e: ClusterError| e.to_string()),
        log_text()
    );

    // A request gets its condition: the add-on's rules are enough.
    if case.provisioning_requests {
        let request = dir.path().join("request.yaml");
        std::fs::write(&request, REQUEST).unwrap();
        kubectl(&admin, &["apply", "-f", request.to_str().unwrap()]);
        let answered = cluster
            .wait_until(
                "the request gets Provisioned=False",
                Duration::from_secs(60),
                |_| async {
                    let reason = kubectl(
                        &admin,
                        &[
                            "get",
                            "provisioningrequest",
                            "batch",
                            "-o",
                            "jsonpath={.status.conditions[?(@.type==\"Provisioned\")].reason}",
                        ],
                    );
                    if reason.trim() == "CapacityIsNotFound" {
                        Ok(())
                    } else {
                        Err(format!("Provisioned reason {reason:?}"))
                    }
                },
            )
            .await;
        assert!(
            answered.is_ok(),
            "{answered:?}\nautoscaler log:\n{}",
            log_text()
        );
    }

    // It wrote its status, and the API server refused it nothing.
    Api::<ConfigMap>::namespaced(cluster.client(), "kube-system")
        .get("cluster-autoscaler-status")
        .await
        .unwrap();
    let text = log_text();
    assert!(
        !text.to_lowercase().contains("forbidden"),
        "{}: the autoscaler was refused a request:\n{text}",
        case.provider
    );
}

/// The kwok manifest's case, with or without the ProvisioningRequest add-on.
fn kwok_case(provisioning_requests: bool) -> Case {
    Case {
        provider: "kwok",
        objects: "deploy/kwok-provider-configmaps.yaml",
        nodes: "kwok-nodegroup=small",
        capi: false,
        provisioning_requests,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployed_rbac_is_enough_for_the_kwok_provider_and_enforced() {
    deploy_and_run(kwok_case(false)).await;
}

/// The kwok manifest with the ProvisioningRequest add-on: the autoscaler
/// answers a request with only the rules the add-on grants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provisioning_request_rules_are_enough_to_answer_a_request() {
    deploy_and_run(kwok_case(true)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployed_rbac_is_enough_for_the_clusterapi_provider_and_enforced() {
    deploy_and_run(Case {
        provider: "clusterapi",
        objects: "deploy/clusterapi-example.yaml",
        nodes: "pool=general",
        capi: true,
        provisioning_requests: false,
    })
    .await;
}

/// The aws manifest applies too (its provider needs AWS, which the aws
/// tests emulate): checked by the API server, nothing created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aws_manifest_applies() {
    if !kubectl_present() {
        skipped("kubectl is not installed; deploy/ cannot be applied");
        return;
    }
    let (_cluster, _endpoint, _dir, admin) = served(false).await;
    let manifest = repo().join("deploy/manifests/aws.yaml");
    let out = kubectl(
        &admin,
        &[
            "apply",
            "--dry-run=server",
            "-f",
            manifest.to_str().unwrap(),
        ],
    );
    assert!(
        out.contains("deployment.apps/cluster-autoscaler created (server dry run)"),
        "{out}"
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

/// Whether `helm` runs here.
fn helm_present() -> bool {
    Command::new("helm")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `helm template` of the chart in `kube-system` with these `--set`s.
fn helm_template(sets: &[String]) -> String {
    let mut cmd = Command::new("helm");
    cmd.args(["template", "ca"])
        .arg(repo().join("deploy/helm/cluster-autoscaler"))
        .args(["--namespace", "kube-system"]);
    for set in sets {
        cmd.args(["--set", set]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Each feature's add-on (ProvisioningRequests, CapacityBuffers,
/// CapacityQuotas) grants exactly the chart's rule file for it, the
/// provider manifests none of it (only with the flag), and, where helm is
/// installed, the chart adds the file's rules with the feature's
/// `extraArgs` and only then.
#[test]
fn feature_rules_come_with_the_feature_only() {
    for (file, addon, flag) in [
        (
            "clusterrole-rules-provisioningrequests.yaml",
            "provisioning-requests.yaml",
            "enable-provisioning-requests",
        ),
        (
            "clusterrole-rules-capacitybuffers.yaml",
            "capacity-buffers.yaml",
            "capacity-buffer-controller-enabled",
        ),
        (
            "clusterrole-rules-capacitybuffers.yaml",
            "capacity-buffers.yaml",
            "capacity-buffer-pod-injection-enabled",
        ),
        (
            "clusterrole-rules-capacityquotas.yaml",
            "capacity-quotas.yaml",
            "capacity-quotas-enabled",
        ),
    ] {
        rules_come_with_the_feature_only(file, addon, flag);
    }
}

fn rules_come_with_the_feature_only(file: &str, addon: &str, flag: &str) {
    let path = repo()
        .join("deploy/helm/cluster-autoscaler/files")
        .join(file);
    let want: Vec<Value> = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(!want.is_empty());
    let text = std::fs::read_to_string(repo().join("deploy/manifests").join(addon)).unwrap();
    assert_eq!(manifest_rules(&text, "ClusterRole"), want, "{addon}");
    for provider in ["kwok", "clusterapi", "aws"] {
        let manifest =
            std::fs::read_to_string(repo().join(format!("deploy/manifests/{provider}.yaml")))
                .unwrap();
        let rules = manifest_rules(&manifest, "ClusterRole");
        // The base rules may share a rule with a feature (pods list...):
        // what must not be there is the feature's own resources.
        let own = |r: &Value| {
            r["apiGroups"]
                .as_array()
                .is_some_and(|g| g.iter().any(|g| g == "autoscaling.x-k8s.io"))
        };
        assert!(
            want.iter().filter(|r| own(r)).all(|r| !rules.contains(r)),
            "deploy/manifests/{provider}.yaml grants the rules of {file} without --{flag}"
        );
    }
    if !helm_present() {
        skipped(&format!(
            "helm is not installed: the chart's rules of {file} are not rendered"
        ));
        return;
    }
    for enabled in [false, true] {
        let rendered = helm_template(&[
            "cloudProvider=kwok".into(),
            format!("extraArgs.{flag}={enabled}"),
        ]);
        let mut expected = chart_rules("clusterrole", "kwok");
        if enabled {
            expected.extend(want.iter().cloned());
        }
        assert_eq!(
            manifest_rules(&rendered, "ClusterRole"),
            expected,
            "helm template with {flag}={enabled}"
        );
    }
}

/// Each provider's plain manifest grants exactly the chart's rules (one
/// place for them: the chart's `files/`), and, where helm is installed,
/// `helm template` renders the same.
#[test]
fn the_manifests_and_the_chart_grant_the_same_rules() {
    let helm = helm_present();
    if !helm {
        skipped(
            "helm is not installed: the chart is compared by its rule files only, not rendered",
        );
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
                let rendered = helm_template(&[
                    format!("cloudProvider={provider}"),
                    "autoDiscovery.clusterName=test".into(),
                ]);
                assert_eq!(
                    manifest_rules(&rendered, kind),
                    want,
                    "helm template, {provider}"
                );
            }
        }
    }
}
