#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::time::{Duration, SystemTime};

use super::rules::Rule;
use super::*;
use serde_json::{Value, json};

/// No budget in the cluster.
static NO_BUDGETS: std::sync::LazyLock<Budgets> = std::sync::LazyLock::new(Budgets::default);

struct Fake(Vec<(&'static str, &'static str, Option<i32>)>);

impl Controllers for Fake {
    fn lookup(&self, kind: &str, _ns: &str, name: &str) -> ControllerState {
        self.0
            .iter()
            .find(|(k, n, _)| *k == kind && *n == name)
            .map_or(ControllerState::NotFound, |(_, _, r)| {
                ControllerState::Found { replicas: *r }
            })
    }
}

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn pod(extra: Value) -> Pod {
    let mut base = json!({
        "metadata": {"name": "p", "namespace": "default", "creationTimestamp": "2027-01-15T08:00:00Z",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running"}
    });
    merge(&mut base, extra);
    serde_json::from_value(base).unwrap()
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

fn check(p: &Pod, budgets: &[Budget], flags: (bool, bool, bool)) -> Outcome {
    let budgets = Budgets::new(budgets.to_vec());
    let controllers = Fake(vec![
        ("ReplicaSet", "rs", Some(3)),
        ("DaemonSet", "ds", None),
    ]);
    let ctx = Context {
        now: now(),
        rules: DrainRules {
            skip_nodes_with_system_pods: flags.0,
            skip_nodes_with_local_storage: flags.1,
            skip_nodes_with_custom_controller_pods: flags.2,
            ..DrainRules::default()
        },
        budgets: &budgets,
        controllers: &controllers,
    };
    evaluate(p, &ctx)
}

const DEFAULTS: (bool, bool, bool) = (true, true, true);

fn reason(o: Outcome) -> Option<BlockingReason> {
    match o {
        Outcome::Block(r, _) => Some(r),
        _ => None,
    }
}

#[test]
fn a_replicated_pod_is_drainable() {
    assert_eq!(check(&pod(json!({})), &[], DEFAULTS), Outcome::Undefined);
}

#[test]
fn mirror_and_long_terminating_pods_are_skipped() {
    let mirror = pod(json!({"metadata": {"annotations": {MIRROR: "x"}, "ownerReferences": null}}));
    assert_eq!(check(&mirror, &[], DEFAULTS), Outcome::Skip);
    let old = pod(
        json!({"metadata": {"deletionTimestamp": "2027-01-15T07:00:00Z", "ownerReferences": null}}),
    );
    assert_eq!(check(&old, &[], DEFAULTS), Outcome::Skip);
    // Deleted 10 s ago with a 30 s grace period: not long terminating.
    let recent = pod(
        json!({"metadata": {"deletionTimestamp": "2027-01-15T07:59:50Z", "ownerReferences": null}}),
    );
    assert_eq!(
        reason(check(&recent, &[], DEFAULTS)),
        Some(BlockingReason::NotReplicated)
    );
}

#[test]
fn a_missing_controller_blocks_unless_custom_controller_checks_are_off() {
    let orphan = pod(
        json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone", "uid": "u", "controller": true}]}}),
    );
    assert_eq!(
        reason(check(&orphan, &[], DEFAULTS)),
        Some(BlockingReason::ControllerNotFound)
    );
    assert_eq!(check(&orphan, &[], (true, true, false)), Outcome::Undefined);
    // ...even with safe-to-evict: the controller rule comes first.
    let safe = pod(
        json!({"metadata": {"annotations": {SAFE_TO_EVICT: "true"}, "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone", "uid": "u", "controller": true}]}}),
    );
    assert_eq!(
        reason(check(&safe, &[], DEFAULTS)),
        Some(BlockingReason::ControllerNotFound)
    );
}

#[test]
fn min_replica_count_blocks_small_replica_sets() {
    let controllers = Fake(vec![("ReplicaSet", "rs", Some(3))]);
    let ctx = |min| Context {
        now: now(),
        rules: DrainRules {
            min_replica_count: min,
            ..DrainRules::default()
        },
        budgets: &NO_BUDGETS,
        controllers: &controllers,
    };
    assert_eq!(
        reason(evaluate(&pod(json!({})), &ctx(5))),
        Some(BlockingReason::MinReplicasReached)
    );
    assert_eq!(evaluate(&pod(json!({})), &ctx(3)), Outcome::Undefined);
}

#[test]
fn daemonset_and_safe_to_evict_pods_drain() {
    let ds = pod(
        json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": true}]}}),
    );
    assert_eq!(check(&ds, &[], DEFAULTS), Outcome::DrainOk);
    let bare_safe = pod(
        json!({"metadata": {"annotations": {SAFE_TO_EVICT: "true"}, "ownerReferences": null}, "spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}),
    );
    assert_eq!(check(&bare_safe, &[], DEFAULTS), Outcome::DrainOk);
}

#[test]
fn unreplicated_pods_block_and_report_not_replicated_first() {
    let bare = pod(
        json!({"metadata": {"ownerReferences": null, "annotations": {SAFE_TO_EVICT: "false"}}}),
    );
    assert_eq!(
        reason(check(&bare, &[], DEFAULTS)),
        Some(BlockingReason::NotReplicated)
    );
    let on_completion = pod(
        json!({"metadata": {"ownerReferences": null, "annotations": {SAFE_TO_EVICT: "on-completion"}}}),
    );
    assert_eq!(
        check(&on_completion, &[], DEFAULTS),
        Outcome::WaitForCompletion
    );
}

#[test]
fn kube_system_pods_block_for_an_hour_without_a_budget() {
    let young = pod(
        json!({"metadata": {"namespace": "kube-system", "creationTimestamp": "2027-01-15T07:30:00Z"}}),
    );
    assert_eq!(
        reason(check(&young, &[], DEFAULTS)),
        Some(BlockingReason::UnmovableKubeSystemPod)
    );
    assert_eq!(check(&young, &[], (false, true, true)), Outcome::Undefined);
    let old = pod(
        json!({"metadata": {"namespace": "kube-system", "creationTimestamp": "2027-01-15T06:00:00Z", "annotations": {SAFE_TO_EVICT: "false"}}}),
    );
    assert_eq!(
        check(&old, &[], DEFAULTS),
        Outcome::DrainOk,
        "past the timeout, later rules are not consulted"
    );
    let budget = Budget {
        namespace: "kube-system".into(),
        name: "b".into(),
        selector: serde_json::from_value(json!({"matchLabels": {"app": "dns"}})).unwrap(),
        disruptions_allowed: 1,
    };
    let covered = pod(
        json!({"metadata": {"namespace": "kube-system", "creationTimestamp": "2027-01-15T07:30:00Z", "labels": {"app": "dns"}}}),
    );
    assert_eq!(check(&covered, &[budget], DEFAULTS), Outcome::Undefined);
}

#[test]
fn not_safe_to_evict_blocks() {
    let p = pod(json!({"metadata": {"annotations": {SAFE_TO_EVICT: "false"}}}));
    let o = check(&p, &[], DEFAULTS);
    assert_eq!(
        o,
        Outcome::Block(
            BlockingReason::NotSafeToEvictAnnotation,
            "pod annotated as not safe to evict present: p".into()
        )
    );
}

#[test]
fn local_storage_blocks_unless_listed_or_in_memory() {
    let disk = pod(
        json!({"spec": {"volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "ram", "emptyDir": {"medium": "Memory"}}]}}),
    );
    assert_eq!(
        reason(check(&disk, &[], DEFAULTS)),
        Some(BlockingReason::LocalStorageRequested)
    );
    assert_eq!(check(&disk, &[], (true, false, true)), Outcome::Undefined);
    let listed = pod(
        json!({"metadata": {"annotations": {SAFE_TO_EVICT_LOCAL_VOLUMES: "scratch"}}, "spec": {"volumes": [{"name": "scratch", "emptyDir": {}}]}}),
    );
    assert_eq!(check(&listed, &[], DEFAULTS), Outcome::Undefined);
    let host = pod(
        json!({"metadata": {"annotations": {SAFE_TO_EVICT_LOCAL_VOLUMES: "other"}}, "spec": {"volumes": [{"name": "h", "hostPath": {"path": "/x"}}]}}),
    );
    assert_eq!(
        reason(check(&host, &[], DEFAULTS)),
        Some(BlockingReason::LocalStorageRequested)
    );
}

#[test]
fn exhausted_budgets_block_and_charging_finds_risky_nodes() {
    let mut budgets = Budgets::new(vec![Budget {
        namespace: "default".into(),
        name: "web".into(),
        selector: serde_json::from_value(json!({"matchLabels": {"app": "web"}})).unwrap(),
        disruptions_allowed: 1,
    }]);
    let web = Arc::new(pod(json!({"metadata": {"labels": {"app": "web"}}})));
    let listed = |b: &Budgets| b.iter().cloned().collect::<Vec<_>>();
    assert_eq!(check(&web, &listed(&budgets), DEFAULTS), Outcome::Undefined);
    assert!(!budgets.charge(std::slice::from_ref(&web)));
    assert_eq!(
        reason(check(&web, &listed(&budgets), DEFAULTS)),
        Some(BlockingReason::NotEnoughPdb)
    );
    assert!(
        budgets.charge(&[web.clone(), web]),
        "two pods against a used-up budget"
    );
}

#[test]
fn pods_are_sorted_into_lists() {
    let controllers = Fake(vec![
        ("ReplicaSet", "rs", Some(3)),
        ("DaemonSet", "ds", None),
    ]);
    let ctx = Context {
        now: now(),
        rules: DrainRules::default(),
        budgets: &NO_BUDGETS,
        controllers: &controllers,
    };
    let pods = vec![
        Arc::new(pod(json!({}))),
        Arc::new(pod(
            json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": true}]}}),
        )),
        Arc::new(pod(json!({"metadata": {"annotations": {MIRROR: "x"}}}))),
    ];
    let d = pods_to_move(&pods, &ctx).unwrap();
    assert_eq!(
        (
            d.pods_to_move.len(),
            d.daemonset_pods.len(),
            d.on_completion.len()
        ),
        (1, 1, 0)
    );
    let blocked = vec![
        pods[0].clone(),
        Arc::new(pod(json!({"metadata": {"ownerReferences": null}}))),
    ];
    assert_eq!(
        pods_to_move(&blocked, &ctx).unwrap_err().reason,
        BlockingReason::NotReplicated
    );
}

#[test]
fn the_rules_are_upstreams_in_upstreams_order() {
    let names: Vec<&str> = rules::DEFAULT.iter().map(|r| r.name()).collect();
    assert_eq!(
        names,
        [
            "Mirror",
            "LongTerminating",
            "ReplicaCount",
            "DaemonSet",
            "SafeToEvict",
            "Terminal",
            "OnCompletion",
            "Replicated",
            "System",
            "NotSafeToEvict",
            "LocalStorage",
            "PDB",
        ]
    );
}

#[test]
fn the_list_decides_the_outcome() {
    let controllers = Fake(vec![("ReplicaSet", "rs", Some(3))]);
    let ctx = Context {
        now: now(),
        rules: DrainRules::default(),
        budgets: &NO_BUDGETS,
        controllers: &controllers,
    };
    let not_safe = pod(json!({"metadata": {"annotations": {SAFE_TO_EVICT: "false"}}}));
    assert_eq!(
        reason(evaluate_with(rules::DEFAULT, &not_safe, &ctx)),
        Some(BlockingReason::NotSafeToEvictAnnotation)
    );
    let without: Vec<&dyn rules::Rule> = rules::DEFAULT
        .iter()
        .copied()
        .filter(|r| r.name() != "NotSafeToEvict")
        .collect();
    assert_eq!(evaluate_with(&without, &not_safe, &ctx), Outcome::Undefined);
    // Order matters too: an unreplicated not-safe-to-evict pod reports the
    // first blocking rule in the list.
    let bare = pod(
        json!({"metadata": {"ownerReferences": null, "annotations": {SAFE_TO_EVICT: "false"}}}),
    );
    let swapped: &[&dyn rules::Rule] = &[&rules::NotSafeToEvict, &rules::Replicated];
    assert_eq!(
        reason(evaluate_with(swapped, &bare, &ctx)),
        Some(BlockingReason::NotSafeToEvictAnnotation)
    );
    assert_eq!(
        reason(evaluate_with(
            &[&rules::Replicated, &rules::NotSafeToEvict],
            &bare,
            &ctx
        )),
        Some(BlockingReason::NotReplicated)
    );
    assert_eq!(evaluate_with(&[], &bare, &ctx), Outcome::Undefined);
}

#[test]
fn a_rule_the_flags_turn_off_is_not_consulted() {
    let controllers = Fake(vec![]);
    let ctx = Context {
        now: now(),
        rules: DrainRules {
            skip_nodes_with_local_storage: false,
            ..DrainRules::default()
        },
        budgets: &NO_BUDGETS,
        controllers: &controllers,
    };
    let disk = pod(json!({"spec": {"volumes": [{"name": "scratch", "emptyDir": {}}]}}));
    assert!(!rules::LocalStorage.enabled(&ctx.rules));
    assert_eq!(
        evaluate_with(&[&rules::LocalStorage], &disk, &ctx),
        Outcome::Undefined
    );
    assert_eq!(
        reason(rules::LocalStorage.drainable(&disk, &ctx)),
        Some(BlockingReason::LocalStorageRequested)
    );
}
