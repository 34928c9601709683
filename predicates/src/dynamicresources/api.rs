//! The parts of `resource.k8s.io/v1` the allocator reads: DeviceClass,
//! ResourceClaim (spec and status), ResourceSlice. Decoded leniently from
//! the objects' JSON (k8s-openapi's API level predates `resource.k8s.io/v1`);
//! fields the allocator does not use are not kept.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::{Deserialize, Serialize};

/// Object metadata the allocator needs.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its namespace (claims).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Set once it is being deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
    /// Its owners (a claim made from a template: its pod).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<OwnerReference>,
}

/// A DeviceClass.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct DeviceClass {
    /// Its metadata.
    #[serde(default)]
    pub metadata: Meta,
    /// Its spec.
    #[serde(default)]
    pub spec: DeviceClassSpec,
}

/// A DeviceClass's spec.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClassSpec {
    /// CEL selectors; every one must hold.
    #[serde(default)]
    pub selectors: Vec<DeviceSelector>,
}

/// A selector: a CEL expression.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct DeviceSelector {
    /// The CEL selector.
    #[serde(default)]
    pub cel: Option<CelDeviceSelector>,
}

/// `selectors[].cel`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct CelDeviceSelector {
    /// The expression over `device`.
    #[serde(default)]
    pub expression: String,
}

/// A ResourceClaim.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct ResourceClaim {
    /// Its metadata.
    #[serde(default)]
    pub metadata: Meta,
    /// Its spec.
    #[serde(default)]
    pub spec: ResourceClaimSpec,
    /// Its status.
    #[serde(default)]
    pub status: ResourceClaimStatus,
}

impl ResourceClaim {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or("default"),
            self.metadata.name
        )
    }

    /// Whether the pod of this uid owns it (made from the pod's template:
    /// it goes with the pod).
    pub fn owned_by(&self, uid: &str) -> bool {
        self.metadata
            .owner_references
            .iter()
            .any(|o| o.uid == uid && o.controller == Some(true))
    }

    /// Whether it is reserved for the pod of this uid.
    pub fn reserved_for(&self, uid: &str) -> bool {
        self.status.reserved_for.iter().any(|r| r.uid == uid)
    }
}

/// A claim's (or a claim template's) spec.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct ResourceClaimSpec {
    /// The devices.
    #[serde(default)]
    pub devices: DeviceClaim,
}

/// `spec.devices`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct DeviceClaim {
    /// The requests.
    #[serde(default)]
    pub requests: Vec<DeviceRequest>,
    /// Constraints across the requests.
    #[serde(default)]
    pub constraints: Vec<DeviceConstraint>,
}

/// One request: exactly one of `exactly` and `firstAvailable`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRequest {
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Devices of one class.
    #[serde(default)]
    pub exactly: Option<ExactDeviceRequest>,
    /// Alternatives, in order of preference.
    #[serde(default)]
    pub first_available: Vec<DeviceSubRequest>,
}

/// `exactly`: devices of one class.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExactDeviceRequest {
    /// The DeviceClass.
    #[serde(default)]
    pub device_class_name: String,
    /// CEL selectors; every one must hold.
    #[serde(default)]
    pub selectors: Vec<DeviceSelector>,
    /// `ExactCount` (the default) or `All`.
    #[serde(default)]
    pub allocation_mode: Option<String>,
    /// For `ExactCount`; 1 when unset.
    #[serde(default)]
    pub count: Option<i64>,
}

/// One alternative of `firstAvailable`: a name and the fields of an
/// `exactly` request.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct DeviceSubRequest {
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// The class, selectors, mode and count.
    #[serde(flatten)]
    pub request: ExactDeviceRequest,
}

/// A constraint over the devices of some requests.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceConstraint {
    /// The requests it covers (all when empty).
    #[serde(default)]
    pub requests: Vec<String>,
    /// Every device must have this attribute with one value.
    #[serde(default)]
    pub match_attribute: Option<String>,
}

/// A claim's status.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimStatus {
    /// Where its devices were allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<AllocationResult>,
    /// The pods that use it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved_for: Vec<ConsumerReference>,
}

/// `status.allocation`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AllocationResult {
    /// The devices.
    #[serde(default)]
    pub devices: DeviceAllocationResult,
    /// Where the devices are reachable (a node-local device: its node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<NodeSelector>,
}

/// `status.allocation.devices`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct DeviceAllocationResult {
    /// One entry per device.
    #[serde(default)]
    pub results: Vec<DeviceRequestAllocationResult>,
}

/// One allocated device.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct DeviceRequestAllocationResult {
    /// The request (`request` or `request/subrequest`).
    pub request: String,
    /// The driver.
    pub driver: String,
    /// The pool.
    pub pool: String,
    /// The device.
    pub device: String,
}

impl DeviceRequestAllocationResult {
    /// The device's identity.
    pub fn id(&self) -> DeviceId {
        DeviceId {
            driver: self.driver.clone(),
            pool: self.pool.clone(),
            device: self.device.clone(),
        }
    }
}

/// A consumer in `status.reservedFor`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerReference {
    /// The consumer's API group (`""` for pods).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// The consumer's resource (`pods`).
    pub resource: String,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
}

/// A device's identity across the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    /// The driver.
    pub driver: String,
    /// The pool.
    pub pool: String,
    /// The device.
    pub device: String,
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// A ResourceSlice.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct ResourceSlice {
    /// Its metadata.
    #[serde(default)]
    pub metadata: Meta,
    /// Its spec.
    #[serde(default)]
    pub spec: ResourceSliceSpec,
}

/// A slice's spec.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSliceSpec {
    /// The driver.
    #[serde(default)]
    pub driver: String,
    /// The pool.
    #[serde(default)]
    pub pool: ResourcePool,
    /// Node-local devices: this node's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// Devices reachable from the nodes this selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<NodeSelector>,
    /// Devices reachable from every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_nodes: Option<bool>,
    /// The devices.
    #[serde(default)]
    pub devices: Vec<Device>,
}

/// A slice's pool.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePool {
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// The pool's generation (only the newest counts).
    #[serde(default)]
    pub generation: i64,
    /// How many slices the pool has in this generation.
    #[serde(default)]
    pub resource_slice_count: i64,
}

/// One device.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct Device {
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Attributes by qualified or bare name.
    #[serde(default)]
    pub attributes: BTreeMap<String, DeviceAttribute>,
    /// Capacities by qualified or bare name.
    #[serde(default)]
    pub capacity: BTreeMap<String, DeviceCapacity>,
}

/// An attribute value: exactly one field is set.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct DeviceAttribute {
    /// An integer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int: Option<i64>,
    /// A boolean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bool: Option<bool>,
    /// A string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    /// A semantic version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl DeviceAttribute {
    /// The value as the selector sees it.
    pub fn as_cel(&self) -> Option<kubecel::device::Attribute<'_>> {
        use kubecel::device::Attribute;
        Some(match self {
            Self { int: Some(i), .. } => Attribute::Int(*i),
            Self { bool: Some(b), .. } => Attribute::Bool(*b),
            Self {
                string: Some(s), ..
            } => Attribute::String(s),
            Self {
                version: Some(v), ..
            } => Attribute::Version(v),
            _ => return None,
        })
    }
}

/// A capacity.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct DeviceCapacity {
    /// The quantity.
    #[serde(default)]
    pub value: String,
}
