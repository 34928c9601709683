//! `NodeInfo`: a node with the pods bound to it and what they use, the unit
//! every filter and score works on (kube-scheduler's `framework.NodeInfo`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, PodCondition, PodStatus};
use k8s_openapi::api::storage::v1::CSINode;

use crate::dynamicresources::api::ResourceSlice;
use crate::labels::Labels;
use crate::resources::{Resources, node_allocatable, pod_requests, pod_requests_for_scoring};

/// What a node's CSINode says: its drivers and their volume limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsiNode {
    /// Driver name → `allocatable.count` (`None`: no limit).
    pub drivers: BTreeMap<String, Option<i64>>,
}

impl CsiNode {
    /// The drivers of a CSINode object.
    pub fn from_object(csi: &CSINode) -> Self {
        Self {
            drivers: csi
                .spec
                .drivers
                .iter()
                .map(|d| {
                    let count = d.allocatable.as_ref().and_then(|a| a.count);
                    (d.name.clone(), count.map(i64::from))
                })
                .collect(),
        }
    }

    /// The drivers that have a limit.
    pub(crate) fn limits(&self) -> impl Iterator<Item = (&str, i64)> {
        self.drivers
            .iter()
            .filter_map(|(d, c)| c.map(|c| (d.as_str(), c)))
    }
}

/// A host port a pod uses: protocol, host IP (`0.0.0.0` when unset), port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// Host IP the port binds, `0.0.0.0` for all.
    pub ip: String,
    /// Port number.
    pub port: i32,
}

impl HostPort {
    /// Whether two host ports conflict (same protocol and port, and the same
    /// IP or either binds all addresses).
    pub fn conflicts(&self, o: &Self) -> bool {
        self.protocol == o.protocol
            && self.port == o.port
            && (self.ip == o.ip || self.ip == "0.0.0.0" || o.ip == "0.0.0.0")
    }
}

/// The host ports a pod asks for.
pub fn pod_host_ports(pod: &Pod) -> Vec<HostPort> {
    let spec = pod.spec.iter();
    let containers = spec.flat_map(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
    });
    containers
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|p| *p > 0)?;
            Some(HostPort {
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                ip: p
                    .host_ip
                    .clone()
                    .filter(|ip| !ip.is_empty())
                    .unwrap_or_else(|| "0.0.0.0".into()),
                port,
            })
        })
        .collect()
}

/// A pod with what the scheduler computes about it once. Cloning it is
/// cheap (the facts are shared): a snapshot copies every pod of the
/// cluster each loop.
#[derive(Debug, Clone)]
pub struct PodInfo(Arc<PodFacts>);

/// What [`PodInfo`] holds.
#[derive(Debug, Clone)]
pub struct PodFacts {
    /// The pod.
    pub pod: Arc<Pod>,
    /// `namespace/name`.
    pub key: String,
    /// [`key_hash`] of `key`: a node's pods are found by key, and keys
    /// share long prefixes (namespace, workload), so a hash tells two
    /// apart sooner than the bytes do.
    pub key_hash: u64,
    /// Effective requests (`pods` = 1).
    pub requests: Resources,
    /// CPU and memory with the scoring defaults for empty requests.
    pub non_zero: (i64, i64),
    /// Host ports used.
    pub ports: Vec<HostPort>,
    /// Priority (0 when unset).
    pub priority: i32,
    /// Whether it has required pod anti-affinity terms (checked against
    /// incoming pods).
    pub has_required_anti_affinity: bool,
    /// Whether it is being deleted (it has a deletion timestamp).
    pub terminating: bool,
}

impl std::ops::Deref for PodInfo {
    type Target = PodFacts;

    fn deref(&self) -> &PodFacts {
        &self.0
    }
}

impl PodInfo {
    /// Computes the pod's scheduling facts.
    pub fn new(pod: Arc<Pod>) -> Self {
        let key = pod_key(&pod);
        let has_required_anti_affinity = pod
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .is_some_and(|t| !t.is_empty());
        Self(Arc::new(PodFacts {
            requests: pod_requests(&pod),
            non_zero: pod_requests_for_scoring(&pod),
            ports: pod_host_ports(&pod),
            priority: pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0),
            has_required_anti_affinity,
            terminating: pod.metadata.deletion_timestamp.is_some(),
            key_hash: key_hash(&key),
            key,
            pod,
        }))
    }

    /// The same scheduling facts for another version of the pod (bound
    /// elsewhere, renamed, stripped of what scheduling never reads): its key
    /// follows the new object.
    pub fn with_pod(&self, pod: Pod) -> Self {
        let key = pod_key(&pod);
        Self(Arc::new(PodFacts {
            key_hash: key_hash(&key),
            key,
            terminating: pod.metadata.deletion_timestamp.is_some(),
            pod: Arc::new(pod),
            ..PodFacts::clone(&self.0)
        }))
    }

    /// The same facts over the pod without what nothing reads once they
    /// are computed: its containers (their requests and ports are in the
    /// facts), managed fields, generate name, resource version, the
    /// last-applied annotation, and of its status all but the phase, the
    /// PodScheduled condition of a pod not yet bound (the scheduler's
    /// Unschedulable mark; a bound pod's says only True), the nominated
    /// node, reason and message, start time (preemption's order) and claim
    /// statuses (no container statuses, IPs or other conditions). The
    /// caches that hold every pod of a cluster (the autoscaler's, the
    /// testbed scheduler's) keep pods so: a pod's `Container`s alone are
    /// over 2 KB, and at 300,000 pods they were most of what a cache held;
    /// a bound pod's condition was another 200 bytes. What is kept is a
    /// fresh copy: left where it was decoded, among the freed parts of the
    /// whole object, it kept glibc's heap fragmented (the autoscaler's peak
    /// at 10,000 nodes was 11% higher).
    pub fn compact(self) -> Self {
        let mut facts = Arc::try_unwrap(self.0).unwrap_or_else(|shared| (*shared).clone());
        let mut pod = Arc::try_unwrap(facts.pod).unwrap_or_else(|shared| (*shared).clone());
        pod.metadata.managed_fields = None;
        pod.metadata.generate_name = None;
        pod.metadata.resource_version = None;
        if let Some(a) = pod.metadata.annotations.as_mut() {
            a.remove("kubectl.kubernetes.io/last-applied-configuration");
            if a.is_empty() {
                pod.metadata.annotations = None;
            }
        }
        let bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        if let Some(spec) = pod.spec.as_mut() {
            spec.containers = Vec::new();
            spec.init_containers = None;
            spec.ephemeral_containers = None;
        }
        if let Some(status) = pod.status.take() {
            let scheduled: Vec<PodCondition> = status
                .conditions
                .into_iter()
                .flatten()
                .filter(|c| !bound && c.type_ == "PodScheduled")
                .collect();
            pod.status = Some(PodStatus {
                phase: status.phase,
                conditions: (!scheduled.is_empty()).then_some(scheduled),
                nominated_node_name: status.nominated_node_name,
                reason: status.reason,
                message: status.message,
                start_time: status.start_time,
                resource_claim_statuses: status.resource_claim_statuses,
                ..PodStatus::default()
            });
        }
        facts.pod = Arc::new(pod.clone());
        Self(Arc::new(facts))
    }

    /// The pod's namespace.
    pub fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// The pod's labels.
    pub fn labels(&self) -> &Labels {
        crate::labels::labels_of(self.pod.metadata.labels.as_ref())
    }
}

/// `namespace/name` of a pod.
pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// The hash of a pod key that [`PodFacts::key_hash`] holds: the same for
/// the same key in every process (SipHash with fixed keys).
pub fn key_hash(key: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

/// A node and the pods on it.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// The node.
    pub node: Arc<Node>,
    /// Allocatable resources (`pods` included).
    pub allocatable: Resources,
    /// Sum of the pods' requests (`pods` = their count).
    pub requested: Resources,
    /// Sum of the pods' scoring requests (CPU, memory).
    pub non_zero: (i64, i64),
    /// The pods bound (or assumed) to the node, shared between the copies
    /// of a NodeInfo (each loop's snapshot) until one of them changes.
    pub pods: Arc<Vec<PodInfo>>,
    /// How many of them have required pod anti-affinity terms.
    pub anti_affinity_pods: usize,
    /// How many of them are being deleted.
    pub terminating_pods: usize,
    /// Its CSINode's drivers, when it has one (NodeVolumeLimits).
    pub csi: Option<Arc<CsiNode>>,
    /// The ResourceSlices local to it (`spec.nodeName`), DynamicResources.
    pub slices: Vec<Arc<ResourceSlice>>,
}

impl NodeInfo {
    /// A node without pods.
    pub fn new(node: Arc<Node>) -> Self {
        Self {
            allocatable: node_allocatable(&node),
            node,
            requested: Resources::default(),
            non_zero: (0, 0),
            pods: Arc::default(),
            anti_affinity_pods: 0,
            terminating_pods: 0,
            csi: None,
            slices: Vec::new(),
        }
    }

    /// Replaces the node object, keeping the pods.
    pub fn set_node(&mut self, node: Arc<Node>) {
        self.allocatable = node_allocatable(&node);
        self.node = node;
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        self.node.metadata.name.as_deref().unwrap_or("")
    }

    /// The node's labels.
    pub fn labels(&self) -> &Labels {
        crate::labels::labels_of(self.node.metadata.labels.as_ref())
    }

    /// Adds a pod (replacing one with the same key).
    pub fn add_pod(&mut self, pod: PodInfo) {
        if let Some(i) = self.position(&pod.key, pod.key_hash) {
            self.take_pod(i);
        }
        self.requested.add(&pod.requests);
        self.non_zero.0 += pod.non_zero.0;
        self.non_zero.1 += pod.non_zero.1;
        self.anti_affinity_pods += usize::from(pod.has_required_anti_affinity);
        self.terminating_pods += usize::from(pod.terminating);
        Arc::make_mut(&mut self.pods).push(pod);
    }

    /// Removes a pod by `namespace/name`.
    pub fn remove_pod(&mut self, key: &str) -> Option<PodInfo> {
        let i = self.position(key, key_hash(key))?;
        Some(self.take_pod(i))
    }

    /// Where the pod keyed `key` (whose [`key_hash`] is `hash`) is.
    fn position(&self, key: &str, hash: u64) -> Option<usize> {
        self.pods
            .iter()
            .position(|p| p.key_hash == hash && p.key == key)
    }

    /// Takes the `i`th pod out, with its share of the sums.
    fn take_pod(&mut self, i: usize) -> PodInfo {
        let pod = Arc::make_mut(&mut self.pods).swap_remove(i);
        self.requested.sub(&pod.requests);
        self.non_zero.0 -= pod.non_zero.0;
        self.non_zero.1 -= pod.non_zero.1;
        self.anti_affinity_pods -= usize::from(pod.has_required_anti_affinity);
        self.terminating_pods -= usize::from(pod.terminating);
        pod
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn running_pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "a"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": "me"},
                "managedFields": [{"manager": "kubectl"}]},
            "spec": {"nodeName": "n1", "priority": 7,
                "containers": [{"name": "c", "image": "i",
                    "ports": [{"containerPort": 80, "hostPort": 8080}],
                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
                "volumes": [{"name": "v", "emptyDir": {}}]},
            "status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
                "podIP": "10.0.0.1", "startTime": "2026-01-01T00:00:00Z",
                "containerStatuses": [{"name": "c", "image": "i", "imageID": "x", "ready": true, "restartCount": 0}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_compact_pod_keeps_its_facts_and_what_filters_read_and_drops_its_containers() {
        let info = PodInfo::new(Arc::new(running_pod())).compact();
        assert_eq!(info.key, "ns/p");
        assert_eq!(info.requests.milli_cpu, 500);
        assert_eq!(info.ports.len(), 1);
        assert_eq!(info.priority, 7);
        let pod = &info.pod;
        let spec = pod.spec.as_ref().unwrap();
        assert!(spec.containers.is_empty());
        assert_eq!(spec.node_name.as_deref(), Some("n1"));
        assert_eq!(
            spec.volumes.as_ref().map(Vec::len),
            Some(1),
            "volume limits read them"
        );
        let status = pod.status.as_ref().unwrap();
        assert!(status.container_statuses.is_none());
        assert!(
            status.conditions.is_none(),
            "a bound pod's PodScheduled says only True"
        );
        assert!(status.pod_ip.is_none());
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert!(status.start_time.is_some(), "preemption's order");
        assert!(pod.metadata.managed_fields.is_none());
        assert!(pod.metadata.generate_name.is_none());
        assert!(pod.metadata.resource_version.is_none());
        let annotations = pod.metadata.annotations.as_ref().unwrap();
        assert!(!annotations.contains_key("kubectl.kubernetes.io/last-applied-configuration"));
        assert_eq!(annotations["keep"], "me");
        assert_eq!(info.labels().get("app"), Some(&"a".to_string()));
    }

    #[test]
    fn a_compact_pending_pod_keeps_the_schedulers_mark_and_no_other_condition() {
        let mut pod = running_pod();
        pod.spec.as_mut().unwrap().node_name = None;
        pod.metadata.annotations = Some(
            [(
                "kubectl.kubernetes.io/last-applied-configuration".to_string(),
                "{}".to_string(),
            )]
            .into(),
        );
        let status = pod.status.as_mut().unwrap();
        status.phase = Some("Pending".into());
        status.conditions = Some(vec![
            serde_json::from_value(json!({"type": "Ready", "status": "False"})).unwrap(),
            serde_json::from_value(json!({"type": "PodScheduled", "status": "False",
                "reason": "Unschedulable", "message": "0/3 nodes are available"}))
            .unwrap(),
        ]);
        let info = PodInfo::new(Arc::new(pod)).compact();
        let conditions = info
            .pod
            .status
            .as_ref()
            .unwrap()
            .conditions
            .as_ref()
            .unwrap();
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].reason.as_deref(), Some("Unschedulable"));
        assert_eq!(
            conditions[0].message.as_deref(),
            Some("0/3 nodes are available")
        );
        assert!(
            info.pod.metadata.annotations.is_none(),
            "no annotation left: no map kept"
        );
    }

    #[test]
    fn compacting_a_shared_pod_leaves_the_other_holders_copy_whole() {
        let full = PodInfo::new(Arc::new(running_pod()));
        let compact = full.clone().compact();
        assert!(compact.pod.spec.as_ref().unwrap().containers.is_empty());
        assert_eq!(full.pod.spec.as_ref().unwrap().containers.len(), 1);
    }
}
