//! Unit tests of the scale-down planner and selection.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use predicates::DraObjects;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use predicates::{NodeInfo, PodInfo};

use crate::simulator::Snapshot;
use crate::simulator::drainability::{BlockingReason, Context};
use crate::simulator::drainability::{Budgets, ControllerState, Controllers, DrainRules};
use serde_json::json;

struct All;

/// No budget in the cluster.
static NO_BUDGETS: std::sync::LazyLock<Budgets> = std::sync::LazyLock::new(Budgets::default);
impl Controllers for All {
    fn lookup(&self, _: &str, _: &str, _: &str) -> ControllerState {
        ControllerState::Found { replicas: Some(3) }
    }
}

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn node(name: &str, cpu: &str, mem: &str) -> NodeInfo {
    NodeInfo::new(Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": mem, "pods": "110"}}}))
        .unwrap(),
    ))
}

fn pod(name: &str, node: &str, cpu: &str, mem: &str, extra: serde_json::Value) -> PodInfo {
    let mut v = json!({"metadata": {"name": name, "namespace": "default",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}});
    if let (Some(a), Some(b)) = (v.as_object_mut(), extra.as_object()) {
        for (k, val) in b {
            if k == "metadata" {
                for (mk, mv) in val.as_object().unwrap() {
                    a["metadata"][mk] = mv.clone();
                }
            } else {
                a.insert(k.clone(), val.clone());
            }
        }
    }
    PodInfo::new(Arc::new(serde_json::from_value(v).unwrap()))
}

#[test]
fn utilization_is_the_larger_of_cpu_and_memory() {
    let mut n = node("n", "4", "8Gi");
    n.add_pod(pod("a", "n", "1", "4Gi", json!({})));
    let u = utilization(&n, false, false, None, &DraObjects::default(), now()).unwrap();
    assert_eq!(
        (u.cpu, u.memory, u.resource.clone(), u.utilization),
        (0.25, 0.5, "memory".to_string(), 0.5)
    );
    assert_eq!(u.to_string(), "{0.25 0.5 0 0 memory 0.5}");
    // DaemonSet pods, when ignored, leave the numerator and allocatable.
    n.add_pod(pod("ds", "n", "2", "0", json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "d", "controller": true}]}})));
    assert_eq!(
        utilization(&n, false, false, None, &DraObjects::default(), now())
            .unwrap()
            .cpu,
        0.75
    );
    assert_eq!(
        utilization(&n, true, false, None, &DraObjects::default(), now())
            .unwrap()
            .cpu,
        0.5
    );
    assert!(
        utilization(
            &node("zero", "0", "0"),
            false,
            false,
            None,
            &DraObjects::default(),
            now()
        )
        .is_err()
    );
}

fn candidate(name: &str) -> CandidateNode {
    CandidateNode {
        name: name.into(),
        group: Some("g".into()),
        ready: true,
        being_deleted: false,
        disabled: false,
        threshold: 0.5,
        gpu_resource: None,
        ignore_daemonsets: false,
        soft_tainted_at: None,
        atomic: false,
    }
}

fn settings() -> PlannerSettings {
    PlannerSettings {
        ignore_mirror_pods: false,
        unready_enabled: true,
        recheck_timeout: Duration::from_secs(300),
        simulation_timeout: Duration::from_secs(30),
        candidate_ttl: Duration::ZERO,
        max_parallelism: 10,
        unneeded_time: Duration::from_secs(600),
    }
}

fn ctx(c: &All) -> Context<'_> {
    Context {
        now: now(),
        rules: DrainRules::default(),
        budgets: &NO_BUDGETS,
        controllers: c,
    }
}

#[test]
fn an_underused_node_whose_pods_fit_elsewhere_is_unneeded_and_keeps_its_time() {
    let mut busy = node("busy", "4", "8Gi");
    busy.add_pod(pod("b", "busy", "3", "1Gi", json!({})));
    let mut light = node("light", "4", "8Gi");
    light.add_pod(pod("l", "light", "500m", "1Gi", json!({})));
    let mut snap = Snapshot::new(vec![busy, light]);
    let mut planner = Planner::default();
    let c = All;
    planner.update(
        &mut snap,
        &[candidate("busy"), candidate("light")],
        &mut Budgets::default(),
        &ctx(&c),
        &settings(),
        now(),
    );
    assert_eq!(
        planner.reasons["busy"],
        Unremovable::Because(UnremovableReason::NotUnderutilized)
    );
    let u = &planner.unneeded["light"];
    assert_eq!(u.pods_to_move.len(), 1);
    assert_eq!(snap.node(0).pods.len(), 2, "the pod is placed on busy");
    // Next loop: the same node keeps its original time.
    let later = now() + Duration::from_secs(60);
    let mut snap2 = Snapshot::new(vec![node("busy", "4", "8Gi"), node("light", "4", "8Gi")]);
    planner.update(
        &mut snap2,
        &[candidate("light")],
        &mut Budgets::default(),
        &ctx(&c),
        &settings(),
        later,
    );
    assert_eq!(planner.unneeded["light"].since, now());
}

/// The pod placed elsewhere is unbound, and the same copy is placed at
/// each update while the pod object is the same.
#[test]
fn a_moved_pod_is_placed_unbound_and_its_copy_is_kept_while_it_moves() {
    let snapshot = |moved: &PodInfo| {
        let mut busy = node("busy", "4", "8Gi");
        busy.add_pod(pod("b", "busy", "3", "1Gi", json!({})));
        let mut light = node("light", "4", "8Gi");
        light.add_pod(moved.clone());
        Snapshot::new(vec![busy, light])
    };
    let placed = |snap: &Snapshot| {
        let on_busy = &snap.node(0).pods;
        let p = on_busy.iter().find(|p| p.key == "default/l").unwrap();
        p.pod.clone()
    };
    let c = All;
    let mut planner = Planner::default();
    let mut update = |snap: &mut Snapshot, minute: u64| {
        planner.update(
            snap,
            &[candidate("light")],
            &mut Budgets::default(),
            &ctx(&c),
            &settings(),
            now() + Duration::from_secs(60 * minute),
        )
    };
    let l = pod("l", "light", "500m", "1Gi", json!({}));
    let mut first = snapshot(&l);
    update(&mut first, 0);
    let copy = placed(&first);
    assert_eq!(copy.spec.as_ref().unwrap().node_name, None, "unbound");
    assert_eq!(
        l.pod.spec.as_ref().unwrap().node_name.as_deref(),
        Some("light")
    );
    let mut second = snapshot(&l);
    update(&mut second, 1);
    assert!(Arc::ptr_eq(&copy, &placed(&second)), "the same copy");
    let changed = pod("l", "light", "500m", "1Gi", json!({}));
    let mut third = snapshot(&changed);
    update(&mut third, 2);
    assert!(
        !Arc::ptr_eq(&copy, &placed(&third)),
        "a new pod object, a new copy"
    );
}

#[test]
fn nodes_whose_pods_fit_nowhere_or_are_blocked_stay() {
    let mut a = node("a", "1", "8Gi");
    a.add_pod(pod("pa", "a", "400m", "1Gi", json!({})));
    let mut b = node("b", "1", "8Gi");
    b.add_pod(pod("pb", "b", "400m", "1Gi", json!({"metadata": {"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}}})));
    let mut snap = Snapshot::new(vec![a, b]);
    let mut planner = Planner::default();
    let c = All;
    planner.update(
        &mut snap,
        &[candidate("b"), candidate("a")],
        &mut Budgets::default(),
        &ctx(&c),
        &settings(),
        now(),
    );
    assert_eq!(
        planner.reasons["b"],
        Unremovable::BlockedByPod {
            pod: "default/pb".into(),
            reason: BlockingReason::NotSafeToEvictAnnotation
        }
    );
    assert!(planner.unneeded.contains_key("a"), "a's pod fits on b");
    // With b gone as a destination... a third node that cannot fit anywhere:
    let mut c1 = node("c1", "1", "8Gi");
    c1.add_pod(pod("big", "c1", "900m", "1Gi", json!({})));
    let mut snap = Snapshot::new(vec![c1, node("tiny", "500m", "8Gi")]);
    let full = CandidateNode {
        threshold: 1.0,
        ..candidate("c1")
    };
    planner.update(
        &mut snap,
        std::slice::from_ref(&full),
        &mut Budgets::default(),
        &ctx(&c),
        &settings(),
        now(),
    );
    assert_eq!(
        planner.reasons["c1"],
        Unremovable::Because(UnremovableReason::NoPlaceToMovePods)
    );
    assert_eq!(
        snap.node(0).pods.len(),
        1,
        "the failed simulation is reverted"
    );
    // ...and is not simulated again for 5 minutes.
    planner.update(
        &mut snap,
        &[full],
        &mut Budgets::default(),
        &ctx(&c),
        &settings(),
        now() + Duration::from_secs(60),
    );
    assert_eq!(
        planner.reasons["c1"],
        Unremovable::Because(UnremovableReason::RecentlyUnremovable)
    );
}

#[test]
fn a_young_soft_taint_restores_the_unneeded_time_with_a_ttl() {
    let c = All;
    let tainted = CandidateNode {
        soft_tainted_at: Some(now() - Duration::from_secs(300)),
        ..candidate("n")
    };
    let run = |ttl: u64| {
        let mut planner = Planner::default();
        let mut snap = Snapshot::new(vec![node("n", "4", "8Gi"), node("m", "4", "8Gi")]);
        let s = PlannerSettings {
            candidate_ttl: Duration::from_secs(ttl),
            ..settings()
        };
        planner.update(
            &mut snap,
            std::slice::from_ref(&tainted),
            &mut Budgets::default(),
            &ctx(&c),
            &s,
            now(),
        );
        planner.unneeded["n"].since
    };
    assert_eq!(run(0), now(), "off by default");
    assert_eq!(
        run(600),
        now() - Duration::from_secs(300),
        "restored from the taint"
    );
    assert_eq!(run(120), now(), "older than the TTL");
}

#[test]
fn deletion_waits_ten_minutes_respects_min_size_and_budgets() {
    let mut planner = Planner::default();
    let u = |pods: usize| UnneededNode {
        since: now(),
        group: "g".into(),
        pods_to_move: (0..pods)
            .map(|i| pod(&format!("p{i}"), "x", "1", "1", json!({})).pod.clone())
            .collect(),
        daemonset_pods: Vec::new(),
        utilization: Utilization {
            cpu: 0.0,
            memory: 0.0,
            gpu: 0.0,
            resource: "cpu".into(),
            dra: 0.0,
            utilization: 0.0,
        },
        ready: true,
        risky: false,
        on_completion: 0,
    };
    for (name, pods) in [("e1", 0), ("e2", 0), ("d1", 1), ("d2", 1)] {
        planner.unneeded.insert(name.into(), u(pods));
    }
    let groups: BTreeMap<String, GroupSize> = [(
        "g".to_string(),
        GroupSize {
            target: 10,
            min: 1,
            deleting: 0,
            unneeded_time: Duration::from_secs(600),
            unready_time: Duration::from_secs(1200),
        },
    )]
    .into();
    let budget = DeletionBudget {
        total: 10,
        drain: 1,
    };
    let early = select(
        &planner,
        &groups,
        budget,
        now() + Duration::from_secs(599),
        |_| true,
    );
    assert!(early.empty.is_empty() && early.drain.is_empty());
    assert_eq!(
        early.kept["e1"],
        Unremovable::Because(UnremovableReason::NotUnneededLongEnough)
    );
    let exactly = select(
        &planner,
        &groups,
        budget,
        now() + Duration::from_secs(600),
        |_| true,
    );
    assert!(exactly.empty.is_empty(), "strictly after the unneeded time");
    let later = select(
        &planner,
        &groups,
        budget,
        now() + Duration::from_secs(601),
        |_| true,
    );
    assert_eq!(later.empty, ["e1", "e2"]);
    assert_eq!(later.drain.len(), 1, "one drain at a time");
    // A node with an on-completion pod waits, and is not tainted.
    let mut waiting = Planner::default();
    waiting.unneeded.insert(
        "oc".into(),
        UnneededNode {
            on_completion: 1,
            ..u(0)
        },
    );
    let waits = select(
        &waiting,
        &groups,
        budget,
        now() + Duration::from_secs(601),
        |_| true,
    );
    assert!(waits.empty.is_empty() && waits.drain.is_empty());
    assert_eq!(
        waits.kept["oc"],
        Unremovable::Because(UnremovableReason::BlockedByOnCompletionPod)
    );
    let small: BTreeMap<String, GroupSize> = [(
        "g".to_string(),
        GroupSize {
            target: 3,
            min: 1,
            deleting: 0,
            unneeded_time: Duration::from_secs(600),
            unready_time: Duration::from_secs(1200),
        },
    )]
    .into();
    let capped = select(
        &planner,
        &small,
        budget,
        now() + Duration::from_secs(601),
        |_| true,
    );
    assert_eq!(
        capped.empty.len() + capped.drain.len(),
        2,
        "never below min"
    );
    assert!(
        capped
            .kept
            .values()
            .any(|r| *r == Unremovable::Because(UnremovableReason::NodeGroupMinSizeReached))
    );
    let limited = select(
        &planner,
        &groups,
        budget,
        now() + Duration::from_secs(601),
        |n| n != "e1",
    );
    assert_eq!(
        limited.kept["e1"],
        Unremovable::Because(UnremovableReason::MinimalResourceLimitExceeded)
    );
}

#[test]
fn the_planner_stops_looking_once_enough_nodes_are_unneeded_and_tracks_the_skipped() {
    // 30 empty nodes, --max-scale-down-parallelism 10: the first update
    // finds 20 (0 known + 2 × 10), the next one 40 at most, so all 30.
    let names: Vec<String> = (0..30).map(|i| format!("n{i:02}")).collect();
    let snap = || Snapshot::new(names.iter().map(|n| node(n, "4", "8Gi")).collect());
    let candidates: Vec<CandidateNode> = names.iter().map(|n| candidate(n)).collect();
    let mut planner = Planner::with_skip_eval_tracker(Some(
        super::nodeevaltracker::MaxNodeSkipEvalTime::new(now()),
    ));
    let c = All;
    let mut at = now();
    for (want_unneeded, want_skipped, longest) in [(20, 10, 0), (30, 0, 0)] {
        at += Duration::from_secs(10);
        planner.update(
            &mut snap(),
            &candidates,
            &mut Budgets::default(),
            &ctx(&c),
            &settings(),
            at,
        );
        assert_eq!(
            (planner.unneeded.len(), planner.skipped.len()),
            (want_unneeded, want_skipped)
        );
        // The skipped nodes were last evaluated at the tracker's start, 10 s before.
        let want = if want_skipped > 0 { 10 } else { longest };
        assert_eq!(planner.max_skip_eval, Some(Duration::from_secs(want)));
    }
    // A spent simulation timeout skips every node left, loop after loop.
    let spent = PlannerSettings {
        simulation_timeout: Duration::ZERO,
        ..settings()
    };
    for waited in [10, 20] {
        at += Duration::from_secs(10);
        planner.update(
            &mut snap(),
            &candidates,
            &mut Budgets::default(),
            &ctx(&c),
            &spent,
            at,
        );
        assert_eq!(planner.skipped.len(), 30);
        assert_eq!(planner.max_skip_eval, Some(Duration::from_secs(waited)));
    }
}

#[test]
fn a_device_nodes_utilization_is_its_busiest_pools() {
    use predicates::dynamicresources::api::ResourceClaim;
    let mut n = node("gpu", "8", "16Gi");
    n.slices.push(Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "gpu-slice"},
            "spec": {"driver": "gpu.example.com", "nodeName": "gpu",
                "pool": {"name": "gpu", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}, {"name": "gpu-2"}, {"name": "gpu-3"}]}}))
        .unwrap(),
    ));
    let p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"nodeName": "gpu", "containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "7"}}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]}}))
    .unwrap();
    n.add_pod(PodInfo::new(Arc::new(p)));
    let claim: ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": "c", "namespace": "default"},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "gpu", "device": "gpu-1"}]}}}}))
    .unwrap();
    let mut dra = DraObjects::default();
    dra.insert_claim(Arc::new(claim));
    let u = utilization(&n, false, false, None, &dra, now()).unwrap();
    assert_eq!(
        (u.utilization, u.resource.as_str()),
        (0.25, "gpu.example.com/gpu"),
        "devices decide, not the 7 CPUs"
    );
    assert_eq!(u.to_string(), "{0 0 0 0.25 gpu.example.com/gpu 0.25}");
    let unallocated: ResourceClaim = serde_json::from_value(json!({
        "metadata": {"name": "c", "namespace": "default"}}))
    .unwrap();
    dra.insert_claim(Arc::new(unallocated));
    assert_eq!(
        utilization(&n, false, false, None, &dra, now())
            .unwrap_err()
            .to_string(),
        "claim default/c not allocated"
    );
}
