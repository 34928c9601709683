//! The what-if predicts what the autoscaler then does. Each case is a
//! small scenario of the suite's kinds (scale-up, its bounds and the
//! priority expander, taints, scale-down, PDBs, blocking pods, expendable
//! pods): its cluster is set up, dumped as `kubectl get -A -o json` would
//! dump it (`whatif::live::read`, list calls only), then the autoscaler
//! runs on it for the case's time. The what-if of the dump must name the
//! same nodes removed and end with the same group sizes; and the run must
//! end as the case expects, so that a broken rule fails here too.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use conformance::world::{
    GroupSpec, priority_expander_config_map, provider_config_map, templates_config_map,
};
use harness::cluster::Cluster;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use serde_json::{Value, json};
use whatif::flags::Flags;

/// A case: node groups, objects, flags, how long, and the outcome.
struct Case {
    name: &'static str,
    groups: Vec<GroupSpec>,
    objects: Vec<Value>,
    flags: &'static str,
    minutes: u64,
    /// Group sizes at the end.
    sizes: &'static [(&'static str, usize)],
    /// How many of the starting nodes are removed.
    removed: usize,
}

/// What became of the cluster: starting nodes removed, group sizes.
#[derive(Debug, PartialEq)]
struct Outcome {
    removed: BTreeSet<String>,
    sizes: BTreeMap<String, usize>,
}

fn group(name: &str, min: usize, max: usize, initial: usize) -> GroupSpec {
    GroupSpec {
        initial,
        ..GroupSpec::new(name, "4", "16Gi", min, max)
    }
}

fn pod_spec(cpu: &str) -> Value {
    json!({"containers": [{"name": "app", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]})
}

fn deployment(name: &str, replicas: usize, cpu: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec(cpu)}}})
}

/// `d` with `value` at `path` (`/`-separated keys), made as needed.
fn with(mut d: Value, path: &str, value: Value) -> Value {
    let mut slot = &mut d;
    for key in path.trim_start_matches('/').split('/') {
        slot = &mut slot[key];
    }
    *slot = value;
    d
}

fn bare_pod(name: &str, node: &str, cpu: &str) -> Value {
    let mut spec = pod_spec(cpu);
    spec["nodeName"] = json!(node);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

fn cases() -> Vec<Case> {
    let tainted = GroupSpec {
        taints: vec![json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"})],
        ..group("tainted", 0, 3, 0)
    };
    let no_scale_down = {
        let mut g = group("pinned", 0, 3, 2);
        g.annotations.insert(
            "cluster-autoscaler.kubernetes.io/scale-down-disabled".into(),
            json!("true"),
        );
        g
    };
    let mut priorities = BTreeMap::new();
    priorities.insert(10, vec!["pricey".to_string()]);
    priorities.insert(1, vec!["cheap".to_string()]);
    vec![
        Case {
            name: "pending pods scale a group up",
            groups: vec![group("a", 0, 5, 1)],
            objects: vec![deployment("web", 4, "1500m")],
            flags: "",
            minutes: 5,
            sizes: &[("a", 2)],
            removed: 0,
        },
        Case {
            name: "a scale-up stops at the group's max",
            groups: vec![group("a", 0, 2, 1)],
            objects: vec![deployment("web", 8, "1500m")],
            flags: "",
            minutes: 5,
            sizes: &[("a", 2)],
            removed: 0,
        },
        Case {
            name: "the priority expander picks the higher priority",
            groups: vec![group("cheap", 0, 3, 0), group("pricey", 0, 3, 0)],
            objects: vec![
                priority_expander_config_map(&priorities),
                deployment("web", 1, "1"),
            ],
            flags: "--expander=priority",
            minutes: 5,
            sizes: &[("pricey", 1)],
            removed: 0,
        },
        Case {
            name: "a pod that tolerates no taint scales the untainted group",
            groups: vec![tainted, group("plain", 0, 3, 0)],
            objects: vec![deployment("web", 1, "1")],
            flags: "",
            minutes: 5,
            sizes: &[("plain", 1)],
            removed: 0,
        },
        Case {
            name: "an expendable pod scales nothing up",
            groups: vec![group("a", 0, 3, 0)],
            objects: vec![
                json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": "expendable"}, "value": -20}),
                with(
                    deployment("batch", 1, "1"),
                    "/spec/template/spec/priorityClassName",
                    json!("expendable"),
                ),
            ],
            flags: "",
            minutes: 5,
            sizes: &[],
            removed: 0,
        },
        Case {
            name: "an empty node is removed",
            groups: vec![group("a", 0, 3, 2)],
            objects: vec![deployment("web", 1, "200m")],
            flags: "",
            minutes: 20,
            sizes: &[("a", 1)],
            removed: 1,
        },
        Case {
            name: "pods without an owner block their nodes",
            groups: vec![group("a", 0, 3, 2)],
            objects: vec![
                bare_pod("lone-0", "a-start0", "100m"),
                bare_pod("lone-1", "a-start1", "100m"),
            ],
            flags: "",
            minutes: 20,
            sizes: &[("a", 2)],
            removed: 0,
        },
        Case {
            name: "a PDB that allows no disruption blocks its pods' nodes",
            groups: vec![group("a", 0, 3, 2)],
            objects: vec![
                deployment("web", 2, "200m"),
                json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": "web", "namespace": "default"},
                    "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}}}),
            ],
            flags: "",
            minutes: 20,
            sizes: &[("a", 2)],
            removed: 0,
        },
        Case {
            name: "the same pods without the PDB go to one node",
            groups: vec![group("a", 0, 3, 2)],
            objects: vec![deployment("web", 2, "200m")],
            flags: "",
            minutes: 20,
            sizes: &[("a", 1)],
            removed: 1,
        },
        Case {
            name: "safe-to-evict false blocks its pod's node",
            groups: vec![group("a", 0, 3, 2)],
            objects: vec![with(
                deployment("web", 2, "200m"),
                "/spec/template/metadata/annotations",
                json!({"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
            )],
            flags: "",
            minutes: 20,
            sizes: &[("a", 2)],
            removed: 0,
        },
        Case {
            name: "scale-down-disabled nodes stay",
            groups: vec![no_scale_down],
            objects: Vec::new(),
            flags: "",
            minutes: 20,
            sizes: &[("pinned", 2)],
            removed: 0,
        },
        Case {
            name: "a kube-system pod blocks its node",
            groups: vec![group("a", 0, 3, 2)],
            objects: vec![with(
                deployment("dns", 2, "200m"),
                "/metadata/namespace",
                json!("kube-system"),
            )],
            flags: "",
            minutes: 20,
            sizes: &[("a", 2)],
            removed: 0,
        },
        Case {
            name: "a group at its min keeps its nodes",
            groups: vec![group("a", 2, 3, 2)],
            objects: Vec::new(),
            flags: "",
            minutes: 20,
            sizes: &[("a", 2)],
            removed: 0,
        },
        Case {
            name: "local storage blocks its pod's node when asked",
            groups: vec![group("a", 0, 3, 2)],
            objects: vec![with(
                deployment("cache", 2, "200m"),
                "/spec/template/spec/volumes",
                json!([{"name": "scratch", "emptyDir": {}}]),
            )],
            flags: "--skip-nodes-with-local-storage=true",
            minutes: 20,
            sizes: &[("a", 2)],
            removed: 0,
        },
    ]
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

/// Where the what-if's input comes from.
#[derive(Clone, Copy, PartialEq)]
enum Source {
    /// `kubectl get -A -o json`, before the autoscaler starts.
    Dump,
    /// The autoscaler's `/snapshotz` of its first loop.
    Snapshotz,
}

/// Sets the case up, takes its state from `source`, runs the autoscaler
/// on it: the state and what became of the cluster.
async fn live(case: &Case, source: Source) -> (Value, Outcome) {
    let cluster = Cluster::builder()
        .object(provider_config_map())
        .object(templates_config_map(&case.groups))
        .start()
        .await
        .expect("the cluster starts");
    let mut nodes = 0;
    for g in &case.groups {
        for i in 0..g.initial.max(g.min) {
            cluster.create(g.starting_node(i)).await.expect("node");
            nodes += 1;
        }
    }
    if nodes > 0 {
        cluster
            .wait_nodes_ready(nodes, Duration::from_secs(60))
            .await
            .expect("nodes Ready");
    }
    for o in &case.objects {
        cluster.create(o.clone()).await.expect("object");
    }
    tokio::time::sleep(Duration::from_secs(30)).await;
    let (dump, _) = whatif::live::read(&cluster.client()).await.expect("dump");
    let start: BTreeSet<String> = names(&dump);
    let mut flags = words(case.flags);
    flags.push("--debugging-snapshot-enabled".into());
    let built =
        autoscaler::inprocess::kwok(cluster.client_under_test(), cluster.clock().clone(), &flags)
            .await
            .expect("the autoscaler starts");
    let endpoints = built.endpoints;
    let task = tokio::spawn(built.autoscaler.run());
    let state = match source {
        Source::Dump => dump,
        Source::Snapshotz => {
            let (code, body) = endpoints.snapshot().await.expect("a snapshot");
            assert_eq!(code, 200, "{body}");
            serde_json::from_str(&body).expect("the snapshot is JSON")
        }
    };
    tokio::time::sleep(Duration::from_secs(case.minutes * 60)).await;
    task.abort();
    let nodes: Vec<Node> = Api::<Node>::all(cluster.client())
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items;
    let now: BTreeSet<String> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let mut sizes = BTreeMap::new();
    for n in &nodes {
        if let Some(g) = conformance::world::node_group_of(n) {
            *sizes.entry(g.to_string()).or_insert(0) += 1;
        }
    }
    let removed = start.difference(&now).cloned().collect();
    (state, Outcome { removed, sizes })
}

fn names(dump: &Value) -> BTreeSet<String> {
    dump["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["kind"] == "Node")
        .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

/// The what-if's outcome of the state (with the groups' bounds given as
/// `--nodes`, as an operator gives them for a `/snapshotz`, which has
/// none).
fn predicted(case: &Case, dump: &Value) -> Outcome {
    let mut flags = words(case.flags);
    flags.extend(
        case.groups
            .iter()
            .map(|g| format!("--nodes={}:{}:{}", g.min, g.max, g.name)),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("dump.json");
    std::fs::write(&file, dump.to_string()).expect("writes");
    let report = whatif::run(&whatif::WhatIf {
        inputs: vec![file],
        kubeconfig: None,
        recording: None,
        flags: Flags::parse("case", &flags).expect("flags"),
        sides: Vec::new(),
        group_label: None,
        duration: Duration::from_secs(case.minutes * 60),
        seed: 0,
        timeline: Default::default(),
        prices: Default::default(),
        parallel: 1,
        sweep: Vec::new(),
        case: None,
    })
    .unwrap_or_else(|e| panic!("{}: the what-if fails: {e}", case.name));
    let side = &report.sides[0];
    let mut sizes = BTreeMap::new();
    for n in side.nodes.iter().filter(|n| n.removed_at.is_none()) {
        if let Some(g) = &n.group {
            *sizes.entry(g.clone()).or_insert(0) += 1;
        }
    }
    let removed = side
        .nodes
        .iter()
        .filter(|n| n.added_at.is_none() && n.removed_at.is_some())
        .map(|n| n.name.clone())
        .collect();
    Outcome { removed, sizes }
}

#[test]
fn the_what_if_of_a_dump_predicts_what_the_autoscaler_does() {
    check(cases(), Source::Dump);
}

/// A `/snapshotz` holds no PDB and no pending pod that fits no node
/// (the what-if's coverage says so): the scale-down cases without a PDB.
#[test]
fn the_what_if_of_a_snapshotz_predicts_scale_down() {
    let cases = cases()
        .into_iter()
        .filter(|c| c.minutes == 20 && !c.name.contains("PDB"))
        .collect::<Vec<_>>();
    assert!(cases.len() >= 6, "{} cases", cases.len());
    check(cases, Source::Snapshotz);
}

fn check(cases: Vec<Case>, source: Source) {
    let mut failures = Vec::new();
    for case in cases {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime");
        let (dump, seen) = runtime.block_on(live(&case, source));
        drop(runtime);
        let expected: BTreeMap<String, usize> = case
            .sizes
            .iter()
            .map(|(g, n)| ((*g).to_string(), *n))
            .collect();
        if seen.sizes != expected || seen.removed.len() != case.removed {
            failures.push(format!(
                "{}: the autoscaler ended with {:?} and removed {:?}; the case expects {expected:?} and {} removed",
                case.name, seen.sizes, seen.removed, case.removed
            ));
            continue;
        }
        let prediction = predicted(&case, &dump);
        if prediction != seen {
            failures.push(format!(
                "{}: the what-if predicted {prediction:?}; the autoscaler did {seen:?}",
                case.name
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A binary side (our `cluster-autoscaler` binary, started as binary mode
/// starts one, in real time at 60x) does to the shop what the in-process
/// side does: the same nodes removed, the same node added.
#[test]
fn a_binary_side_does_what_the_in_process_side_does() {
    let binary = conformance::binary::sibling_binary("autoscaler", "cluster-autoscaler")
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().expect("tempdir");
    let shop =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../whatif/tests/data/shop.json");
    let side = |name: &str, binary: Option<whatif::binary::BinarySide>| whatif::SideSpec {
        name: name.into(),
        flags: Flags::default(),
        binary,
    };
    let report = whatif::run(&whatif::WhatIf {
        inputs: vec![shop],
        kubeconfig: None,
        recording: None,
        flags: Flags::default(),
        sides: vec![
            side("in-process", None),
            side(
                "binary",
                Some(whatif::binary::BinarySide {
                    path: binary.clone(),
                    time_scale: 60.0,
                    dir: dir.path().to_path_buf(),
                    launcher: std::sync::Arc::new(conformance::binary_side::BinaryLauncher),
                }),
            ),
        ],
        group_label: None,
        duration: Duration::from_secs(30 * 60),
        seed: 0,
        timeline: Default::default(),
        prices: Default::default(),
        parallel: 2,
        sweep: Vec::new(),
        case: None,
    })
    .unwrap_or_else(|e| panic!("the what-if fails: {e}"));
    let removed = |i: usize| -> BTreeSet<String> {
        report.sides[i]
            .nodes
            .iter()
            .filter(|n| n.added_at.is_none() && n.removed_at.is_some())
            .map(|n| n.name.clone())
            .collect()
    };
    let expected: BTreeSet<String> = ["ip-10-0-1-11", "ip-10-0-1-13"].map(String::from).into();
    assert_eq!(removed(0), expected);
    assert_eq!(removed(1), expected, "see {}", dir.path().display());
    assert_eq!(report.sides[1].summary.nodes_added, 1);
    let b = report.sides[1]
        .binary
        .as_ref()
        .expect("the binary is reported");
    assert_eq!(b.path, binary.display().to_string());
    let log = std::fs::read_to_string(&b.log).expect("its log is kept");
    assert!(log.contains("Cluster Autoscaler"), "{log}");
}
