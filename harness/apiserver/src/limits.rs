//! kube-apiserver's size limits, one place for each:
//!
//! - a write's request body over [`MAX_REQUEST_BODY_BYTES`] (3 MiB) is
//!   refused with 413 `Request entity too large: limit is 3145728`;
//! - an object over etcd's request limit [`ETCD_MAX_REQUEST_BYTES`]
//!   (1.5 MiB) is refused as etcd refuses it, a 500 with etcd's message
//!   `etcdserver: request is too large`, which kube-apiserver passes through
//!   (kubernetes/kubernetes#112152);
//! - ConfigMap and Secret data over [`MAX_DATA_BYTES`] (1 MiB) is refused by
//!   validation with 422 (`Too long: may not be more than 1048576 bytes`);
//! - annotations over [`MAX_ANNOTATIONS_BYTES`] (256 KiB, keys and values)
//!   are refused by metadata validation with 422, on every kind.

use apimachinery::json::Lookup;
use base64::Engine;
use serde_json::Value;

use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::ResourceDef;

/// kube-apiserver's `MaxRequestBodyBytes` for writes: twice etcd's limit,
/// leaving room for JSON's size over protobuf's.
pub const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;

/// etcd's default `--max-request-bytes`. The store measures an object's JSON,
/// the form etcd keeps custom resources in (built-in kinds are kept as the
/// smaller protobuf upstream, so a built-in object near the limit may be
/// refused here and not there).
pub const ETCD_MAX_REQUEST_BYTES: usize = 1536 * 1024;

/// `corev1.MaxSecretSize`: the most data a ConfigMap or Secret may hold.
pub const MAX_DATA_BYTES: usize = 1024 * 1024;

/// `TotalAnnotationSizeLimitB`: the most an object's annotations may hold.
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

/// The size checks of validation: annotations on every kind, data on
/// ConfigMaps and Secrets.
pub fn validate_sizes(def: &ResourceDef, obj: &Value) -> ApiResult<()> {
    validate_annotations_size(def, obj)?;
    validate_data_size(def, obj)
}

/// Refuses annotations whose keys and values together are over
/// [`MAX_ANNOTATIONS_BYTES`] (`ValidateAnnotationsSize`).
fn validate_annotations_size(def: &ResourceDef, obj: &Value) -> ApiResult<()> {
    let total: usize = obj
        .lookup("/metadata/annotations")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
                .sum()
        })
        .unwrap_or(0);
    if total <= MAX_ANNOTATIONS_BYTES {
        return Ok(());
    }
    Err(too_long(
        def,
        obj,
        "metadata.annotations",
        MAX_ANNOTATIONS_BYTES,
    ))
}

fn too_long(def: &ResourceDef, obj: &Value, field: &str, limit: usize) -> ApiError {
    ApiError::invalid(
        &def.group,
        &def.kind,
        obj.lookup("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(""),
        vec![Cause {
            reason: "FieldValueTooLong",
            message: format!("Too long: may not be more than {limit} bytes"),
            field: field.into(),
        }],
    )
}

/// Refuses a ConfigMap whose `data` and `binaryData` together, or a Secret
/// whose decoded `data`, is over [`MAX_DATA_BYTES`], with kube-apiserver's
/// cause: the whole object (`[]`) for a ConfigMap, `data` for a Secret.
fn validate_data_size(def: &ResourceDef, obj: &Value) -> ApiResult<()> {
    if !def.group.is_empty() {
        return Ok(());
    }
    let field = match def.resource.as_str() {
        "configmaps" => "[]",
        "secrets" => "data",
        _ => return Ok(()),
    };
    let strings = |key: &str| -> usize {
        obj.get(key)
            .and_then(Value::as_object)
            .map(|m| m.values().filter_map(Value::as_str).map(str::len).sum())
            .unwrap_or(0)
    };
    let decoded = |key: &str| -> usize {
        obj.get(key)
            .and_then(Value::as_object)
            .map(|m| {
                m.values()
                    .filter_map(Value::as_str)
                    .map(|s| {
                        base64::engine::general_purpose::STANDARD
                            .decode(s)
                            .map_or(s.len(), |b| b.len())
                    })
                    .sum()
            })
            .unwrap_or(0)
    };
    let total = match def.resource.as_str() {
        "configmaps" => strings("data") + decoded("binaryData"),
        _ => decoded("data"),
    };
    if total <= MAX_DATA_BYTES {
        return Ok(());
    }
    Err(too_long(def, obj, field, MAX_DATA_BYTES))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::registry::Registry;
    use serde_json::json;

    fn def(resource: &str) -> std::sync::Arc<ResourceDef> {
        Registry::with_builtins()
            .by_gr(&crate::registry::GroupResource::new("", resource))
            .unwrap()
    }

    #[test]
    fn configmap_data_over_one_mebibyte_is_too_long_on_the_whole_object() {
        // ValidateConfigMap: field.TooLong(field.NewPath(""), "", MaxSecretSize).
        let big = "x".repeat(MAX_DATA_BYTES + 1);
        let cm = json!({"metadata": {"name": "big"}, "data": {"a": big}});
        let e = validate_sizes(&def("configmaps"), &cm).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "ConfigMap \"big\" is invalid: []: Too long: may not be more than 1048576 bytes"
        );
        let ok = json!({"metadata": {"name": "ok"}, "data": {"a": "x".repeat(MAX_DATA_BYTES)}});
        assert!(validate_sizes(&def("configmaps"), &ok).is_ok());
    }

    #[test]
    fn secret_data_is_counted_decoded() {
        // ValidateSecret: total of the decoded values, field "data".
        let raw = vec![0u8; MAX_DATA_BYTES];
        let encoded = base64::engine::general_purpose::STANDARD.encode(&raw);
        let at_limit = json!({"metadata": {"name": "s"}, "data": {"k": encoded}});
        assert!(validate_sizes(&def("secrets"), &at_limit).is_ok());
        let over = base64::engine::general_purpose::STANDARD.encode(vec![0u8; MAX_DATA_BYTES + 1]);
        let e = validate_data_size(
            &def("secrets"),
            &json!({"metadata": {"name": "s"}, "data": {"k": over}}),
        )
        .unwrap_err();
        assert_eq!(e.details.unwrap()["causes"][0]["field"], "data");
    }

    #[test]
    fn annotations_over_256_kib_are_too_long() {
        // ValidateAnnotationsSize: keys and values, TotalAnnotationSizeLimitB.
        let big = json!({"metadata": {"name": "p", "annotations": {"a": "x".repeat(MAX_ANNOTATIONS_BYTES)}}});
        let e = validate_sizes(&def("pods"), &big).unwrap_err();
        assert_eq!(
            e.message,
            "Pod \"p\" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes"
        );
        let ok = json!({"metadata": {"name": "p", "annotations": {"a": "x".repeat(MAX_ANNOTATIONS_BYTES - 1)}}});
        assert!(validate_sizes(&def("pods"), &ok).is_ok());
    }
}
