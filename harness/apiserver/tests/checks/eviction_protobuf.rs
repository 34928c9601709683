//! Draining a node the way the upstream Cluster Autoscaler does: evictions
//! built as client-go encodes them (`policy/v1beta1`, protobuf, the `k8s\0`
//! envelope), sent to the embedded API server over TLS. And what the server
//! answers to protobuf bodies it cannot take.

use std::time::Duration;

use apiserver::{ApiServer, TlsEndpoint};
use http::header::{ACCEPT, CONTENT_TYPE};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Error};
use prost::Message;
use serde_json::json;
use simclock::Clock;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

async fn tls() -> (ApiServer, TlsEndpoint, Client) {
    let api = ApiServer::start(Clock::new()).unwrap();
    let ep = api.serve_tls("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let client = ep.client().unwrap();
    (api, ep, client)
}

/// client-go's protobuf body: the magic, then a runtime.Unknown.
fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [b"k8s\0".to_vec(), unknown.encode_to_vec()].concat()
}

/// The eviction upstream CA's drain builds (`core/scaledown/actuation/drain.go`):
/// policy/v1beta1, the pod's name and namespace, the grace period it allows.
fn upstream_eviction(version: &str, pod: &str, grace: i64) -> Vec<u8> {
    let metadata = Some(meta::ObjectMeta {
        name: Some(pod.into()),
        namespace: Some("default".into()),
        ..Default::default()
    });
    let delete_options = Some(meta::DeleteOptions {
        grace_period_seconds: Some(grace),
        ..Default::default()
    });
    let raw = match version {
        "policy/v1beta1" => k8s_pb::api::policy::v1beta1::Eviction {
            metadata,
            delete_options,
        }
        .encode_to_vec(),
        _ => k8s_pb::api::policy::v1::Eviction {
            metadata,
            delete_options,
        }
        .encode_to_vec(),
    };
    envelope(version, "Eviction", raw)
}

/// POSTs a protobuf body as client-go does (protobuf in, protobuf or JSON back).
async fn post_protobuf(client: &Client, path: &str, body: Vec<u8>) -> Result<String, Error> {
    let request = http::Request::post(path)
        .header(CONTENT_TYPE, PROTOBUF)
        .header(ACCEPT, format!("{PROTOBUF}, */*"))
        .body(body)
        .unwrap();
    client.request_text(request).await
}

fn status_of(e: Error) -> (u16, String, String) {
    match e {
        Error::Api(s) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected a Status from the server, got {other:?}"),
    }
}

/// A Running, Ready pod of `app` bound to node `pool-1`.
async fn running_pod(client: &Client, name: &str, app: &str) {
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"nodeName": "pool-1", "containers": [{"name": "c", "image": "pause"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_node_is_drained_with_the_evictions_upstream_ca_sends() {
    let (_api, _ep, client) = tls().await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    for (name, version) in [("dns-0", "policy/v1beta1"), ("web-0", "policy/v1")] {
        running_pod(&client, name, "free").await;
        let path = format!("/api/v1/namespaces/default/pods/{name}/eviction");
        let answer = post_protobuf(&client, &path, upstream_eviction(version, name, 45))
            .await
            .unwrap_or_else(|e| panic!("{version} eviction of {name}: {e}"));
        assert!(answer.contains("Success"), "{answer}");
        // Deleted with the eviction's grace period: the kubelet (kwok) ends it.
        let p = pods.get(name).await.unwrap();
        assert!(p.metadata.deletion_timestamp.is_some(), "{name} is going");
        assert_eq!(p.metadata.deletion_grace_period_seconds, Some(45));
        pods.delete(name, &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
        assert!(pods.get_opt(name).await.unwrap().is_none(), "{name} gone");
    }

    // A budget that allows no disruption: 429, the pod stays, for both versions.
    running_pod(&client, "guarded-0", "guarded").await;
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(client.clone());
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "guarded"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    for version in ["policy/v1beta1", "policy/v1"] {
        let path = "/api/v1/namespaces/default/pods/guarded-0/eviction";
        let e = post_protobuf(&client, path, upstream_eviction(version, "guarded-0", 30))
            .await
            .expect_err("the budget forbids the eviction");
        let (code, reason, message) = status_of(e);
        assert_eq!(
            (code, reason.as_str()),
            (429, "TooManyRequests"),
            "{version}"
        );
        assert_eq!(
            message, "Cannot evict pod as it would violate the pod's disruption budget.",
            "{version}"
        );
        let p = pods.get("guarded-0").await.unwrap();
        assert!(p.metadata.deletion_timestamp.is_none(), "guarded-0 stays");
    }

    // The same v1beta1 Eviction in JSON is taken too; another kind is not.
    running_pod(&client, "json-0", "free").await;
    let json_eviction = |api_version: &str, kind: &str| {
        http::Request::post("/api/v1/namespaces/default/pods/json-0/eviction")
            .header(CONTENT_TYPE, "application/json")
            .body(
                serde_json::to_vec(&json!({"apiVersion": api_version, "kind": kind,
                    "metadata": {"name": "json-0", "namespace": "default"}}))
                .unwrap(),
            )
            .unwrap()
    };
    let (code, _, message) = status_of(
        client
            .request_text(json_eviction("v1", "Pod"))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 400, "{message}");
    assert!(message.contains("default/json-0"), "{message}");
    client
        .request_text(json_eviction("policy/v1beta1", "Eviction"))
        .await
        .unwrap();
    let p = pods.get("json-0").await.unwrap();
    assert!(p.metadata.deletion_timestamp.is_some());
}

#[tokio::test]
async fn protobuf_bodies_the_server_cannot_take_store_nothing() {
    let (_api, _ep, client) = tls().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let before = cms.list(&ListParams::default()).await.unwrap().items.len();

    // A ConfigMap cut short, and one whose bytes are garbage: 400 naming the problem.
    let config_map = k8s_pb::api::core::v1::ConfigMap {
        metadata: Some(meta::ObjectMeta {
            name: Some("cut".into()),
            ..Default::default()
        }),
        data: [("key".to_string(), "value".to_string())].into(),
        ..Default::default()
    };
    let mut truncated = envelope("v1", "ConfigMap", config_map.encode_to_vec());
    truncated.truncate(truncated.len() - 10);
    let garbled = [b"k8s\0".to_vec(), vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]].concat();
    let path = "/api/v1/namespaces/default/configmaps";
    for (what, body) in [("truncated", truncated), ("garbled", garbled)] {
        let (code, reason, message) =
            status_of(post_protobuf(&client, path, body).await.unwrap_err());
        assert_eq!((code, reason.as_str()), (400, "BadRequest"), "{what}");
        assert!(
            message.contains("protobuf") && message.contains("past the end"),
            "{what}: {message}"
        );
    }

    // A custom resource has no protobuf form: 415.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let widgets: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("example.com", "v1", "Widget"),
            "widgets",
        ),
    );
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let mut answer = None;
    for _ in 0..100 {
        match post_protobuf(&client, path, envelope("example.com/v1", "Widget", vec![])).await {
            // The CRD may take a moment to be served.
            Err(Error::Api(s)) if s.code == 404 => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => {
                answer = Some(other);
                break;
            }
        }
    }
    let (code, reason, message) = status_of(answer.expect("the CRD is served").unwrap_err());
    assert_eq!((code, reason.as_str()), (415, "UnsupportedMediaType"));
    assert!(message.contains("example.com/v1, Kind=Widget"), "{message}");

    // Nothing was stored, and the server still serves.
    assert_eq!(
        cms.list(&ListParams::default()).await.unwrap().items.len(),
        before
    );
    assert!(
        widgets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let ok = k8s_pb::api::core::v1::ConfigMap {
        metadata: Some(meta::ObjectMeta {
            name: Some("whole".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    post_protobuf(
        &client,
        "/api/v1/namespaces/default/configmaps",
        envelope("v1", "ConfigMap", ok.encode_to_vec()),
    )
    .await
    .unwrap();
    assert!(cms.get_opt("whole").await.unwrap().is_some());
}
