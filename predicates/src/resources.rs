//! Resource arithmetic as kube-scheduler's NodeResourcesFit plugin does it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::quantity::{parse_milli, parse_value};

/// CPU that a container without a CPU request counts as, for scoring only
/// (kube-scheduler's `DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Memory that a container without a memory request counts as, for scoring
/// only (`DefaultMemoryRequest`, 200 MiB).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// An amount of resources: CPU in millicores, the rest in units.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    /// CPU, millicores.
    pub milli_cpu: i64,
    /// Memory, bytes.
    pub memory: i64,
    /// Ephemeral storage, bytes.
    pub ephemeral_storage: i64,
    /// Pod count (only meaningful for node capacity).
    pub pods: i64,
    /// Extended and other scalar resources (`nvidia.com/gpu`, `hugepages-2Mi`).
    pub scalar: BTreeMap<String, i64>,
}

impl Resources {
    /// Reads a `ResourceList` (requests, limits, capacity, allocatable).
    /// Malformed quantities count as zero (the API server rejects them).
    pub fn from_list(list: Option<&BTreeMap<String, Quantity>>) -> Self {
        let mut r = Self::default();
        for (name, q) in list.into_iter().flatten() {
            r.set(name, &q.0);
        }
        r
    }

    fn set(&mut self, name: &str, q: &str) {
        match name {
            "cpu" => self.milli_cpu = parse_milli(q).unwrap_or(0),
            "memory" => self.memory = parse_value(q).unwrap_or(0),
            "ephemeral-storage" => self.ephemeral_storage = parse_value(q).unwrap_or(0),
            "pods" => self.pods = parse_value(q).unwrap_or(0),
            other => {
                self.scalar
                    .insert(other.to_string(), parse_value(q).unwrap_or(0));
            }
        }
    }

    /// Adds another amount.
    pub fn add(&mut self, o: &Self) {
        self.milli_cpu += o.milli_cpu;
        self.memory += o.memory;
        self.ephemeral_storage += o.ephemeral_storage;
        self.pods += o.pods;
        for (k, v) in &o.scalar {
            *self.scalar.entry(k.clone()).or_default() += v;
        }
    }

    /// Subtracts another amount.
    pub fn sub(&mut self, o: &Self) {
        self.milli_cpu -= o.milli_cpu;
        self.memory -= o.memory;
        self.ephemeral_storage -= o.ephemeral_storage;
        self.pods -= o.pods;
        for (k, v) in &o.scalar {
            *self.scalar.entry(k.clone()).or_default() -= v;
        }
    }

    /// Element-wise maximum.
    pub fn max(&mut self, o: &Self) {
        self.milli_cpu = self.milli_cpu.max(o.milli_cpu);
        self.memory = self.memory.max(o.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(o.ephemeral_storage);
        self.pods = self.pods.max(o.pods);
        for (k, v) in &o.scalar {
            let e = self.scalar.entry(k.clone()).or_default();
            *e = (*e).max(*v);
        }
    }

    /// True when every amount is zero.
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar.values().all(|v| *v == 0)
    }
}

fn container_requests(c: &Container) -> Resources {
    let r = c.resources.as_ref();
    let mut req = Resources::from_list(r.and_then(|r| r.requests.as_ref()));
    // A limit without a request defaults the request (API server defaulting;
    // applied here too for objects created without it).
    let limits = Resources::from_list(r.and_then(|r| r.limits.as_ref()));
    let has = |name: &str| {
        r.and_then(|r| r.requests.as_ref())
            .is_some_and(|m| m.contains_key(name))
    };
    if !has("cpu") {
        req.milli_cpu = limits.milli_cpu;
    }
    if !has("memory") {
        req.memory = limits.memory;
    }
    if !has("ephemeral-storage") {
        req.ephemeral_storage = limits.ephemeral_storage;
    }
    for (k, v) in &limits.scalar {
        if !has(k) {
            req.scalar.insert(k.clone(), *v);
        }
    }
    req
}

/// A pod's effective requests, as kube-scheduler computes them: the sum of
/// its containers and sidecars, or the largest init container step if that
/// is larger, plus the pod overhead. `pods` is 1.
pub fn pod_requests(pod: &Pod) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources {
            pods: 1,
            ..Resources::default()
        };
    };
    let mut reqs = Resources::default();
    for c in &spec.containers {
        reqs.add(&container_requests(c));
    }
    let mut sidecars = Resources::default();
    let mut init_max = Resources::default();
    for c in spec.init_containers.iter().flatten() {
        let r = container_requests(c);
        if c.restart_policy.as_deref() == Some("Always") {
            reqs.add(&r);
            sidecars.add(&r);
            init_max.max(&sidecars);
        } else {
            let mut step = sidecars.clone();
            step.add(&r);
            init_max.max(&step);
        }
    }
    reqs.max(&init_max);
    reqs.add(&Resources::from_list(spec.overhead.as_ref()));
    reqs.pods = 1;
    reqs
}

/// Requests used for scoring: containers without a CPU or memory request
/// count as 100m / 200Mi (kube-scheduler's non-zero requests).
pub fn pod_requests_for_scoring(pod: &Pod) -> (i64, i64) {
    let mut cpu = 0;
    let mut mem = 0;
    for c in pod.spec.iter().flat_map(|s| &s.containers) {
        let r = container_requests(c);
        cpu += if r.milli_cpu == 0 {
            DEFAULT_MILLI_CPU_REQUEST
        } else {
            r.milli_cpu
        };
        mem += if r.memory == 0 {
            DEFAULT_MEMORY_REQUEST
        } else {
            r.memory
        };
    }
    (cpu, mem)
}

/// A node's allocatable resources (capacity when allocatable is absent).
pub fn node_allocatable(node: &Node) -> Resources {
    let status = node.status.as_ref();
    let list = status
        .and_then(|s| s.allocatable.as_ref())
        .or_else(|| status.and_then(|s| s.capacity.as_ref()));
    Resources::from_list(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": v})).unwrap()
    }

    #[test]
    fn init_containers_count_as_the_largest_step_and_sidecars_add_up() {
        let p = pod(json!({
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}},
                {"name": "b", "resources": {"limits": {"cpu": "200m", "nvidia.com/gpu": "1"}}}
            ],
            "initContainers": [
                {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}},
                {"name": "init", "resources": {"requests": {"cpu": "1", "memory": "10Mi"}}}
            ],
            "overhead": {"cpu": "10m"}
        }));
        let r = pod_requests(&p);
        // containers 300m + sidecar 50m = 350m; init step = 50m + 1000m = 1050m; + 10m overhead
        assert_eq!(r.milli_cpu, 1060);
        assert_eq!(r.memory, 100 * 1024 * 1024);
        assert_eq!(r.scalar.get("nvidia.com/gpu"), Some(&1));
        assert_eq!(r.pods, 1);
        assert_eq!(
            pod_requests_for_scoring(&p),
            (300, 100 * 1024 * 1024 + DEFAULT_MEMORY_REQUEST)
        );
    }
}
