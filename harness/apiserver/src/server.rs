//! The API server's operations, independent of HTTP: get, list, create,
//! update, patch, delete with the semantics of the real API server's generic
//! registry (optimistic concurrency, status subresource, generation,
//! graceful deletion, finalizers, propagation policies), plus the `scale`
//! subresource. The HTTP layer (`http.rs`) and the server's own controllers
//! (`gc.rs`) both call these.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use serde_json::{Value, json};
use simclock::Clock;

use crate::admission::{self, SYSTEM_CLUSTER_CRITICAL, SYSTEM_NODE_CRITICAL, name_of};
use crate::error::{ApiError, ApiResult, Cause};
use crate::normalize::{FieldValidation, NormalizeError, normalize};
use crate::patch;
use crate::registry::{GroupResource, Registry, ResourceDef, crd_resource};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{ObjKey, Store, StoreError, Stored};

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// The object itself (status changes ignored when a status subresource exists).
    Main,
    /// `/status`: only `.status` changes.
    Status,
    /// `/finalize` of a namespace: only `.spec.finalizers` changes.
    Finalize,
}

/// Options of a write request.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
}

/// The patch types of `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply {
        /// `force=true`.
        force: bool,
    },
}

/// `DeleteOptions`, from the body or the query.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `propagationPolicy`: `Orphan`, `Background` or `Foreground`.
    pub propagation_policy: Option<String>,
    /// `preconditions.uid`.
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub precondition_rv: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

impl DeleteOptions {
    /// Reads a `DeleteOptions` JSON body (absent fields stay unset).
    pub fn from_body(v: &Value) -> Result<Self, String> {
        let mut o = DeleteOptions::default();
        if let Some(g) = v.get("gracePeriodSeconds").filter(|g| !g.is_null()) {
            o.grace_period_seconds =
                Some(g.as_i64().ok_or("gracePeriodSeconds must be an integer")?);
        }
        if let Some(p) = v.get("propagationPolicy").and_then(Value::as_str) {
            o.propagation_policy = Some(p.to_string());
        } else if let Some(orphan) = v.get("orphanDependents").and_then(Value::as_bool) {
            o.propagation_policy = Some(if orphan { "Orphan" } else { "Background" }.into());
        }
        o.precondition_uid = v
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string);
        o.precondition_rv = v
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some(d) = v.get("dryRun").and_then(Value::as_array) {
            o.dry_run = d.iter().any(|x| x == "All");
        }
        Ok(o)
    }
}

/// List parameters.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `limit` (0 = all).
    pub limit: usize,
    /// `continue`.
    pub continue_token: Option<String>,
}

/// A parsed label + field selector pair for one resource.
#[derive(Debug, Clone)]
pub struct Filter {
    /// Label part.
    pub labels: LabelSelector,
    /// Field part.
    pub fields: FieldSelector,
}

impl Filter {
    /// Parses both selectors against a resource.
    pub fn parse(def: &ResourceDef, label: Option<&str>, field: Option<&str>) -> ApiResult<Self> {
        let labels = match label {
            Some(s) => LabelSelector::parse(s).map_err(ApiError::bad_request)?,
            None => LabelSelector::everything(),
        };
        let fields = match field {
            Some(s) => {
                FieldSelector::parse(s, &def.field_names()).map_err(ApiError::bad_request)?
            }
            None => FieldSelector::default(),
        };
        Ok(Self { labels, fields })
    }

    /// Whether a stored object matches.
    pub fn matches(&self, o: &Stored) -> bool {
        self.labels.matches(&o.labels) && self.fields.matches(&o.fields)
    }
}

/// One page of a list.
#[derive(Debug)]
pub struct ListPage {
    /// resourceVersion of the list.
    pub rv: u64,
    /// Matching objects.
    pub items: Vec<Arc<Stored>>,
    /// Token for the next page.
    pub continue_token: Option<String>,
}

/// The result of a delete.
#[derive(Debug)]
pub enum Deleted {
    /// The object is gone; this was its last state.
    Gone(Bytes),
    /// Deletion is in progress (grace period or finalizers); the object now.
    Pending(Bytes),
}

/// The embedded API server's state: one store, the resource registry and
/// the clock. Shared as `Arc<Server>`.
pub struct Server {
    /// The one store.
    pub store: Store,
    /// Served resources.
    pub registry: Registry,
    /// The clock for every timestamp the server writes.
    pub clock: Clock,
    next_ip: AtomicU32,
}

const SYSTEM_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

impl Server {
    /// A server with the built-in resources, the system namespaces, the
    /// system priority classes and the `default/kubernetes` service.
    pub fn new(clock: Clock, history: usize) -> ApiResult<Arc<Self>> {
        let s = Arc::new(Self {
            store: Store::new(history),
            registry: Registry::with_builtins(),
            clock,
            next_ip: AtomicU32::new(1),
        });
        let opts = WriteOptions::default();
        for ns in SYSTEM_NAMESPACES {
            s.create(
                &*s.def("", "namespaces")?,
                None,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                &opts,
            )?;
        }
        for (name, value, desc) in [
            (
                "system-node-critical",
                SYSTEM_NODE_CRITICAL,
                "Used for system critical pods that must not be moved from their current node.",
            ),
            (
                "system-cluster-critical",
                SYSTEM_CLUSTER_CRITICAL,
                "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
            ),
        ] {
            s.create(
                &*s.def("scheduling.k8s.io", "priorityclasses")?,
                None,
                json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value, "description": desc}),
                &opts,
            )?;
        }
        s.create(
            &*s.def("", "services")?,
            Some("default"),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
                   "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "targetPort": 6443}]}}),
            &opts,
        )?;
        Ok(s)
    }

    /// The definition of a built-in or registered resource.
    pub fn def(&self, group: &str, resource: &str) -> ApiResult<Arc<ResourceDef>> {
        self.registry
            .by_gr(&GroupResource::new(group, resource))
            .ok_or_else(|| ApiError::no_route(&format!("{resource}.{group}")))
    }

    /// Allocates the next service cluster IP from 10.96.0.0/12.
    pub fn allocate_cluster_ip(&self) -> String {
        let n = self.next_ip.fetch_add(1, Ordering::Relaxed) + 1;
        format!(
            "10.{}.{}.{}",
            96 + (n >> 16 & 0x0f),
            n >> 8 & 0xff,
            n & 0xff
        )
    }

    /// (value, preemptionPolicy) of a PriorityClass.
    pub fn priority_class(&self, name: &str) -> Option<(i64, String)> {
        let pc = self.store.get(
            &GroupResource::new("scheduling.k8s.io", "priorityclasses"),
            "",
            name,
        )?;
        let v = pc.value();
        Some((
            v.get("value").and_then(Value::as_i64).unwrap_or(0),
            v.get("preemptionPolicy")
                .and_then(Value::as_str)
                .unwrap_or("PreemptLowerPriority")
                .to_string(),
        ))
    }

    /// (name, value, preemptionPolicy) of the PriorityClass marked `globalDefault`.
    pub fn global_default_priority_class(&self) -> Option<(String, i64, String)> {
        let (_, pcs) = self.store.list(
            &GroupResource::new("scheduling.k8s.io", "priorityclasses"),
            None,
            None,
        );
        pcs.iter().find_map(|pc| {
            let v = pc.value();
            (v.get("globalDefault").and_then(Value::as_bool) == Some(true)).then(|| {
                (
                    pc.name.clone(),
                    v.get("value").and_then(Value::as_i64).unwrap_or(0),
                    v.get("preemptionPolicy")
                        .and_then(Value::as_str)
                        .unwrap_or("PreemptLowerPriority")
                        .to_string(),
                )
            })
        })
    }

    fn store_err(def: &ResourceDef, name: &str, e: StoreError) -> ApiError {
        match e {
            StoreError::NotFound => ApiError::not_found(&def.group, &def.resource, name),
            StoreError::AlreadyExists => ApiError::already_exists(&def.group, &def.resource, name),
            StoreError::Conflict(_) => ApiError::stale(&def.group, &def.resource, name),
            StoreError::Gone { requested, oldest } => {
                ApiError::gone(format!("too old resource version: {requested} ({oldest})"))
            }
            StoreError::Malformed(m) => ApiError::bad_request(m),
        }
    }

    /// Reads one object.
    pub fn get(&self, def: &ResourceDef, ns: &str, name: &str) -> ApiResult<Arc<Stored>> {
        self.store
            .get(&def.gr(), ns, name)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.resource, name))
    }

    /// Lists with selectors and pagination. The resourceVersion of a
    /// paginated list is that of its first page, so a watch started from it
    /// misses nothing.
    pub fn list(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> ApiResult<ListPage> {
        let filter = Filter::parse(
            def,
            opts.label_selector.as_deref(),
            opts.field_selector.as_deref(),
        )?;
        let (mut list_rv, mut after) = (None, None);
        if let Some(token) = opts.continue_token.as_deref().filter(|t| !t.is_empty()) {
            let (rv, key) = decode_continue(token)?;
            list_rv = Some(rv);
            after = Some(key);
        }
        let (rv, all) = self.store.list(&def.gr(), ns, after.as_ref());
        let mut items = Vec::new();
        let mut continue_token = None;
        for o in all {
            if !filter.matches(&o) {
                continue;
            }
            if opts.limit > 0 && items.len() == opts.limit {
                let last: &Arc<Stored> = &items[items.len() - 1];
                continue_token = Some(encode_continue(
                    list_rv.unwrap_or(rv),
                    &(last.namespace.clone(), last.name.clone()),
                ));
                break;
            }
            items.push(o);
        }
        Ok(ListPage {
            rv: list_rv.unwrap_or(rv),
            items,
            continue_token,
        })
    }

    /// Creates an object in `ns` (ignored for cluster-scoped resources).
    pub fn create(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        mut obj: Value,
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
                o["metadata"]["name"] = json!(format!("{prefix}{}", random_suffix()));
            }
            admission::admit_create(self, def, &mut o)?;
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

    fn check_namespace_open(&self, ns: &str) -> ApiResult<()> {
        let nsdef = self.def("", "namespaces")?;
        let n = self
            .store
            .get(&nsdef.gr(), "", ns)
            .ok_or_else(|| ApiError::not_found("", "namespaces", ns))?;
        if n.value().pointer("/metadata/deletionTimestamp").is_some() {
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

    fn normalize(&self, def: &ResourceDef, o: Value, mode: FieldValidation) -> ApiResult<Value> {
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

    /// Hooks after a committed write: CRDs (un)register their resource,
    /// namespaces get their default ServiceAccount.
    fn after_write(&self, def: &ResourceDef, stored: &Stored) {
        match (def.group.as_str(), def.resource.as_str()) {
            ("apiextensions.k8s.io", "customresourcedefinitions") => {
                if let Ok(res) = crd_resource(&stored.value()) {
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
            .pointer("/metadata/resourceVersion")
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
            let rv_before = cur.pointer("/metadata/resourceVersion").cloned();
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
            let rv_after = cur.pointer("/metadata/resourceVersion").cloned();
            if rv_after.is_some() && rv_after != rv_before {
                return Err(ApiError::stale(&def.group, &def.resource, name));
            }
            Ok(cur)
        })
    }

    /// Server-side apply: creates the object if absent, otherwise merges the
    /// applied configuration into it (lists by their merge keys). Field
    /// ownership is tracked only as far as conflicts on values another
    /// manager last set through apply: those are rejected unless `force`.
    #[allow(clippy::too_many_arguments)]
    fn apply(
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
                && applied.pointer("/metadata/resourceVersion")
                    != cur.pointer("/metadata/resourceVersion")
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

    /// The read-modify-write loop of the generic registry: retried when the
    /// object changed underneath unless the caller gave a resourceVersion.
    #[allow(clippy::too_many_arguments)]
    fn guaranteed_update(
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
            let finalized = new.pointer("/metadata/deletionTimestamp").is_some()
                && new
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .is_none_or(Vec::is_empty)
                && old
                    .pointer("/metadata/deletionGracePeriodSeconds")
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

    fn prepare_update(
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
        if let (Some(a), Some(b)) = (old.pointer("/metadata/uid"), new.pointer("/metadata/uid"))
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
                let mut o = old.clone();
                match new.get("status") {
                    Some(s) => o["status"] = s.clone(),
                    None => {
                        if let Some(m) = o.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
                o
            }
            Subresource::Finalize => {
                let mut o = old.clone();
                o["spec"]["finalizers"] = new
                    .pointer("/spec/finalizers")
                    .cloned()
                    .unwrap_or(json!([]));
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
                    match old.pointer(&format!("/metadata/{f}")) {
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
                        .pointer("/metadata/generation")
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
        out = self.normalize(def, out, opts.field_validation)?;
        Ok(out)
    }

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
                && obj.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid)
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
                .pointer("/metadata/finalizers")
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
            let deleting = obj.pointer("/metadata/deletionTimestamp").is_some();
            let blocked = !finalizers.is_empty() || (is_namespace && has_spec_finalizers(&obj));
            if opts.dry_run {
                return Ok(Deleted::Pending(cur.json.clone()));
            }
            if !blocked && grace == 0 {
                match self.store.delete(def, ns, name, Some(cur.rv)) {
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
                .pointer("/metadata/deletionGracePeriodSeconds")
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

    fn after_delete(&self, def: &ResourceDef, stored: &Stored) {
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
    fn grace_period(&self, def: &ResourceDef, obj: &Value, requested: Option<i64>) -> i64 {
        if !(def.group.is_empty() && def.resource == "pods") {
            return 0;
        }
        let bound = obj
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let phase = obj
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !bound || phase == "Succeeded" || phase == "Failed" {
            return 0;
        }
        requested
            .or_else(|| {
                obj.pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(30)
            .max(0)
    }

    /// The `autoscaling/v1` Scale of an object.
    pub fn get_scale(&self, def: &ResourceDef, ns: &str, name: &str) -> ApiResult<Value> {
        let spec = def
            .scale
            .clone()
            .ok_or_else(|| ApiError::no_route(&format!("{}/{name}/scale", def.resource)))?;
        let cur = self.get(def, ns, name)?;
        let obj = cur.value();
        let selector = spec
            .label_selector
            .as_deref()
            .and_then(|p| crate::registry::lookup(&obj, p))
            .map(selector_string)
            .unwrap_or_default();
        let mut meta = json!({
            "name": name,
            "uid": cur.uid,
            "resourceVersion": cur.rv.to_string(),
            "creationTimestamp": obj.pointer("/metadata/creationTimestamp").cloned().unwrap_or(Value::Null),
        });
        if !ns.is_empty() {
            meta["namespace"] = json!(ns);
        }
        Ok(json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": meta,
            "spec": {"replicas": crate::registry::lookup(&obj, &spec.spec_replicas).and_then(Value::as_i64).unwrap_or(0)},
            "status": {
                "replicas": crate::registry::lookup(&obj, &spec.status_replicas).and_then(Value::as_i64).unwrap_or(0),
                "selector": selector,
            }
        }))
    }

    /// Writes a Scale (PUT, or the result of a patch) back to its object.
    pub fn update_scale(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        scale: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let spec = def
            .scale
            .clone()
            .ok_or_else(|| ApiError::no_route(&format!("{}/{name}/scale", def.resource)))?;
        let replicas = scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .ok_or_else(|| {
                ApiError::invalid(
                    "autoscaling",
                    "Scale",
                    name,
                    vec![Cause::required("spec.replicas")],
                )
            })?;
        if replicas < 0 {
            return Err(ApiError::invalid(
                "autoscaling",
                "Scale",
                name,
                vec![Cause::invalid(
                    "spec.replicas",
                    &replicas.to_string(),
                    "must be greater than or equal to 0",
                )],
            ));
        }
        let precondition = scale
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .and_then(|s| s.parse::<u64>().ok());
        self.guaranteed_update(
            def,
            ns,
            name,
            Subresource::Main,
            opts,
            precondition,
            |mut cur| {
                set_path(&mut cur, &spec.spec_replicas, json!(replicas));
                Ok(cur)
            },
        )?;
        self.get_scale(def, ns, name)
    }
}

/// kind/apiVersion must match the resource when present; absent ones are filled in.
fn check_type(def: &ResourceDef, obj: &mut Value) -> ApiResult<()> {
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

fn has_spec_finalizers(ns: &Value) -> bool {
    ns.pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

/// Whether anything but metadata and status differs.
fn spec_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| -> BTreeMap<String, Value> {
        v.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    strip(old) != strip(new)
}

fn set_path(obj: &mut Value, path: &str, value: Value) {
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

/// A label selector (object or string) in its string form, as Scale reports it.
pub fn selector_string(sel: &Value) -> String {
    if let Some(s) = sel.as_str() {
        return s.to_string();
    }
    let mut parts = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            parts.push(format!("{k}={}", v.as_str().unwrap_or("")));
        }
    }
    if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
        for e in exprs {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("");
            let vals: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e.get("operator").and_then(Value::as_str).unwrap_or("") {
                "In" => parts.push(format!("{key} in ({})", vals.join(","))),
                "NotIn" => parts.push(format!("{key} notin ({})", vals.join(","))),
                "Exists" => parts.push(key.to_string()),
                "DoesNotExist" => parts.push(format!("!{key}")),
                _ => {}
            }
        }
    }
    parts.join(",")
}

/// Key under `fieldsV1` where the paths an apply manager set are recorded.
const APPLY_ANNOTATION: &str = "f:testbed.applied";

/// Records, in `metadata.managedFields`, the paths a manager applied.
fn set_apply_owner(obj: &mut Value, manager: &str, applied: &Value) {
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
fn apply_conflict(cur: &Value, applied: &Value, manager: &str) -> Option<String> {
    let mut mine = Vec::new();
    leaf_paths(applied, "", &mut mine);
    for e in cur
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)?
    {
        let other = e.get("manager").and_then(Value::as_str).unwrap_or("");
        if other == manager || e.get("operation").and_then(Value::as_str) != Some("Apply") {
            continue;
        }
        let owned: Vec<&str> = e
            .pointer(&format!(
                "/fieldsV1/{}",
                APPLY_ANNOTATION.replace('/', "~1")
            ))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for p in &mine {
            if owned.contains(&p.as_str()) && cur.pointer(p) != applied.pointer(p) {
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
fn leaf_paths(v: &Value, prefix: &str, out: &mut Vec<String>) {
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

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    bytes[..5]
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

fn encode_continue(rv: u64, key: &ObjKey) -> String {
    let raw = json!({"rv": rv, "ns": key.0, "name": key.1}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str) -> ApiResult<(u64, ObjKey)> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token:?}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let ns = v.get("ns").and_then(Value::as_str).ok_or_else(bad)?;
    let name = v.get("name").and_then(Value::as_str).ok_or_else(bad)?;
    Ok((rv, (ns.to_string(), name.to_string())))
}
