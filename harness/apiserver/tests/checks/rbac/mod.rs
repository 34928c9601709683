//! ServiceAccount tokens and RBAC over TLS: a token from TokenRequest can do
//! what its Role and ClusterRole bindings allow, and nothing else; access
//! reviews and impersonation answered from the same RBAC ([`access_review`]).

mod access_review;

use apiserver::ApiServer;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Error};
use serde_json::{Value, json};
use simclock::Clock;

/// Creates `obj` (its resource is its kind, lower case, plural).
pub async fn create(client: &Client, obj: Value) {
    let api_version = obj["apiVersion"].as_str().unwrap().to_string();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    let kind = obj["kind"].as_str().unwrap();
    let plural = format!("{}s", kind.to_lowercase());
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural);
    let api: Api<DynamicObject> = match obj.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    api.create(
        &PostParams::default(),
        &serde_json::from_value(obj).unwrap(),
    )
    .await
    .unwrap();
}

/// A token for ServiceAccount `ns/sa` (TokenRequest).
pub async fn token(client: &Client, ns: &str, sa: &str) -> String {
    let req = http::Request::post(format!(
        "/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token"
    ))
    .header("content-type", "application/json")
    .body(
        serde_json::to_vec(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}))
            .unwrap(),
    )
    .unwrap();
    let tr: Value = client.request(req).await.unwrap();
    assert_eq!(tr["kind"], "TokenRequest");
    tr["status"]["token"].as_str().unwrap().to_string()
}

fn forbidden(e: Error) -> String {
    match e {
        Error::Api(s) if s.code == 403 => s.message,
        other => panic!("expected 403, got {other:?}"),
    }
}

#[tokio::test]
async fn a_service_account_token_does_what_its_bindings_allow_and_nothing_else() {
    let api = ApiServer::start(Clock::new()).unwrap();
    let ep = api.serve_tls("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let admin = ep.client().unwrap();
    create(&admin, json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ca", "namespace": "kube-system"}})).await;
    create(&admin, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "ca"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}]})).await;
    create(&admin, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "ca"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ca"},
        "subjects": [{"kind": "ServiceAccount", "name": "ca", "namespace": "kube-system"}]})).await;
    create(&admin, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "ca", "namespace": "kube-system"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["status"]}]})).await;
    create(&admin, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "ca", "namespace": "kube-system"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ca"},
        "subjects": [{"kind": "ServiceAccount", "name": "ca"}]})).await;
    for name in ["status", "other"] {
        create(&admin, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "kube-system"}})).await;
    }

    let sa = ep
        .client_with_token(&token(&admin, "kube-system", "ca").await)
        .unwrap();
    // Allowed: the ClusterRole everywhere, the Role's one name in its namespace.
    Api::<Node>::all(sa.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let cms = Api::<ConfigMap>::namespaced(sa.clone(), "kube-system");
    cms.get("status").await.unwrap();
    // Denied, with kube-apiserver's text.
    assert_eq!(
        forbidden(cms.get("other").await.unwrap_err()),
        "configmaps \"other\" is forbidden: User \"system:serviceaccount:kube-system:ca\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"kube-system\""
    );
    assert_eq!(
        forbidden(
            Api::<Pod>::all(sa.clone())
                .list(&ListParams::default())
                .await
                .unwrap_err()
        ),
        "pods is forbidden: User \"system:serviceaccount:kube-system:ca\" cannot list resource \"pods\" in API group \"\" at the cluster scope"
    );
    let node = serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap();
    forbidden(
        Api::<Node>::all(sa.clone())
            .create(&PostParams::default(), &node)
            .await
            .unwrap_err(),
    );
    // The Role binds in its namespace only.
    forbidden(
        Api::<ConfigMap>::namespaced(sa.clone(), "default")
            .get("status")
            .await
            .unwrap_err(),
    );
    // Discovery is open to any authenticated user.
    sa.apiserver_version().await.unwrap();

    // A token nobody issued is 401, and so is one whose ServiceAccount went.
    let stranger = ep.client_with_token("sa-not-issued").unwrap();
    match Api::<Node>::all(stranger)
        .list(&ListParams::default())
        .await
    {
        Err(Error::Api(s)) => assert_eq!(s.code, 401),
        other => panic!("expected 401, got {other:?}"),
    }
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(admin.clone(), "kube-system")
        .delete("ca", &Default::default())
        .await
        .unwrap();
    match Api::<Node>::all(sa).list(&ListParams::default()).await {
        Err(Error::Api(s)) => assert_eq!(s.code, 401),
        other => panic!("expected 401 after the ServiceAccount was deleted, got {other:?}"),
    }
}

#[tokio::test]
async fn a_token_request_for_a_missing_service_account_is_404() {
    let api = ApiServer::start(Clock::new()).unwrap();
    let ep = api.serve_tls("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let req = http::Request::post("/api/v1/namespaces/default/serviceaccounts/nobody/token")
        .header("content-type", "application/json")
        .body(br#"{"spec":{}}"#.to_vec())
        .unwrap();
    match ep.client().unwrap().request::<Value>(req).await {
        Err(Error::Api(s)) => assert_eq!(
            (s.code, s.message.as_str()),
            (404, "serviceaccounts \"nobody\" not found")
        ),
        other => panic!("expected 404, got {other:?}"),
    }
}
