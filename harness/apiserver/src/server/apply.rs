//! Server-side apply: field ownership per manager and conflicts.

use apimachinery::json::Lookup;
use bytes::Bytes;
use serde_json::{Value, json};

use super::create::check_type;
use super::options::{Subresource, WriteOptions};
use super::state::Server;
use crate::admission::name_of;
use crate::error::{ApiError, ApiResult, Cause};
use crate::patch;
use crate::registry::ResourceDef;

/// Key under `fieldsV1` where the paths an apply manager set are recorded.
const APPLY_ANNOTATION: &str = "f:testbed.applied";

impl Server {
    /// Server-side apply: creates the object if absent, otherwise merges the
    /// applied configuration into it (lists by their merge keys). Field
    /// ownership is tracked only as far as conflicts on values another
    /// manager last set through apply: those are rejected unless `force`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn apply(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        body: &[u8],
        sub: Subresource,
        opts: &WriteOptions,
        manager: &str,
        force: bool,
    ) -> ApiResult<Bytes> {
        let mut applied: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding apply patch: {e}")))?;
        check_type(def, &mut applied)?;
        if name_of(&applied) != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                name_of(&applied)
            )));
        }
        if manager.is_empty() {
            return Err(ApiError::bad_request(
                "PATCH requests with apply content type require a fieldManager",
            ));
        }
        if self.store.get(&def.gr(), ns, name).is_none() && sub == Subresource::Main {
            let mut obj = applied.clone();
            set_apply_owner(&mut obj, manager, &applied);
            return match self.create(def, Some(ns).filter(|n| !n.is_empty()), obj, opts) {
                Err(e) if e.reason == "AlreadyExists" => {
                    self.apply(def, ns, name, body, sub, opts, manager, force)
                }
                other => other,
            };
        }
        let applied_bytes =
            serde_json::to_vec(&applied).map_err(|e| ApiError::internal(e.to_string()))?;
        self.guaranteed_update(def, ns, name, sub, opts, None, |mut cur| {
            if !force && let Some(conflict) = apply_conflict(&cur, &applied, manager) {
                return Err(ApiError::conflict(
                    &def.group,
                    &def.resource,
                    name,
                    &format!("Apply failed with 1 conflict: conflict with {conflict}"),
                ));
            }
            if let Some(m) = applied.get("metadata").and_then(Value::as_object)
                && m.contains_key("resourceVersion")
                && applied.lookup("/metadata/resourceVersion")
                    != cur.lookup("/metadata/resourceVersion")
            {
                return Err(ApiError::stale(&def.group, &def.resource, name));
            }
            if def.custom {
                patch::merge_patch(&mut cur, &applied_bytes)
            } else {
                patch::strategic_merge_patch(&mut cur, &applied_bytes)
            }
            .map_err(|e| {
                ApiError::invalid(
                    &def.group,
                    &def.kind,
                    name,
                    vec![Cause::invalid("", "", e.0)],
                )
            })?;
            set_apply_owner(&mut cur, manager, &applied);
            Ok(cur)
        })
    }
}

/// Records, in `metadata.managedFields`, the paths a manager applied.
pub(super) fn set_apply_owner(obj: &mut Value, manager: &str, applied: &Value) {
    let mut paths = Vec::new();
    leaf_paths(applied, "", &mut paths);
    let entry = json!({
        "manager": manager,
        "operation": "Apply",
        "apiVersion": obj.get("apiVersion").cloned().unwrap_or(Value::Null),
        "fieldsType": "FieldsV1",
        "fieldsV1": {APPLY_ANNOTATION: paths},
    });
    let mf = obj["metadata"]
        .as_object_mut()
        .map(|m| m.entry("managedFields").or_insert(json!([])));
    if let Some(Value::Array(list)) = mf {
        list.retain(|e| e.get("manager").and_then(Value::as_str) != Some(manager));
        list.push(entry);
    }
}

/// A field that another apply manager owns and this apply would change.
pub(super) fn apply_conflict(cur: &Value, applied: &Value, manager: &str) -> Option<String> {
    let mut mine = Vec::new();
    leaf_paths(applied, "", &mut mine);
    for e in cur
        .lookup("/metadata/managedFields")
        .and_then(Value::as_array)?
    {
        let other = e.get("manager").and_then(Value::as_str).unwrap_or("");
        if other == manager || e.get("operation").and_then(Value::as_str) != Some("Apply") {
            continue;
        }
        let owned: Vec<&str> = e
            .lookup(&format!(
                "/fieldsV1/{}",
                APPLY_ANNOTATION.replace('/', "~1")
            ))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for p in &mine {
            if owned.contains(&p.as_str()) && cur.lookup(p) != applied.lookup(p) {
                return Some(format!(
                    "{other:?} using {}: {p}",
                    e.get("apiVersion").and_then(Value::as_str).unwrap_or("")
                ));
            }
        }
    }
    None
}

/// JSON pointers of the leaves of an applied configuration (not its identity fields).
pub(super) fn leaf_paths(v: &Value, prefix: &str, out: &mut Vec<String>) {
    if let Value::Object(m) = v {
        for (k, child) in m {
            let skip = (prefix.is_empty() && matches!(k.as_str(), "apiVersion" | "kind"))
                || (prefix == "/metadata"
                    && matches!(
                        k.as_str(),
                        "name" | "namespace" | "managedFields" | "resourceVersion"
                    ));
            if skip {
                continue;
            }
            let p = format!("{prefix}/{}", k.replace('~', "~0").replace('/', "~1"));
            match child {
                Value::Object(c) if !c.is_empty() => leaf_paths(child, &p, out),
                _ => out.push(p),
            }
        }
    }
}
