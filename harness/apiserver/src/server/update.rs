//! Updates and patches with optimistic concurrency, the status subresource and generation.

use apimachinery::json::Lookup;
use bytes::Bytes;
use serde_json::{Value, json};

use super::create::check_type;
use super::delete::has_spec_finalizers;
use super::options::{PatchType, Subresource, WriteOptions};
use super::state::Server;
use crate::admission::{self, name_of};
use crate::crd::Write;
use crate::error::{ApiError, ApiResult, Cause};
use crate::normalize::FieldValidation;
use crate::patch;
use crate::registry::ResourceDef;
use crate::store::StoreError;

impl Server {
    /// Replaces an object (PUT).
    pub fn update(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        mut body: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> ApiResult<Bytes> {
        check_type(def, &mut body)?;
        if name_of(&body) != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                name_of(&body)
            )));
        }
        let precondition = body
            .lookup("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<u64>()
                    .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {s:?}")))
            })
            .transpose()?;
        self.guaranteed_update(def, ns, name, sub, opts, precondition, |_| Ok(body.clone()))
    }

    /// Patches an object.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        ty: PatchType,
        body: &[u8],
        sub: Subresource,
        opts: &WriteOptions,
        manager: &str,
    ) -> ApiResult<Bytes> {
        if ty == PatchType::Strategic && def.custom {
            return Err(ApiError::unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        if let PatchType::Apply { force } = ty {
            return self.apply(def, ns, name, body, sub, opts, manager, force);
        }
        self.guaranteed_update(def, ns, name, sub, opts, None, |mut cur| {
            let rv_before = cur.lookup("/metadata/resourceVersion").cloned();
            match ty {
                PatchType::Json => patch::json_patch(&mut cur, body),
                PatchType::Merge => patch::merge_patch(&mut cur, body),
                PatchType::Strategic => patch::strategic_merge_patch(&mut cur, body),
                PatchType::Apply { .. } => Ok(()),
            }
            .map_err(|e| match e.0.starts_with("error decoding") {
                true => ApiError::bad_request(e.0),
                false => ApiError::invalid(
                    &def.group,
                    &def.kind,
                    name,
                    vec![Cause::invalid("", "", e.0)],
                ),
            })?;
            // A resourceVersion in the patch is a precondition.
            let rv_after = cur.lookup("/metadata/resourceVersion").cloned();
            if rv_after.is_some() && rv_after != rv_before {
                return Err(ApiError::stale(&def.group, &def.resource, name));
            }
            Ok(cur)
        })
    }

    /// The read-modify-write loop of the generic registry: retried when the
    /// object changed underneath unless the caller gave a resourceVersion.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn guaranteed_update(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        sub: Subresource,
        opts: &WriteOptions,
        precondition: Option<u64>,
        mutate: impl Fn(Value) -> ApiResult<Value>,
    ) -> ApiResult<Bytes> {
        loop {
            let cur = self.get(def, ns, name)?;
            if precondition.is_some_and(|rv| rv != cur.rv) {
                return Err(ApiError::stale(&def.group, &def.resource, name));
            }
            let old = cur.value();
            let mut new = mutate(old.clone())?;
            check_type(def, &mut new)?;
            let new = self.prepare_update(def, &old, new, sub, opts)?;
            if opts.dry_run {
                return Ok(Bytes::from(
                    serde_json::to_vec(&new).map_err(|e| ApiError::internal(e.to_string()))?,
                ));
            }
            let finalized = new.lookup("/metadata/deletionTimestamp").is_some()
                && new
                    .lookup("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .is_none_or(Vec::is_empty)
                && old
                    .lookup("/metadata/deletionGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    == Some(0)
                && !(def.group.is_empty()
                    && def.resource == "namespaces"
                    && has_spec_finalizers(&new));
            let result = if finalized {
                self.store.delete(def, ns, name, Some(cur.rv)).inspect(|s| {
                    self.after_delete(def, s);
                })
            } else {
                self.store.update(def, cur.rv, new)
            };
            match result {
                Ok(s) => {
                    if !finalized {
                        self.after_write(def, &s);
                    }
                    return Ok(s.json.clone());
                }
                Err(StoreError::Conflict(_)) if precondition.is_none() => continue,
                Err(e) => return Err(Self::store_err(def, name, e)),
            }
        }
    }

    pub(super) fn prepare_update(
        &self,
        def: &ResourceDef,
        old: &Value,
        mut new: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let name = name_of(old);
        if name_of(&new) != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                name_of(&new)
            )));
        }
        if let (Some(a), Some(b)) = (old.lookup("/metadata/uid"), new.lookup("/metadata/uid"))
            && a != b
            && !b.as_str().is_some_and(str::is_empty)
        {
            return Err(ApiError::conflict(
                &def.group,
                &def.resource,
                &name,
                &format!("Precondition failed: UID in precondition: {b}, UID in object meta: {a}"),
            ));
        }
        let mut out = match sub {
            Subresource::Status => {
                // The stored object but its status (a node's is most of
                // it), with the new status: the new object itself when the
                // rest is the stored one's (a status patch's).
                let o = if same_but_status(old, &new) {
                    new
                } else {
                    let mut o = match old.as_object() {
                        Some(m) => Value::Object(
                            m.iter()
                                .filter(|(k, _)| k.as_str() != "status")
                                .map(|(k, v)| (k.clone(), v.clone()))
                                .collect(),
                        ),
                        None => old.clone(),
                    };
                    if let Some(s) = new.get_mut("status") {
                        o["status"] = s.take();
                    }
                    o
                };
                crate::dra::admit_status(def, &name, old, &o)?;
                o
            }
            Subresource::Finalize => {
                let mut o = old.clone();
                o["spec"]["finalizers"] =
                    new.lookup("/spec/finalizers").cloned().unwrap_or(json!([]));
                o
            }
            Subresource::Main => {
                if def.status {
                    match old.get("status") {
                        Some(s) => new["status"] = s.clone(),
                        None => {
                            if let Some(m) = new.as_object_mut() {
                                m.remove("status");
                            }
                        }
                    }
                }
                // System-owned metadata is kept from the stored object.
                for f in [
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                    "namespace",
                ] {
                    match old.lookup(&format!("/metadata/{f}")) {
                        Some(v) => new["metadata"][f] = v.clone(),
                        None => {
                            if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut)
                            {
                                m.remove(f);
                            }
                        }
                    }
                }
                admission::admit_update(def, old, &mut new)?;
                if spec_changed(old, &new) {
                    let g = old
                        .lookup("/metadata/generation")
                        .and_then(Value::as_i64)
                        .unwrap_or(1);
                    new["metadata"]["generation"] = json!(g + 1);
                }
                new
            }
        };
        if let Some(m) = out.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        let write = match sub {
            Subresource::Status => Some(Write::Status { old }),
            Subresource::Main => Some(Write::Update { old }),
            Subresource::Finalize => None,
        };
        if let Some(write) = write {
            self.admit_custom(def, &mut out, write, opts.field_validation)?;
        }
        out = match sub {
            Subresource::Status => self.normalize_status(def, out, opts.field_validation)?,
            Subresource::Main | Subresource::Finalize => {
                self.normalize(def, out, opts.field_validation)?
            }
        };
        Ok(out)
    }

    /// Normalizes what a status write changes, the status: the rest of
    /// the object is the stored one, already normalized, and a typed
    /// round trip gives it back unchanged. The status alone passes
    /// through the type (with the name, for errors): at 300,000 pods most
    /// writes are status writes, and a pod's spec and metadata were most
    /// of each one's round trip.
    fn normalize_status(
        &self,
        def: &ResourceDef,
        mut o: Value,
        mode: FieldValidation,
    ) -> ApiResult<Value> {
        let Some(status) = o.as_object_mut().and_then(|m| m.remove("status")) else {
            return self.normalize(def, o, mode);
        };
        let part = json!({
            "metadata": {"name": name_of(&o)},
            "status": status,
        });
        let mut part = self.normalize(def, part, mode)?;
        if let Some(status) = part.as_object_mut().and_then(|m| m.remove("status")) {
            o["status"] = status;
        }
        Ok(o)
    }
}

/// Whether the two objects differ at most in their status.
fn same_but_status(old: &Value, new: &Value) -> bool {
    let (Some(o), Some(n)) = (old.as_object(), new.as_object()) else {
        return false;
    };
    let rest = |m: &'_ serde_json::Map<String, Value>| m.keys().filter(|k| *k != "status").count();
    rest(o) == rest(n)
        && o.iter()
            .filter(|(k, _)| *k != "status")
            .all(|(k, v)| n.get(k) == Some(v))
}

/// Whether anything but metadata and status differs (compared in place:
/// every write of an object goes through here).
pub(super) fn spec_changed(old: &Value, new: &Value) -> bool {
    fn rest(v: &Value) -> impl Iterator<Item = (&String, &Value)> {
        v.as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status"))
    }
    let new_fields = new.as_object();
    rest(old).count() != rest(new).count()
        || rest(old).any(|(k, v)| new_fields.and_then(|m| m.get(k)) != Some(v))
}

pub(super) fn set_path(obj: &mut Value, path: &str, value: Value) {
    let parts: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    let mut cur = obj;
    for (i, p) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        if i == parts.len() - 1 {
            cur[*p] = value;
            return;
        }
        cur = &mut cur[*p];
    }
}
