//! Scale-down (ca-compat §3, upstream's `core/scaledown`).
//!
//! One loop's scale-down runs in this order ([`orchestrator`]):
//!
//! - [`eligibility`]: which nodes are candidates (autoscaled, above min
//!   size, not in a per-group delay) and their utilization.
//! - [`unneeded`]: the planner; a candidate is unneeded when its
//!   utilization is below the threshold and every pod can move elsewhere
//!   (drainability rules in [`crate::simulator::drainability`]); it keeps
//!   the time since when.
//! - [`softtaint`]: `DeletionCandidateOfClusterAutoscaler` on unneeded nodes.
//! - [`cooldown`]: the delays after a scale-up, a deletion or a failure.
//! - [`selection`]: which unneeded nodes to delete now, within min sizes,
//!   resource limits and the parallelism budgets.
//! - [`actuation`]: taint, drain and delete, in the background.
//!
//! Every reason a node stays is an [`Unremovable`]; its name is rendered
//! only here.

pub mod actuation;
pub mod cooldown;
pub mod eligibility;
pub mod orchestrator;
pub mod selection;
pub mod softtaint;
pub mod unneeded;

use crate::simulator::drainability::BlockingReason;

pub use eligibility::{Utilization, utilization};
pub use selection::{DeletionBudget, GroupSize, Selection, select};
pub use unneeded::{CandidateNode, Planner, PlannerSettings, UnneededNode};

/// `cluster-autoscaler.kubernetes.io/scale-down-disabled`.
pub const SCALE_DOWN_DISABLED: &str = "cluster-autoscaler.kubernetes.io/scale-down-disabled";

/// Why a node is not removed: upstream's reason, with the details that
/// some reasons carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unremovable {
    /// A reason without details.
    Because(UnremovableReason),
    /// `BlockedByPod` with the pod and its reason.
    BlockedByPod {
        /// `namespace/name`.
        pod: String,
        /// The blocking reason.
        reason: BlockingReason,
    },
    /// `UnexpectedError` with what failed.
    UnexpectedError(String),
}

impl From<UnremovableReason> for Unremovable {
    fn from(r: UnremovableReason) -> Self {
        Self::Because(r)
    }
}

ca_names! {
    /// Every `UnremovableReason` name upstream has: the labels of
    /// `unremovable_nodes_count`, all of which are reported every loop.
    pub enum UnremovableReason {
        /// No reason.
        NoReason,
        /// The scale-down-disabled annotation.
        ScaleDownDisabledAnnotation,
        /// Unready and `--scale-down-unready-enabled=false`.
        ScaleDownUnreadyDisabled,
        /// In no node group.
        NotAutoscaled,
        /// Unneeded for less than the unneeded time.
        NotUnneededLongEnough,
        /// Unready for less than the unready time.
        NotUnreadyLongEnough,
        /// The group is at min size.
        NodeGroupMinSizeReached,
        /// The group's deletion count is reached.
        NodeGroupMaxDeletionCountReached,
        /// An atomic group's scale-down failed.
        AtomicScaleDownFailed,
        /// Removal would go below `--cores-total` or `--memory-total` min.
        MinimalResourceLimitExceeded,
        /// Being deleted.
        CurrentlyBeingDeleted,
        /// Utilization above the threshold.
        NotUnderutilized,
        /// Unneeded for another reason.
        NotUnneededOtherReason,
        /// Found unremovable recently; not checked again yet.
        RecentlyUnremovable,
        /// Its pods fit nowhere else.
        NoPlaceToMovePods,
        /// A pod blocks the removal.
        BlockedByPod,
        /// Something failed.
        UnexpectedError,
        /// No node info.
        NoNodeInfo,
        /// An on-completion pod blocks the removal.
        BlockedByOnCompletionPod,
    }
}

impl Unremovable {
    /// Upstream's name (the metric label).
    pub fn as_str(&self) -> &'static str {
        self.reason().as_str()
    }

    /// The reason without its details.
    pub fn reason(&self) -> UnremovableReason {
        match self {
            Self::Because(r) => *r,
            Self::BlockedByPod { .. } => UnremovableReason::BlockedByPod,
            Self::UnexpectedError(_) => UnremovableReason::UnexpectedError,
        }
    }
}

#[cfg(test)]
mod tests;
