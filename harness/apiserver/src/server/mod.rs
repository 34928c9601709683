//! The API server's operations, independent of HTTP: get, list, create,
//! update, patch, delete with the semantics of the real API server's generic
//! registry (optimistic concurrency, status subresource, generation,
//! graceful deletion, finalizers, propagation policies), plus the `scale`
//! subresource. The HTTP layer (`http.rs`) and the server's own controllers
//! (`gc.rs`) both call these. One file per operation: `create`, `update`
//! (with patch), `apply`, `delete`, `scale`; reads (`get`, `list`) are here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use serde_json::{Value, json};
use simclock::Clock;

use crate::admission::{
    self, AdmissionContext, SYSTEM_CLUSTER_CRITICAL, SYSTEM_NODE_CRITICAL, name_of,
};
use crate::error::{ApiError, ApiResult, Cause};
use crate::normalize::{FieldValidation, NormalizeError, normalize};
use crate::patch;
use crate::registry::{GroupResource, Registry, ResourceDef, crd_resource};
use crate::store::{ObjKey, Store, StoreError, Stored};
use apimachinery::fields::FieldSelector;
use apimachinery::labels::LabelSelector;

mod apply;
mod create;
mod delete;
mod scale;
mod update;

use create::check_type;
use delete::has_spec_finalizers;
pub use scale::selector_string;
use update::set_path;

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
    /// ServiceAccount tokens issued by TokenRequest.
    pub tokens: crate::rbac::Tokens,
    /// Faults injected into requests from the client under test.
    pub faults: crate::faults::Faults,
    /// The writes of the clients under test, by client.
    pub writes: crate::writes::Writes,
    next_ip: AtomicU32,
    tls_requests: AtomicU64,
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
            tokens: Default::default(),
            faults: Default::default(),
            writes: Default::default(),
            next_ip: AtomicU32::new(1),
            tls_requests: AtomicU64::new(0),
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

    /// Counts an authenticated request served over TLS (from a client
    /// outside the process: kubectl, an autoscaler binary).
    pub fn count_tls_request(&self) {
        self.tls_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests served over TLS so far.
    pub fn tls_requests(&self) -> u64 {
        self.tls_requests.load(Ordering::Relaxed)
    }

    /// The definition of a built-in or registered resource.
    pub fn def(&self, group: &str, resource: &str) -> ApiResult<Arc<ResourceDef>> {
        self.registry
            .by_gr(&GroupResource::new(group, resource))
            .ok_or_else(|| ApiError::no_route(&format!("{resource}.{group}")))
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

impl AdmissionContext for Server {
    /// Allocates the next service cluster IP from 10.96.0.0/12.
    fn allocate_cluster_ip(&self) -> String {
        let n = self.next_ip.fetch_add(1, Ordering::Relaxed) + 1;
        format!(
            "10.{}.{}.{}",
            96 + (n >> 16 & 0x0f),
            n >> 8 & 0xff,
            n & 0xff
        )
    }

    /// (value, preemptionPolicy) of a PriorityClass.
    fn priority_class(&self, name: &str) -> Option<(i64, String)> {
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
    fn global_default_priority_class(&self) -> Option<(String, i64, String)> {
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

    fn serves_builtin(&self, gr: &GroupResource) -> bool {
        self.registry.by_gr(gr).is_some_and(|d| !d.custom)
    }

    fn now_rfc3339(&self) -> String {
        self.clock.rfc3339()
    }
}
