//! The real kubectl against `testbed up`: every command an operator uses
//! on a cluster works on the embedded API server over TLS. Skipped, with a
//! message, when kubectl is not installed.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Testbed {
    child: Child,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Testbed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn up() -> Testbed {
    up_with(&[])
}

fn up_with(flags: &[&str]) -> Testbed {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_testbed"))
        .args(["up", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("testbed starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("a line from testbed up");
    assert_eq!(line.trim(), format!("kubeconfig: {}", kubeconfig.display()));
    Testbed {
        child,
        kubeconfig,
        _dir: dir,
    }
}

impl Testbed {
    fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.spawn().expect("kubectl runs");
        if let Some(input) = stdin {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.as_bytes())
                .expect("write stdin");
        }
        child.wait_with_output().expect("kubectl finishes")
    }

    /// Runs kubectl and returns stdout, failing the test with stderr on error.
    fn ok(&self, args: &[&str]) -> String {
        self.expect_success(args, None)
    }

    /// Like [`Testbed::ok`], feeding `input` on stdin (`apply -f -`).
    fn ok_stdin(&self, args: &[&str], input: &str) -> String {
        self.expect_success(args, Some(input))
    }

    fn expect_success(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.run(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {} failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn jsonpath(&self, args: &[&str], path: &str) -> String {
        let mut a = args.to_vec();
        let jp = format!("jsonpath={path}");
        a.extend(["-o", &jp]);
        self.ok(&a)
    }
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

macro_rules! require_kubectl {
    () => {
        if !kubectl_available() {
            eprintln!(
                "SKIPPED: kubectl is not installed; the kubectl conformance tests need it on PATH"
            );
            return;
        }
    };
}

#[test]
fn discovery_and_get_describe_every_resource() {
    require_kubectl!();
    let tb = up();
    let resources = tb.ok(&["api-resources", "-o", "name"]);
    for r in [
        "namespaces",
        "nodes",
        "pods",
        "services",
        "endpoints",
        "configmaps",
        "secrets",
        "events",
        "serviceaccounts",
        "persistentvolumes",
        "persistentvolumeclaims",
        "replicationcontrollers",
        "podtemplates",
        "deployments.apps",
        "replicasets.apps",
        "statefulsets.apps",
        "daemonsets.apps",
        "controllerrevisions.apps",
        "jobs.batch",
        "poddisruptionbudgets.policy",
        "leases.coordination.k8s.io",
        "events.events.k8s.io",
        "priorityclasses.scheduling.k8s.io",
        "storageclasses.storage.k8s.io",
        "csinodes.storage.k8s.io",
        "csidrivers.storage.k8s.io",
        "csistoragecapacities.storage.k8s.io",
        "volumeattachments.storage.k8s.io",
        "deviceclasses.resource.k8s.io",
        "resourceclaims.resource.k8s.io",
        "resourceclaimtemplates.resource.k8s.io",
        "resourceslices.resource.k8s.io",
        "customresourcedefinitions.apiextensions.k8s.io",
    ] {
        assert!(resources.lines().any(|l| l == r), "api-resources lists {r}");
        tb.ok(&["get", r, "-A"]);
    }
    let versions = tb.ok(&["api-versions"]);
    for v in [
        "v1",
        "apps/v1",
        "batch/v1",
        "policy/v1",
        "scheduling.k8s.io/v1",
        "apiextensions.k8s.io/v1",
    ] {
        assert!(versions.lines().any(|l| l == v), "api-versions lists {v}");
    }
    let ns = tb.ok(&["get", "namespaces"]);
    for n in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(ns.contains(n), "{ns}");
    }
    assert!(
        tb.ok(&["get", "priorityclasses"])
            .contains("system-node-critical")
    );
    let described = tb.ok(&["describe", "namespace", "default"]);
    assert!(
        described.contains("Status:") && described.contains("Active"),
        "{described}"
    );
    assert!(
        tb.ok(&["describe", "service", "kubernetes"])
            .contains("10.96.0.1")
    );
}

#[test]
fn apply_edit_and_delete_like_an_operator() {
    require_kubectl!();
    let tb = up();
    let out = tb.ok(&["apply", "-f", &fixture("stack.yaml")]);
    for created in [
        "namespace/shop created",
        "priorityclass.scheduling.k8s.io/high created",
        "deployment.apps/web created",
        "service/web created",
        "configmap/settings created",
        "poddisruptionbudget.policy/web created",
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created",
    ] {
        assert!(out.contains(created), "{out}");
    }
    assert!(
        tb.ok(&["apply", "-f", &fixture("widget.yaml")])
            .contains("widget.example.com/gizmo created")
    );
    let again = tb.ok(&["apply", "-f", &fixture("stack.yaml")]);
    assert!(again.contains("deployment.apps/web unchanged"), "{again}");
    assert!(tb.ok(&["get", "wd", "-n", "shop"]).contains("gizmo"));
    assert_eq!(
        tb.jsonpath(&["get", "widget", "gizmo", "-n", "shop"], "{.spec.color}"),
        "blue"
    );
    assert!(
        tb.ok(&["describe", "deployment", "web", "-n", "shop"])
            .contains("nginx:1.27")
    );

    // A fake node (kwok runs its pods) to label, annotate, taint and cordon.
    tb.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-1\n  annotations: {kwok.x-k8s.io/node: fake}\nstatus:\n  capacity: {cpu: \"4\", memory: 16Gi, pods: \"110\"}\n",
    );
    tb.ok(&["label", "node", "node-1", "pool=a"]);
    tb.ok(&["annotate", "node", "node-1", "note=hello"]);
    tb.ok(&["taint", "node", "node-1", "dedicated=gpu:NoSchedule"]);
    tb.ok(&["cordon", "node-1"]);
    assert_eq!(
        tb.jsonpath(&["get", "node", "node-1"], "{.metadata.labels.pool} {.metadata.annotations.note} {.spec.taints[0].key}={.spec.taints[0].value}:{.spec.taints[0].effect} {.spec.unschedulable}"),
        "a hello dedicated=gpu:NoSchedule true"
    );
    tb.ok(&["uncordon", "node-1"]);
    tb.ok(&["taint", "node", "node-1", "dedicated-"]);
    tb.ok(&["label", "node", "node-1", "pool-"]);
    assert_eq!(
        tb.jsonpath(
            &["get", "node", "node-1"],
            "{.spec.taints}{.spec.unschedulable}{.metadata.labels.pool}"
        ),
        ""
    );
    assert!(
        tb.ok(&["describe", "node", "node-1"])
            .contains("Unschedulable:      false")
    );

    // Scale and the three patch types.
    tb.ok(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    assert_eq!(
        tb.jsonpath(
            &["get", "deployment", "web", "-n", "shop"],
            "{.spec.replicas}"
        ),
        "5"
    );
    tb.ok(&[
        "patch",
        "configmap",
        "settings",
        "-n",
        "shop",
        "--type=merge",
        "-p",
        r#"{"data":{"a":"1"}}"#,
    ]);
    tb.ok(&[
        "patch",
        "configmap",
        "settings",
        "-n",
        "shop",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/data/b","value":"2"}]"#,
    ]);
    tb.ok(&[
        "patch",
        "deployment",
        "web",
        "-n",
        "shop",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.28"}]}}}}"#,
    ]);
    assert_eq!(
        tb.jsonpath(
            &["get", "configmap", "settings", "-n", "shop"],
            "{.data.a}{.data.b}{.data.mode}"
        ),
        "12fast"
    );
    assert_eq!(
        tb.jsonpath(&["get", "deployment", "web", "-n", "shop"], "{.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].ports[0].containerPort}"),
        "nginx:1.28 80"
    );

    // Foreground cascading delete of an object with dependents.
    tb.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: owner, namespace: shop}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: owned}}\n  template:\n    metadata: {labels: {app: owned}}\n    spec: {containers: [{name: c, image: pause}]}\n",
    );
    let uid = tb.jsonpath(&["get", "rs", "owner", "-n", "shop"], "{.metadata.uid}");
    for i in 0..2 {
        tb.ok_stdin(
            &["apply", "-f", "-"],
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dep-{i}\n  namespace: shop\n  ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: owner, uid: {uid}, blockOwnerDeletion: true}}]\n"),
        );
    }
    tb.ok(&[
        "delete",
        "rs",
        "owner",
        "-n",
        "shop",
        "--cascade=foreground",
        "--timeout=20s",
    ]);
    let left = tb.ok(&["get", "configmaps", "-n", "shop", "-o", "name"]);
    assert!(!left.contains("dep-"), "dependents are gone: {left}");
    assert!(
        tb.run(&["get", "rs", "owner", "-n", "shop"], None)
            .status
            .code()
            != Some(0)
    );

    // Deleting the namespace removes its content.
    tb.ok(&["delete", "namespace", "shop", "--timeout=20s"]);
    assert!(tb.run(&["get", "namespace", "shop"], None).status.code() != Some(0));
}

#[test]
fn get_watch_streams_changes() {
    require_kubectl!();
    let tb = up();
    let mut watch = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&tb.kubeconfig)
        .args(["get", "configmaps", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl get -w");
    let stdout = watch.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    tb.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: live}\ndata: {a: b}\n",
    );
    tb.ok(&["label", "configmap", "live", "x=y"]);
    tb.ok(&["delete", "configmap", "live"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut lines = Vec::new();
    while Instant::now() < deadline && !lines.iter().any(|l: &String| l.starts_with("DELETED")) {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(200)) {
            lines.push(l);
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    let events: Vec<&str> = lines
        .iter()
        .filter(|l| l.contains("live"))
        .map(|l| l.split_whitespace().next().unwrap_or(""))
        .collect();
    assert_eq!(events, vec!["ADDED", "MODIFIED", "DELETED"], "{lines:?}");
}

#[test]
fn requests_without_the_token_are_rejected() {
    require_kubectl!();
    let tb = up();
    let server = tb.jsonpath(
        &["config", "view", "--raw"],
        "{.clusters[0].cluster.server}",
    );
    let out = tb.run(
        &[
            "get",
            "pods",
            "--server",
            &server,
            "--token",
            "wrong",
            "--insecure-skip-tls-verify",
        ],
        None,
    );
    assert!(!out.status.success());
    // kubectl words a 401 either way, depending on which request saw it.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("You must be logged in to the server")
            && (stderr.contains("provide credentials") || stderr.contains("Unauthorized")),
        "{stderr}"
    );
}

/// kubectl's typed `create <kind>` subcommands and `drain` send protobuf.
#[test]
fn create_subcommands_and_drain_send_protobuf() {
    require_kubectl!();
    let tb = up();
    tb.ok(&[
        "create",
        "poddisruptionbudget",
        "web",
        "--selector=app=web",
        "--min-available=1",
    ]);
    tb.ok(&[
        "create",
        "pdb",
        "half",
        "--selector=app=web",
        "--max-unavailable=50%",
    ]);
    tb.ok(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=mode=fast",
    ]);
    tb.ok(&[
        "create",
        "secret",
        "generic",
        "token",
        "--from-literal=key=abc",
    ]);
    tb.ok(&[
        "create",
        "deployment",
        "idle",
        "--image=nginx",
        "--replicas=0",
    ]);
    tb.ok(&["create", "priorityclass", "high", "--value=1000"]);
    assert_eq!(
        tb.jsonpath(
            &["get", "pdb", "web"],
            "{.spec.minAvailable} {.spec.selector.matchLabels.app}"
        ),
        "1 web"
    );
    assert_eq!(
        tb.jsonpath(&["get", "pdb", "half"], "{.spec.maxUnavailable}"),
        "50%"
    );
    assert_eq!(
        tb.jsonpath(&["get", "configmap", "settings"], "{.data.mode}"),
        "fast"
    );
    assert_eq!(
        tb.jsonpath(&["get", "secret", "token"], "{.data.key}"),
        "YWJj"
    );
    // An explicit zero survives the decoding (a dropped replicas would default to 1).
    assert_eq!(
        tb.jsonpath(&["get", "deployment", "idle"], "{.spec.replicas}"),
        "0"
    );
    assert_eq!(
        tb.jsonpath(&["get", "priorityclass", "high"], "{.value}"),
        "1000"
    );

    // drain: cordon (a patch), then evictions (protobuf) honouring the PDB.
    tb.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: free}\n\
         spec: {nodeName: n1, containers: [{name: c, image: nginx}]}\n",
    );
    // A running, ready pod that the `web` budget (minAvailable 1) protects.
    tb.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: guarded, labels: {app: web}}\n\
         spec: {nodeName: n1, containers: [{name: c, image: nginx}]}\n",
    );
    tb.ok(&[
        "patch",
        "pod",
        "guarded",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}"#,
    ]);
    // Kubernetes refuses evicting a pod under two budgets; keep one.
    tb.ok(&["delete", "pdb", "half"]);
    let blocked = tb.run(
        &["drain", "n1", "--force", "--grace-period=0", "--timeout=3s"],
        None,
    );
    assert!(!blocked.status.success());
    let stderr = String::from_utf8_lossy(&blocked.stderr);
    assert!(stderr.contains("disruption budget"), "{stderr}");
    assert_eq!(tb.ok(&["get", "pods", "-o", "name"]), "pod/guarded\n");

    tb.ok(&["delete", "pdb", "web"]);
    let out = tb.ok(&[
        "drain",
        "n1",
        "--force",
        "--grace-period=0",
        "--timeout=30s",
    ]);
    assert!(out.contains("node/n1 drained"), "{out}");
    assert_eq!(
        tb.jsonpath(&["get", "node", "n1"], "{.spec.unschedulable}"),
        "true"
    );
    assert_eq!(tb.ok(&["get", "pods", "-o", "name"]), "");
}

/// The full cluster behind `testbed up --nodes 3`: kubectl drain evicts
/// through the PDB, and the evicted pods come back Running elsewhere.
#[test]
fn drain_respects_a_budget_and_pods_come_back_elsewhere() {
    require_kubectl!();
    let tb = up_with(&["--nodes", "3", "--node-cpu", "2"]);
    tb.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 4\n  \
         selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    \
         spec: {containers: [{name: c, image: nginx, resources: {requests: {cpu: 100m}}}]}\n---\n\
         apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\n\
         spec: {maxUnavailable: 0, selector: {matchLabels: {app: web}}}\n",
    );
    tb.ok(&[
        "wait",
        "--for=condition=Ready",
        "nodes",
        "--all",
        "--timeout=30s",
    ]);
    tb.ok(&["rollout", "status", "deployment/web", "--timeout=30s"]);
    let on_node = |node: &str| {
        tb.ok(&[
            "get",
            "pods",
            "-l",
            "app=web",
            "--field-selector",
            &format!("spec.nodeName={node}"),
            "-o",
            "name",
        ])
        .lines()
        .count()
    };
    assert!(on_node("kwok-node-0") >= 1, "pods spread over the nodes");

    let blocked = tb.run(&["drain", "kwok-node-0", "--timeout=3s"], None);
    assert!(!blocked.status.success());
    let stderr = String::from_utf8_lossy(&blocked.stderr);
    assert!(stderr.contains("disruption budget"), "{stderr}");
    assert!(on_node("kwok-node-0") >= 1, "nothing was evicted");

    tb.ok(&[
        "patch",
        "pdb",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec": {"maxUnavailable": 1}}"#,
    ]);
    let out = tb.ok(&["drain", "kwok-node-0", "--timeout=90s"]);
    assert!(out.contains("node/kwok-node-0 drained"), "{out}");
    assert_eq!(on_node("kwok-node-0"), 0);
    tb.ok(&["rollout", "status", "deployment/web", "--timeout=30s"]);
    let running = tb.jsonpath(
        &["get", "pods", "-l", "app=web"],
        "{range .items[*]}{.status.phase}@{.spec.nodeName} {end}",
    );
    let running: Vec<&str> = running.split_whitespace().collect();
    assert_eq!(running.len(), 4, "{running:?}");
    assert!(
        running
            .iter()
            .all(|p| p.starts_with("Running@") && !p.ends_with("kwok-node-0")),
        "{running:?}"
    );
}
