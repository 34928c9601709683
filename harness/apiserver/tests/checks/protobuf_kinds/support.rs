//! The table's row type and the functions that build protobuf messages and
//! their JSON twins.

use std::collections::BTreeMap;

use k8s_pb::api as pb;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{Value, json};

/// One row of the table.
pub(crate) struct Row {
    pub(crate) api_version: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) body: Vec<u8>,
    pub(crate) want: Value,
}

pub(crate) fn row(
    api_version: &'static str,
    kind: &'static str,
    msg: impl Message,
    want: Value,
) -> Row {
    Row {
        api_version,
        kind,
        body: envelope(api_version, kind, &msg.encode_to_vec()),
        want,
    }
}

/// The body client-go's protobuf serializer writes for an object.
pub(crate) fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
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

pub(crate) fn s(v: &str) -> Option<String> {
    Some(v.into())
}

pub(crate) fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

pub(crate) fn meta(name: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: s(name),
        ..Default::default()
    })
}

pub(crate) fn meta_ns(name: &str, labels: &[(&str, &str)]) -> Option<meta::ObjectMeta> {
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

pub(crate) fn quantity(v: &str) -> Quantity {
    Quantity { string: s(v) }
}

pub(crate) fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), quantity(v)))
        .collect()
}

pub(crate) fn int_or_string_int(v: i32) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(0),
        int_val: Some(v),
        str_val: None,
    })
}

pub(crate) fn int_or_string_str(v: &str) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(1),
        int_val: None,
        str_val: s(v),
    })
}

pub(crate) fn selector(key: &str, value: &str) -> Option<meta::LabelSelector> {
    Some(meta::LabelSelector {
        match_labels: [(key.to_string(), value.to_string())].into(),
        match_expressions: vec![],
    })
}

pub(crate) fn time(seconds: i64) -> Option<meta::Time> {
    Some(meta::Time {
        seconds: Some(seconds),
        nanos: Some(0),
    })
}

pub(crate) fn micro_time(seconds: i64, nanos: i32) -> Option<meta::MicroTime> {
    Some(meta::MicroTime {
        seconds: Some(seconds),
        nanos: Some(nanos),
    })
}

pub(crate) fn delete_options() -> meta::DeleteOptions {
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

pub(crate) fn delete_options_json(api_version: &str) -> Value {
    json!({
        "apiVersion": api_version, "kind": "DeleteOptions",
        "gracePeriodSeconds": 30,
        "preconditions": {"uid": "0b5c6b8e-1111-4b4b-9a9a-000000000001"},
        "propagationPolicy": "Background",
        "dryRun": ["All"],
    })
}

pub(crate) fn container(name: &str, cpu: &str) -> pb::core::v1::Container {
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

pub(crate) fn container_json(name: &str, cpu: &str) -> Value {
    json!({"name": name, "image": "registry.k8s.io/pause:3.9", "resources": {"requests": {"cpu": cpu}}})
}

pub(crate) fn pod_template(app: &str) -> Option<pb::core::v1::PodTemplateSpec> {
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

pub(crate) fn pod_template_json(app: &str) -> Value {
    json!({"metadata": {"labels": {"app": app}}, "spec": {"containers": [container_json("c", "100m")]}})
}

pub(crate) fn object_reference(kind: &str, name: &str) -> Option<pb::core::v1::ObjectReference> {
    Some(pb::core::v1::ObjectReference {
        kind: s(kind),
        namespace: s("default"),
        name: s(name),
        api_version: s("v1"),
        ..Default::default()
    })
}
