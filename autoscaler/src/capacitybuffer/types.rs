//! The CapacityBuffer API (`autoscaling.x-k8s.io/v1beta1`, upstream's
//! `apis/capacitybuffer`): the object, its strategy and the conditions CA
//! writes on it. Every condition is rendered by [`BufferCondition`], here
//! and nowhere else.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use serde::{Deserialize, Serialize};

/// The strategy this autoscaler provisions: fake pods in the simulation
/// (upstream's `ActiveProvisioningStrategy`).
pub const ACTIVE_CAPACITY: &str = "buffer.x-k8s.io/active-capacity";

/// A CapacityBuffer: spare room for `replicas` pods of a template, or a
/// share of a workload, kept ready by scale-up and kept by scale-down.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CapacityBuffer {
    /// `autoscaling.x-k8s.io/v1beta1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `CapacityBuffer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What is asked.
    #[serde(default)]
    pub spec: BufferSpec,
    /// What the controller made of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<BufferStatus>,
}

/// The spec of a [`CapacityBuffer`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BufferSpec {
    /// Who provisions the buffer (CRD default [`ACTIVE_CAPACITY`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_strategy: Option<String>,
    /// A PodTemplate of the buffer's namespace: the shape of one unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_ref: Option<LocalObjectRef>,
    /// A workload with a scale subresource: its pods are the shape, its
    /// replicas the base of `percentage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scalable_ref: Option<ScalableRef>,
    /// A fixed number of units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// A share of the scalable object's replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage: Option<i32>,
    /// As many units as fit in these resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
}

/// A reference by name within the buffer's namespace.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LocalObjectRef {
    /// The name.
    #[serde(default)]
    pub name: String,
}

/// A reference to an object with a scale subresource.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScalableRef {
    /// Its API group (`""` for the core group).
    #[serde(default)]
    pub api_group: String,
    /// Its kind.
    #[serde(default)]
    pub kind: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
}

/// The status of a [`CapacityBuffer`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BufferStatus {
    /// The managed PodTemplate the fake pods are made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_ref: Option<LocalObjectRef>,
    /// How many fake pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The managed template's generation when translated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_generation: Option<i64>,
    /// `ReadyForProvisioning`, `Provisioning`, `LimitedByQuotas`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The strategy copied from the spec (`""` read as the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_strategy: Option<String>,
}

crate::crd_kind!(
    CapacityBuffer,
    "autoscaling.x-k8s.io",
    "v1beta1",
    "CapacityBuffer",
    "capacitybuffers",
    Namespace
);

impl CapacityBuffer {
    /// The namespace.
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// The name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace(), self.name())
    }

    /// Whether the spec asks for a strategy this autoscaler provisions
    /// (unset or empty counts as the default).
    pub fn spec_strategy_served(&self) -> bool {
        matches!(
            self.spec.provisioning_strategy.as_deref(),
            None | Some("") | Some(ACTIVE_CAPACITY)
        )
    }

    /// Whether the condition of `type_` is `True`.
    pub fn is_true(&self, type_: ConditionType) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == type_.as_str() && c.status == "True")
        })
    }

    /// The condition of `type_`, if any.
    pub fn condition(&self, type_: ConditionType) -> Option<&Condition> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == type_.as_str())
    }
}

ca_names! {
    /// The condition types CA writes on a CapacityBuffer.
    pub enum ConditionType {
        /// The controller translated the spec (`True`) or could not (`False`).
        ReadyForProvisioning,
        /// The fake pods are in the simulation (`True`) or why not (`False`).
        Provisioning,
        /// Namespace ResourceQuotas cut the replicas (`True`) or not (`False`).
        LimitedByQuotas,
    }
}

/// What CA says of a buffer: one condition each, rendered in [`Self::parts`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BufferCondition {
    /// `ReadyForProvisioning=True`.
    Ready,
    /// `ReadyForProvisioning=False`, with the error if any.
    NotReady(Option<String>),
    /// `Provisioning=True`: the fake pods are injected.
    FakePodsInjected,
    /// `Provisioning=False`: not ready (no template, replicas or Ready).
    NotReadyForProvisioning,
    /// `Provisioning=False`: zero replicas.
    BufferIsEmpty,
    /// `Provisioning=False`: the managed template could not be read.
    FailedToGetPodTemplate(String),
    /// `LimitedByQuotas=True`: from, to, the quotas.
    LimitedByQuotas(i32, i32, Vec<String>),
    /// `LimitedByQuotas=False`.
    NotLimitedByQuotas,
}

impl BufferCondition {
    /// The type, status, reason and message (upstream's texts).
    pub fn parts(&self) -> (ConditionType, bool, &'static str, String) {
        use ConditionType as T;
        match self {
            Self::Ready => (
                T::ReadyForProvisioning,
                true,
                "AttributesSetSuccessfully",
                "ready".into(),
            ),
            Self::NotReady(err) => (
                T::ReadyForProvisioning,
                false,
                "error",
                match err {
                    Some(e) => format!("Buffer not ready for provisioning: {e}"),
                    None => "Buffer not ready for provisioning".into(),
                },
            ),
            Self::FakePodsInjected => (T::Provisioning, true, "FakePodsInjected", String::new()),
            Self::NotReadyForProvisioning => (
                T::Provisioning,
                false,
                "NotReadyForProvisioning",
                "CapacityBuffer is not ready for provisioning".into(),
            ),
            Self::BufferIsEmpty => (
                T::Provisioning,
                false,
                "BufferIsEmpty",
                "CapacityBuffer has zero replicas".into(),
            ),
            Self::FailedToGetPodTemplate(e) => (
                T::Provisioning,
                false,
                "FailedToGetPodTemplate",
                format!("failed to get pod template with error: {e}"),
            ),
            Self::LimitedByQuotas(from, to, quotas) => (
                T::LimitedByQuotas,
                true,
                "ResourceQuotasAllocated",
                format!(
                    "Buffer replicas limited from {from} to {to} due to quotas: {}",
                    quotas.join(", ")
                ),
            ),
            Self::NotLimitedByQuotas => (
                T::LimitedByQuotas,
                false,
                "ResourceQuotasAllocated",
                String::new(),
            ),
        }
    }

    /// Sets the condition on `buffer` as `meta.SetStatusCondition` does
    /// (the transition time moves only when the status changes); whether
    /// anything changed.
    pub fn set(&self, buffer: &mut CapacityBuffer, now: SystemTime) -> bool {
        let (type_, status, reason, message) = self.parts();
        let observed = matches!(type_, ConditionType::LimitedByQuotas)
            .then(|| buffer.metadata.generation)
            .flatten();
        let status = if status { "True" } else { "False" };
        let conditions = &mut buffer
            .status
            .get_or_insert_with(Default::default)
            .conditions;
        set_status_condition(
            conditions,
            Condition {
                type_: type_.as_str().into(),
                status: status.into(),
                reason: reason.into(),
                message,
                observed_generation: observed,
                last_transition_time: Time(simclock::to_timestamp(now)),
            },
        )
    }
}

/// `meta.SetStatusCondition`: adds the condition or updates the one of its
/// type (the transition time kept unless the status changes); whether
/// anything changed. Shared by the buffers and the CapacityQuotas.
pub fn set_status_condition(conditions: &mut Vec<Condition>, new: Condition) -> bool {
    let Some(old) = conditions.iter_mut().find(|c| c.type_ == new.type_) else {
        conditions.push(new);
        return true;
    };
    let mut changed = false;
    if old.status != new.status {
        old.status = new.status;
        old.last_transition_time = new.last_transition_time;
        changed = true;
    }
    if old.reason != new.reason {
        old.reason = new.reason;
        changed = true;
    }
    if old.message != new.message {
        old.message = new.message;
        changed = true;
    }
    if old.observed_generation != new.observed_generation {
        old.observed_generation = new.observed_generation;
        changed = true;
    }
    changed
}
