//! What the drainability rules read and answer: the annotations they
//! look at, the outcomes and blocking reasons, the flags that turn rules
//! off ([`DrainRules`]), the [`Context`] of an evaluation, and the pod
//! functions the rules share.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::budgets::Budgets;

/// `cluster-autoscaler.kubernetes.io/safe-to-evict`.
pub const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
/// `cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes`.
pub const SAFE_TO_EVICT_LOCAL_VOLUMES: &str =
    "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes";
/// `cluster-autoscaler.kubernetes.io/daemonset-pod`.
pub const DAEMONSET_POD: &str = "cluster-autoscaler.kubernetes.io/daemonset-pod";
/// `kubernetes.io/config.mirror`.
pub const MIRROR: &str = "kubernetes.io/config.mirror";

ca_names! {
    /// Why a pod blocks its node (`BlockingPodReason`).
    pub enum BlockingReason {
        /// The pod's controller does not exist.
        ControllerNotFound,
        /// Its controller would go below its min replicas.
        MinReplicasReached,
        /// No controller would recreate it.
        NotReplicated,
        /// It has local storage.
        LocalStorageRequested,
        /// `safe-to-evict: false`.
        NotSafeToEvictAnnotation,
        /// A kube-system pod without a PDB.
        UnmovableKubeSystemPod,
        /// Its PDB allows no disruption.
        NotEnoughPdb,
        /// Something failed.
        UnexpectedError,
    }
}

/// A rule's verdict on a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// No rule decided: the pod is drainable.
    Undefined,
    /// The pod can be moved.
    DrainOk,
    /// The pod blocks its node.
    Block(BlockingReason, String),
    /// The pod is ignored (not moved, not evicted, not blocking).
    Skip,
    /// The node waits until the pod completes.
    WaitForCompletion,
}

/// What the cluster says about a pod's controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControllerState {
    /// It exists; `replicas` when the kind has a replica count.
    Found {
        /// `spec.replicas`.
        replicas: Option<i32>,
    },
    /// It does not exist.
    NotFound,
}

/// Looks up controllers (ReplicaSet, ReplicationController, Job,
/// StatefulSet, DaemonSet) by kind, namespace and name.
pub trait Controllers {
    /// The controller's state.
    fn lookup(&self, kind: &str, namespace: &str, name: &str) -> ControllerState;
}

/// The drainability flags. The planner and the actuator's re-check read
/// the same rules, built once from the flags.
#[derive(Debug, Clone, Copy)]
pub struct DrainRules {
    /// `--skip-nodes-with-system-pods`.
    pub skip_nodes_with_system_pods: bool,
    /// `--skip-nodes-with-local-storage`.
    pub skip_nodes_with_local_storage: bool,
    /// `--skip-nodes-with-custom-controller-pods`.
    pub skip_nodes_with_custom_controller_pods: bool,
    /// `--min-replica-count`.
    pub min_replica_count: i32,
    /// `--blocking-system-pod-distruption-timeout`.
    pub system_pod_timeout: Duration,
}

impl DrainRules {
    /// The rules the flags set.
    pub fn from_flags(f: &crate::config::Flags) -> Self {
        Self {
            skip_nodes_with_system_pods: f.skip_nodes_with_system_pods,
            skip_nodes_with_local_storage: f.skip_nodes_with_local_storage,
            skip_nodes_with_custom_controller_pods: f.skip_nodes_with_custom_controller_pods,
            min_replica_count: f.min_replica_count,
            system_pod_timeout: f.blocking_system_pod_distruption_timeout,
        }
    }
}

impl Default for DrainRules {
    /// CA's defaults.
    fn default() -> Self {
        Self {
            skip_nodes_with_system_pods: true,
            skip_nodes_with_local_storage: true,
            skip_nodes_with_custom_controller_pods: true,
            min_replica_count: 0,
            system_pod_timeout: Duration::from_secs(3600),
        }
    }
}

/// The rules and the cluster facts they read.
pub struct Context<'a> {
    /// Now.
    pub now: SystemTime,
    /// The flags' rules.
    pub rules: DrainRules,
    /// Budgets in the cluster.
    pub budgets: &'a Budgets,
    /// Controller lookups.
    pub controllers: &'a dyn Controllers,
}

pub(super) fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The owner reference marked `controller: true`.
pub fn controller_ref(pod: &Pod) -> Option<&OwnerReference> {
    pod.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// The controller's uid.
pub fn controller_uid(pod: &Pod) -> Option<&str> {
    controller_ref(pod).map(|r| r.uid.as_str())
}

/// The controller owner reference (kind, name, api group).
pub fn controller_of(pod: &Pod) -> Option<(&str, &str, &str)> {
    controller_ref(pod).map(|r| {
        let group = r.api_version.split_once('/').map_or("", |(g, _)| g);
        (r.kind.as_str(), r.name.as_str(), group)
    })
}

/// Whether a pod is a DaemonSet pod (controller kind DaemonSet, or the
/// `daemonset-pod: "true"` annotation).
pub fn is_daemonset_pod(pod: &Pod) -> bool {
    controller_of(pod).is_some_and(|(k, _, _)| k == "DaemonSet")
        || annotation(pod, DAEMONSET_POD) == Some("true")
}

/// Whether a pod is a mirror (static) pod.
pub fn is_mirror_pod(pod: &Pod) -> bool {
    annotation(pod, MIRROR).is_some()
}

/// Whether deletion was requested more than grace period + 30 s ago.
pub fn is_long_terminating(pod: &Pod, now: SystemTime) -> bool {
    let Some(ts) = pod.metadata.deletion_timestamp.as_ref() else {
        return false;
    };
    let grace = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    let grace = Duration::from_secs(u64::try_from(grace).unwrap_or(0));
    SystemTime::from(ts.0) + grace + Duration::from_secs(30) < now
}

pub(super) fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

pub(super) fn pod_name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("")
}

pub(super) fn pod_ns(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}
