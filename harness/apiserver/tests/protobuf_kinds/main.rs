//! Protobuf request bodies, kind by kind: for every (group, version, kind)
//! that kube-apiserver 1.30–1.35 accepts from a client writing a built-in
//! kind, the body is encoded here as client-go encodes it (the `k8s\0`
//! envelope around a `runtime.Unknown`, the object's message in `raw`) with
//! the independent k8s-pb/prost bindings, and must decode to the JSON object
//! the same client would have sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use apiserver::protobuf;
use k8s_pb::api as pb;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{Value, json};

/// One row of the table.
struct Row {
    api_version: &'static str,
    kind: &'static str,
    body: Vec<u8>,
    want: Value,
}

fn row(api_version: &'static str, kind: &'static str, msg: impl Message, want: Value) -> Row {
    Row {
        api_version,
        kind,
        body: envelope(api_version, kind, &msg.encode_to_vec()),
        want,
    }
}

/// The body client-go's protobuf serializer writes for an object.
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw.to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [b"k8s\0".to_vec(), unknown.encode_to_vec()].concat()
}

fn s(v: &str) -> Option<String> {
    Some(v.into())
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn meta(name: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: s(name),
        ..Default::default()
    })
}

fn meta_ns(name: &str, labels: &[(&str, &str)]) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: s(name),
        namespace: s("default"),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    })
}

fn quantity(v: &str) -> Quantity {
    Quantity { string: s(v) }
}

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), quantity(v)))
        .collect()
}

fn int_or_string_int(v: i32) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(0),
        int_val: Some(v),
        str_val: None,
    })
}

fn int_or_string_str(v: &str) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(1),
        int_val: None,
        str_val: s(v),
    })
}

fn selector(key: &str, value: &str) -> Option<meta::LabelSelector> {
    Some(meta::LabelSelector {
        match_labels: [(key.to_string(), value.to_string())].into(),
        match_expressions: vec![],
    })
}

fn time(seconds: i64) -> Option<meta::Time> {
    Some(meta::Time {
        seconds: Some(seconds),
        nanos: Some(0),
    })
}

fn micro_time(seconds: i64, nanos: i32) -> Option<meta::MicroTime> {
    Some(meta::MicroTime {
        seconds: Some(seconds),
        nanos: Some(nanos),
    })
}

fn delete_options() -> meta::DeleteOptions {
    meta::DeleteOptions {
        grace_period_seconds: Some(30),
        preconditions: Some(meta::Preconditions {
            uid: s("0b5c6b8e-1111-4b4b-9a9a-000000000001"),
            resource_version: None,
        }),
        propagation_policy: s("Background"),
        dry_run: strings(&["All"]),
        ..Default::default()
    }
}

fn delete_options_json(api_version: &str) -> Value {
    json!({
        "apiVersion": api_version, "kind": "DeleteOptions",
        "gracePeriodSeconds": 30,
        "preconditions": {"uid": "0b5c6b8e-1111-4b4b-9a9a-000000000001"},
        "propagationPolicy": "Background",
        "dryRun": ["All"],
    })
}

fn container(name: &str, cpu: &str) -> pb::core::v1::Container {
    pb::core::v1::Container {
        name: s(name),
        image: s("registry.k8s.io/pause:3.9"),
        resources: Some(pb::core::v1::ResourceRequirements {
            requests: quantities(&[("cpu", cpu)]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn container_json(name: &str, cpu: &str) -> Value {
    json!({"name": name, "image": "registry.k8s.io/pause:3.9", "resources": {"requests": {"cpu": cpu}}})
}

fn pod_template(app: &str) -> Option<pb::core::v1::PodTemplateSpec> {
    Some(pb::core::v1::PodTemplateSpec {
        metadata: Some(meta::ObjectMeta {
            labels: [("app".to_string(), app.to_string())].into(),
            ..Default::default()
        }),
        spec: Some(pb::core::v1::PodSpec {
            containers: vec![container("c", "100m")],
            ..Default::default()
        }),
    })
}

fn pod_template_json(app: &str) -> Value {
    json!({"metadata": {"labels": {"app": app}}, "spec": {"containers": [container_json("c", "100m")]}})
}

fn object_reference(kind: &str, name: &str) -> Option<pb::core::v1::ObjectReference> {
    Some(pb::core::v1::ObjectReference {
        kind: s(kind),
        namespace: s("default"),
        name: s(name),
        api_version: s("v1"),
        ..Default::default()
    })
}

mod kinds_apps;
mod kinds_cluster;
mod kinds_core;

use kinds_apps::{policy_rows, workload_rows};
use kinds_cluster::{cluster_rows, delete_options_rows, extension_rows};
use kinds_core::core_rows;

#[test]
fn every_built_in_kind_a_client_writes_decodes_from_protobuf() {
    let rows: Vec<Row> = [
        core_rows(),
        workload_rows(),
        policy_rows(),
        cluster_rows(),
        extension_rows(),
        delete_options_rows(),
    ]
    .into_iter()
    .flatten()
    .collect();
    assert!(rows.len() >= 70, "{} rows", rows.len());
    let mut failures = Vec::new();
    for r in &rows {
        match protobuf::decode(&r.body) {
            Ok(got) if got == r.want => {}
            Ok(got) => failures.push(format!(
                "{} {}:\n  got  {got}\n  want {}",
                r.api_version, r.kind, r.want
            )),
            Err(e) => failures.push(format!("{} {}: {}", r.api_version, r.kind, e.message)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

#[test]
fn a_kind_without_protobuf_is_unsupported_media_type() {
    let body = envelope("cluster.x-k8s.io/v1beta1", "MachineDeployment", b"");
    let e = protobuf::decode(&body).unwrap_err();
    assert_eq!(e.code, 415);
    assert!(
        e.message
            .contains("not supported for cluster.x-k8s.io/v1beta1, Kind=MachineDeployment"),
        "{}",
        e.message
    );
}
