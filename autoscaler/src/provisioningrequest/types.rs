//! The ProvisioningRequest API (`autoscaling.x-k8s.io/v1`, upstream's
//! `apis/provisioningrequest`): the object, its classes, the pod
//! annotations, and which requests this autoscaler serves.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::PodTemplate;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};

/// The API group of ProvisioningRequests.
pub const GROUP: &str = "autoscaling.x-k8s.io";

/// The pod annotation naming the request a pod consumes.
pub const CONSUME_ANNOTATION: &str = "autoscaling.x-k8s.io/consume-provisioning-request";
/// The pod annotation naming the class of the request a pod consumes.
pub const CLASS_ANNOTATION: &str = "autoscaling.x-k8s.io/provisioning-class-name";
/// The deprecated form of [`CONSUME_ANNOTATION`].
pub const DEPRECATED_CONSUME_ANNOTATION: &str =
    "cluster-autoscaler.kubernetes.io/consume-provisioning-request";
/// The deprecated form of [`CLASS_ANNOTATION`].
pub const DEPRECATED_CLASS_ANNOTATION: &str =
    "cluster-autoscaler.kubernetes.io/provisioning-class-name";

/// The parameter naming the check-capacity processor instance that serves
/// a request (`--check-capacity-processor-instance`).
pub const PROCESSOR_INSTANCE_PARAMETER: &str = "processorInstance";
/// The parameter that makes a check-capacity request fail rather than wait
/// when there is no room (`"true"`).
pub const NO_RETRY_PARAMETER: &str = "noRetry";

/// A ProvisioningRequest (`autoscaling.x-k8s.io/v1`), the fields CA reads
/// and writes; unknown fields are kept as they came.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningRequest {
    /// `autoscaling.x-k8s.io/v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `ProvisioningRequest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What is asked.
    #[serde(default)]
    pub spec: ProvisioningRequestSpec,
    /// What CA answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ProvisioningRequestStatus>,
}

/// The spec of a [`ProvisioningRequest`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningRequestSpec {
    /// The class: who serves the request and how.
    #[serde(default)]
    pub provisioning_class_name: String,
    /// The groups of pods.
    #[serde(default)]
    pub pod_sets: Vec<PodSet>,
    /// Class parameters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
}

/// One group of pods: a `PodTemplate` of the request's namespace, so many
/// times.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodSet {
    /// The template.
    #[serde(default)]
    pub pod_template_ref: PodTemplateRef,
    /// How many pods.
    #[serde(default)]
    pub count: i32,
}

/// A reference to a `PodTemplate` by name.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PodTemplateRef {
    /// Its name.
    #[serde(default)]
    pub name: String,
}

/// The status of a [`ProvisioningRequest`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningRequestStatus {
    /// `Accepted`, `Provisioned`, `Failed`, `BookingExpired`...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Class-specific details.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub provisioning_class_details: BTreeMap<String, String>,
}

crate::crd_kind!(
    ProvisioningRequest,
    "autoscaling.x-k8s.io",
    "v1",
    "ProvisioningRequest",
    "provisioningrequests",
    Namespace
);

impl ProvisioningRequest {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace(), self.name())
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// The name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The conditions.
    pub fn conditions(&self) -> &[Condition] {
        self.status.as_ref().map_or(&[], |s| &s.conditions)
    }

    /// A parameter's value.
    pub fn parameter(&self, key: &str) -> Option<&str> {
        self.spec.parameters.get(key).map(String::as_str)
    }

    /// How many pods the request asks for, over its pod sets.
    pub fn pod_count(&self) -> i64 {
        self.spec.pod_sets.iter().map(|s| i64::from(s.count)).sum()
    }
}

/// The classes this autoscaler serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProvisioningClass {
    /// `check-capacity.autoscaling.x-k8s.io`.
    CheckCapacity,
    /// `best-effort-atomic-scale-up.autoscaling.x-k8s.io`.
    BestEffortAtomicScaleUp,
}

impl ProvisioningClass {
    /// The class's name in `spec.provisioningClassName`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CheckCapacity => "check-capacity.autoscaling.x-k8s.io",
            Self::BestEffortAtomicScaleUp => "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
        }
    }

    /// The class this autoscaler serves `pr` as, if any (upstream's
    /// `SupportedProvisioningClass`): with `--check-capacity-processor-instance`
    /// set, only check-capacity requests naming that instance (in the
    /// `processorInstance` parameter, or, deprecated, as a prefix of the class
    /// name); without it, only requests naming no instance. Requests of other
    /// classes are another controller's.
    pub fn of(pr: &ProvisioningRequest, processor_instance: &str) -> Option<Self> {
        let class = pr.spec.provisioning_class_name.as_str();
        if class == Self::BestEffortAtomicScaleUp.as_str() {
            return processor_instance
                .is_empty()
                .then_some(Self::BestEffortAtomicScaleUp);
        }
        serves_check_capacity(pr, processor_instance).then_some(Self::CheckCapacity)
    }
}

/// Whether `pr` is a check-capacity request for this processor instance
/// (upstream's `SupportedCheckCapacityClass`).
fn serves_check_capacity(pr: &ProvisioningRequest, instance: &str) -> bool {
    let class = pr.spec.provisioning_class_name.as_str();
    let check = ProvisioningClass::CheckCapacity.as_str();
    let named = pr.parameter(PROCESSOR_INSTANCE_PARAMETER).unwrap_or("");
    if instance.is_empty() {
        return named.is_empty() && class == check;
    }
    if !named.is_empty() {
        return named == instance && class == check;
    }
    match class.strip_prefix(instance) {
        Some(rest) => {
            tracing::warn!(
                "ProvReq {} has prefixed provisioningClassName {class:?} that is not recommended and will be removed in CA 1.35. Parameters should be used instead",
                pr.key()
            );
            rest == check
        }
        None => false,
    }
}

/// A request with the `PodTemplate`s it names that exist (in the order of
/// its pod sets; a missing one is left out, as upstream's client does).
#[derive(Debug, Clone)]
pub struct WithTemplates {
    /// The request.
    pub pr: ProvisioningRequest,
    /// Its templates found.
    pub templates: Vec<Arc<PodTemplate>>,
}

/// The request a pod consumes, from its annotation (or the deprecated one).
pub fn consumed_request(pod: &k8s_openapi::api::core::v1::Pod) -> Option<&str> {
    let a = pod.metadata.annotations.as_ref()?;
    a.get(CONSUME_ANNOTATION)
        .or_else(|| a.get(DEPRECATED_CONSUME_ANNOTATION))
        .map(String::as_str)
}
