//! CRDs as apiextensions-apiserver serves them.

use serde_json::{Value, json};

use super::{CRDS, call, get, install, post, put, server};

const BUFFERS: &str = "/apis/autoscaling.x-k8s.io/v1beta1/namespaces/default/capacitybuffers";
const REQUESTS: &str = "/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests";
const QUOTAS: &str = "/apis/autoscaling.x-k8s.io/v1alpha1/capacityquotas";

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/crd-{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// A server with upstream CA 1.37's three CRDs installed.
async fn with_crds() -> apiserver::ApiServer {
    let api = server();
    for name in ["capacitybuffers", "provisioningrequests", "capacityquotas"] {
        install(&api, &fixture(name)).await;
    }
    api
}

fn buffer(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
           "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

fn request(name: &str, class: &str) -> Value {
    json!({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"provisioningClassName": class,
                    "podSets": [{"count": 2, "podTemplateRef": {"name": "tpl"}}]}})
}

fn causes(a: &super::Answer) -> Vec<(String, String, String)> {
    a.body["details"]["causes"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| {
                    let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
                    (s("reason"), s("field"), s("message"))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_wrong_type_is_422_with_kube_openapis_message() {
    // kube-openapi validate: "%s in body must be of type %s: %q", as a field.Invalid.
    let api = with_crds().await;
    let a = post(
        &api,
        BUFFERS,
        &buffer(
            "b",
            json!({"replicas": "abc", "podTemplateRef": {"name": "t"}}),
        ),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(a.body["reason"], "Invalid");
    assert_eq!(a.body["details"]["kind"], "CapacityBuffer");
    assert_eq!(a.body["details"]["group"], "autoscaling.x-k8s.io");
    assert!(
        a.message()
            .starts_with("CapacityBuffer.autoscaling.x-k8s.io \"b\" is invalid: "),
        "{}",
        a.message()
    );
    assert!(
        causes(&a)
            .iter()
            .any(|(reason, field, message)| reason == "FieldValueTypeInvalid"
                && field == "spec.replicas"
                && message.contains("spec.replicas in body must be of type integer: \"string\"")),
        "{:?}",
        causes(&a)
    );
}

#[tokio::test]
async fn unknown_fields_are_pruned() {
    // apiextensions-apiserver prunes what the structural schema does not specify.
    let api = with_crds().await;
    let a = post(
        &api,
        BUFFERS,
        &buffer(
            "b",
            json!({"replicas": 2, "podTemplateRef": {"name": "t"}, "surprise": true}),
        ),
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert!(a.body["spec"].get("surprise").is_none(), "{}", a.body);
    let stored = get(&api, &format!("{BUFFERS}/b")).await;
    assert!(stored.body["spec"].get("surprise").is_none());
}

#[tokio::test]
async fn strict_field_validation_refuses_unknown_fields() {
    // fieldValidation=Strict: 400 "strict decoding error: unknown field".
    let api = with_crds().await;
    let body = serde_json::to_vec(&buffer(
        "b",
        json!({"replicas": 2, "podTemplateRef": {"name": "t"}, "surprise": true}),
    ))
    .unwrap();
    let a = call(
        &api,
        "POST",
        &format!("{BUFFERS}?fieldValidation=Strict"),
        Some(body),
        "application/json",
    )
    .await;
    assert_eq!(a.code, 400, "{}", a.body);
    assert_eq!(
        a.message(),
        "strict decoding error: unknown field \"spec.surprise\""
    );
}

#[tokio::test]
async fn a_schema_default_is_set() {
    // Structural defaulting: spec.provisioningStrategy defaults to buffer.x-k8s.io/active-capacity.
    let api = with_crds().await;
    let a = post(
        &api,
        BUFFERS,
        &buffer("b", json!({"replicas": 1, "podTemplateRef": {"name": "t"}})),
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(
        a.body["spec"]["provisioningStrategy"],
        "buffer.x-k8s.io/active-capacity"
    );
}

#[tokio::test]
async fn a_cel_rule_refuses_both_refs() {
    // x-kubernetes-validations: a failed rule is field.Invalid at the rule's node with its message.
    let api = with_crds().await;
    let a = post(
        &api,
        BUFFERS,
        &buffer("b", json!({"replicas": 1, "podTemplateRef": {"name": "t"}, "scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "d"}})),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    let found = causes(&a);
    assert!(
        found.iter().any(|(reason, field, message)| reason == "FieldValueInvalid"
            && field == "spec"
            && message.starts_with("Invalid value: \"object\": You must define either PodTemplateRef or ScalableRef")),
        "{found:?}"
    );
}

#[tokio::test]
async fn a_second_cel_rule_needs_replicas_or_limits_with_a_template() {
    // '!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)'.
    let api = with_crds().await;
    let a = post(
        &api,
        BUFFERS,
        &buffer("b", json!({"podTemplateRef": {"name": "t"}})),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert!(
        a.message()
            .contains("If X is set, replicas or limits must also be set"),
        "{}",
        a.message()
    );
    let ok = post(
        &api,
        BUFFERS,
        &buffer(
            "c",
            json!({"podTemplateRef": {"name": "t"}, "percentage": 10, "replicas": 1}),
        ),
    )
    .await;
    assert_eq!(ok.code, 201, "{}", ok.body);
}

#[tokio::test]
async fn a_transition_rule_runs_on_update_only() {
    // oldSelf rules ('self == oldSelf', "Value is immutable") do not run on create.
    let api = with_crds().await;
    let created = post(
        &api,
        REQUESTS,
        &request("r", "check-capacity.autoscaling.x-k8s.io"),
    )
    .await;
    assert_eq!(created.code, 201, "{}", created.body);
    let mut changed = created.body.clone();
    changed["spec"]["provisioningClassName"] =
        json!("best-effort-atomic-scale-up.autoscaling.x-k8s.io");
    let a = put(&api, &format!("{REQUESTS}/r"), &changed).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert!(
        causes(&a)
            .iter()
            .any(|(_, field, message)| field == "spec.provisioningClassName"
                && message.contains("Value is immutable")),
        "{:?}",
        causes(&a)
    );
    // An update that leaves the field alone passes.
    let mut labelled = created.body.clone();
    labelled["metadata"]["labels"] = json!({"team": "a"});
    assert_eq!(
        put(&api, &format!("{REQUESTS}/r"), &labelled).await.code,
        200
    );
}

#[tokio::test]
async fn a_merge_patch_is_validated_like_an_update() {
    // Patches are decoded, defaulted and validated as the resulting object.
    let api = with_crds().await;
    assert_eq!(
        post(
            &api,
            REQUESTS,
            &request("r", "check-capacity.autoscaling.x-k8s.io")
        )
        .await
        .code,
        201
    );
    let patch = serde_json::to_vec(
        &json!({"spec": {"podSets": [{"count": 3, "podTemplateRef": {"name": "other"}}]}}),
    )
    .unwrap();
    let a = call(
        &api,
        "PATCH",
        &format!("{REQUESTS}/r"),
        Some(patch),
        "application/merge-patch+json",
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert!(
        a.message().contains("Value is immutable"),
        "{}",
        a.message()
    );
}

#[tokio::test]
async fn a_required_field_is_required() {
    // kube-openapi required → field.Required ("Required value").
    let api = with_crds().await;
    let mut r = request("r", "x");
    r["spec"].as_object_mut().unwrap().remove("podSets");
    let a = post(&api, REQUESTS, &r).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert!(
        causes(&a)
            .iter()
            .any(|(reason, field, message)| reason == "FieldValueRequired"
                && field == "spec.podSets"
                && message == "Required value"),
        "{:?}",
        causes(&a)
    );
}

#[tokio::test]
async fn a_quota_cel_rule_with_the_quantity_library() {
    // The Kubernetes quantity library in a CRD rule (CapacityQuota's non-negative integers).
    let api = with_crds().await;
    let quota = |name: &str, cpu: Value| {
        json!({"apiVersion": "autoscaling.x-k8s.io/v1alpha1", "kind": "CapacityQuota",
               "metadata": {"name": name}, "spec": {"limits": {"resources": {"cpu": cpu}}}})
    };
    assert_eq!(
        post(&api, QUOTAS, &quota("ok", json!("32"))).await.code,
        201
    );
    let a = post(&api, QUOTAS, &quota("milli", json!("500m"))).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert!(
        a.message()
            .contains("All resource quantities must be non-negative integers."),
        "{}",
        a.message()
    );
    let a = post(&api, QUOTAS, &quota("negative", json!(-1))).await;
    assert_eq!(a.code, 422, "{}", a.body);
}

#[tokio::test]
async fn a_crd_without_a_structural_schema_is_refused() {
    // apiextensions ValidateStructural: "type: Required value: must not be empty for specified object fields".
    let api = server();
    let mut crd = fixture("capacitybuffers");
    let spec = &mut crd["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    spec.as_object_mut().unwrap().remove("type");
    let a = post(&api, CRDS, &crd).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert!(
        causes(&a).iter().any(|(_, field, message)| field
            == "spec.versions[1].schema.openAPIV3Schema.properties[spec].type"
            && message.contains("must not be empty for specified object fields")),
        "{:?}",
        causes(&a)
    );
}

#[tokio::test]
async fn a_crd_with_a_rule_that_does_not_compile_is_refused() {
    // CEL compile errors refuse the CRD at ...x-kubernetes-validations[i].rule.
    let api = server();
    let mut crd = fixture("capacitybuffers");
    crd["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"]
        [0]["rule"] = json!("self.replicas >");
    let a = post(&api, CRDS, &crd).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert!(
        causes(&a).iter().any(|(_, field, message)| field
            .ends_with("x-kubernetes-validations[0].rule")
            && message.contains("compilation failed")),
        "{:?}",
        causes(&a)
    );
}

#[tokio::test]
async fn a_crd_without_a_schema_is_refused() {
    // apiextensions/v1: "schemas are required".
    let api = server();
    let mut crd = fixture("capacityquotas");
    crd["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("schema");
    let a = post(&api, CRDS, &crd).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert!(
        a.message().contains("schemas are required"),
        "{}",
        a.message()
    );
}

#[tokio::test]
async fn the_status_subresource_validates_status_and_keeps_spec() {
    // status subresource: /status writes only status, validated against its schema;
    // main-resource writes keep the stored status.
    let api = with_crds().await;
    let created = post(
        &api,
        BUFFERS,
        &buffer("b", json!({"replicas": 1, "podTemplateRef": {"name": "t"}})),
    )
    .await;
    assert_eq!(created.code, 201);
    let mut with_status = created.body.clone();
    with_status["status"] = json!({"replicas": "many"});
    let a = put(&api, &format!("{BUFFERS}/b/status"), &with_status).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert!(
        causes(&a)
            .iter()
            .any(|(_, field, _)| field == "status.replicas"),
        "{:?}",
        causes(&a)
    );
    with_status["status"] = json!({"replicas": 3});
    with_status["spec"]["replicas"] = json!(9);
    let a = put(&api, &format!("{BUFFERS}/b/status"), &with_status).await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(a.body["status"]["replicas"], 3);
    assert_eq!(
        a.body["spec"]["replicas"], 1,
        "a status write leaves spec alone"
    );
}

#[tokio::test]
async fn an_object_is_served_in_every_served_version() {
    // Conversion strategy None: only apiVersion changes between served versions.
    let api = with_crds().await;
    assert_eq!(
        post(
            &api,
            BUFFERS,
            &buffer("b", json!({"replicas": 1, "podTemplateRef": {"name": "t"}}))
        )
        .await
        .code,
        201
    );
    let old = get(
        &api,
        "/apis/autoscaling.x-k8s.io/v1alpha1/namespaces/default/capacitybuffers/b",
    )
    .await;
    assert_eq!(old.code, 200, "{}", old.body);
    assert_eq!(old.body["apiVersion"], "autoscaling.x-k8s.io/v1alpha1");
    assert_eq!(old.body["spec"]["replicas"], 1);
}

#[tokio::test]
async fn a_valid_update_of_an_invalid_stored_field_is_ratcheted() {
    // CRDValidationRatcheting (GA 1.33): unchanged invalid values do not fail an update.
    let api = server();
    let mut crd = fixture("capacityquotas");
    install(&api, &crd).await;
    let quota = json!({"apiVersion": "autoscaling.x-k8s.io/v1alpha1", "kind": "CapacityQuota",
        "metadata": {"name": "q"}, "spec": {"limits": {"resources": {"cpu": "32", "memory": "64Gi"}}}});
    let created = post(&api, QUOTAS, &quota).await;
    assert_eq!(created.code, 201, "{}", created.body);
    // Tighten the schema: at most 1 resource. The stored quota now breaks it.
    crd = get(&api, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/capacityquotas.autoscaling.x-k8s.io").await.body;
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["limits"]
        ["properties"]["resources"]["maxProperties"] = json!(1);
    let a = put(&api, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/capacityquotas.autoscaling.x-k8s.io", &crd).await;
    assert_eq!(a.code, 200, "{}", a.body);
    let mut labelled = created.body.clone();
    labelled["metadata"]["labels"] = json!({"a": "b"});
    let a = put(&api, &format!("{QUOTAS}/q"), &labelled).await;
    assert_eq!(
        a.code, 200,
        "an unchanged spec is not checked again: {}",
        a.body
    );
    // A new object must meet the tightened schema.
    let mut second = quota.clone();
    second["metadata"]["name"] = json!("q2");
    let a = post(&api, QUOTAS, &second).await;
    assert_eq!(a.code, 422, "{}", a.body);
    // apiextensions turns maxProperties into field.TooMany.
    assert!(
        a.message()
            .contains("spec.limits.resources: Too many: 2: must have at most 1 item"),
        "{}",
        a.message()
    );
}
