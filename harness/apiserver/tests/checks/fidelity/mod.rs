//! The fidelity suite: requests a kube-apiserver conformance reader would
//! send, answered as kube-apiserver answers them. Each case names the
//! upstream behaviour it mirrors.
//!
//! - [`crd`]: CRD schemas (validation, pruning, defaulting), CEL rules and
//!   transition rules, subresources, CRDs refused for a bad schema or rule;
//! - [`dra`]: `resource.k8s.io/v1` defaults and validation (requests,
//!   selectors compiled, slices' node selection and pools, claim status);
//! - [`limits`]: request body, etcd object and ConfigMap/Secret data sizes,
//!   and the count of pods a ResourceQuota allows;
//! - [`watch`]: the watch window (410 Gone), bookmarks, the streaming list
//!   (`sendInitialEvents`) and its option checks.

mod crd;
mod dra;
mod limits;
mod watch;

use apiserver::ApiServer;
use http_body_util::BodyExt;
use serde_json::Value;
use simclock::Clock;
use tower::ServiceExt;

/// A response: status code and JSON body (Null when not JSON).
pub struct Answer {
    /// HTTP status.
    pub code: u16,
    /// The JSON body.
    pub body: Value,
}

impl Answer {
    /// The Status message.
    pub fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or("")
    }
}

/// A server under test.
pub fn server() -> ApiServer {
    ApiServer::start(Clock::new()).unwrap()
}

/// Sends one request to the server's router (as an authenticated admin).
pub async fn call(
    api: &ApiServer,
    method: &str,
    path: &str,
    body: Option<Vec<u8>>,
    content_type: &str,
) -> Answer {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(axum::body::Body::from(body.unwrap_or_default()))
        .unwrap();
    let resp = api.router().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    Answer {
        code,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

/// A namespaced CRD `<plural>.example.com` (version v1) of `kind` whose
/// schema keeps every field and checks nothing.
pub fn open_crd(plural: &str, kind: &str) -> Value {
    serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

/// Creates a CRD; it must be accepted.
pub async fn install(api: &ApiServer, crd: &Value) {
    let a = post(api, CRDS, crd).await;
    assert_eq!(a.code, 201, "{}: {}", crd["metadata"]["name"], a.body);
}

/// The CRD collection.
pub const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// POSTs a JSON object.
pub async fn post(api: &ApiServer, path: &str, obj: &Value) -> Answer {
    call(
        api,
        "POST",
        path,
        Some(serde_json::to_vec(obj).unwrap()),
        "application/json",
    )
    .await
}

/// PUTs a JSON object.
pub async fn put(api: &ApiServer, path: &str, obj: &Value) -> Answer {
    call(
        api,
        "PUT",
        path,
        Some(serde_json::to_vec(obj).unwrap()),
        "application/json",
    )
    .await
}

/// GETs a path.
pub async fn get(api: &ApiServer, path: &str) -> Answer {
    call(api, "GET", path, None, "application/json").await
}
