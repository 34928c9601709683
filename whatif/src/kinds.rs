//! The kinds a what-if reads, and where the API serves each.

use kube::core::ApiResource;

/// A kind the what-if knows: it is loaded into the embedded cluster, or
/// read for what it says (the autoscaler's Deployment, its priority
/// expander's ConfigMap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Namespaces (created for every namespace an object names, too).
    Namespace,
    /// PriorityClasses: pods' priorities and preemption.
    PriorityClass,
    /// Nodes: node groups are inferred from their labels.
    Node,
    /// CSINodes: volume limits per node.
    CsiNode,
    /// DeviceClasses (DRA).
    DeviceClass,
    /// ResourceSlices (DRA): the devices nodes publish.
    ResourceSlice,
    /// ConfigMaps: the priority expander's only.
    ConfigMap,
    /// PodDisruptionBudgets: evictions are checked against them.
    PodDisruptionBudget,
    /// Deployments.
    Deployment,
    /// ReplicaSets.
    ReplicaSet,
    /// StatefulSets.
    StatefulSet,
    /// DaemonSets.
    DaemonSet,
    /// Jobs.
    Job,
    /// PodTemplates: the pods ProvisioningRequests and CapacityBuffers
    /// ask for.
    PodTemplate,
    /// CapacityQuotas: limits on what the autoscaler may add.
    CapacityQuota,
    /// CapacityBuffers: spare capacity the autoscaler keeps.
    CapacityBuffer,
    /// ProvisioningRequests: capacity asked for all at once.
    ProvisioningRequest,
    /// ResourceClaimTemplates (DRA).
    ResourceClaimTemplate,
    /// ResourceClaims (DRA).
    ResourceClaim,
    /// Pods: bound where they were, pending ones pending.
    Pod,
}

impl Kind {
    /// Every kind, in the order they are created (owners before what they
    /// own, nodes before the pods bound to them).
    pub const ALL: [Kind; 20] = [
        Kind::Namespace,
        Kind::PriorityClass,
        Kind::Node,
        Kind::CsiNode,
        Kind::DeviceClass,
        Kind::ResourceSlice,
        Kind::ConfigMap,
        Kind::PodDisruptionBudget,
        Kind::Deployment,
        Kind::ReplicaSet,
        Kind::StatefulSet,
        Kind::DaemonSet,
        Kind::Job,
        Kind::PodTemplate,
        Kind::CapacityQuota,
        Kind::CapacityBuffer,
        Kind::ProvisioningRequest,
        Kind::ResourceClaimTemplate,
        Kind::ResourceClaim,
        Kind::Pod,
    ];

    /// The kind as the API names it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Namespace => "Namespace",
            Kind::PriorityClass => "PriorityClass",
            Kind::Node => "Node",
            Kind::CsiNode => "CSINode",
            Kind::DeviceClass => "DeviceClass",
            Kind::ResourceSlice => "ResourceSlice",
            Kind::ConfigMap => "ConfigMap",
            Kind::PodDisruptionBudget => "PodDisruptionBudget",
            Kind::Deployment => "Deployment",
            Kind::ReplicaSet => "ReplicaSet",
            Kind::StatefulSet => "StatefulSet",
            Kind::DaemonSet => "DaemonSet",
            Kind::Job => "Job",
            Kind::PodTemplate => "PodTemplate",
            Kind::CapacityQuota => "CapacityQuota",
            Kind::CapacityBuffer => "CapacityBuffer",
            Kind::ProvisioningRequest => "ProvisioningRequest",
            Kind::ResourceClaimTemplate => "ResourceClaimTemplate",
            Kind::ResourceClaim => "ResourceClaim",
            Kind::Pod => "Pod",
        }
    }

    /// The kind named `kind` in API group `group`, if the what-if knows it.
    pub fn of(group: &str, kind: &str) -> Option<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == kind && k.group() == group)
    }

    /// The API group.
    pub fn group(self) -> &'static str {
        match self {
            Kind::Namespace | Kind::Node | Kind::ConfigMap | Kind::Pod | Kind::PodTemplate => "",
            Kind::PriorityClass => "scheduling.k8s.io",
            Kind::CsiNode => "storage.k8s.io",
            Kind::DeviceClass
            | Kind::ResourceSlice
            | Kind::ResourceClaimTemplate
            | Kind::ResourceClaim => "resource.k8s.io",
            Kind::PodDisruptionBudget => "policy",
            Kind::Deployment | Kind::ReplicaSet | Kind::StatefulSet | Kind::DaemonSet => "apps",
            Kind::Job => "batch",
            Kind::CapacityQuota | Kind::CapacityBuffer | Kind::ProvisioningRequest => {
                "autoscaling.x-k8s.io"
            }
        }
    }

    /// The version created when an object gives none.
    fn default_version(self) -> &'static str {
        match self {
            Kind::CapacityQuota => "v1beta1",
            Kind::CapacityBuffer => "v1beta1",
            _ => "v1",
        }
    }

    /// Whether the kind is served through a CRD, whose status is its
    /// own to keep: created, then its status written as the input had it.
    pub fn is_custom(self) -> bool {
        matches!(
            self,
            Kind::CapacityQuota | Kind::CapacityBuffer | Kind::ProvisioningRequest
        )
    }

    /// The lowercase plural of the resource.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Namespace => "namespaces",
            Kind::PriorityClass => "priorityclasses",
            Kind::Node => "nodes",
            Kind::CsiNode => "csinodes",
            Kind::DeviceClass => "deviceclasses",
            Kind::ResourceSlice => "resourceslices",
            Kind::ConfigMap => "configmaps",
            Kind::PodDisruptionBudget => "poddisruptionbudgets",
            Kind::Deployment => "deployments",
            Kind::ReplicaSet => "replicasets",
            Kind::StatefulSet => "statefulsets",
            Kind::DaemonSet => "daemonsets",
            Kind::Job => "jobs",
            Kind::PodTemplate => "podtemplates",
            Kind::CapacityQuota => "capacityquotas",
            Kind::CapacityBuffer => "capacitybuffers",
            Kind::ProvisioningRequest => "provisioningrequests",
            Kind::ResourceClaimTemplate => "resourceclaimtemplates",
            Kind::ResourceClaim => "resourceclaims",
            Kind::Pod => "pods",
        }
    }

    /// Whether objects of the kind live in a namespace.
    pub fn namespaced(self) -> bool {
        !matches!(
            self,
            Kind::Namespace
                | Kind::PriorityClass
                | Kind::Node
                | Kind::CsiNode
                | Kind::DeviceClass
                | Kind::ResourceSlice
                | Kind::CapacityQuota
        )
    }

    /// Where the API serves the kind at `api_version` (the object's own;
    /// the kind's usual version when it gives none).
    pub fn resource(self, api_version: Option<&str>) -> ApiResource {
        let version = api_version
            .map(|v| v.rsplit_once('/').map_or(v, |(_, v)| v))
            .unwrap_or(self.default_version());
        let group = self.group();
        ApiResource {
            group: group.to_string(),
            version: version.to_string(),
            api_version: if group.is_empty() {
                version.to_string()
            } else {
                format!("{group}/{version}")
            },
            kind: self.name().to_string(),
            plural: self.plural().to_string(),
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
