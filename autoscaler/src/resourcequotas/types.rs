//! The CapacityQuota API (`autoscaling.x-k8s.io/v1alpha1`, cluster-scoped,
//! upstream's `apis/capacityquota`) and the conditions CA writes on it.

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
    /// `autoscaling.x-k8s.io/v1alpha1`.
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
    /// `Valid`, `Reconciled`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

crate::crd_kind!(
    CapacityQuota,
    "autoscaling.x-k8s.io",
    "v1alpha1",
    "CapacityQuota",
    "capacityquotas",
    Cluster
);

impl CapacityQuota {
    /// The name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// Whether `Valid` is `True`.
    pub fn is_valid(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Valid" && c.status == "True")
        })
    }
}

/// What CA says of a quota: one condition each, rendered in [`Self::parts`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaCondition {
    /// `Valid=True`.
    Valid,
    /// `Valid=False`: the validation errors.
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
                "Valid",
                true,
                "ValidationSucceeded",
                "CapacityQuota is valid".into(),
            ),
            Self::Invalid(e) => ("Valid", false, "ValidationFailed", e.clone()),
            Self::Reconciled => (
                "Reconciled",
                true,
                "ReconciliationSucceeded",
                "CapacityQuota successfully reconciled".into(),
            ),
            Self::NotReconciled(e) => ("Reconciled", false, "ReconciliationFailed", e.clone()),
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
