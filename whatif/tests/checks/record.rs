//! `testbed record` of the testbed itself, over TLS with a token that may
//! only list and watch: a Deployment scaled while the API server cuts the
//! recorder's watches, then the recording read back. A cut watch is
//! resumed; a watch answered `410 Gone` is answered by a relist that
//! writes only what changed.

use std::time::Duration;

use apiserver::faults::{Fault, Rule};
use harness::cluster::Cluster;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use whatif::record::Written;
use whatif::recording::Replay;

/// What the API server does to the recorder's watches at 2.5 s.
#[derive(Clone, Copy, PartialEq)]
enum Cut {
    /// Every watch cut: each resumes from its resourceVersion.
    Resumed,
    /// Every watch cut, the Deployments' answered 410 when it resumes and
    /// their first list after it answered 500: the relist comes seconds
    /// later (the recorder backs off after each error).
    Gone,
}

/// `web` in `shop` at 2 replicas (and `api`, left alone), recorded for 6 s (10 s with
/// `Cut::Gone`): scaled to 5 at 1.5 s, the watches cut at 2.5 s, scaled to
/// 3 at 2.7 s (`Cut::Gone`) or to 1 at 3.5 s (`Cut::Resumed`).
fn record_the_testbed(cut: Cut) -> (Written, String) {
    let runtime = crate::live::runtime();
    let dir = tempfile::tempdir().expect("a directory");
    let kubeconfig = dir.path().join("kubeconfig");
    let web = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx",
                    "env": [{"name": "PASSWORD", "value": "secret"}],
                    "resources": {"requests": {"cpu": "100m"}}}]}}}});
    let api = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "api"}},
            "template": {"metadata": {"labels": {"app": "api"}},
                "spec": {"containers": [{"name": "api", "image": "api"}]}}}});
    runtime.block_on(async {
        let cluster = Cluster::builder()
            .namespace("shop")
            .object(web)
            .object(api)
            .start()
            .await
            .expect("a cluster");
        let token = crate::live::service_account(
            &cluster,
            "recorder",
            // All it records but PriorityClasses.
            json!([
                {"apiGroups": ["", "apps", "batch", "policy"], "resources": ["*"], "verbs": ["list", "watch"]},
            ]),
        )
        .await;
        let api_server = cluster.api_server().expect("embedded");
        let endpoint = api_server
            .serve_tls("127.0.0.1:0".parse().expect("an address"))
            .await
            .expect("served over TLS");
        std::fs::write(&kubeconfig, endpoint.kubeconfig_with_token(&token)).expect("written");
        let client = whatif::live::client(&kubeconfig).await.expect("a client");
        let length = if cut == Cut::Gone { 10 } else { 6 };
        let recorder = tokio::spawn(async move {
            let mut out = Vec::new();
            let written = whatif::record::record(
                client,
                &mut out,
                "test",
                Some(Duration::from_secs(length)),
                std::future::pending(),
            )
            .await
            .expect("the recording ends");
            (written, String::from_utf8(out).expect("UTF-8"))
        });
        let scale = |replicas: i64| {
            let api: Api<Deployment> = Api::namespaced(cluster.client(), "shop");
            async move {
                api.patch(
                    "web",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"replicas": replicas}})),
                )
                .await
                .expect("scaled");
            }
        };
        tokio::time::sleep(Duration::from_millis(1500)).await;
        scale(5).await;
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let faults = &api_server.server().faults;
        if cut == Cut::Gone {
            let rule = |verb: &str, fault: Fault, times: u64| Rule {
                verb: Some(verb.into()),
                resource: Some("deployments".into()),
                fault,
                rate: 1.0,
                times: Some(times),
            };
            faults
                .set(vec![
                    rule("watch", Fault::WatchGone, 1),
                    rule("list", Fault::InternalError, 1),
                ])
                .expect("valid rules");
        }
        faults.cut_watches(None);
        match cut {
            Cut::Gone => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                scale(3).await;
            }
            Cut::Resumed => {
                tokio::time::sleep(Duration::from_millis(1000)).await;
                scale(1).await;
            }
        }
        let recorded = recorder.await.expect("the recorder ran");
        if cut == Cut::Gone {
            let injected = faults.report();
            assert_eq!(
                injected.injected.get("410").copied(),
                Some(1),
                "the resumed watch was answered 410: {injected:?}"
            );
        }
        recorded
    })
}

/// The recording read back, complete, with exactly two scales of `web`:
/// to 5 at 1.5 s, then to `then` (its offset returned).
fn scaled_to_5_then(text: &str, then: i64) -> (Replay, u64) {
    let replay = whatif::recording::parse("test", text).expect("the recording reads");
    assert!(replay.recorded.complete, "it has its end line");
    let scales: Vec<(u64, String)> = replay
        .steps
        .iter()
        .filter(|s| s.action.starts_with("scale Deployment shop/web"))
        .map(|s| (s.at, s.action.clone()))
        .collect();
    let second = format!("scale Deployment shop/web to {then}");
    let [(up, first), (at, action)] = &scales[..] else {
        panic!("two scales, to 5 then to {then}, none twice: {scales:?}");
    };
    assert_eq!(
        (first.as_str(), action),
        ("scale Deployment shop/web to 5", &second),
        "{scales:?}"
    );
    assert!(
        (1..=2).contains(up),
        "scaled up at 1.5 s, replayed at {up} s"
    );
    (replay, *at)
}

/// The recording replays the two scales at their offsets, the second
/// made after every watch was cut.
#[test]
fn a_recording_of_the_testbed_replays_its_scales_at_their_offsets_through_cut_watches() {
    let (written, text) = record_the_testbed(Cut::Resumed);
    assert!(written.initial > 0 && written.changes > 0, "{written:?}");
    assert_eq!(written.relists, 0, "every watch resumed: {written:?}");
    assert_eq!(
        written.unreadable.keys().collect::<Vec<_>>(),
        ["PriorityClass"],
        "a kind the token may not list is left out and said so"
    );
    assert!(
        !text.contains("PASSWORD"),
        "a container's environment is not recorded"
    );
    let (replay, down) = scaled_to_5_then(&text, 1);
    assert!(
        (3..=4).contains(&down),
        "scaled down at 3.5 s, after the cut, replayed at {down} s"
    );
    let start: Vec<&Value> = replay.start["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "web")
        .collect();
    assert_eq!(start.len(), 1);
    assert_eq!(start[0]["spec"]["replicas"], 2, "the state at the start");
}

/// After the 410 the Deployments are listed again: the scale made while
/// the recorder could not watch is written once, when the relist finds
/// it, and the Deployment left alone is not written again.
#[test]
fn a_watch_answered_410_is_answered_by_a_relist_that_writes_only_the_differences() {
    let (written, text) = record_the_testbed(Cut::Gone);
    assert!(
        written.relists >= 1,
        "the Deployments relisted: {written:?}"
    );
    let (_, relisted) = scaled_to_5_then(&text, 3);
    assert!(
        (3..=9).contains(&relisted),
        "scaled at 2.7 s, found by the relist after a failed list, replayed at {relisted} s"
    );
    let api_after_the_cut: Vec<&str> = text
        .lines()
        .filter(|l| {
            let line: Value = serde_json::from_str(l).expect("a JSON line");
            line["object"]["kind"] == "Deployment"
                && line["object"]["metadata"]["name"] == "api"
                && line["at"].as_f64().is_some_and(|at| at >= 3.0)
        })
        .collect();
    assert!(
        api_after_the_cut.is_empty(),
        "api, unchanged, is not written by the relist: {api_after_the_cut:?}"
    );
}
