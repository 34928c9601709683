//! Deletion: graceful deletion, finalizers, propagation policies and collections.

use std::time::Duration;

use apimachinery::json::Lookup;
use bytes::Bytes;
use serde_json::{Value, json};

use super::options::{DeleteOptions, Deleted, ListOptions};
use super::state::{SYSTEM_NAMESPACES, Server};
use crate::error::{ApiError, ApiResult};
use crate::registry::{ResourceDef, crd_resource};
use crate::store::{StoreError, Stored};

impl Server {
    /// Deletes an object with the real API server's graceful deletion,
    /// finalizer and propagation semantics.
    pub fn delete(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> ApiResult<Deleted> {
        if def.create_only {
            return Err(ApiError::method_not_allowed(&def.resource));
        }
        loop {
            let cur = self.get(def, ns, name)?;
            let mut obj = cur.value();
            if let Some(uid) = &opts.precondition_uid
                && obj.lookup("/metadata/uid").and_then(Value::as_str) != Some(uid)
            {
                return Err(ApiError::conflict(
                    &def.group,
                    &def.resource,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        cur.uid
                    ),
                ));
            }
            if let Some(rv) = &opts.precondition_rv
                && *rv != cur.rv.to_string()
            {
                return Err(ApiError::conflict(
                    &def.group,
                    &def.resource,
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        cur.rv
                    ),
                ));
            }
            let grace = self.grace_period(def, &obj, opts.grace_period_seconds);
            let mut finalizers: Vec<String> = obj
                .lookup("/metadata/finalizers")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|f| f.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let before = finalizers.clone();
            match opts.propagation_policy.as_deref() {
                Some("Foreground") => {
                    finalizers.retain(|f| f != "orphan");
                    if !finalizers.iter().any(|f| f == "foregroundDeletion") {
                        finalizers.push("foregroundDeletion".into());
                    }
                }
                Some("Orphan") => {
                    finalizers.retain(|f| f != "foregroundDeletion");
                    if !finalizers.iter().any(|f| f == "orphan") {
                        finalizers.push("orphan".into());
                    }
                }
                Some("Background") | None => {}
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "propagationPolicy {other:?} is not supported: use Orphan, Background or Foreground"
                    )));
                }
            }
            let is_namespace = def.group.is_empty() && def.resource == "namespaces";
            if is_namespace && SYSTEM_NAMESPACES.contains(&name) {
                return Err(ApiError::forbidden(
                    "",
                    "namespaces",
                    name,
                    "this namespace may not be deleted",
                ));
            }
            let deleting = obj.lookup("/metadata/deletionTimestamp").is_some();
            let blocked = !finalizers.is_empty() || (is_namespace && has_spec_finalizers(&obj));
            if opts.dry_run {
                return Ok(Deleted::Pending(cur.json.clone()));
            }
            if !blocked && grace == 0 {
                match self.store.delete_parsed(def, ns, name, cur.rv, obj) {
                    Ok(s) => {
                        self.after_delete(def, &s);
                        return Ok(Deleted::Gone(s.json.clone()));
                    }
                    Err(StoreError::Conflict(_)) => continue,
                    Err(e) => return Err(Self::store_err(def, name, e)),
                }
            }
            // Graceful deletion: mark, and let finalizers / the kubelet finish.
            let current_grace = obj
                .lookup("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64);
            let mut changed = finalizers != before;
            if !deleting || current_grace.is_some_and(|g| grace < g) {
                let at = self.clock.now() + Duration::from_secs(grace.max(0) as u64);
                obj["metadata"]["deletionTimestamp"] = json!(simclock::format_rfc3339(at));
                obj["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
                changed = true;
            }
            if is_namespace {
                obj["status"]["phase"] = json!("Terminating");
            }
            if !changed {
                return Ok(Deleted::Pending(cur.json.clone()));
            }
            obj["metadata"]["finalizers"] = json!(finalizers);
            if finalizers.is_empty()
                && let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut)
            {
                m.remove("finalizers");
            }
            match self.store.update(def, cur.rv, obj) {
                Ok(s) => return Ok(Deleted::Pending(s.json.clone())),
                Err(StoreError::Conflict(_)) => continue,
                Err(e) => return Err(Self::store_err(def, name, e)),
            }
        }
    }

    /// Deletes every object of a resource that matches the selectors.
    pub fn delete_collection(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        list: &ListOptions,
        opts: &DeleteOptions,
    ) -> ApiResult<Vec<Bytes>> {
        let page = self.list(
            def,
            ns,
            &ListOptions {
                limit: 0,
                continue_token: None,
                ..list.clone()
            },
        )?;
        let mut out = Vec::new();
        for o in page.items {
            match self.delete(def, &o.namespace, &o.name, opts) {
                Ok(Deleted::Gone(b) | Deleted::Pending(b)) => out.push(b),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    pub(super) fn after_delete(&self, def: &ResourceDef, stored: &Stored) {
        if def.group == "apiextensions.k8s.io"
            && def.resource == "customresourcedefinitions"
            && let Ok(res) = crd_resource(&stored.value())
        {
            let gr = res.gr();
            if let Some(d) = self.registry.by_gr(&gr) {
                let (_, items) = self.store.list(&gr, None, None);
                for o in items {
                    let _ = self.store.delete(&d, &o.namespace, &o.name, None);
                }
            }
            self.registry.remove(&gr);
        }
    }

    /// The grace period a delete gets: pods that are bound and not finished
    /// get the requested or their own `terminationGracePeriodSeconds`; every
    /// other object is deleted at once.
    pub(super) fn grace_period(
        &self,
        def: &ResourceDef,
        obj: &Value,
        requested: Option<i64>,
    ) -> i64 {
        if !(def.group.is_empty() && def.resource == "pods") {
            return 0;
        }
        let bound = obj
            .lookup("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let phase = obj
            .lookup("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !bound || phase == "Succeeded" || phase == "Failed" {
            return 0;
        }
        requested
            .or_else(|| {
                obj.lookup("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(30)
            .max(0)
    }
}

pub(super) fn has_spec_finalizers(ns: &Value) -> bool {
    ns.lookup("/spec/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}
