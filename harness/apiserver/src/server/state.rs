//! The server's state ([`Server`]): the store, the registry, the clock and
//! the test hooks; its construction with the system objects, and the
//! lookups admission needs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use apimachinery::json::Lookup;
use serde_json::{Value, json};
use simclock::Clock;

use super::options::WriteOptions;
use crate::admission::{AdmissionContext, SYSTEM_CLUSTER_CRITICAL, SYSTEM_NODE_CRITICAL};
use crate::error::{ApiError, ApiResult};
use crate::registry::{GroupResource, Registry, ResourceDef};
use crate::store::{Store, StoreError};
use crate::window::WindowPolicy;

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
    /// How long requests take to answer, and the server's own 5xx.
    pub timings: crate::timings::Timings,
    next_ip: AtomicU32,
    tls_requests: AtomicU64,
    expired_watches: AtomicU64,
}

/// The namespaces every cluster has, which cannot be deleted.
pub(super) const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

impl Server {
    /// A server with the built-in resources, the system namespaces, the
    /// system priority classes and the `default/kubernetes` service.
    pub fn new(clock: Clock, window: WindowPolicy) -> ApiResult<Arc<Self>> {
        let s = Arc::new(Self {
            store: Store::new(window),
            registry: Registry::with_builtins(),
            clock,
            tokens: Default::default(),
            faults: Default::default(),
            writes: Default::default(),
            timings: Default::default(),
            next_ip: AtomicU32::new(1),
            tls_requests: AtomicU64::new(0),
            expired_watches: AtomicU64::new(0),
        });
        // kube-apiserver's watch cache indexes pods by the node they are
        // bound to: a node's pods are listed without reading the others.
        let pods = s.def("", "pods")?;
        if let Some(field) = pods
            .field_names()
            .iter()
            .position(|f| *f == "spec.nodeName")
        {
            s.store.index_field(&pods.gr(), field);
        }
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

    /// Counts a watch of a client under test answered `410 Gone` because
    /// its resourceVersion left the resource's window (not an injected fault).
    pub fn count_expired_watch(&self) {
        self.expired_watches.fetch_add(1, Ordering::Relaxed);
    }

    /// Watches of clients under test answered `410 Gone` by the window so far.
    pub fn expired_watches(&self) -> u64 {
        self.expired_watches.load(Ordering::Relaxed)
    }

    /// The definition of a built-in or registered resource.
    pub fn def(&self, group: &str, resource: &str) -> ApiResult<Arc<ResourceDef>> {
        self.registry
            .by_gr(&GroupResource::new(group, resource))
            .ok_or_else(|| ApiError::no_route(&format!("{resource}.{group}")))
    }

    pub(super) fn store_err(def: &ResourceDef, name: &str, e: StoreError) -> ApiError {
        match e {
            StoreError::NotFound => ApiError::not_found(&def.group, &def.resource, name),
            StoreError::AlreadyExists => ApiError::already_exists(&def.group, &def.resource, name),
            StoreError::Conflict(_) => ApiError::stale(&def.group, &def.resource, name),
            StoreError::Gone { requested, oldest } => {
                ApiError::gone(format!("too old resource version: {requested} ({oldest})"))
            }
            StoreError::Malformed(m) => ApiError::bad_request(m),
            StoreError::TooLarge => ApiError::etcd_request_too_large(),
        }
    }
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

    fn pod_quotas(&self, namespace: &str) -> (Vec<(String, i64)>, i64) {
        let (_, quotas) = self.store.list(
            &GroupResource::new("", "resourcequotas"),
            Some(namespace),
            None,
        );
        let limits: Vec<(String, i64)> = quotas
            .iter()
            .filter_map(|q| {
                let value = q.value();
                let hard = value.lookup("/spec/hard")?;
                let limit = ["pods", "count/pods"]
                    .iter()
                    .filter_map(|k| hard.get(*k))
                    .filter_map(|v| match v {
                        Value::String(s) => s.parse::<i64>().ok(),
                        other => other.as_i64(),
                    })
                    .min()?;
                Some((q.name.clone(), limit))
            })
            .collect();
        if limits.is_empty() {
            return (limits, 0);
        }
        let (_, pods) = self
            .store
            .list(&GroupResource::new("", "pods"), Some(namespace), None);
        let used = pods
            .iter()
            .filter(|p| {
                !matches!(
                    p.value().lookup("/status/phase").and_then(Value::as_str),
                    Some("Succeeded" | "Failed")
                )
            })
            .count();
        (limits, i64::try_from(used).unwrap_or(i64::MAX))
    }

    fn serves_builtin(&self, gr: &GroupResource) -> bool {
        self.registry.by_gr(gr).is_some_and(|d| !d.custom)
    }

    fn now_rfc3339(&self) -> String {
        self.clock.rfc3339()
    }
}
