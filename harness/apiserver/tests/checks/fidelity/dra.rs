//! `resource.k8s.io/v1`: the defaults and the validation kube-apiserver
//! applies to DeviceClasses, ResourceClaims (and their templates) and
//! ResourceSlices (pkg/apis/resource).

use serde_json::{Value, json};

use super::{call, post, put, server};

const CLAIMS: &str = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims";
const TEMPLATES: &str = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates";
const CLASSES: &str = "/apis/resource.k8s.io/v1/deviceclasses";
const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";

fn claim(requests: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": requests}}})
}

#[tokio::test]
async fn a_request_gets_exact_count_one_by_default() {
    let api = server();
    let a = post(
        &api,
        CLAIMS,
        &claim(json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}])),
    )
    .await;
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(
        a.body["spec"]["devices"]["requests"][0]["exactly"],
        json!({"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1})
    );
    let t = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
            {"name": "all", "deviceClassName": "gpu", "allocationMode": "All"}]}]}}}});
    let a = post(&api, TEMPLATES, &t).await;
    assert_eq!(a.code, 201, "{}", a.body);
    let alt = &a.body["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"][0];
    assert_eq!(alt["allocationMode"], "All");
    assert!(alt.get("count").is_none(), "All keeps no count: {alt}");
}

#[tokio::test]
async fn bad_requests_are_refused_with_kube_apiservers_field_errors() {
    let api = server();
    for (requests, message) in [
        (
            json!([{"name": "gpu"}]),
            "ResourceClaim.resource.k8s.io \"c\" is invalid: spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required",
        ),
        (
            json!([{"name": "gpu", "exactly": {}}]),
            "ResourceClaim.resource.k8s.io \"c\" is invalid: spec.devices.requests[0].exactly.deviceClassName: Required value",
        ),
        (
            json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "All", "count": 2}}]),
            "ResourceClaim.resource.k8s.io \"c\" is invalid: spec.devices.requests[0].exactly.count: Invalid value: 2: must not be specified when allocationMode is 'All'",
        ),
        (
            json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": -1}}]),
            "ResourceClaim.resource.k8s.io \"c\" is invalid: spec.devices.requests[0].exactly.count: Invalid value: -1: must be greater than zero",
        ),
        (
            json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "Some"}}]),
            "ResourceClaim.resource.k8s.io \"c\" is invalid: spec.devices.requests[0].exactly.allocationMode: Unsupported value: \"Some\": supported values: \"All\", \"ExactCount\"",
        ),
        (
            json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu"}},
                   {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]),
            "ResourceClaim.resource.k8s.io \"c\" is invalid: spec.devices.requests[1]: Duplicate value: \"gpu\"",
        ),
    ] {
        let a = post(&api, CLAIMS, &claim(requests)).await;
        assert_eq!(a.code, 422, "{}", a.body);
        assert_eq!(a.message(), message);
    }
}

#[tokio::test]
async fn a_selector_that_does_not_compile_is_refused() {
    let api = server();
    let bad = claim(json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu",
        "selectors": [{"cel": {"expression": "gpu.model == 'a100'"}}]}}]));
    let a = post(&api, CLAIMS, &bad).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.message(),
        "ResourceClaim.resource.k8s.io \"c\" is invalid: spec.devices.requests[0].exactly.selectors[0].cel.expression: \
         Invalid value: \"gpu.model == 'a100'\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'gpu' (in container '')\n \
         | gpu.model == 'a100'\n | ^"
    );
    let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver =="}}]}});
    let a = post(&api, CLASSES, &class).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert!(
        a.message().contains("spec.selectors[0].cel.expression: Invalid value: \"device.driver ==\": compilation failed: ERROR: <input>:1:"),
        "{}",
        a.message()
    );
    let ok = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}});
    assert_eq!(post(&api, CLASSES, &ok).await.code, 201);
}

#[tokio::test]
async fn a_claims_spec_is_immutable_and_its_reservations_need_an_allocation() {
    let api = server();
    let c = claim(json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]));
    let a = post(&api, CLAIMS, &c).await;
    assert_eq!(a.code, 201, "{}", a.body);
    let mut changed = a.body.clone();
    changed["spec"]["devices"]["requests"][0]["exactly"]["count"] = json!(2);
    let b = put(&api, &format!("{CLAIMS}/c"), &changed).await;
    assert_eq!(b.code, 422, "{}", b.body);
    assert!(
        b.message().contains("spec: Invalid value: "),
        "{}",
        b.message()
    );
    assert!(
        b.message().ends_with("field is immutable"),
        "{}",
        b.message()
    );
    let mut status = a.body.clone();
    status["status"] = json!({"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]});
    let s = call(
        &api,
        "PUT",
        &format!("{CLAIMS}/c/status"),
        Some(serde_json::to_vec(&status).unwrap()),
        "application/json",
    )
    .await;
    assert_eq!(s.code, 422, "{}", s.body);
    assert_eq!(
        s.message(),
        "ResourceClaim.resource.k8s.io \"c\" is invalid: status.reservedFor: Forbidden: may not be specified when `allocated` is not set"
    );
}

#[tokio::test]
async fn a_slice_names_one_node_selection_and_a_pool_of_at_least_one_slice() {
    let api = server();
    let slice = |spec: Value| {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "s"}, "spec": spec})
    };
    let a = post(
        &api,
        SLICES,
        &slice(json!({"driver": "gpu.example.com", "pool": {"name": "n1", "generation": 0, "resourceSliceCount": 0}})),
    )
    .await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.message(),
        "ResourceSlice.resource.k8s.io \"s\" is invalid: [spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero, \
         spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required]"
    );
    let both = slice(
        json!({"driver": "gpu.example.com", "nodeName": "n1", "allNodes": true,
        "pool": {"name": "n1", "generation": 0, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0"}, {"name": "gpu-0"}]}),
    );
    let a = post(&api, SLICES, &both).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert!(
        a.message()
            .contains("spec: Invalid value: \"{`nodeName`, `allNodes`}\": exactly one of"),
        "{}",
        a.message()
    );
    assert!(
        a.message()
            .contains("spec.devices[1]: Duplicate value: \"gpu-0\""),
        "{}",
        a.message()
    );
    let good = slice(json!({"driver": "gpu.example.com", "nodeName": "n1",
        "pool": {"name": "n1", "generation": 0, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}}}]}));
    assert_eq!(post(&api, SLICES, &good).await.code, 201);
}
