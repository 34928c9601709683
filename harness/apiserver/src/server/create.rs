//! Creating objects (and restoring them with their status, for loaders of a
//! snapshot): admission, normalisation, namespace checks, generateName.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};

use super::options::WriteOptions;
use super::state::Server;
use crate::admission::{self, name_of};
use crate::crd::{CrdValidation, Write};
use crate::error::{ApiError, ApiResult, Cause};
use crate::normalize::{FieldValidation, NormalizeError, normalize};
use crate::registry::{ResourceDef, crd_resource};
use crate::store::{StoreError, Stored};

impl Server {
    /// Creates an object in `ns` (ignored for cluster-scoped resources).
    pub fn create(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Bytes> {
        self.create_with_status(def, ns, obj, None, opts)
    }

    /// Creates an object with a status, as a restore of a cluster's
    /// snapshot stores it (etcd holds objects with their status): the
    /// create's admission, defaults and validation, then `status` merged
    /// over what admission set (RFC 7386), as a status merge patch right
    /// after the create would. One write, not two; no client serves this:
    /// loaders inside the process call it.
    pub fn restore(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        obj: Value,
        status: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<Bytes> {
        self.create_with_status(def, ns, obj, Some(status), opts)
    }

    fn create_with_status(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        mut obj: Value,
        status: Option<&Value>,
        opts: &WriteOptions,
    ) -> ApiResult<Bytes> {
        if def.create_only {
            return Err(ApiError::method_not_allowed(&def.resource));
        }
        check_type(def, &mut obj)?;
        let name_for_errors = name_of(&obj);
        let meta = obj
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .ok_or_else(|| {
                ApiError::invalid(&def.group, &def.kind, "", vec![Cause::required("metadata")])
            })?;
        if def.namespaced {
            let url_ns = ns.unwrap_or("");
            match meta.get("namespace").and_then(Value::as_str) {
                Some(body_ns) if !body_ns.is_empty() && !url_ns.is_empty() && body_ns != url_ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                Some(body_ns) if !body_ns.is_empty() => {}
                _ if url_ns.is_empty() => {
                    return Err(ApiError::bad_request(
                        "a namespace must be specified for a namespaced resource",
                    ));
                }
                _ => {
                    meta.insert("namespace".into(), json!(url_ns));
                }
            }
        } else {
            meta.remove("namespace");
        }
        if meta
            .get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
        {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let generate = meta
            .get("name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        let prefix = meta
            .get("generateName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if generate && prefix.is_empty() {
            return Err(ApiError::invalid(
                &def.group,
                &def.kind,
                &name_for_errors,
                vec![Cause {
                    reason: "FieldValueRequired",
                    message: "Required value: name or generateName is required".into(),
                    field: "metadata.name".into(),
                }],
            ));
        }
        meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        meta.insert("creationTimestamp".into(), json!(self.clock.rfc3339()));
        meta.insert("generation".into(), json!(1));
        for f in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta.remove(f);
        }
        let namespace = meta
            .get("namespace")
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some(ns) = &namespace {
            self.check_namespace_open(ns)?;
        }
        for attempt in 0..8 {
            let mut o = obj.clone();
            if generate {
                o["metadata"]["name"] = json!(format!("{prefix}{}", apimachinery::rand::suffix(5)));
            }
            admission::admit_create(self, def, &mut o)?;
            self.admit_custom(def, &mut o, Write::Create, opts.field_validation)?;
            if let Some(status) = status {
                json_patch::merge(&mut o, &json!({ "status": status }));
            }
            let o = self.normalize(def, o, opts.field_validation)?;
            if opts.dry_run {
                return Ok(Bytes::from(
                    serde_json::to_vec(&o).map_err(|e| ApiError::internal(e.to_string()))?,
                ));
            }
            let name = name_of(&o);
            match self.store.create(def, o) {
                Ok(stored) => {
                    self.after_write(def, &stored);
                    return Ok(stored.json.clone());
                }
                Err(StoreError::AlreadyExists) if generate && attempt < 7 => continue,
                Err(e) => return Err(Self::store_err(def, &name, e)),
            }
        }
        Err(ApiError::internal("could not generate a unique name"))
    }

    pub(super) fn check_namespace_open(&self, ns: &str) -> ApiResult<()> {
        let nsdef = self.def("", "namespaces")?;
        let n = self
            .store
            .get(&nsdef.gr(), "", ns)
            .ok_or_else(|| ApiError::not_found("", "namespaces", ns))?;
        if n.deleting {
            return Err(ApiError::forbidden(
                "",
                "namespaces",
                ns,
                format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                ),
            ));
        }
        Ok(())
    }

    pub(super) fn normalize(
        &self,
        def: &ResourceDef,
        o: Value,
        mode: FieldValidation,
    ) -> ApiResult<Value> {
        let name = name_of(&o);
        normalize(&def.group, &def.kind, o, mode).map_err(|e| match e {
            NormalizeError::Invalid(m) => ApiError::invalid(
                &def.group,
                &def.kind,
                &name,
                vec![Cause::invalid("", "", m)],
            ),
            NormalizeError::UnknownFields(f) => ApiError::bad_request(format!(
                "strict decoding error: {}",
                f.iter()
                    .map(|p| format!("unknown field {p:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        })
    }

    /// A custom resource's schema and rules, as apiextensions-apiserver
    /// applies them: unknown fields pruned (refused under strict field
    /// validation), defaults set, then the schema and CEL rules checked.
    pub(super) fn admit_custom(
        &self,
        def: &ResourceDef,
        o: &mut Value,
        write: Write<'_>,
        mode: FieldValidation,
    ) -> ApiResult<()> {
        let Some(validation) = def.validation.as_ref().and_then(|v| {
            let storage = def.versions.first().map(String::as_str).unwrap_or("");
            v.for_object(o, storage)
        }) else {
            return Ok(());
        };
        let pruned = validation.decode(o);
        if mode == FieldValidation::Strict && !pruned.is_empty() {
            return Err(ApiError::bad_request(format!(
                "strict decoding error: {}",
                pruned
                    .iter()
                    .map(|p| format!("unknown field {p:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let causes = validation.validate(o, write);
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(
                &def.group,
                &def.kind,
                &name_of(o),
                causes,
            ))
        }
    }

    /// Hooks after a committed write: CRDs (un)register their resource,
    /// namespaces get their default ServiceAccount.
    pub(super) fn after_write(&self, def: &ResourceDef, stored: &Stored) {
        match (def.group.as_str(), def.resource.as_str()) {
            ("apiextensions.k8s.io", "customresourcedefinitions") => {
                let crd = stored.value();
                if let Ok(mut res) = crd_resource(&crd) {
                    res.validation = CrdValidation::compile(&crd).ok().map(Arc::new);
                    if self.registry.by_gr(&res.gr()).is_none() {
                        self.store.open_window(res.gr());
                    }
                    self.registry.insert(res);
                }
            }
            ("", "namespaces") => {
                if let Ok(sa) = self.def("", "serviceaccounts") {
                    let obj = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": stored.name}});
                    // Already there after a namespace update: nothing to do.
                    let _ = self.create(&sa, Some(&stored.name), obj, &WriteOptions::default());
                }
            }
            _ => {}
        }
    }
}

/// kind/apiVersion must match the resource when present; absent ones are filled in.
pub(super) fn check_type(def: &ResourceDef, obj: &mut Value) -> ApiResult<()> {
    let Some(m) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    match m.get("kind").and_then(Value::as_str) {
        Some(k) if k != def.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                def.kind
            )));
        }
        _ => {
            m.insert("kind".into(), json!(def.kind));
        }
    }
    match m.get("apiVersion").and_then(Value::as_str) {
        Some(v)
            if !def
                .versions
                .iter()
                .any(|ver| crate::registry::api_version(&def.group, ver) == v) =>
        {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({})",
                def.api_version()
            )));
        }
        Some(_) => {}
        None => {
            m.insert("apiVersion".into(), json!(def.api_version()));
        }
    }
    if !m.get("metadata").is_none_or(Value::is_object) {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    m.entry("metadata").or_insert(json!({}));
    Ok(())
}
