//! Unit tests of scale-up planning.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use predicates::{NodeInfo, PodInfo};

use crate::resourcequotas::Quota;
use crate::simulator::Snapshot;
use limits::QuotaLeft;
use serde_json::json;

fn raw_pod(name: &str, owner: Option<&str>, cpu: &str) -> Pod {
    let owners = owner.map(|o| json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": o, "uid": format!("uid-{o}"), "controller": true}]));
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": "x"}, "ownerReferences": owners,
        "creationTimestamp": "2027-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "c", "image": "i", "env": [{"name": "POD", "value": name}], "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
        "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}))
    .unwrap()
}

/// A pod as the cache keeps it (compact, its facts computed).
fn info(pod: Pod) -> PodInfo {
    PodInfo::new(Arc::new(pod)).compact()
}

fn pod(name: &str, owner: Option<&str>, cpu: &str) -> PodInfo {
    info(raw_pod(name, owner, cpu))
}

fn template(cpu: &str) -> NodeInfo {
    NodeInfo::new(Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "t", "labels": {"pool": "a"}},
            "status": {"capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"}, "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}))
        .unwrap(),
    ))
}

#[test]
fn equivalent_pods_share_a_group_despite_env() {
    let pods = vec![
        pod("a", Some("rs"), "1"),
        pod("b", Some("rs"), "1"),
        pod("c", Some("rs"), "2"),
        pod("d", None, "1"),
        pod("e", None, "1"),
    ];
    let groups = equivalence_groups(&pods);
    let sizes: Vec<usize> = groups.iter().map(|g| g.pods.len()).collect();
    assert_eq!(sizes, [2, 1, 1, 1]);
}

#[test]
fn fast_path_binpacking_moves_the_group_it_saves_most_on_last() {
    // Upstream's example: 4 pods of 3 CPU and 4 of 1 CPU on 4-CPU nodes.
    // In order (largest first) the small pods fill the big ones' gaps: 4
    // nodes. Fast path moves the big pods last (4 - 4/3 = 3 simulations
    // saved, 0 for the small ones): the small ones take a node of their
    // own, then one big pod per node: 5.
    let pods: Vec<PodInfo> = (0..4)
        .map(|i| pod(&format!("big{i}"), Some("big"), "3"))
        .chain((0..4).map(|i| pod(&format!("small{i}"), Some("small"), "1")))
        .collect();
    let groups = equivalence_groups(&pods);
    let refs: Vec<&PodGroup> = groups.iter().collect();
    let mut snap = Snapshot::new(Vec::new());
    let count = |snap: &mut Snapshot, fastpath: bool, limit: usize| {
        let est = estimate(
            snap,
            &template("4"),
            &refs,
            limit,
            "t",
            Duration::from_secs(10),
            fastpath,
        );
        (est.node_count, est.pods.len())
    };
    assert_eq!(count(&mut snap, false, 100), (4, 8));
    assert_eq!(count(&mut snap, true, 100), (5, 8));
    // The nodes only counted stop at the limit too.
    assert_eq!(count(&mut snap, true, 3), (3, 6));
    assert!(snap.nodes().is_empty(), "the snapshot is restored");
    // One group alike: the same count either way (4 per node, 10 pods).
    let same: Vec<PodInfo> = (0..10)
        .map(|i| pod(&format!("p{i}"), Some("rs"), "1"))
        .collect();
    let groups = equivalence_groups(&same);
    let refs: Vec<&PodGroup> = groups.iter().collect();
    for fastpath in [false, true] {
        let est = estimate(
            &mut snap,
            &template("4"),
            &refs,
            100,
            "t",
            Duration::from_secs(10),
            fastpath,
        );
        assert_eq!((est.node_count, est.pods.len()), (3, 10));
    }
}

#[test]
fn binpacking_counts_nodes() {
    let pods: Vec<PodInfo> = (0..10)
        .map(|i| pod(&format!("p{i}"), Some("rs"), "1"))
        .collect();
    let groups = equivalence_groups(&pods);
    let refs: Vec<&PodGroup> = groups.iter().collect();
    let mut snap = Snapshot::new(Vec::new());
    // 4-CPU nodes take 4 pods each: 3 nodes for 10 pods.
    let est = estimate(
        &mut snap,
        &template("4"),
        &refs,
        100,
        "t",
        Duration::from_secs(10),
        false,
    );
    assert_eq!((est.node_count, est.pods.len()), (3, 10));
    assert_eq!(est.requests.0, 10_000);
    assert!(snap.nodes().is_empty(), "the snapshot is restored");
    // A limit of 2 nodes places 8 pods.
    let est = estimate(
        &mut snap,
        &template("4"),
        &refs,
        2,
        "t",
        Duration::from_secs(10),
        false,
    );
    assert_eq!((est.node_count, est.pods.len()), (2, 8));
    // Too big for the template: no node.
    let big = equivalence_groups(&[pod("huge", Some("rs2"), "8")]);
    let est = estimate(
        &mut snap,
        &template("4"),
        &[&big[0]],
        100,
        "t",
        Duration::from_secs(10),
        false,
    );
    assert_eq!(est.node_count, 0);
}

#[test]
fn pods_fitting_existing_nodes_are_dropped() {
    let mut node = template("2");
    let n = Arc::make_mut(&mut node.node);
    n.metadata.name = Some("n1".into());
    let mut snap = Snapshot::new(vec![node]);
    let pods: Vec<PodInfo> = (0..5)
        .map(|i| pod(&format!("p{i}"), Some("rs"), "1"))
        .collect();
    let left = crate::processors::pods::filter_out_schedulable(&mut snap, pods, None).left;
    assert_eq!(left.len(), 3);
    assert_eq!(snap.node(0).pods.len(), 2);
}

#[test]
fn balancing_splits_evenly() {
    let groups = vec![
        ("a".to_string(), 3, 10),
        ("b".to_string(), 1, 10),
        ("c".to_string(), 5, 5),
    ];
    let infos = balance(&groups, 4);
    assert_eq!(
        infos,
        [
            ScaleUpInfo {
                group: "b".into(),
                current: 1,
                new: 4,
                max: 10
            },
            ScaleUpInfo {
                group: "a".into(),
                current: 3,
                new: 4,
                max: 10
            },
        ]
    );
}

#[test]
fn similarity_ignores_zone_labels_and_small_memory_differences() {
    let cfg = Balancing {
        enabled: true,
        memory_ratio: 0.015,
        allocatable_ratio: 0.05,
        free_ratio: 0.05,
        ..Default::default()
    };
    let mk = |zone: &str, mem: &str, pool: &str| {
        NodeInfo::new(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": zone, "labels": {"topology.kubernetes.io/zone": zone, "pool": pool}},
                "status": {"capacity": {"cpu": "4", "memory": mem}, "allocatable": {"cpu": "4", "memory": mem}}}))
            .unwrap(),
        ))
    };
    assert!(similar(
        &mk("a", "16000Mi", "x"),
        &mk("b", "16100Mi", "x"),
        &cfg
    ));
    assert!(!similar(&mk("a", "16Gi", "x"), &mk("b", "20Gi", "x"), &cfg));
    assert!(!similar(&mk("a", "16Gi", "x"), &mk("b", "16Gi", "y"), &cfg));
    let by_label = Balancing {
        labels: vec!["pool".into()],
        ..cfg
    };
    assert!(similar(
        &mk("a", "16Gi", "x"),
        &mk("b", "20Gi", "x"),
        &by_label
    ));
}

#[test]
fn young_pods_wait() {
    let now = SystemTime::from(jiff::Timestamp::from_second(1_798_761_620).unwrap()); // 20 s after creation
    let p = raw_pod("p", None, "1");
    assert!(old_enough(&p, Duration::ZERO, now));
    assert!(!old_enough(&p, Duration::from_secs(30), now));
    let mut annotated = p.clone();
    annotated.metadata.annotations =
        Some([(POD_SCALE_UP_DELAY.to_string(), "1m".to_string())].into());
    assert!(!old_enough(&annotated, Duration::from_secs(10), now));
    annotated.metadata.annotations =
        Some([(POD_SCALE_UP_DELAY.to_string(), "5s".to_string())].into());
    assert!(
        !old_enough(&annotated, Duration::from_secs(30), now),
        "a smaller annotation is ignored"
    );
}

/// The listing, then the expendable filter of the pod-list processors.
fn listed_and_not_expendable(pods: &[PodInfo], bypassed: &[String]) -> Vec<PodInfo> {
    use crate::processors::pods::{FilterOutExpendable, PodListContext, PodListProcessor};
    let metrics = crate::metrics::Metrics::new(false);
    let mut snap = Snapshot::new(Vec::new());
    let mut ctx = PodListContext::for_test(&mut snap, &metrics);
    FilterOutExpendable.process(&mut ctx, pending_pods(pods.iter(), bypassed))
}

#[test]
fn pending_pods_skip_nominated_and_expendable() {
    let normal = pod("a", Some("rs"), "1");
    let mut nominated = raw_pod("b", Some("rs"), "1");
    nominated.status.as_mut().unwrap().nominated_node_name = Some("n".into());
    let mut expendable = raw_pod("c", Some("rs"), "1");
    expendable.spec.as_mut().unwrap().priority = Some(-100);
    let mut fresh = raw_pod("d", Some("rs"), "1");
    fresh.status = None;
    let all = [
        normal,
        info(nominated),
        info(expendable),
        info(fresh.clone()),
    ];
    let left = listed_and_not_expendable(&all, &[]);
    assert_eq!(left.len(), 1);
    assert_eq!(
        pending_pods(all.iter(), &[]).len(),
        3,
        "the listing keeps nominated and expendable pods for the processors"
    );
    let mut bypassed = fresh;
    bypassed.spec.as_mut().unwrap().scheduler_name = Some("custom".into());
    let with = [info(bypassed)];
    assert_eq!(
        listed_and_not_expendable(&with, &["custom".to_string()]).len(),
        1
    );
}

fn inputs<'a>(
    pods: &'a [PodInfo],
    candidates: &'a [Candidate],
    limits: &'a Limits,
    skipped: &'a BTreeMap<String, String>,
    balancing: &'a Balancing,
) -> PlanInputs<'a> {
    PlanInputs {
        pods,
        candidates,
        skipped,
        skipped_templates: None,
        limits,
        expanders: &[crate::config::ExpanderName::LeastWaste],
        priorities: None,
        balancing,
        max_binpacking_time: Duration::from_secs(300),
        max_group_binpacking_time: Duration::from_secs(10),
        fastpath_binpacking: false,
        all_or_nothing: false,
    }
}

/// Limits that hold nothing back.
fn roomy_limits() -> Limits {
    Limits {
        max_nodes_total: 0,
        nodes_now: 0,
        cores: (320_000, 0),
        memory: (i64::MAX, 0),
        max_nodes_per_scaleup: 1000,
        quotas: Vec::new(),
    }
}

#[test]
fn limits_cap_and_skip_groups() {
    let pods: Vec<PodInfo> = (0..10)
        .map(|i| pod(&format!("p{i}"), Some("rs"), "1"))
        .collect();
    let candidates = vec![Candidate {
        id: "a".into(),
        template: template("4"),
        target: 0,
        max: 10,
    }];
    let skipped = BTreeMap::new();
    let balancing = Balancing::default();
    let roomy = roomy_limits();
    let mut snap = Snapshot::new(Vec::new());
    let Plan::ScaleUp { infos, .. } = plan(
        &mut snap,
        &inputs(&pods, &candidates, &roomy, &skipped, &balancing),
    )
    .decision
    else {
        panic!("no scale-up")
    };
    assert_eq!(
        infos,
        [ScaleUpInfo {
            group: "a".into(),
            current: 0,
            new: 3,
            max: 10
        }]
    );
    // --cores-total max of 8 with 2 cores in use: one more 4-core node.
    let tight = Limits {
        cores: (8, 2),
        ..roomy.clone()
    };
    let Plan::ScaleUp { infos, .. } = plan(
        &mut snap,
        &inputs(&pods, &candidates, &tight, &skipped, &balancing),
    )
    .decision
    else {
        panic!("no scale-up")
    };
    assert_eq!(infos[0].new, 1);
    // No room at all: the group is skipped with upstream's reason.
    let full = Limits {
        cores: (8, 8),
        ..roomy.clone()
    };
    let planned = plan(
        &mut snap,
        &inputs(&pods, &candidates, &full, &skipped, &balancing),
    );
    let (Plan::NoOptions, reasons, groups, hits) = (
        planned.decision,
        planned.reasons,
        planned.verdicts,
        planned.limit_hits,
    ) else {
        panic!("scaled up past the limit")
    };
    assert_eq!(
        reasons["default/p0"],
        BTreeMap::from([(
            "exceeded quota: \"cluster-wide\", resources: cpu".to_string(),
            1
        )])
    );
    let texts: Vec<String> = hits.iter().map(ToString::to_string).collect();
    assert_eq!(texts, ["exceeded quota: \"cluster-wide\", resources: cpu"]);
    assert_eq!(
        groups["default/p0"]["a"],
        "exceeded quota: \"cluster-wide\", resources: cpu"
    );
    // --max-nodes-total caps the count.
    let capped = Limits {
        max_nodes_total: 5,
        nodes_now: 4,
        ..roomy
    };
    let Plan::ScaleUp { infos, .. } = plan(
        &mut snap,
        &inputs(&pods, &candidates, &capped, &skipped, &balancing),
    )
    .decision
    else {
        panic!("no scale-up")
    };
    assert_eq!(infos[0].new, 1);
}

#[test]
fn balancing_estimates_up_to_the_similar_groups_joint_room() {
    // 20 one-CPU pods need five 4-CPU nodes; each group takes 2 at most.
    let pods: Vec<PodInfo> = (0..20)
        .map(|i| pod(&format!("p{i}"), Some("rs"), "1"))
        .collect();
    let candidates: Vec<Candidate> = ["a", "b", "c"]
        .into_iter()
        .map(|id| Candidate {
            id: id.into(),
            template: template("4"),
            target: 0,
            max: 2,
        })
        .collect();
    let skipped = BTreeMap::new();
    let limits = roomy_limits();
    let total = |balancing: &Balancing| {
        let mut snap = Snapshot::new(Vec::new());
        let Plan::ScaleUp { infos, .. } = plan(
            &mut snap,
            &inputs(&pods, &candidates, &limits, &skipped, balancing),
        )
        .decision
        else {
            panic!("no scale-up")
        };
        infos.iter().map(|i| i.new - i.current).sum::<usize>()
    };
    // Alone, a group's estimate stops at its own max.
    assert_eq!(total(&Balancing::default()), 2);
    // With balancing, the three groups' joint room of 6 bounds it: 5 nodes.
    let balancing = Balancing {
        enabled: true,
        ..Balancing::default()
    };
    assert_eq!(total(&balancing), 5);
}

/// A CapacityQuota of `limits` on the nodes labeled `pool=<pool>`, with
/// nothing used yet.
fn capacity_quota(name: &str, pool: &str, limits: &[(&str, i64)]) -> QuotaLeft {
    let quota = Quota {
        id: format!("CapacityQuota/{name}"),
        selector: apimachinery::labels::LabelSelector::parse(&format!("pool={pool}")).unwrap(),
        limits: limits.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    };
    QuotaLeft::new(quota, &BTreeMap::new())
}

#[test]
fn capacity_quotas_cut_and_skip_the_groups_they_cover() {
    // Ten 1-CPU pods want three 4-CPU nodes.
    let pods: Vec<PodInfo> = (0..10)
        .map(|i| pod(&format!("p{i}"), Some("rs"), "1"))
        .collect();
    let candidates = vec![Candidate {
        id: "a".into(),
        template: template("4"),
        target: 0,
        max: 10,
    }];
    let skipped = BTreeMap::new();
    let balancing = Balancing::default();
    let run = |quotas: Vec<QuotaLeft>| {
        let limits = Limits {
            quotas,
            ..roomy_limits()
        };
        plan(
            &mut Snapshot::new(Vec::new()),
            &inputs(&pods, &candidates, &limits, &skipped, &balancing),
        )
    };
    // 8 cores hold two nodes: the increase is cut to 2.
    let Plan::ScaleUp { infos, .. } = run(vec![capacity_quota("cpu", "a", &[("cpu", 8)])]).decision
    else {
        panic!("no scale-up")
    };
    assert_eq!(infos[0].new, 2);
    // A quota on other nodes holds nothing back.
    let Plan::ScaleUp { infos, .. } = run(vec![capacity_quota("b", "b", &[("nodes", 0)])]).decision
    else {
        panic!("no scale-up")
    };
    assert_eq!(infos[0].new, 3);
    // Balanced groups take from what a shared quota leaves, in turn.
    let mut shared = Limits {
        quotas: vec![capacity_quota("cpu", "a", &[("cpu", 8)])],
        ..roomy_limits()
    };
    assert_eq!(shared.consume(&template("4"), 3), 2);
    assert_eq!(shared.consume(&template("4"), 1), 0);
    // Two full quotas: one reason each, cpu before nodes.
    let planned = run(vec![
        capacity_quota("small", "a", &[("nodes", 0), ("cpu", 2)]),
        capacity_quota("gpu", "a", &[("nvidia.com/gpu", 0), ("memory", 1)]),
    ]);
    assert!(matches!(planned.decision, Plan::NoOptions));
    assert_eq!(
        planned.reasons["default/p0"],
        BTreeMap::from([
            (
                "exceeded quota: \"CapacityQuota/gpu\", resources: memory".to_string(),
                1
            ),
            (
                "exceeded quota: \"CapacityQuota/small\", resources: cpu, nodes".to_string(),
                1
            ),
        ])
    );
}
