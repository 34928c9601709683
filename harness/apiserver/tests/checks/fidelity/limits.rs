//! kube-apiserver's and etcd's size limits.

use serde_json::json;

use super::{install, open_crd, post, server};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn a_body_over_three_mebibytes_is_413() {
    // k8s.io/apiserver limitedReadBody: MaxRequestBodyBytes 3 MiB, "Request entity too large: limit is 3145728".
    let api = server();
    let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "huge"},
                     "data": {"a": "x".repeat(4 * 1024 * 1024)}});
    let a = post(&api, CONFIGMAPS, &big).await;
    assert_eq!(a.code, 413, "{}", a.body);
    assert_eq!(a.body["reason"], "RequestEntityTooLarge");
    assert_eq!(a.message(), "Request entity too large: limit is 3145728");
}

#[tokio::test]
async fn configmap_data_over_one_mebibyte_is_422() {
    // ValidateConfigMap: field.TooLong(field.NewPath(""), "", MaxSecretSize).
    let api = server();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
                    "data": {"a": "x".repeat(2 * 1024 * 1024)}});
    let a = post(&api, CONFIGMAPS, &cm).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.message(),
        "ConfigMap \"big\" is invalid: []: Too long: may not be more than 1048576 bytes"
    );
    assert_eq!(
        a.body["details"]["causes"][0]["reason"],
        "FieldValueTooLong"
    );
}

#[tokio::test]
async fn configmap_data_at_one_mebibyte_is_accepted() {
    // The limit is inclusive: totalSize > MaxSecretSize fails.
    let api = server();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "edge"},
                    "data": {"a": "x".repeat(1024 * 1024)}});
    assert_eq!(post(&api, CONFIGMAPS, &cm).await.code, 201);
}

#[tokio::test]
async fn secret_data_over_one_mebibyte_is_422_on_data() {
    // ValidateSecret: field.TooLong(dataPath, "", MaxSecretSize), counted decoded.
    use base64::Engine;
    let api = server();
    let data = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 1024 * 1024 + 1]);
    let s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "big"}, "data": {"k": data}});
    let a = post(&api, "/api/v1/namespaces/default/secrets", &s).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(a.body["details"]["causes"][0]["field"], "data");
}

#[tokio::test]
async fn annotations_over_256_kib_are_422() {
    // ValidateAnnotationsSize: TotalAnnotationSizeLimitB (256 KiB).
    let api = server();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "noted", "annotations": {"example.com/a": "x".repeat(300 * 1024)}}});
    let a = post(&api, CONFIGMAPS, &cm).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.body["details"]["causes"][0]["field"],
        "metadata.annotations"
    );
}

#[tokio::test]
async fn an_object_over_etcds_limit_is_refused_as_etcd_refuses_it() {
    // etcd --max-request-bytes 1.5 MiB: "etcdserver: request is too large", passed through as a 500
    // (kubernetes/kubernetes#112152). A custom resource is kept as JSON: 1.6 MiB of it, under the
    // 3 MiB body limit, is over etcd's.
    let api = server();
    let crd = open_crd("blobs", "Blob");
    install(&api, &crd).await;
    let blob = |name: &str, kib: usize| {
        json!({"apiVersion": "example.com/v1", "kind": "Blob", "metadata": {"name": name},
               "data": "x".repeat(kib * 1024)})
    };
    let path = "/apis/example.com/v1/namespaces/default/blobs";
    assert_eq!(post(&api, path, &blob("small", 1400)).await.code, 201);
    let a = post(&api, path, &blob("large", 1600)).await;
    assert_eq!(a.code, 500, "{}", a.body);
    assert_eq!(a.message(), "etcdserver: request is too large");
    assert!(a.body.get("reason").is_none(), "no reason: {}", a.body);
}

#[tokio::test]
async fn a_pod_past_a_pods_quota_is_403() {
    // plugin/pkg/admission/resourcequota: the quota evaluator counts pods
    // not Succeeded or Failed; "exceeded quota: <quota>, requested: ...".
    let api = server();
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota",
                       "metadata": {"name": "two-pods"}, "spec": {"hard": {"pods": "2"}}});
    assert_eq!(
        post(&api, "/api/v1/namespaces/default/resourcequotas", &quota)
            .await
            .code,
        201
    );
    let pod = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
               "spec": {"containers": [{"name": "c", "image": "i"}]}})
    };
    const PODS: &str = "/api/v1/namespaces/default/pods";
    assert_eq!(post(&api, PODS, &pod("a")).await.code, 201);
    assert_eq!(post(&api, PODS, &pod("b")).await.code, 201);
    let a = post(&api, PODS, &pod("c")).await;
    assert_eq!(a.code, 403, "{}", a.body);
    assert_eq!(
        a.message(),
        "pods \"c\" is forbidden: exceeded quota: two-pods, requested: pods=1, used: pods=2, limited: pods=2"
    );
    // Another namespace is not limited by it.
    let other = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}});
    assert_eq!(post(&api, "/api/v1/namespaces", &other).await.code, 201);
    assert_eq!(
        post(&api, "/api/v1/namespaces/other/pods", &pod("c"))
            .await
            .code,
        201
    );
}

#[tokio::test]
async fn a_csinode_driver_count_is_an_integer_and_node_quantities_stay_strings() {
    // storage/v1 CSINodeDriver.allocatable.count is an int32, not a
    // quantity: kube-apiserver keeps it a number (a Node's allocatable
    // quantities given as numbers become strings).
    let api = server();
    let csi = json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {"name": "n1"},
        "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "n1",
            "allocatable": {"count": 25}}]}});
    let a = post(&api, "/apis/storage.k8s.io/v1/csinodes", &csi).await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(
        a.body["spec"]["drivers"][0]["allocatable"]["count"],
        json!(25)
    );
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": 4}}});
    let a = post(&api, "/api/v1/nodes", &node).await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(a.body["status"]["allocatable"]["cpu"], json!("4"));
}
