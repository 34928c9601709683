//! The cloud provider interface, mirroring upstream CA's
//! (`cloudprovider/cloud_provider.go`, docs/reference/ca-rules.md §9): a provider lists node
//! groups; a node group has a min, max and target size, grows
//! (`increase_size`), deletes given nodes (`delete_nodes`, lowering its
//! target), shrinks its request for nodes that have not registered
//! (`decrease_target_size`), lists its instances with their states and
//! errors, and describes a new node (`template_node_info`).
//!
//! Async operations return boxed futures so that providers are trait
//! objects, chosen at run time by `--cloud-provider`.

/// The AWS provider.
#[cfg(feature = "aws")]
pub mod aws;
/// Which provider names are implemented (the one list).
pub mod builder;
/// The Cluster API provider.
pub mod clusterapi;
/// The kwok provider.
pub mod kwok;

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

/// Where an instance is in its life (`InstanceState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceState {
    /// Running (registered or about to).
    Running,
    /// Being created.
    Creating,
    /// Being deleted.
    Deleting,
}

/// The class of an instance error (`InstanceErrorClass`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Out of resources (quota, stock-out): prints `OutOfResource`.
    OutOfResources,
    /// Anything else: prints `Other`.
    Other,
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::OutOfResources => "OutOfResource",
            Self::Other => "Other",
        })
    }
}

/// Why an instance failed (`InstanceErrorInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceErrorInfo {
    /// The class.
    pub class: ErrorClass,
    /// Provider-specific code (becomes the backoff's `errorCode`).
    pub code: String,
    /// Human-readable message.
    pub message: String,
}

/// One instance of a node group. `id` equals the Node's `spec.providerID`
/// once it has registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// Provider ID.
    pub id: String,
    /// State; `None` means running / expected to register.
    pub state: Option<InstanceState>,
    /// Creation or other error.
    pub error: Option<InstanceErrorInfo>,
}

/// The AutoscalerError types (the `errors_total{type}` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// `cloudProviderError`.
    CloudProvider,
    /// `apiCallError`.
    ApiCall,
    /// `internalError`.
    Internal,
    /// `transientError`.
    Transient,
    /// `configurationError`.
    Configuration,
    /// `nodeGroupDoesNotExistError`.
    NodeGroupDoesNotExist,
}

impl ErrorType {
    /// Upstream's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CloudProvider => "cloudProviderError",
            Self::ApiCall => "apiCallError",
            Self::Internal => "internalError",
            Self::Transient => "transientError",
            Self::Configuration => "configurationError",
            Self::NodeGroupDoesNotExist => "nodeGroupDoesNotExistError",
        }
    }
}

/// A cloud provider error.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum CloudError {
    /// The provider does not implement this (`ErrNotImplemented`).
    #[error("Not implemented")]
    NotImplemented,
    /// Anything else, with the error type it counts as.
    #[error("{message}")]
    Failed {
        /// Error type.
        kind: ErrorType,
        /// What failed, on which object.
        message: String,
        /// Error details for backoff (quota, stock-out...), when known.
        info: Option<InstanceErrorInfo>,
    },
}

impl CloudError {
    /// A `cloudProviderError`.
    pub fn provider(message: impl Into<String>) -> Self {
        Self::Failed {
            kind: ErrorType::CloudProvider,
            message: message.into(),
            info: None,
        }
    }

    /// A `configurationError`.
    pub fn configuration(message: impl Into<String>) -> Self {
        Self::Failed {
            kind: ErrorType::Configuration,
            message: message.into(),
            info: None,
        }
    }

    /// An `apiCallError`.
    pub fn api(message: impl Into<String>) -> Self {
        Self::Failed {
            kind: ErrorType::ApiCall,
            message: message.into(),
            info: None,
        }
    }

    /// The error type.
    pub fn kind(&self) -> ErrorType {
        match self {
            Self::NotImplemented => ErrorType::Internal,
            Self::Failed { kind, .. } => *kind,
        }
    }
}

/// Per-group autoscaling options (`NodeGroupAutoscalingOptions`); the
/// defaults come from the flags, providers may override them per group.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeGroupOptions {
    /// `scaledownutilizationthreshold`.
    pub scale_down_utilization_threshold: f64,
    /// `scaledowngpuutilizationthreshold`.
    pub scale_down_gpu_utilization_threshold: f64,
    /// `scaledownunneededtime`.
    pub scale_down_unneeded_time: Duration,
    /// `scaledownunreadytime`.
    pub scale_down_unready_time: Duration,
    /// `maxnodeprovisiontime`.
    pub max_node_provision_time: Duration,
    /// `maxnodestartuptime`.
    pub max_node_startup_time: Duration,
    /// `ignoredaemonsetsutilization`.
    pub ignore_daemonsets_utilization: bool,
    /// The group is scaled only between 0 and max, atomically.
    pub zero_or_max_node_scaling: bool,
}

/// What a new node of a group looks like: the node and the pods that
/// start on every new node (DaemonSet pods, kube-proxy).
#[derive(Debug, Clone)]
pub struct TemplateNodeInfo {
    /// The node.
    pub node: Node,
    /// Pods started on it.
    pub pods: Vec<Pod>,
    /// Its CSI drivers and their volume limits, when the provider knows
    /// them (Cluster API's `csi-driver` annotation).
    pub csi: Option<predicates::CsiNode>,
    /// Its devices: node-local ResourceSlices (Cluster API's `dra-driver`
    /// annotation, the kwok provider's `kwok.x-k8s.io/dra-devices`).
    pub slices: Vec<predicates::dynamicresources::api::ResourceSlice>,
}

/// The current nodes, as the autoscaler's cache has them (providers that
/// derive instances from Node objects read them through this).
pub type NodeLister = Arc<dyn Fn() -> Vec<Arc<Node>> + Send + Sync>;

/// Locks a mutex of a provider's state, even one a panic poisoned.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A node group (`NodeGroup`).
pub trait NodeGroup: Send + Sync + fmt::Debug {
    /// Unique, stable id (used in status, events, metrics, priority regexes).
    fn id(&self) -> String;
    /// Minimum size.
    fn min_size(&self) -> usize;
    /// Maximum size.
    fn max_size(&self) -> usize;
    /// Desired size (may differ from the registered nodes while they boot
    /// or go away).
    fn target_size(&self) -> Result<usize, CloudError>;
    /// Grows the group by `delta` (> 0).
    fn increase_size(&self, delta: usize) -> BoxFuture<'_, Result<(), CloudError>>;
    /// Grows the group by `delta` in one piece or not at all
    /// (`AtomicIncreaseSize`, for best-effort-atomic ProvisioningRequests);
    /// `NotImplemented` where the provider cannot promise it, and the
    /// executor falls back to [`Self::increase_size`].
    fn atomic_increase_size(&self, delta: usize) -> BoxFuture<'_, Result<(), CloudError>> {
        let _ = delta;
        Box::pin(async { Err(CloudError::NotImplemented) })
    }
    /// Deletes these nodes of the group and lowers the target accordingly.
    fn delete_nodes(&self, nodes: Vec<Node>) -> BoxFuture<'_, Result<(), CloudError>>;
    /// Deletes these nodes without checking constraints such as the min
    /// size (`ForceDeleteNodes`, for `--force-delete-unregistered-nodes`
    /// and `--force-delete-failed-nodes`); `NotImplemented` where the
    /// provider has no such call (kwok, clusterapi and aws upstream), and
    /// the caller falls back to [`Self::delete_nodes`].
    fn force_delete_nodes(&self, nodes: Vec<Node>) -> BoxFuture<'_, Result<(), CloudError>> {
        let _ = nodes;
        Box::pin(async { Err(CloudError::NotImplemented) })
    }
    /// Lowers the target by `delta` (< 0) without deleting registered nodes.
    fn decrease_target_size(&self, delta: i64) -> BoxFuture<'_, Result<(), CloudError>>;
    /// All instances, including those that have not registered.
    fn nodes(&self) -> Result<Vec<Instance>, CloudError>;
    /// The instances of [`Self::nodes`] that the cluster state registry
    /// counts beyond the registered nodes: those whose id `registered`
    /// does not know, and every one with an error. A provider whose
    /// registered instances are read from the nodes themselves answers
    /// without copying them (the registry asks at every loop).
    fn instances_besides(
        &self,
        registered: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<Instance>, CloudError> {
        let mut instances = self.nodes()?;
        instances.retain(|i| i.error.is_some() || !registered(&i.id));
        Ok(instances)
    }
    /// A new node of the group, for scale-up from zero.
    fn template_node_info(&self) -> Result<TemplateNodeInfo, CloudError>;
    /// Per-group options; `None` means the defaults.
    fn get_options(
        &self,
        defaults: &NodeGroupOptions,
    ) -> Result<Option<NodeGroupOptions>, CloudError> {
        let _ = defaults;
        Ok(None)
    }
    /// Human-readable description (`<id> (<min>:<max>)`).
    fn debug(&self) -> String {
        format!("{} ({}:{})", self.id(), self.min_size(), self.max_size())
    }
}

/// A cloud provider (`CloudProvider`).
pub trait CloudProvider: Send + Sync {
    /// `kwok`, `clusterapi`, `aws`.
    fn name(&self) -> &str;
    /// The node groups CA may scale.
    fn node_groups(&self) -> Vec<Arc<dyn NodeGroup>>;
    /// The group of a node; `None` means "not autoscaled, ignore it".
    fn node_group_for_node(&self, node: &Node) -> Result<Option<Arc<dyn NodeGroup>>, CloudError>;
    /// The id of the node's group: [`Self::node_group_for_node`]'s, which
    /// a provider may answer without building the group's handle (the
    /// cluster state asks it of every node every loop).
    fn node_group_id(&self, node: &Arc<Node>) -> Result<Option<String>, CloudError> {
        Ok(self.node_group_for_node(node)?.map(|g| g.id()))
    }
    /// Whether the node's instance still exists.
    fn has_instance(&self, node: &Node) -> Result<bool, CloudError> {
        let _ = node;
        Err(CloudError::NotImplemented)
    }
    /// The node label that marks GPU nodes.
    fn gpu_label(&self) -> String {
        String::new()
    }
    /// Known GPU types.
    fn available_gpu_types(&self) -> BTreeSet<String> {
        BTreeSet::new()
    }
    /// Called near the start of every loop; may change the group list.
    fn refresh(&self) -> BoxFuture<'_, Result<(), CloudError>>;
    /// Releases resources on graceful exit.
    fn cleanup(&self) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async { Ok(()) })
    }
}

/// The `dra_drivers` metric label of a group, from the drivers of its
/// provider template's slices, as upstream labels failed scale-ups and
/// removed nodes; `""` when the template cannot be built (with upstream's
/// warning).
pub fn template_dra_drivers(g: &dyn NodeGroup) -> String {
    match g.template_node_info() {
        Ok(t) => crate::metrics::dra_drivers(t.slices.iter().map(|s| s.spec.driver.as_str())),
        Err(e) => {
            tracing::warn!("Failed to get template node info for a node group: {e}");
            String::new()
        }
    }
}

/// [`template_dra_drivers`] of the provider's group `id`; `""` when the
/// provider has no such group any more.
pub fn group_dra_drivers(provider: &dyn CloudProvider, id: &str) -> String {
    let group = provider.node_groups().into_iter().find(|g| g.id() == id);
    group.map_or_else(String::new, |g| template_dra_drivers(&*g))
}

/// A taint of a template node, as a provider's annotation or tag gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value (may be empty).
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// A template node as upstream's providers build one for scale from zero:
/// `labels` (which carry `kubernetes.io/arch` and `kubernetes.io/os`,
/// copied to `status.nodeInfo`), `taints`, capacity = allocatable =
/// `resources` (quantity strings), and Ready.
pub(crate) fn template_node(
    name: &str,
    labels: std::collections::BTreeMap<String, String>,
    taints: &[Taint],
    resources: &std::collections::BTreeMap<String, String>,
    now: &str,
) -> Result<Node, serde_json::Error> {
    let taints: Vec<serde_json::Value> = taints
        .iter()
        .map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect}))
        .collect();
    let condition = |type_: &str, status: &str| json!({"type": type_, "status": status, "lastTransitionTime": now, "lastHeartbeatTime": now});
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints},
        "status": {"capacity": resources, "allocatable": resources,
            "conditions": [condition("Ready", "True"), condition("NetworkUnavailable", "False"),
                condition("DiskPressure", "False"), condition("MemoryPressure", "False")],
            "nodeInfo": {"architecture": labels.get("kubernetes.io/arch"),
                "operatingSystem": labels.get("kubernetes.io/os"), "kubeletVersion": "",
                "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "", "kubeProxyVersion": "",
                "machineID": "", "osImage": "", "systemUUID": ""}},
    }))
}

/// The kube-proxy pseudo-pod upstream adds to templates (100m CPU).
pub(crate) fn kube_proxy_pod(group: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("kube-proxy-{group}-{}", apimachinery::rand::suffix(5)), "namespace": "kube-system",
            "annotations": {"kubernetes.io/config.mirror": "kube-proxy"}},
        "spec": {"priorityClassName": "system-node-critical", "priority": 2_000_001_000,
            "containers": [{"name": "kube-proxy", "image": "kube-proxy", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Running"},
    }))
    .unwrap_or_default()
}
