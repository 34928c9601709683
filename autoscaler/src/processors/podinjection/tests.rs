#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::cache::CachedController;
use crate::cache::desired_pods;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;

fn job(spec: Value, succeeded: i32) -> Job {
    serde_json::from_value(json!({"metadata": {"name": "j"}, "spec": spec,
        "status": {"succeeded": succeeded}}))
    .unwrap()
}

#[test]
fn a_job_wants_its_incomplete_pods_up_to_its_parallelism() {
    let wants = |spec, succeeded| desired_pods::job(&job(spec, succeeded));
    let template = json!({});
    let with = |extra: Value| {
        let mut s = json!({"template": template});
        for (k, v) in extra.as_object().unwrap() {
            s[k] = v.clone();
        }
        s
    };
    // min(8 - 3, 6)
    assert_eq!(
        wants(with(json!({"parallelism": 6, "completions": 8})), 3),
        Some(5)
    );
    // A work queue (no completions) none of whose pods succeeded: its parallelism.
    assert_eq!(wants(with(json!({"parallelism": 4})), 0), Some(4));
    // Once one succeeded, the queue is draining: min(1 - 1, 4).
    assert_eq!(wants(with(json!({"parallelism": 4})), 1), Some(0));
    // Neither set: one pod.
    assert_eq!(wants(with(json!({})), 0), Some(1));
    assert_eq!(wants(with(json!({"completions": 2})), 5), Some(0));
}

#[test]
fn only_a_parallel_stateful_set_wants_its_replicas() {
    let sts = |policy: &str| -> StatefulSet {
        serde_json::from_value(json!({"metadata": {"name": "s"}, "spec": {"replicas": 5,
            "podManagementPolicy": policy, "serviceName": "s",
            "selector": {}, "template": {}}}))
        .unwrap()
    };
    assert_eq!(desired_pods::stateful_set(&sts("Parallel")), Some(5));
    assert_eq!(desired_pods::stateful_set(&sts("OrderedReady")), None);
}

fn pod(name: &str, owner: &str, created: &str, node: Option<&str>) -> PodInfo {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "creationTimestamp": created,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                "uid": owner, "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "3"}}}]},
    }))
    .unwrap();
    PodInfo::new(Arc::new(p)).compact()
}

fn state_with(controllers: &[(&str, Option<i32>)], pods: &[PodInfo]) -> State {
    let mut s = State::default();
    for (uid, desired) in controllers {
        s.controllers.insert(
            ("ReplicaSet".into(), "default".into(), (*uid).into()),
            CachedController {
                uid: (*uid).into(),
                replicas: *desired,
                desired_pods: *desired,
            },
        );
    }
    for p in pods {
        s.pods.insert(p.key.as_str().into(), p.clone());
        let owner = controller_of(&p.pod).unwrap().1.to_string();
        s.by_owner
            .entry(owner)
            .or_default()
            .insert(p.key.as_str().into());
    }
    s
}

#[test]
fn a_controller_missing_pods_gets_copies_of_its_newest_pod() {
    let state = state_with(
        &[
            ("web", Some(5)),
            ("full", Some(1)),
            ("none-yet", Some(3)),
            ("job-done", None),
        ],
        &[
            pod("web-a", "web", "2026-01-01T00:00:00Z", Some("n1")),
            pod("web-b", "web", "2026-01-01T00:00:05Z", None),
            pod("full-a", "full", "2026-01-01T00:00:00Z", None),
        ],
    );
    let fakes = fake_pods(&state);
    let names: Vec<&str> = fakes.iter().map(|p| p.key.as_str()).collect();
    // 5 desired, 2 exist (bound or not): 3 copies of the newest, web-b.
    // A controller with no pod at all gets none, nor one that wants none.
    assert_eq!(
        names,
        [
            "default/web-b-copy-1",
            "default/web-b-copy-2",
            "default/web-b-copy-3"
        ]
    );
    let f = &fakes[0].pod;
    assert!(is_fake(f));
    assert_eq!(f.metadata.uid.as_deref(), Some("web-1"));
    assert!(f.spec.as_ref().unwrap().node_name.is_none());
    // The requests computed of the sample stay (the cache keeps pods compact).
    assert_eq!(
        fakes[0].requests,
        pod("x", "web", "2026-01-01T00:00:00Z", None).requests
    );
}

#[test]
fn the_limit_drops_fake_pods_first_and_never_real_ones() {
    let metrics = Metrics::new(false);
    let mut snapshot = crate::simulator::Snapshot::new(Vec::new());
    let real = |n: &str| pod(n, "web", "2026-01-01T00:00:00Z", None);
    let fakes = make_fake_pods("web", &real("web-a"), 8);
    let mut left = |limit: usize| {
        let mut ctx = PodListContext::for_test(&mut snapshot, &metrics);
        let pods: Vec<PodInfo> = [real("web-a"), real("web-b")]
            .into_iter()
            .chain(fakes.clone())
            .collect();
        let kept = EnforceInjectedPodsLimitProcessor { limit }.process(&mut ctx, pods);
        let fake = kept.iter().filter(|p| is_fake(&p.pod)).count();
        (kept.len() - fake, fake)
    };
    assert_eq!(left(5000), (2, 8));
    assert_eq!(left(5), (2, 3));
    assert_eq!(left(1), (2, 0));
    let text = metrics.encode();
    assert!(
        text.contains(r#"cluster_autoscaler_unschedulable_pods_count{type="injected"} 0"#),
        "{text}"
    );
    assert!(
        text.contains(r#"cluster_autoscaler_unschedulable_pods_count{type="skipped_injection"} 8"#),
        "{text}"
    );
}
