//! Fault injection: rules hit the client under test only, with
//! kube-apiserver's answers (500, 429 with Retry-After, 409, 504 after the
//! hold, 410 on a watch, a stalled watch), cut watches, and the HTTP
//! endpoint `testbed up` serves them on.

use std::time::Duration;

use apiserver::ApiServer;
use apiserver::faults::{Fault, Rule};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{PostParams, WatchEvent, WatchParams};
use serde_json::json;
use simclock::Clock;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

fn rule(verb: &str, resource: &str, fault: Fault) -> Rule {
    Rule {
        verb: Some(verb.into()),
        resource: Some(resource.into()),
        fault,
        rate: 1.0,
        times: Some(1),
    }
}

fn code(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason, s.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn errors_hit_the_client_under_test_only_and_as_kube_apiserver_words_them() {
    let api = ApiServer::start(Clock::new()).unwrap();
    let faults = &api.server().faults;
    let tested: Api<ConfigMap> = Api::namespaced(api.client_under_test(), "default");
    let testbed: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    let pp = PostParams::default();

    faults
        .add(rule("create", "configmaps", Fault::InternalError))
        .unwrap();
    testbed
        .create(&pp, &cm("a"))
        .await
        .expect("the testbed's own client is spared");
    let (c, reason, msg) = code(tested.create(&pp, &cm("b")).await.unwrap_err());
    assert_eq!((c, reason.as_str()), (500, "InternalError"), "{msg}");
    tested.create(&pp, &cm("b")).await.expect("times: 1");

    faults
        .add(rule(
            "get",
            "configmaps",
            Fault::TooManyRequests {
                retry_after_seconds: 3,
            },
        ))
        .unwrap();
    let (c, reason, msg) = code(tested.get("a").await.unwrap_err());
    assert_eq!((c, reason.as_str()), (429, "TooManyRequests"));
    assert_eq!(
        msg,
        "the server has received too many requests and has asked us to try again later"
    );

    faults
        .add(rule("patch", "configmaps", Fault::Conflict))
        .unwrap();
    let patch = kube::api::Patch::Merge(json!({"data": {"k": "w"}}));
    let (c, _, msg) = code(
        tested
            .patch("a", &kube::api::PatchParams::default(), &patch)
            .await
            .unwrap_err(),
    );
    assert_eq!(c, 409);
    assert_eq!(
        msg,
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let report = faults.report();
    assert_eq!(report.total(), 3, "{report:?}");
    assert_eq!(report.injected["429"], 1);
}

#[tokio::test(start_paused = true)]
async fn a_timeout_holds_the_request_then_answers_504() {
    let api = ApiServer::start(Clock::new()).unwrap();
    api.server()
        .faults
        .add(rule(
            "list",
            "configmaps",
            Fault::Timeout { millis: 30_000 },
        ))
        .unwrap();
    let tested: Api<ConfigMap> = Api::namespaced(api.client_under_test(), "default");
    let started = tokio::time::Instant::now();
    let (c, reason, _) = code(tested.list(&Default::default()).await.unwrap_err());
    assert_eq!((c, reason.as_str()), (504, "Timeout"));
    assert!(started.elapsed() >= Duration::from_secs(30));
}

#[tokio::test]
async fn the_429_carries_retry_after_over_http() {
    use tower::ServiceExt;
    let api = ApiServer::start(Clock::new()).unwrap();
    api.server()
        .faults
        .add(rule(
            "list",
            "nodes",
            Fault::TooManyRequests {
                retry_after_seconds: 7,
            },
        ))
        .unwrap();
    let mut req = http::Request::get("/api/v1/nodes")
        .body(axum::body::Body::empty())
        .unwrap();
    req.extensions_mut()
        .insert(apiserver::faults::UnderTest("test".into()));
    let resp = api.router().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "7");
}

#[tokio::test]
async fn watches_get_410_and_cut_streams_end() {
    let api = ApiServer::start(Clock::new()).unwrap();
    let faults = &api.server().faults;
    let tested: Api<ConfigMap> = Api::namespaced(api.client_under_test(), "default");
    faults
        .add(Rule {
            verb: None,
            resource: Some("configmaps".into()),
            fault: Fault::WatchGone,
            rate: 1.0,
            times: Some(1),
        })
        .unwrap();
    let mut gone = tested
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    match gone.next().await {
        Some(Ok(WatchEvent::Error(e))) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    assert!(gone.next().await.is_none(), "then the stream ends");

    // A watch of the testbed's own client is never cut.
    let own: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    let mut kept = own
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let mut cut = tested
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    tokio::task::yield_now().await;
    faults.cut_watches(Some("nodes"));
    faults.cut_watches(Some("configmaps"));
    let ended = tokio::time::timeout(Duration::from_secs(5), cut.next()).await;
    assert!(matches!(ended, Ok(None)), "cut: {ended:?}");
    own.create(&PostParams::default(), &cm("after"))
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), kept.next()).await;
    assert!(
        matches!(event, Ok(Some(Ok(WatchEvent::Added(_))))),
        "kept: {event:?}"
    );
    let report = faults.report();
    assert_eq!(report.injected["410"], 1);
    assert_eq!(report.injected[apiserver::faults::WATCH_CUT], 1);
}

#[tokio::test(start_paused = true)]
async fn a_stalled_watch_sends_nothing_until_its_timeout() {
    let api = ApiServer::start(Clock::new()).unwrap();
    api.server()
        .faults
        .add(rule(
            "watch",
            "configmaps",
            Fault::WatchStall { millis: None },
        ))
        .unwrap();
    let tested: Api<ConfigMap> = Api::namespaced(api.client_under_test(), "default");
    let own: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    let wp = WatchParams::default().timeout(60);
    let mut stalled = tested.watch(&wp, "0").await.unwrap().boxed();
    own.create(&PostParams::default(), &cm("x")).await.unwrap();
    let started = tokio::time::Instant::now();
    assert!(stalled.next().await.is_none(), "no event, only the end");
    assert!(started.elapsed() >= Duration::from_secs(59));
}

#[tokio::test(start_paused = true)]
async fn a_stall_with_a_duration_ends_the_watch_then_and_the_client_resumes() {
    let api = ApiServer::start(Clock::new()).unwrap();
    let stall = Fault::WatchStall {
        millis: Some(30_000),
    };
    api.server()
        .faults
        .add(rule("watch", "configmaps", stall))
        .unwrap();
    let tested: Api<ConfigMap> = Api::namespaced(api.client_under_test(), "default");
    let own: Api<ConfigMap> = Api::namespaced(api.client(), "default");
    let start = own.create(&PostParams::default(), &cm("a")).await.unwrap();
    let from = start.metadata.resource_version.unwrap();
    let wp = WatchParams::default().timeout(600);
    let mut stalled = tested.watch(&wp, &from).await.unwrap().boxed();
    own.create(&PostParams::default(), &cm("b")).await.unwrap();
    let started = tokio::time::Instant::now();
    assert!(stalled.next().await.is_none(), "no event, only the end");
    let silent = started.elapsed();
    assert!(
        silent >= Duration::from_secs(29) && silent < Duration::from_secs(60),
        "the stall lasts its 30 s, not the watch's 600 s timeout: {silent:?}"
    );
    // The next watch from the same resourceVersion is served: the change
    // made during the stall arrives.
    let mut resumed = tested.watch(&wp, &from).await.unwrap().boxed();
    match resumed.next().await {
        Some(Ok(WatchEvent::Added(c))) => assert_eq!(c.metadata.name.as_deref(), Some("b")),
        other => panic!("want the ADDED event of b, got {other:?}"),
    }
}

#[tokio::test]
async fn the_fault_endpoint_sets_reports_and_refuses_bad_rules() {
    use tower::ServiceExt;
    let api = ApiServer::start(Clock::new()).unwrap();
    let send = |method: &str, path: &str, body: &str| {
        http::Request::builder()
            .method(method)
            .uri(path)
            .body(axum::body::Body::from(body.to_string()))
            .unwrap()
    };
    let rules = r#"[{"verb": "delete", "resource": "nodes", "fault": {"kind": "internalError"}, "rate": 0.5}]"#;
    let resp = api
        .router()
        .oneshot(send("PUT", "/testbed/faults", rules))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(api.server().faults.report().rules.len(), 1);
    let resp = api
        .router()
        .oneshot(send(
            "PUT",
            "/testbed/faults",
            r#"[{"fault": {"kind": "conflict"}, "rate": 2}]"#,
        ))
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("rules[0].rate: 2 is not in (0, 1]"), "{text}");
    assert_eq!(
        api.server().faults.report().rules.len(),
        1,
        "a bad set changes nothing"
    );
    let resp = api
        .router()
        .oneshot(send("DELETE", "/testbed/faults", ""))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(api.server().faults.report().rules.is_empty());
}
