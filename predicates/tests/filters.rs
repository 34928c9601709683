//! The filters, scores and preemption with the inputs kube-scheduler
//! accepts or rejects.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use predicates::preemption::{Budget, preempt};
use predicates::{
    NodeInfo, Objects, PodInfo, PreFilter, Reason, Sample, find_node, find_node_from,
};
use serde_json::{Value, json};

fn node(name: &str, cpu: &str, extra: Value) -> NodeInfo {
    let mut v = json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}
    });
    merge(&mut v, extra);
    NodeInfo::new(Arc::new(serde_json::from_value::<Node>(v).unwrap()))
}

fn pod(name: &str, cpu: &str, extra: Value) -> PodInfo {
    let mut v = json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    });
    merge(&mut v, extra);
    PodInfo::new(Arc::new(serde_json::from_value::<Pod>(v).unwrap()))
}

fn merge(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

fn check(p: &PodInfo, n: &NodeInfo) -> Result<(), Vec<Reason>> {
    PreFilter::new(p, std::slice::from_ref(n)).filter(n)
}

#[test]
fn resources_and_pod_count() {
    let mut n = node(
        "n",
        "1",
        json!({"status": {"allocatable": {"pods": "2", "nvidia.com/gpu": "1"}}}),
    );
    assert!(check(&pod("a", "600m", json!({})), &n).is_ok());
    n.add_pod(pod("a", "600m", json!({})));
    assert_eq!(
        check(&pod("b", "600m", json!({})), &n),
        Err(vec![Reason::Insufficient("cpu".into())])
    );
    n.add_pod(pod("b", "100m", json!({})));
    let gpu = pod(
        "g",
        "100m",
        json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}),
    );
    assert_eq!(
        check(&gpu, &n),
        Err(vec![
            Reason::TooManyPods,
            Reason::Insufficient("nvidia.com/gpu".into())
        ])
    );
}

#[test]
fn taints_with_every_effect_and_operator() {
    let tainted = |effect: &str| {
        node(
            "n",
            "4",
            json!({"spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": effect}]}}),
        )
    };
    let untolerated = Err(vec![Reason::UntoleratedTaint {
        key: "dedicated".into(),
        value: "gpu".into(),
    }]);
    let plain = pod("p", "1", json!({}));
    assert_eq!(check(&plain, &tainted("NoSchedule")), untolerated);
    assert_eq!(check(&plain, &tainted("NoExecute")), untolerated);
    assert!(
        check(&plain, &tainted("PreferNoSchedule")).is_ok(),
        "PreferNoSchedule only scores"
    );
    for tol in [
        json!({"key": "dedicated", "operator": "Equal", "value": "gpu"}),
        json!({"key": "dedicated", "operator": "Exists"}),
        json!({"operator": "Exists"}),
        json!({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}),
    ] {
        let p = pod("p", "1", json!({"spec": {"tolerations": [tol.clone()]}}));
        assert!(check(&p, &tainted("NoSchedule")).is_ok(), "{tol}");
    }
    let wrong_effect = pod(
        "p",
        "1",
        json!({"spec": {"tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]}}),
    );
    assert_eq!(check(&wrong_effect, &tainted("NoSchedule")), untolerated);
    let wrong_value = pod(
        "p",
        "1",
        json!({"spec": {"tolerations": [{"key": "dedicated", "value": "cpu"}]}}),
    );
    assert_eq!(check(&wrong_value, &tainted("NoExecute")), untolerated);
    assert_eq!(
        Reason::UntoleratedTaint {
            key: "dedicated".into(),
            value: "gpu".into()
        }
        .to_string(),
        "node(s) had untolerated taint {dedicated: gpu}"
    );
}

#[test]
fn cordon_node_name_selector_and_affinity() {
    let cordoned = node("n", "4", json!({"spec": {"unschedulable": true}}));
    assert_eq!(
        check(&pod("p", "1", json!({})), &cordoned),
        Err(vec![Reason::Unschedulable])
    );
    let tolerant = pod(
        "p",
        "1",
        json!({"spec": {"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]}}),
    );
    assert!(check(&tolerant, &cordoned).is_ok());

    let n = node(
        "n",
        "4",
        json!({"metadata": {"labels": {"zone": "a", "cores": "8"}}}),
    );
    assert_eq!(
        check(&pod("p", "1", json!({"spec": {"nodeName": "m"}})), &n),
        Err(vec![Reason::NodeName])
    );
    assert_eq!(
        check(
            &pod("p", "1", json!({"spec": {"nodeSelector": {"zone": "b"}}})),
            &n
        ),
        Err(vec![Reason::NodeAffinity])
    );
    assert!(
        check(
            &pod("p", "1", json!({"spec": {"nodeSelector": {"zone": "a"}}})),
            &n
        )
        .is_ok()
    );
    for (op, values, ok) in [
        ("In", json!(["a"]), true),
        ("NotIn", json!(["a"]), false),
        ("Exists", json!(null), true),
        ("DoesNotExist", json!(null), false),
    ] {
        let p = pod(
            "p",
            "1",
            json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": op, "values": values}]}]}}}}}),
        );
        assert_eq!(check(&p, &n).is_ok(), ok, "{op}");
    }
    let gt = pod(
        "p",
        "1",
        json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["16"]}]},
                              {"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["16"]}]}]}}}}}),
    );
    assert!(check(&gt, &n).is_ok(), "terms are ORed");
}

#[test]
fn host_port_conflicts() {
    let mut n = node("n", "4", json!({}));
    let web = |name: &str, port: i64, ip: Option<&str>| {
        pod(
            name,
            "100m",
            json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": port, "hostIP": ip}]}]}}),
        )
    };
    n.add_pod(web("a", 8080, None));
    assert_eq!(
        check(&web("b", 8080, None), &n),
        Err(vec![Reason::HostPorts])
    );
    assert_eq!(
        check(&web("b", 8080, Some("10.0.0.1")), &n),
        Err(vec![Reason::HostPorts]),
        "0.0.0.0 covers every IP"
    );
    assert!(check(&web("b", 8081, None), &n).is_ok());
    let udp = pod(
        "u",
        "100m",
        json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}]}]}}),
    );
    assert!(check(&udp, &n).is_ok(), "other protocol");
}

#[test]
fn inter_pod_affinity_and_anti_affinity_with_topology_keys() {
    let zone = |name: &str, z: &str| node(name, "4", json!({"metadata": {"labels": {"zone": z}}}));
    let mut nodes = vec![zone("a1", "a"), zone("a2", "a"), zone("b1", "b")];
    nodes[0].add_pod(pod("db", "100m", json!({})));

    let term =
        |key: &str| json!([{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": key}]);
    let near = pod(
        "web",
        "100m",
        json!({"spec": {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term("zone")}}}}),
    );
    let pre = PreFilter::new(&near, &nodes);
    assert!(pre.filter(&nodes[1]).is_ok(), "same zone as db");
    assert_eq!(pre.filter(&nodes[2]), Err(vec![Reason::PodAffinity]));

    let far = pod(
        "web",
        "100m",
        json!({"spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term("zone")}}}}),
    );
    let pre = PreFilter::new(&far, &nodes);
    assert_eq!(pre.filter(&nodes[1]), Err(vec![Reason::PodAntiAffinity]));
    assert!(pre.filter(&nodes[2]).is_ok());

    // An existing pod's anti-affinity rejects incoming pods it selects.
    let mut nodes = vec![zone("a1", "a"), zone("b1", "b")];
    nodes[0].add_pod(pod("loner", "100m", json!({"spec": {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}}})));
    let web = pod("web", "100m", json!({}));
    let pre = PreFilter::new(&web, &nodes);
    assert_eq!(
        pre.filter(&nodes[0]),
        Err(vec![Reason::ExistingAntiAffinity])
    );
    assert!(pre.filter(&nodes[1]).is_ok());

    // The first pod of a self-affine group may go anywhere.
    let first = pod(
        "db",
        "100m",
        json!({"spec": {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term("zone")}}}}),
    );
    let empty = vec![zone("a1", "a")];
    assert!(PreFilter::new(&first, &empty).filter(&empty[0]).is_ok());
}

#[test]
fn topology_spread_skew() {
    let zone = |name: &str, z: &str| node(name, "8", json!({"metadata": {"labels": {"zone": z}}}));
    let mut nodes = vec![
        zone("a1", "a"),
        zone("b1", "b"),
        node("nolabel", "8", json!({})),
    ];
    let spread = |name: &str| {
        pod(
            name,
            "100m",
            json!({"metadata": {"labels": {"app": "web"}}, "spec": {"topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}}]}}),
        )
    };
    nodes[0].add_pod(spread("w1"));
    let p = spread("w2");
    let pre = PreFilter::new(&p, &nodes);
    assert_eq!(
        pre.filter(&nodes[0]),
        Err(vec![Reason::Spread]),
        "a would have skew 2"
    );
    assert!(pre.filter(&nodes[1]).is_ok());
    assert_eq!(pre.filter(&nodes[2]), Err(vec![Reason::SpreadMissingLabel]));
    assert_eq!(find_node(&p, &nodes).unwrap(), 1);
}

#[test]
fn fit_error_message_in_scheduler_style() {
    let nodes = vec![
        node("small", "1", json!({})),
        node(
            "tainted",
            "8",
            json!({"spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}}),
        ),
        node(
            "tainted2",
            "8",
            json!({"spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}}),
        ),
    ];
    let err = find_node(&pod("big", "2", json!({})), &nodes).unwrap_err();
    assert_eq!(
        err.message,
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {k: v}."
    );
}

#[test]
fn the_adaptive_share_of_nodes_a_cycle_filters() {
    // kube-scheduler's numFeasibleNodesToFind with percentageOfNodesToScore
    // unset: every node below 100, 50% less 1% per 125 nodes, at least 5%
    // and at least 100 nodes.
    let to_find = |n| Sample::adaptive(n, 0).to_find;
    assert_eq!(to_find(0), 0);
    assert_eq!(to_find(99), 99);
    assert_eq!(to_find(100), 100);
    assert_eq!(to_find(1000), 420);
    assert_eq!(to_find(5000), 500);
    assert_eq!(to_find(10_000), 500);
    assert_eq!(to_find(30_000), 1500);
}

#[test]
fn a_sampled_cycle_stops_at_enough_feasible_nodes_and_moves_on() {
    // Ten nodes, the first three too small: from node 0, looking for two
    // feasible nodes, it examines five and picks among nodes 3 and 4 (the
    // emptier, 4).
    let mut nodes: Vec<NodeInfo> = (0..10)
        .map(|i| node(&format!("n{i}"), if i < 3 { "1" } else { "4" }, json!({})))
        .collect();
    nodes[3].add_pod(pod("x", "2", json!({})));
    let p = pod("p", "2", json!({}));
    let sample = Sample {
        start: 0,
        to_find: 2,
    };
    let found = find_node_from(&p, &nodes, Objects::default(), sample);
    assert_eq!(found.examined, 5);
    assert_eq!(found.result.unwrap(), 4);
    // From node 8 it wraps: 8 and 9 are enough.
    let found = find_node_from(
        &p,
        &nodes,
        Objects::default(),
        Sample {
            start: 8,
            to_find: 2,
        },
    );
    assert_eq!(found.examined, 2);
    assert!(matches!(found.result, Ok(8 | 9)));
    // A pod that fits nowhere examines every node, failures in node order.
    let big = pod("big", "8", json!({}));
    let found = find_node_from(
        &big,
        &nodes,
        Objects::default(),
        Sample {
            start: 6,
            to_find: 2,
        },
    );
    assert_eq!(found.examined, 10);
    let err = found.result.unwrap_err();
    let order: Vec<usize> = err.failures.iter().map(|(i, _)| *i).collect();
    assert_eq!(order, (0..10).collect::<Vec<_>>());
    assert_eq!(
        err.message,
        "0/10 nodes are available: 10 Insufficient cpu."
    );
}

#[test]
fn a_full_node_is_passed_by_but_keeps_its_first_failing_plugin_as_reason() {
    // Node 0 is full and tainted, node 1 full, node 2 has room: the pod
    // lands on node 2, and examines all three.
    let taint =
        json!({"spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}});
    let mut nodes = vec![
        node("n0", "1", taint),
        node("n1", "1", json!({})),
        node("n2", "4", json!({})),
    ];
    let p = pod("p", "2", json!({}));
    let found = find_node_from(&p, &nodes, Objects::default(), Sample::every_node(3));
    assert_eq!((found.result.unwrap(), found.examined), (2, 3));
    // With node 2 full too, each node's reason is its first failing
    // plugin in kube-scheduler's order: the taint before the room.
    nodes[2].add_pod(pod("x", "3", json!({})));
    let err = find_node_from(&p, &nodes, Objects::default(), Sample::every_node(3))
        .result
        .unwrap_err();
    assert_eq!(
        err.failures,
        vec![
            (
                0,
                vec![Reason::UntoleratedTaint {
                    key: "dedicated".into(),
                    value: "gpu".into()
                }]
            ),
            (1, vec![Reason::Insufficient("cpu".into())]),
            (2, vec![Reason::Insufficient("cpu".into())]),
        ]
    );
}

#[test]
fn scoring_spreads_onto_the_least_allocated_node() {
    let mut nodes = vec![node("a", "4", json!({})), node("b", "4", json!({}))];
    nodes[0].add_pod(pod("x", "2", json!({})));
    assert_eq!(find_node(&pod("p", "1", json!({})), &nodes).unwrap(), 1);
    // PreferNoSchedule taints push pods away.
    let nodes = vec![
        node(
            "a",
            "4",
            json!({"spec": {"taints": [{"key": "k", "effect": "PreferNoSchedule"}]}}),
        ),
        node("b", "4", json!({})),
    ];
    assert_eq!(find_node(&pod("p", "1", json!({})), &nodes).unwrap(), 1);
    // Preferred node affinity pulls them.
    let nodes = vec![
        node("a", "4", json!({})),
        node("b", "4", json!({"metadata": {"labels": {"disk": "ssd"}}})),
    ];
    let p = pod(
        "p",
        "1",
        json!({"spec": {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}}}),
    );
    assert_eq!(find_node(&p, &nodes).unwrap(), 1);
}

#[test]
fn preemption_evicts_only_lower_priority_and_prefers_no_pdb_violation() {
    let prio = |name: &str, cpu: &str, p: i32, app: &str| {
        pod(
            name,
            cpu,
            json!({"metadata": {"labels": {"app": app}}, "spec": {"priority": p}}),
        )
    };
    let mut nodes = vec![node("a", "2", json!({})), node("b", "2", json!({}))];
    nodes[0].add_pod(prio("low-a", "2", 0, "guarded"));
    nodes[1].add_pod(prio("low-b", "2", 0, "free"));
    let high = prio("high", "1", 1000, "high");
    let err = find_node(&high, &nodes).unwrap_err();
    let budgets = vec![Budget {
        namespace: "default".into(),
        selector: serde_json::from_value(json!({"matchLabels": {"app": "guarded"}})).unwrap(),
        disruptions_allowed: 0,
    }];
    let p = preempt(&high, &nodes, &err.failures, &budgets).unwrap();
    assert_eq!(p.node, 1, "the node whose victim has no budget");
    assert_eq!(
        p.victims.iter().map(|v| v.key.as_str()).collect::<Vec<_>>(),
        ["default/low-b"]
    );
    assert_eq!(p.pdb_violations, 0);

    // Equal or higher priority pods are never victims.
    let same = prio("same", "1", 0, "same");
    let err = find_node(&same, &nodes).unwrap_err();
    assert!(preempt(&same, &nodes, &err.failures, &[]).is_none());

    // Only as many victims as needed: the more important one is reprieved.
    let mut nodes = vec![node("a", "2", json!({}))];
    nodes[0].add_pod(prio("v1", "1", 10, "v"));
    nodes[0].add_pod(prio("v2", "1", 5, "v"));
    let err = find_node(&high, &nodes).unwrap_err();
    let p = preempt(&high, &nodes, &err.failures, &[]).unwrap();
    assert_eq!(
        p.victims.iter().map(|v| v.key.as_str()).collect::<Vec<_>>(),
        ["default/v2"]
    );

    // preemptionPolicy: Never.
    let polite = pod(
        "polite",
        "1",
        json!({"spec": {"priority": 1000, "preemptionPolicy": "Never"}}),
    );
    assert!(preempt(&polite, &nodes, &err.failures, &[]).is_none());
    // Taints cannot be resolved by preemption.
    let tainted = vec![node(
        "t",
        "2",
        json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}),
    )];
    let err = find_node(&high, &tainted).unwrap_err();
    assert!(preempt(&high, &tainted, &err.failures, &[]).is_none());
}

/// Objects for the volume-limit tests: class `ebs` provisioned by
/// `ebs.csi`, claims `c1`..`c4` unbound in it, and `shared` bound to a
/// CSI volume.
fn volume_objects() -> predicates::VolumeObjects {
    let mut o = predicates::VolumeObjects::default();
    let class = json!({"metadata": {"name": "ebs"}, "provisioner": "ebs.csi"});
    o.classes.insert(
        "ebs".into(),
        Arc::new(serde_json::from_value(class).unwrap()),
    );
    for c in ["c1", "c2", "c3", "c4"] {
        let claim = json!({"metadata": {"name": c, "namespace": "default"},
            "spec": {"storageClassName": "ebs"}});
        o.claims.insert(
            format!("default/{c}"),
            Arc::new(serde_json::from_value(claim).unwrap()),
        );
    }
    let claim = json!({"metadata": {"name": "shared", "namespace": "default"},
        "spec": {"volumeName": "pv1"}});
    o.claims.insert(
        "default/shared".into(),
        Arc::new(serde_json::from_value(claim).unwrap()),
    );
    let pv = json!({"metadata": {"name": "pv1"},
        "spec": {"csi": {"driver": "ebs.csi", "volumeHandle": "vol-1"}}});
    o.volumes
        .insert("pv1".into(), Arc::new(serde_json::from_value(pv).unwrap()));
    o
}

fn with_claims(name: &str, claims: &[&str]) -> PodInfo {
    let volumes: Vec<Value> = claims
        .iter()
        .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    pod(name, "10m", json!({"spec": {"volumes": volumes}}))
}

fn csi_node(name: &str, limit: Option<i32>) -> NodeInfo {
    let mut n = node(name, "4", json!({}));
    let csi = json!({"metadata": {"name": name}, "spec": {"drivers": [
        {"name": "ebs.csi", "nodeID": name, "allocatable": {"count": limit}}]}});
    let csi: k8s_openapi::api::storage::v1::CSINode = serde_json::from_value(csi).unwrap();
    n.csi = Some(Arc::new(predicates::CsiNode::from_object(&csi)));
    n
}

fn check_volumes(
    p: &PodInfo,
    n: &NodeInfo,
    o: &predicates::VolumeObjects,
) -> Result<(), Vec<Reason>> {
    PreFilter::new(p, std::slice::from_ref(n))
        .with_volumes(o)
        .filter(n)
}

#[test]
fn csi_volume_limits_count_distinct_volumes_per_driver() {
    let o = volume_objects();
    let mut n = csi_node("n", Some(2));
    n.add_pod(with_claims("a", &["c1"]));
    n.add_pod(with_claims("b", &["shared"]));
    // Two volumes of ebs.csi already: a third does not fit.
    assert_eq!(
        check_volumes(&with_claims("p", &["c2"]), &n, &o),
        Err(vec![Reason::MaxVolumeCount])
    );
    assert_eq!(
        Reason::MaxVolumeCount.to_string(),
        "node(s) exceed max volume count"
    );
    // A volume already attached counts once.
    assert!(check_volumes(&with_claims("q", &["shared", "c1"]), &n, &o).is_ok());
    // Without the claims given, the filter does not run.
    assert!(check(&with_claims("p", &["c2"]), &n).is_ok());
    // No count, or no CSINode: no limit.
    let mut unlimited = csi_node("u", None);
    unlimited.add_pod(with_claims("a", &["c1", "c2", "c3"]));
    assert!(check_volumes(&with_claims("p", &["c4"]), &unlimited, &o).is_ok());
    let plain = node("plain", "4", json!({}));
    assert!(check_volumes(&with_claims("p", &["c1", "c2", "c3"]), &plain, &o).is_ok());
    // Two new volumes on an empty node with room for one.
    let one = csi_node("one", Some(1));
    assert_eq!(
        check_volumes(&with_claims("p", &["c1", "c2"]), &one, &o),
        Err(vec![Reason::MaxVolumeCount])
    );
}

#[test]
fn a_missing_claim_fits_nowhere() {
    let o = volume_objects();
    let n = csi_node("n", Some(5));
    let err = check_volumes(&with_claims("p", &["gone"]), &n, &o).unwrap_err();
    assert_eq!(err, vec![Reason::ClaimNotFound("gone".into())]);
    assert!(err[0].unresolvable());
    assert_eq!(
        err[0].to_string(),
        "persistentvolumeclaim \"gone\" not found"
    );
}

/// NodeAffinity's PreFilter result: the nodes named by `matchFields`
/// `metadata.name In`, intersected within a term and united across
/// terms; any node as soon as one term names none; and every node the
/// names leave out fails the filter.
#[test]
fn named_nodes_are_the_only_nodes_that_pass_node_affinity() {
    use predicates::filters::named_nodes;
    let term = |names: &[&str]| json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": names}]});
    let pinned = |terms: Vec<Value>| {
        pod(
            "p",
            "100m",
            json!({"spec": {"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}}),
        )
    };
    let names = |p: &PodInfo| {
        named_nodes(&p.pod).map(|s| s.into_iter().map(str::to_string).collect::<Vec<_>>())
    };

    let one = pinned(vec![term(&["n2"])]);
    assert_eq!(names(&one), Some(vec!["n2".to_string()]));
    let two_terms = pinned(vec![term(&["n1", "n2"]), term(&["n3"])]);
    assert_eq!(
        names(&two_terms),
        Some(vec!["n1".into(), "n2".into(), "n3".into()])
    );
    let anded = pinned(vec![json!({"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]},
        {"key": "metadata.name", "operator": "In", "values": ["n2", "n3"]}]})]);
    assert_eq!(names(&anded), Some(vec!["n2".to_string()]));
    let conflicting = pinned(vec![json!({"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]},
        {"key": "metadata.name", "operator": "In", "values": ["n2"]}]})]);
    assert_eq!(names(&conflicting), Some(vec![]));
    let open = pinned(vec![
        term(&["n1"]),
        json!({"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["a"]}]}),
    ]);
    assert_eq!(
        names(&open),
        None,
        "a term without names lets any node through"
    );
    assert_eq!(names(&pod("free", "100m", json!({}))), None);
    let not_in = pinned(vec![json!({"matchFields": [
        {"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]})]);
    assert_eq!(names(&not_in), None, "only In names nodes");

    let nodes: Vec<NodeInfo> = ["n1", "n2", "n3", "n4"]
        .iter()
        .map(|n| node(n, "4", json!({})))
        .collect();
    for p in [&one, &two_terms, &anded, &conflicting] {
        let named = names(p).unwrap();
        for n in &nodes {
            let passes = PreFilter::new(p, &nodes).passes(n);
            assert_eq!(
                passes,
                named.contains(&n.name().to_string()),
                "{}",
                n.name()
            );
        }
    }
}
