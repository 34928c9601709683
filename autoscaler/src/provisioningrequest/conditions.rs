//! The conditions CA writes on ProvisioningRequests (upstream's
//! `provisioningrequest/conditions`): each [`Verdict`] renders its type,
//! status, reason and message here and nowhere else.

use std::time::SystemTime;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::types::{ProvisioningClass, ProvisioningRequest, ProvisioningRequestStatus};

ca_names! {
    /// The condition types of a ProvisioningRequest.
    pub enum ConditionType {
        /// CA took the request in hand.
        Accepted,
        /// The capacity was found or asked for (`True`), or not yet (`False`).
        Provisioned,
        /// CA gave up on the request.
        Failed,
        /// The 10-minute booking of a provisioned request ended.
        BookingExpired,
    }
}

ca_names! {
    /// The reasons of the conditions CA writes.
    pub enum Reason {
        /// `Accepted=True`.
        Accepted,
        /// No room: `Provisioned=False`, or `Failed=True` with `noRetry`.
        CapacityIsNotFound,
        /// Room in the cluster as it is.
        CapacityIsFound,
        /// Room asked for by a scale-up.
        CapacityIsProvisioned,
        /// The simulation failed.
        FailedToCheckCapacity,
        /// The request's pods could not be made (a template missing...).
        FailedToCreatePods,
        /// A booked request's pods could no longer be made.
        FailedToBookCapacity,
        /// The 10-minute booking ended.
        CapacityReservationTimeExpired,
        /// Every pod of the booked request is scheduled (CA 1.37).
        CapacityBookingConsumed,
        /// Not provisioned within 7 days.
        Expired,
    }
}

/// What CA says of a request: one condition each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// `Accepted=True`: CA will check capacity for it.
    Accepted,
    /// `Provisioned=True`: room in the cluster as it is.
    CapacityFound,
    /// `Provisioned=True`: a scale-up for all of it was made.
    CapacityProvisioned,
    /// `Provisioned=False`: no room yet; retried after a backoff.
    CapacityNotFound,
    /// `Failed=True`: no room and the request asked not to be retried.
    CapacityNotFoundNoRetry,
    /// `Provisioned=False`: the simulation failed.
    FailedToCheckCapacity,
    /// `Failed=True`: the pods could not be made; the error.
    FailedToCreatePods(String),
    /// `Failed=True`: the pods of a booked request could not be made.
    FailedToBookCapacity(String),
    /// `BookingExpired=True`: the 10 minutes are over.
    BookingExpired,
    /// `BookingExpired=True`: every pod of the request is scheduled, so
    /// the room is theirs and no longer booked (CA 1.37).
    BookingConsumed,
    /// `Failed=True`: not provisioned within 7 days.
    Expired,
}

impl Verdict {
    /// The condition's type, status, reason and message.
    pub fn parts(&self) -> (ConditionType, bool, Reason, String) {
        use ConditionType as T;
        match self {
            Self::Accepted => (
                T::Accepted,
                true,
                Reason::Accepted,
                "ProvisioningRequest is accepted by ClusterAutoscaler".into(),
            ),
            Self::CapacityFound => (
                T::Provisioned,
                true,
                Reason::CapacityIsFound,
                "Capacity is found in the cluster".into(),
            ),
            Self::CapacityProvisioned => (
                T::Provisioned,
                true,
                Reason::CapacityIsProvisioned,
                "Capacity is found in the cluster".into(),
            ),
            Self::CapacityNotFound => (
                T::Provisioned,
                false,
                Reason::CapacityIsNotFound,
                "Capacity is not found, CA will try to find it later.".into(),
            ),
            Self::CapacityNotFoundNoRetry => (
                T::Failed,
                true,
                Reason::CapacityIsNotFound,
                "CA could not find requested capacity".into(),
            ),
            Self::FailedToCheckCapacity => (
                T::Provisioned,
                false,
                Reason::FailedToCheckCapacity,
                "Failed to check pre-existing capacity in the cluster".into(),
            ),
            Self::FailedToCreatePods(e) => (T::Failed, true, Reason::FailedToCreatePods, e.clone()),
            Self::FailedToBookCapacity(e) => (
                T::Failed,
                true,
                Reason::FailedToBookCapacity,
                format!("Couldn't create pods, err: {e}"),
            ),
            Self::BookingExpired => (
                T::BookingExpired,
                true,
                Reason::CapacityReservationTimeExpired,
                "Capacity reservation time is expired".into(),
            ),
            Self::BookingConsumed => (
                T::BookingExpired,
                true,
                Reason::CapacityBookingConsumed,
                "Capacity booking consumed: all pods scheduled".into(),
            ),
            Self::Expired => (
                T::Failed,
                true,
                Reason::Expired,
                "ProvisioningRequest is expired".into(),
            ),
        }
    }

    /// Sets the verdict's condition on `pr` (upstream's
    /// `AddOrUpdateCondition`): a condition of the same type is replaced in
    /// place, with `now` as its transition time; otherwise it is appended.
    pub fn apply(&self, pr: &mut ProvisioningRequest, now: SystemTime) {
        let (type_, status, reason, message) = self.parts();
        let condition = Condition {
            type_: type_.to_string(),
            status: if status { "True" } else { "False" }.into(),
            observed_generation: pr.metadata.generation,
            last_transition_time: Time(simclock::to_timestamp(now)),
            reason: reason.to_string(),
            message,
        };
        let conditions = &mut pr
            .status
            .get_or_insert_with(ProvisioningRequestStatus::default)
            .conditions;
        match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
            Some(c) => *c = condition,
            None => conditions.push(condition),
        }
    }
}

/// The condition of this type, if any.
pub fn find(pr: &ProvisioningRequest, type_: ConditionType) -> Option<&Condition> {
    pr.conditions().iter().find(|c| c.type_ == type_.as_str())
}

/// Whether the condition of this type is `True`.
pub fn is_true(pr: &ProvisioningRequest, type_: ConditionType) -> bool {
    find(pr, type_).is_some_and(|c| c.status == "True")
}

/// When a condition last changed.
pub fn transition_time(c: &Condition) -> SystemTime {
    SystemTime::from(c.last_transition_time.0)
}

/// Whether CA holds room for `pr` (upstream's `ShouldCapacityBeBooked`): a
/// request it serves, `Provisioned=True`, neither failed nor expired.
pub fn should_capacity_be_booked(pr: &ProvisioningRequest, processor_instance: &str) -> bool {
    ProvisioningClass::of(pr, processor_instance).is_some()
        && !is_true(pr, ConditionType::Failed)
        && !is_true(pr, ConditionType::BookingExpired)
        && is_true(pr, ConditionType::Provisioned)
}
