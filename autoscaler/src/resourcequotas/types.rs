//! The CapacityQuota API (`autoscaling.x-k8s.io/v1beta1`, the storage
//! version from CA 1.37; `v1alpha1` is still served, deprecated;
//! cluster-scoped, upstream's `apis/capacityquota`) and the conditions CA
//! writes on it.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, ObjectMeta, Time};
use serde::{Deserialize, Serialize};

use crate::capacitybuffer::types::set_status_condition;

/// A CapacityQuota: the most of each resource the nodes its selector
/// matches may have together.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CapacityQuota {
    /// `autoscaling.x-k8s.io/v1beta1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `CapacityQuota`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The selector and the limits.
    #[serde(default)]
    pub spec: QuotaSpec,
    /// What the controller found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<QuotaStatus>,
}

/// The spec of a [`CapacityQuota`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct QuotaSpec {
    /// The nodes the quota covers (none: every node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// The limits.
    #[serde(default)]
    pub limits: QuotaResources,
}

/// Resources by name (`cpu`, `memory`, `nodes`, any extended resource).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct QuotaResources {
    /// The amounts.
    #[serde(default)]
    pub resources: BTreeMap<String, Quantity>,
}

/// The status of a [`CapacityQuota`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct QuotaStatus {
    /// What the matching nodes have, for each limited resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used: Option<QuotaResources>,
    /// The last generation of the spec the controller read (CA 1.37).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// [`VALID_CONDITION`], `Reconciled`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The condition that says whether a quota is valid; only a quota with it
/// `True` is enforced. CA 1.37 renamed it from `Valid` (1.36).
pub const VALID_CONDITION: &str = "cluster-autoscaler.kubernetes.io/valid";

/// The condition that says whether the quota's usage was computed.
pub const RECONCILED_CONDITION: &str = "Reconciled";

crate::crd_kind!(
    CapacityQuota,
    "autoscaling.x-k8s.io",
    "v1beta1",
    "CapacityQuota",
    "capacityquotas",
    Cluster
);

impl CapacityQuota {
    /// The name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// Whether [`VALID_CONDITION`] is `True`.
    pub fn is_valid(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == VALID_CONDITION && c.status == "True")
        })
    }

    /// Records that the controller read the spec's current generation.
    pub fn observe_generation(&mut self) {
        self.status
            .get_or_insert_with(Default::default)
            .observed_generation = self.metadata.generation;
    }
}

/// What CA says of a quota: one condition each, rendered in [`Self::parts`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaCondition {
    /// [`VALID_CONDITION`] `True`.
    Valid,
    /// [`VALID_CONDITION`] `False`: the validation errors.
    Invalid(String),
    /// `Reconciled=True`.
    Reconciled,
    /// `Reconciled=False`: why.
    NotReconciled(String),
}

impl QuotaCondition {
    /// The type, status, reason and message (upstream's texts).
    pub fn parts(&self) -> (&'static str, bool, &'static str, String) {
        match self {
            Self::Valid => (
                VALID_CONDITION,
                true,
                "ValidationSucceeded",
                "CapacityQuota is valid".into(),
            ),
            Self::Invalid(e) => (VALID_CONDITION, false, "ValidationFailed", e.clone()),
            Self::Reconciled => (
                RECONCILED_CONDITION,
                true,
                "ReconciliationSucceeded",
                "CapacityQuota successfully reconciled".into(),
            ),
            Self::NotReconciled(e) => (
                RECONCILED_CONDITION,
                false,
                "ReconciliationFailed",
                e.clone(),
            ),
        }
    }

    /// Sets the condition (with the quota's generation observed).
    pub fn set(&self, q: &mut CapacityQuota, now: SystemTime) -> bool {
        let (type_, status, reason, message) = self.parts();
        let generation = q.metadata.generation;
        set_status_condition(
            &mut q.status.get_or_insert_with(Default::default).conditions,
            Condition {
                type_: type_.into(),
                status: if status { "True" } else { "False" }.into(),
                reason: reason.into(),
                message,
                observed_generation: generation,
                last_transition_time: Time(simclock::to_timestamp(now)),
            },
        )
    }
}
