//! Access reviews, impersonation and whoami over TLS, answered from the RBAC
//! the server enforces, as kube-apiserver answers them
//! (`pkg/registry/authorization/*`, `pkg/apis/authorization/validation`,
//! k8s.io/apiserver's impersonation filter, `selfsubjectreview`).

use super::{create, token};
use apiserver::{ApiServer, TlsEndpoint};
use kube::{Client, Error};
use serde_json::{Value, json};
use simclock::Clock;

const SSAR: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
const SAR: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
const SSRR: &str = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
const WHOAMI: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
const CA_USER: &str = "system:serviceaccount:kube-system:cluster-autoscaler";

/// A request with a JSON body (or none) and extra headers.
async fn call(
    client: &Client,
    method: &str,
    path: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> Result<Value, Error> {
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = body
        .map(|b| serde_json::to_vec(&b).unwrap())
        .unwrap_or_default();
    client.request::<Value>(req.body(body).unwrap()).await
}

async fn post(client: &Client, path: &str, body: Value) -> Result<Value, Error> {
    call(client, "POST", path, Some(body), &[]).await
}

fn status(e: Error) -> (u16, String) {
    match e {
        Error::Api(s) => (s.code, s.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn ssar(verb: &str, resource: &str, ns: &str) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": ns}}})
}

/// A server over TLS with the cluster-autoscaler's ServiceAccount, its
/// ClusterRole (the upstream chart's shape, trimmed) and its Role on the
/// status ConfigMap, both bound.
async fn cluster() -> (ApiServer, TlsEndpoint, Client) {
    let api = ApiServer::start(Clock::new()).unwrap();
    let ep = api.serve_tls("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let admin = ep.client().unwrap();
    let rbac = "rbac.authorization.k8s.io/v1";
    create(&admin, json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "cluster-autoscaler", "namespace": "kube-system"}})).await;
    create(&admin, json!({"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": "cluster-autoscaler"}, "rules": [
        {"apiGroups": [""], "resources": ["events", "endpoints"], "verbs": ["create", "patch"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["watch", "list", "get", "update"]},
        {"apiGroups": [""], "resources": ["pods", "services", "namespaces"], "verbs": ["watch", "list", "get"]},
    ]})).await;
    create(&admin, json!({"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": "cluster-autoscaler"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-autoscaler"},
        "subjects": [{"kind": "ServiceAccount", "name": "cluster-autoscaler", "namespace": "kube-system"}]})).await;
    create(&admin, json!({"apiVersion": rbac, "kind": "Role", "metadata": {"name": "cluster-autoscaler", "namespace": "kube-system"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "update"], "resourceNames": ["cluster-autoscaler-status"]},
    ]})).await;
    create(&admin, json!({"apiVersion": rbac, "kind": "RoleBinding", "metadata": {"name": "cluster-autoscaler", "namespace": "kube-system"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cluster-autoscaler"},
        "subjects": [{"kind": "ServiceAccount", "name": "cluster-autoscaler"}]})).await;
    (api, ep, admin)
}

// Upstream: the privileged-group authorizer allows system:masters everything, with no reason.
#[tokio::test]
async fn ssar_by_the_administrator_is_allowed_without_a_reason() {
    let (_api, _ep, admin) = cluster().await;
    let r = post(&admin, SSAR, ssar("delete", "secrets", "kube-system"))
        .await
        .unwrap();
    assert_eq!(r["kind"], "SelfSubjectAccessReview");
    assert_eq!(r["status"], json!({"allowed": true}));
    assert_eq!(
        r["spec"]["resourceAttributes"]["verb"], "delete",
        "the request is echoed"
    );
}

// Upstream: RBAC's allow reason names the binding, role and subject; no rule is no opinion.
#[tokio::test]
async fn ssar_by_a_service_account_token_answers_from_its_bindings() {
    let (_api, ep, admin) = cluster().await;
    let sa = ep
        .client_with_token(&token(&admin, "kube-system", "cluster-autoscaler").await)
        .unwrap();
    let r = post(&sa, SSAR, ssar("list", "nodes", "")).await.unwrap();
    assert_eq!(
        r["status"],
        json!({"allowed": true, "reason": "RBAC: allowed by ClusterRoleBinding \"cluster-autoscaler\" of ClusterRole \"cluster-autoscaler\" to ServiceAccount \"cluster-autoscaler/kube-system\""})
    );
    let r = post(&sa, SSAR, ssar("delete", "secrets", "kube-system"))
        .await
        .unwrap();
    assert_eq!(r["status"], json!({"allowed": false}), "RBAC never denies");
    let mut named = ssar("update", "configmaps", "kube-system");
    named["spec"]["resourceAttributes"]["name"] = json!("cluster-autoscaler-status");
    let r = post(&sa, SSAR, named).await.unwrap();
    assert_eq!(
        r["status"]["reason"],
        "RBAC: allowed by RoleBinding \"cluster-autoscaler/kube-system\" of Role \"cluster-autoscaler\" to ServiceAccount \"cluster-autoscaler/kube-system\""
    );
    // Non-resource URLs: the bootstrap system:discovery binding.
    let nr = |path: &str| json!({"spec": {"nonResourceAttributes": {"verb": "get", "path": path}}});
    let r = post(&sa, SSAR, nr("/apis/apps/v1")).await.unwrap();
    assert_eq!(
        r["status"]["reason"],
        "RBAC: allowed by ClusterRoleBinding \"system:discovery\" of ClusterRole \"system:discovery\" to Group \"system:authenticated\""
    );
    let r = post(&sa, SSAR, nr("/metrics")).await.unwrap();
    assert_eq!(r["status"]["allowed"], false);
}

// Upstream: SubjectAccessReview evaluates spec.user/groups as given (the cluster-autoscaler shape).
#[tokio::test]
async fn sar_answers_for_the_subject_named_in_the_spec() {
    let (_api, _ep, admin) = cluster().await;
    let sar = |verb: &str, resource: &str, ns: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
            "user": CA_USER, "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system"],
            "resourceAttributes": {"verb": verb, "resource": resource, "namespace": ns}}})
    };
    let yes = post(&admin, SAR, sar("list", "nodes", "")).await.unwrap();
    assert_eq!(yes["kind"], "SubjectAccessReview");
    assert_eq!(yes["status"]["allowed"], true);
    assert_eq!(yes["spec"]["user"], CA_USER);
    let no = post(&admin, SAR, sar("delete", "secrets", "kube-system"))
        .await
        .unwrap();
    assert_eq!(no["status"], json!({"allowed": false}));
    // A binding to a role that does not exist: RBAC reports it as the reason.
    create(&admin, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "dangling"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gone"},
        "subjects": [{"kind": "User", "name": CA_USER}]})).await;
    let no = post(&admin, SAR, sar("delete", "secrets", "kube-system"))
        .await
        .unwrap();
    assert_eq!(
        no["status"]["reason"],
        "RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found"
    );
}

// Upstream: creating a SubjectAccessReview needs RBAC's create on subjectaccessreviews.
#[tokio::test]
async fn sar_by_a_user_without_the_permission_is_forbidden() {
    let (_api, ep, admin) = cluster().await;
    let sa = ep
        .client_with_token(&token(&admin, "kube-system", "cluster-autoscaler").await)
        .unwrap();
    let body =
        json!({"spec": {"user": "bob", "resourceAttributes": {"verb": "get", "resource": "pods"}}});
    assert_eq!(
        status(post(&sa, SAR, body).await.unwrap_err()),
        (
            403,
            format!(
                "subjectaccessreviews.authorization.k8s.io is forbidden: User \"{CA_USER}\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope"
            )
        )
    );
}

// Upstream: pkg/apis/authorization/validation (ValidateSelfSubjectAccessReview, ValidateSubjectAccessReview).
#[tokio::test]
async fn invalid_review_specs_are_refused_with_upstreams_causes() {
    let (_api, _ep, admin) = cluster().await;
    let (code, message) = status(post(&admin, SSAR, json!({"spec": {}})).await.unwrap_err());
    assert_eq!(
        (code, message.as_str()),
        (
            422,
            "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"
        )
    );
    let both = json!({"spec": {"resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"verb": "get", "path": "/api"}}});
    assert_eq!(
        status(post(&admin, SSAR, both).await.unwrap_err()).1,
        "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:\"/api\", Verb:\"get\"}: cannot be specified in combination with resourceAttributes"
    );
    let nobody = json!({"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}});
    assert_eq!(
        status(post(&admin, SAR, nobody).await.unwrap_err()).1,
        "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified"
    );
    let named = json!({"metadata": {"name": "x"}, "spec": {"resourceAttributes": {"verb": "get"}}});
    let (code, message) = status(post(&admin, SSAR, named).await.unwrap_err());
    assert_eq!(code, 422);
    assert!(message.starts_with("SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: metadata: Invalid value: "), "{message}");
    assert!(message.ends_with(": must be empty"), "{message}");
    // Create only: other verbs are not served.
    assert_eq!(
        status(call(&admin, "GET", SSAR, None, &[]).await.unwrap_err()).0,
        405
    );
}

// Upstream: ValidateLocalSubjectAccessReview and the create handler's namespace check.
#[tokio::test]
async fn lsar_namespaces_must_agree() {
    let (_api, _ep, admin) = cluster().await;
    let lsar = |meta_ns: Option<&str>, attr_ns: &str| {
        let mut b = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
            "spec": {"user": CA_USER, "resourceAttributes": {"verb": "get", "resource": "configmaps", "name": "cluster-autoscaler-status", "namespace": attr_ns}}});
        if let Some(ns) = meta_ns {
            b["metadata"] = json!({"namespace": ns});
        }
        b
    };
    let path = "/apis/authorization.k8s.io/v1/namespaces/kube-system/localsubjectaccessreviews";
    let ok = post(&admin, path, lsar(None, "kube-system")).await.unwrap();
    assert_eq!(ok["metadata"]["namespace"], "kube-system");
    assert_eq!(ok["status"]["allowed"], true);
    assert_eq!(
        status(post(&admin, path, lsar(None, "default")).await.unwrap_err()),
        (422, "LocalSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes.namespace: Invalid value: \"default\": must match metadata.namespace".into())
    );
    assert_eq!(
        status(
            post(&admin, path, lsar(Some("default"), "default"))
                .await
                .unwrap_err()
        ),
        (
            400,
            "the namespace of the provided object does not match the namespace sent on the request"
                .into()
        )
    );
    let non_resource = json!({"spec": {"user": CA_USER, "nonResourceAttributes": {"verb": "get", "path": "/api"}}});
    assert_eq!(
        status(post(&admin, path, non_resource).await.unwrap_err()).1,
        "LocalSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:\"/api\", Verb:\"get\"}: disallowed on this kind of request"
    );
}

// Upstream: selfsubjectrulesreview lists RBAC's rules for the namespace (bootstrap roles included).
#[tokio::test]
async fn ssrr_lists_the_rules_held_in_the_namespace() {
    let (_api, ep, admin) = cluster().await;
    let sa = ep
        .client_with_token(&token(&admin, "kube-system", "cluster-autoscaler").await)
        .unwrap();
    let body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "kube-system"}});
    let r = post(&sa, SSRR, body).await.unwrap();
    assert_eq!(r["kind"], "SelfSubjectRulesReview");
    assert_eq!(r["status"]["incomplete"], false);
    let rules = r["status"]["resourceRules"].as_array().unwrap();
    assert!(rules.contains(&json!({"verbs": ["watch", "list", "get", "update"], "apiGroups": [""], "resources": ["nodes"]})));
    assert!(rules.contains(&json!({"verbs": ["get", "update"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cluster-autoscaler-status"]})));
    assert!(rules.contains(&json!({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]})));
    assert!(
        r["status"]["nonResourceRules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["nonResourceURLs"]
                .as_array()
                .unwrap()
                .contains(&json!("/apis/*")))
    );
    // In another namespace the Role does not apply.
    let other = post(&sa, SSRR, json!({"spec": {"namespace": "default"}}))
        .await
        .unwrap();
    assert!(
        !other["status"]["resourceRules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["resources"] == json!(["configmaps"]))
    );
    assert_eq!(
        status(post(&sa, SSRR, json!({"spec": {}})).await.unwrap_err()),
        (400, "no namespace on request".into())
    );
    // The administrator holds cluster-admin through system:masters.
    let all = post(&admin, SSRR, json!({"spec": {"namespace": "default"}}))
        .await
        .unwrap();
    assert!(
        all["status"]["resourceRules"]
            .as_array()
            .unwrap()
            .contains(&json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}))
    );
}

// Upstream: WithImpersonation — the request runs as the impersonated user, with a ServiceAccount's groups.
#[tokio::test]
async fn an_impersonated_request_gets_the_impersonated_users_rbac() {
    let (_api, _ep, admin) = cluster().await;
    let as_ca = [("Impersonate-User", CA_USER)];
    call(&admin, "GET", "/api/v1/nodes", None, &as_ca)
        .await
        .unwrap();
    assert_eq!(
        status(
            call(
                &admin,
                "GET",
                "/api/v1/namespaces/kube-system/secrets",
                None,
                &as_ca
            )
            .await
            .unwrap_err()
        ),
        (
            403,
            format!(
                "secrets is forbidden: User \"{CA_USER}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"kube-system\""
            )
        )
    );
    let r = call(
        &admin,
        "POST",
        SSAR,
        Some(ssar("delete", "secrets", "kube-system")),
        &as_ca,
    )
    .await
    .unwrap();
    assert_eq!(
        r["status"]["allowed"], false,
        "`kubectl auth can-i --as` answers for the impersonated user"
    );
    // Impersonating system:masters is impersonating the administrator's power.
    let masters = [
        ("Impersonate-User", "alice"),
        ("Impersonate-Group", "system:masters"),
    ];
    let r = call(
        &admin,
        "POST",
        SSAR,
        Some(ssar("delete", "secrets", "kube-system")),
        &masters,
    )
    .await
    .unwrap();
    assert_eq!(r["status"]["allowed"], true);
}

// Upstream: impersonation needs RBAC's impersonate verb; its 403 and the 500 for a group without a user.
#[tokio::test]
async fn impersonation_by_a_user_without_the_permission_is_refused() {
    let (_api, ep, admin) = cluster().await;
    let sa = ep
        .client_with_token(&token(&admin, "kube-system", "cluster-autoscaler").await)
        .unwrap();
    let as_alice = [("Impersonate-User", "alice")];
    assert_eq!(
        status(
            call(&sa, "GET", "/api/v1/nodes", None, &as_alice)
                .await
                .unwrap_err()
        ),
        (
            403,
            format!(
                "users \"alice\" is forbidden: User \"{CA_USER}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
            )
        )
    );
    assert_eq!(
        status(
            call(
                &sa,
                "GET",
                "/api/v1/nodes",
                None,
                &[("Impersonate-User", "system:serviceaccount:default:builder")]
            )
            .await
            .unwrap_err()
        )
        .1,
        format!(
            "serviceaccounts \"builder\" is forbidden: User \"{CA_USER}\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"default\""
        )
    );
    // Granted impersonate on users named alice: the request runs as alice (who may not list nodes).
    create(&admin, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "impersonate-alice"},
        "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["alice"]}]})).await;
    create(&admin, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "impersonate-alice"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "impersonate-alice"},
        "subjects": [{"kind": "ServiceAccount", "name": "cluster-autoscaler", "namespace": "kube-system"}]})).await;
    assert_eq!(
        status(
            call(&sa, "GET", "/api/v1/nodes", None, &as_alice)
                .await
                .unwrap_err()
        )
        .1,
        "nodes is forbidden: User \"alice\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
    );
    let (code, message) = status(
        call(
            &admin,
            "GET",
            "/api/v1/nodes",
            None,
            &[("Impersonate-Group", "g")],
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 500);
    assert!(
        message.ends_with("requested [{Group  g    }] without impersonating a user"),
        "{message}"
    );
}

// Upstream: selfsubjectreview (kubectl auth whoami) returns the request's user.
#[tokio::test]
async fn whoami_names_the_requester() {
    let (_api, ep, admin) = cluster().await;
    let me = post(
        &admin,
        WHOAMI,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
    )
    .await
    .unwrap();
    assert_eq!(me["kind"], "SelfSubjectReview");
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        json!(["system:masters", "system:authenticated"])
    );
    let sa = ep
        .client_with_token(&token(&admin, "kube-system", "cluster-autoscaler").await)
        .unwrap();
    let me = post(&sa, WHOAMI, json!({})).await.unwrap();
    assert_eq!(me["status"]["userInfo"]["username"], CA_USER);
    assert!(
        me["status"]["userInfo"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );
    let as_bob = [
        ("Impersonate-User", "bob"),
        ("Impersonate-Group", "devs"),
        ("Impersonate-Extra-Scopes", "view"),
    ];
    let me = call(&admin, "POST", WHOAMI, Some(json!({})), &as_bob)
        .await
        .unwrap();
    assert_eq!(
        me["status"]["userInfo"],
        json!({"username": "bob", "groups": ["devs", "system:authenticated"], "extra": {"scopes": ["view"]}})
    );
}

// Upstream: discovery advertises authorization.k8s.io/v1 and authentication.k8s.io/v1 create-only resources.
#[tokio::test]
async fn discovery_lists_the_review_resources() {
    let (_api, _ep, admin) = cluster().await;
    let groups = call(&admin, "GET", "/apis", None, &[]).await.unwrap();
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert!(
        names.contains(&"authorization.k8s.io") && names.contains(&"authentication.k8s.io"),
        "{names:?}"
    );
    let list = call(&admin, "GET", "/apis/authorization.k8s.io/v1", None, &[])
        .await
        .unwrap();
    let resources = list["resources"].as_array().unwrap();
    let lsar = resources
        .iter()
        .find(|r| r["name"] == "localsubjectaccessreviews")
        .unwrap();
    assert_eq!(
        (lsar["namespaced"].clone(), lsar["verbs"].clone()),
        (json!(true), json!(["create"]))
    );
    let ssar = resources
        .iter()
        .find(|r| r["name"] == "selfsubjectaccessreviews")
        .unwrap();
    assert_eq!(
        (ssar["kind"].clone(), ssar["namespaced"].clone()),
        (json!("SelfSubjectAccessReview"), json!(false))
    );
}

fn kubectl(kubeconfig: &std::path::Path, args: &[String]) -> (bool, String, String) {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// A kubeconfig for the endpoint in a temporary directory, or `None` (with
/// the reason printed) when kubectl is not on PATH.
fn kubeconfig(ep: &TlsEndpoint) -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    let found = std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok();
    if !found {
        println!("skipped: kubectl is not on PATH");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kubeconfig");
    ep.write_kubeconfig(&config).unwrap();
    Some((dir, config))
}

async fn run_kubectl(config: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let config = config.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || kubectl(&config, &args))
        .await
        .unwrap()
}

// Upstream: `kubectl auth can-i ... --as=<ServiceAccount>` (SSAR through impersonation).
// kubectl sends the SSAR in protobuf with an empty metav1.Time, which
// protobuf.rs decodes as 1970-01-01 instead of null (Go's Time.Unmarshal of
// no bytes is the zero time): the metadata then is not empty.
#[tokio::test]
async fn kubectl_auth_can_i_as_the_cluster_autoscaler() {
    let (_api, ep, _admin) = cluster().await;
    let Some((_dir, config)) = kubeconfig(&ep) else {
        return;
    };
    let (ok, out, err) = run_kubectl(
        &config,
        &[
            "auth",
            "can-i",
            "list",
            "nodes",
            "--as=system:serviceaccount:kube-system:cluster-autoscaler",
        ],
    )
    .await;
    assert!(ok && out == "yes", "stdout {out:?}, stderr {err}");
    let (ok, out, err) = run_kubectl(
        &config,
        &[
            "auth",
            "can-i",
            "delete",
            "secrets",
            "-n",
            "kube-system",
            "--as=system:serviceaccount:kube-system:cluster-autoscaler",
        ],
    )
    .await;
    assert!(!ok && out == "no", "stdout {out:?}, stderr {err}");
}

// Upstream: `kubectl auth whoami --as=...` (SelfSubjectReview through impersonation),
// `kubectl create -f ssar.json --as=...` and `kubectl auth can-i --list --as=...` (SSRR).
#[tokio::test]
async fn kubectl_whoami_create_and_list_as_the_cluster_autoscaler() {
    let (_api, ep, _admin) = cluster().await;
    let Some((dir, config)) = kubeconfig(&ep) else {
        return;
    };
    let (ok, out, err) = run_kubectl(
        &config,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
            "--as=system:serviceaccount:kube-system:cluster-autoscaler",
        ],
    )
    .await;
    assert!(ok && out == CA_USER, "stdout {out:?}, stderr {err}");
    std::fs::write(
        dir.path().join("ssar.json"),
        ssar("list", "nodes", "").to_string(),
    )
    .unwrap();
    let file = dir.path().join("ssar.json").display().to_string();
    for args in [
        // JSON through the raw path, and through the dynamic client.
        ["create", "--raw", SSAR, "-f", &file],
        ["create", "-o", "json", "-f", &file],
    ] {
        let mut args = args.to_vec();
        args.push("--as=system:serviceaccount:kube-system:cluster-autoscaler");
        let (ok, out, err) = run_kubectl(&config, &args).await;
        assert!(ok, "{args:?}: stderr {err}");
        let answer: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(answer["status"]["allowed"], true, "{out}");
    }
    // `kubectl auth can-i --list`: a SelfSubjectRulesReview.
    let (ok, out, err) = run_kubectl(
        &config,
        &[
            "auth",
            "can-i",
            "--list",
            "-n",
            "kube-system",
            "--as=system:serviceaccount:kube-system:cluster-autoscaler",
        ],
    )
    .await;
    assert!(ok, "stderr {err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("nodes ") && l.contains("[watch list get update]")),
        "{out}"
    );
}
