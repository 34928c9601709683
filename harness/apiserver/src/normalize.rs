//! Built-in objects pass through their typed k8s-openapi form on every
//! write, as they pass through Go structs in the real API server: a field of
//! the wrong type is rejected, and fields the type does not declare are
//! dropped, or rejected under `fieldValidation=Strict`.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use k8s_openapi::api::{
    apps, batch, coordination, core, events, policy, rbac, scheduling, storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// What to do with fields the type does not declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them (the real server adds a warning header).
    #[default]
    Warn,
    /// Reject the request.
    Strict,
}

impl FieldValidation {
    /// Parses the `fieldValidation` query parameter.
    pub fn parse(s: Option<&str>) -> Result<Self, String> {
        match s {
            None | Some("") => Ok(Self::default()),
            Some("Ignore") => Ok(Self::Ignore),
            Some("Warn") => Ok(Self::Warn),
            Some("Strict") => Ok(Self::Strict),
            Some(other) => Err(format!(
                "fieldValidation must be one of Ignore, Warn or Strict, not {other:?}"
            )),
        }
    }
}

/// Why normalisation failed.
#[derive(Debug, Clone, PartialEq)]
pub enum NormalizeError {
    /// The object does not fit the type (422 Invalid).
    Invalid(String),
    /// Unknown fields under strict validation (400 BadRequest).
    UnknownFields(Vec<String>),
}

fn roundtrip<T: DeserializeOwned + Serialize>(
    v: Value,
    mode: FieldValidation,
) -> Result<Value, NormalizeError> {
    let original = (mode == FieldValidation::Strict).then(|| v.clone());
    let typed: T = serde_json::from_value(v).map_err(|e| NormalizeError::Invalid(e.to_string()))?;
    let out = serde_json::to_value(&typed).map_err(|e| NormalizeError::Invalid(e.to_string()))?;
    if let Some(original) = original {
        let mut unknown = Vec::new();
        dropped_fields(&original, &out, "", &mut unknown);
        if !unknown.is_empty() {
            return Err(NormalizeError::UnknownFields(unknown));
        }
    }
    Ok(out)
}

/// Paths present (and non-empty) in `before` but missing in `after`.
fn dropped_fields(before: &Value, after: &Value, path: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (k, bv) in b {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match a.get(k) {
                    Some(av) => dropped_fields(bv, av, &p, out),
                    None if is_empty(bv) => {}
                    None => out.push(p),
                }
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            for (i, (bv, av)) in b.iter().zip(a).enumerate() {
                dropped_fields(bv, av, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Normalises a built-in object of `group`/`kind`; other kinds pass unchanged.
pub fn normalize(
    group: &str,
    kind: &str,
    v: Value,
    mode: FieldValidation,
) -> Result<Value, NormalizeError> {
    use FieldValidation as M;
    let m: M = mode;
    match (group, kind) {
        ("", "Namespace") => roundtrip::<core::v1::Namespace>(v, m),
        ("", "Node") => roundtrip::<core::v1::Node>(v, m),
        ("", "Pod") => roundtrip::<core::v1::Pod>(v, m),
        ("", "Service") => roundtrip::<core::v1::Service>(v, m),
        ("", "Endpoints") => roundtrip::<core::v1::Endpoints>(v, m),
        ("", "ConfigMap") => roundtrip::<core::v1::ConfigMap>(v, m),
        ("", "Secret") => roundtrip::<core::v1::Secret>(v, m),
        ("", "Event") => roundtrip::<core::v1::Event>(v, m),
        ("", "ServiceAccount") => roundtrip::<core::v1::ServiceAccount>(v, m),
        ("", "PersistentVolume") => roundtrip::<core::v1::PersistentVolume>(v, m),
        ("", "PersistentVolumeClaim") => roundtrip::<core::v1::PersistentVolumeClaim>(v, m),
        ("", "ReplicationController") => roundtrip::<core::v1::ReplicationController>(v, m),
        ("", "PodTemplate") => roundtrip::<core::v1::PodTemplate>(v, m),
        ("apps", "Deployment") => roundtrip::<apps::v1::Deployment>(v, m),
        ("apps", "ReplicaSet") => roundtrip::<apps::v1::ReplicaSet>(v, m),
        ("apps", "StatefulSet") => roundtrip::<apps::v1::StatefulSet>(v, m),
        ("apps", "DaemonSet") => roundtrip::<apps::v1::DaemonSet>(v, m),
        ("apps", "ControllerRevision") => roundtrip::<apps::v1::ControllerRevision>(v, m),
        ("batch", "Job") => roundtrip::<batch::v1::Job>(v, m),
        ("policy", "PodDisruptionBudget") => roundtrip::<policy::v1::PodDisruptionBudget>(v, m),
        ("coordination.k8s.io", "Lease") => roundtrip::<coordination::v1::Lease>(v, m),
        ("rbac.authorization.k8s.io", "Role") => roundtrip::<rbac::v1::Role>(v, m),
        ("rbac.authorization.k8s.io", "RoleBinding") => roundtrip::<rbac::v1::RoleBinding>(v, m),
        ("rbac.authorization.k8s.io", "ClusterRole") => roundtrip::<rbac::v1::ClusterRole>(v, m),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            roundtrip::<rbac::v1::ClusterRoleBinding>(v, m)
        }
        ("events.k8s.io", "Event") => roundtrip::<events::v1::Event>(v, m),
        ("scheduling.k8s.io", "PriorityClass") => roundtrip::<scheduling::v1::PriorityClass>(v, m),
        ("storage.k8s.io", "StorageClass") => roundtrip::<storage::v1::StorageClass>(v, m),
        ("storage.k8s.io", "CSINode") => roundtrip::<storage::v1::CSINode>(v, m),
        ("storage.k8s.io", "CSIDriver") => roundtrip::<storage::v1::CSIDriver>(v, m),
        ("storage.k8s.io", "VolumeAttachment") => roundtrip::<storage::v1::VolumeAttachment>(v, m),
        ("storage.k8s.io", "CSIStorageCapacity") => {
            roundtrip::<storage::v1::CSIStorageCapacity>(v, m)
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            roundtrip::<CustomResourceDefinition>(v, m)
        }
        _ => Ok(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn drops_or_rejects_unknown_fields() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}, "bogus": 1});
        let out = normalize("", "ConfigMap", cm.clone(), FieldValidation::Warn).unwrap();
        assert!(out.get("bogus").is_none());
        assert_eq!(out["data"]["k"], "v");
        assert_eq!(
            normalize("", "ConfigMap", cm, FieldValidation::Strict),
            Err(NormalizeError::UnknownFields(vec!["bogus".into()]))
        );
    }

    #[test]
    fn rejects_wrong_types() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": "nope"}});
        assert!(matches!(
            normalize("", "Pod", pod, FieldValidation::Warn),
            Err(NormalizeError::Invalid(_))
        ));
    }

    #[test]
    fn custom_kinds_pass_through() {
        let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "a"}, "spec": {"anything": true}});
        assert_eq!(
            normalize("example.com", "Widget", w.clone(), FieldValidation::Strict),
            Ok(w)
        );
    }
}
