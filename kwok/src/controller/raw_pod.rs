//! A pod as kwok reads it off the watch: the JSON the API server sent, as a
//! `Value`. Stages select on and render from JSON, so the pod is decoded
//! once into what they read, not into a typed `Pod` first and then
//! serialized back (both were a good part of kwok's work in a burst of
//! pods).

use std::borrow::Cow;

use apimachinery::json::Lookup;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

/// A pod's JSON, with `kind` and `apiVersion` set; `meta` holds the name,
/// namespace, uid and resourceVersion (what a watcher reads of it).
#[derive(Debug, Clone)]
pub(super) struct RawPod {
    pub(super) value: Value,
    meta: ObjectMeta,
}

impl RawPod {
    /// `namespace/name`.
    pub(super) fn key(&self) -> String {
        format!(
            "{}/{}",
            self.meta.namespace.as_deref().unwrap_or(""),
            self.meta.name.as_deref().unwrap_or("")
        )
    }

    /// The node it is bound to (empty when none).
    pub(super) fn node_name(&self) -> &str {
        self.value
            .lookup("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// `status.podIP`.
    pub(super) fn pod_ip(&self) -> Option<&str> {
        self.value.lookup("/status/podIP").and_then(Value::as_str)
    }
}

impl<'de> Deserialize<'de> for RawPod {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut value = Value::deserialize(d)?;
        let field = |name: &str| {
            value
                .get("metadata")
                .and_then(|m| m.get(name))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let meta = ObjectMeta {
            name: field("name"),
            namespace: field("namespace"),
            uid: field("uid"),
            resource_version: field("resourceVersion"),
            ..ObjectMeta::default()
        };
        if let Some(m) = value.as_object_mut() {
            m.entry("kind").or_insert_with(|| json!("Pod"));
            m.entry("apiVersion").or_insert_with(|| json!("v1"));
        }
        Ok(Self { value, meta })
    }
}

impl Resource for RawPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        Pod::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        Pod::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        Pod::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        Pod::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_pod_reads_as_its_json_with_its_kind() {
        let raw: RawPod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"podIP": "10.0.0.9"}
        }))
        .unwrap();
        assert_eq!(raw.key(), "ns/p");
        assert_eq!(raw.node_name(), "n1");
        assert_eq!(raw.pod_ip(), Some("10.0.0.9"));
        assert_eq!(raw.meta().resource_version.as_deref(), Some("7"));
        assert_eq!(raw.value["kind"], "Pod");
        assert_eq!(raw.value["apiVersion"], "v1");
        assert_eq!(raw.value["spec"]["containers"][0]["image"], "i");
    }
}
