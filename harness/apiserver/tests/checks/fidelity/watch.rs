//! Watches as kube-apiserver's watch cache serves them.

use std::time::Duration;

use apiserver::ApiServer;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use simclock::Clock;
use tower::ServiceExt;

use super::{Answer, get, install, open_crd, post};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

/// Opens a watch and reads events until `until` says stop (or 20 events).
async fn watch_events(
    api: &ApiServer,
    query: &str,
    until: impl Fn(&Value) -> bool,
) -> (u16, Vec<Value>) {
    let req = http::Request::get(format!("{CONFIGMAPS}?watch=true&{query}"))
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = api.router().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut events = Vec::new();
    let mut buf = Vec::new();
    while events.len() < 20 {
        let Some(frame) = body.frame().await else {
            break;
        };
        let Ok(data) = frame.unwrap().into_data() else {
            continue;
        };
        buf.extend_from_slice(&data);
        while let Some(end) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            let event: Value = serde_json::from_slice(&line).unwrap();
            let stop = until(&event);
            events.push(event);
            if stop {
                return (code, events);
            }
        }
    }
    (code, events)
}

async fn create(api: &ApiServer, name: &str) -> u64 {
    let a: Answer = post(api, CONFIGMAPS, &cm(name)).await;
    assert_eq!(a.code, 201, "{}", a.body);
    a.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_watch_from_before_the_window_gets_an_error_event_410() {
    // Cacher.Watch: newErrWatcher(too old resource version) — HTTP 200, one ERROR event, Status 410 Expired.
    let api = ApiServer::with_history(Clock::new(), 3).unwrap();
    let first = create(&api, "c0").await;
    for i in 1..6 {
        create(&api, &format!("c{i}")).await;
    }
    let (code, events) = watch_events(&api, &format!("resourceVersion={first}"), |_| true).await;
    assert_eq!(code, 200);
    assert_eq!(events[0]["type"], "ERROR");
    let status = &events[0]["object"];
    assert_eq!(status["code"], 410);
    assert_eq!(status["reason"], "Expired");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("too old resource version: {first} (")),
        "{status}"
    );
}

#[tokio::test]
async fn a_watch_inside_the_window_replays_what_followed() {
    // watchCache.getAllEventsSinceLocked: events after the requested version, in order.
    let api = ApiServer::with_history(Clock::new(), 3).unwrap();
    create(&api, "c0").await;
    let rv = create(&api, "c1").await;
    create(&api, "c2").await;
    create(&api, "c3").await;
    let (code, events) = watch_events(&api, &format!("resourceVersion={rv}"), |e| {
        e["object"]["metadata"]["name"] == "c3"
    })
    .await;
    assert_eq!(code, 200);
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c2", "c3"]);
}

#[tokio::test(start_paused = true)]
async fn the_window_keeps_75_seconds_of_changes() {
    // The watch cache's eventFreshDuration (75 s) with its 100-event floor: a version older than both is gone.
    let api = ApiServer::start(Clock::new()).unwrap();
    let first = create(&api, "c0").await;
    for i in 1..120 {
        create(&api, &format!("c{i}")).await;
    }
    let (_, events) = watch_events(&api, &format!("resourceVersion={first}"), |_| true).await;
    assert_ne!(
        events[0]["type"], "ERROR",
        "all 120 changes are fresh: {}",
        events[0]
    );
    tokio::time::advance(Duration::from_secs(80)).await;
    create(&api, "late").await;
    let (_, events) = watch_events(&api, &format!("resourceVersion={first}"), |_| true).await;
    assert_eq!(events[0]["type"], "ERROR", "{}", events[0]);
    assert_eq!(events[0]["object"]["code"], 410);
}

#[tokio::test]
async fn a_watch_on_a_new_crd_from_an_older_version_is_gone() {
    // A CRD's watch cache starts when the CRD is established.
    let api = ApiServer::start(Clock::new()).unwrap();
    let rv = create(&api, "before").await;
    let crd = open_crd("widgets", "Widget");
    install(&api, &crd).await;
    let a = get(&api, &format!("/apis/example.com/v1/namespaces/default/widgets?watch=true&resourceVersion={}&timeoutSeconds=1", rv - 1)).await;
    assert_eq!(a.code, 200);
    assert_eq!(a.body["type"], "ERROR", "{}", a.body);
    assert_eq!(a.body["object"]["code"], 410);
}

#[tokio::test]
async fn a_watch_of_a_quiet_resource_survives_a_busy_one() {
    // One watch cache per resource: secrets keep their window however busy configmaps are.
    let api = ApiServer::with_history(Clock::new(), 3).unwrap();
    let secret = post(
        &api,
        "/api/v1/namespaces/default/secrets",
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
    )
    .await;
    let rv: u64 = secret.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    for i in 0..10 {
        create(&api, &format!("c{i}")).await;
    }
    let a = get(
        &api,
        &format!(
            "/api/v1/namespaces/default/secrets?watch=true&resourceVersion={rv}&timeoutSeconds=1"
        ),
    )
    .await;
    assert_eq!(a.code, 200);
    assert!(a.body.is_null(), "no event for secrets: {}", a.body);
}

#[tokio::test(start_paused = true)]
async fn bookmarks_come_when_asked() {
    // allowWatchBookmarks: BOOKMARK events carrying only the object's kind, apiVersion and resourceVersion.
    let api = ApiServer::start(Clock::new()).unwrap();
    let rv = create(&api, "c0").await;
    let (_, events) = watch_events(
        &api,
        &format!("resourceVersion={rv}&allowWatchBookmarks=true"),
        |e| e["type"] == "BOOKMARK",
    )
    .await;
    let bookmark = events.last().unwrap();
    assert_eq!(bookmark["type"], "BOOKMARK");
    assert_eq!(bookmark["object"]["kind"], "ConfigMap");
    assert_eq!(bookmark["object"]["apiVersion"], "v1");
    assert!(
        bookmark["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= rv
    );
}

#[tokio::test]
async fn the_streaming_list_ends_with_the_initial_events_end_bookmark() {
    // WatchList: sendInitialEvents=true&resourceVersionMatch=NotOlderThan: ADDED for every object,
    // then a BOOKMARK annotated k8s.io/initial-events-end: "true".
    let api = ApiServer::start(Clock::new()).unwrap();
    create(&api, "a").await;
    create(&api, "b").await;
    let (code, events) = watch_events(
        &api,
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
        |e| e["type"] == "BOOKMARK",
    )
    .await;
    assert_eq!(code, 200);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ADDED", "ADDED", "BOOKMARK"]);
    assert_eq!(
        events[2]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
}

#[tokio::test]
async fn send_initial_events_needs_not_older_than() {
    // validateWatchOptions: "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".
    let api = ApiServer::start(Clock::new()).unwrap();
    let a = get(
        &api,
        &format!("{CONFIGMAPS}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.message(),
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    );
}

#[tokio::test]
async fn resource_version_match_on_a_watch_needs_send_initial_events() {
    // validateWatchOptions: "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided".
    let api = ApiServer::start(Clock::new()).unwrap();
    let a = get(
        &api,
        &format!("{CONFIGMAPS}?watch=true&resourceVersionMatch=NotOlderThan"),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert!(
        a.message().ends_with(
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
        ),
        "{}",
        a.message()
    );
    let a = get(
        &api,
        &format!("{CONFIGMAPS}?watch=true&sendInitialEvents=true&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!(a.code, 422);
    assert!(
        a.message()
            .contains("Unsupported value: \"Exact\": supported values: \"NotOlderThan\""),
        "{}",
        a.message()
    );
}
