//! Scale-down (docs/reference/ca-rules.md §3, upstream's `core/scaledown`).
//!
//! One loop's scale-down runs in this order ([`orchestrator`]):
//!
//! - [`eligibility`]: which nodes are candidates (autoscaled, above min
//!   size, not in a per-group delay), with their thresholds.
//! - [`unneeded`]: the planner; a candidate is unneeded when its
//!   utilization is below the threshold and every pod can move elsewhere
//!   (drainability rules in [`crate::simulator::drainability`]); it keeps
//!   the time since when. A node's utilization is computed in
//!   [`utilization`](mod@utilization).
//! - [`softtaint`]: `DeletionCandidateOfClusterAutoscaler` on unneeded nodes.
//! - [`cooldown`]: the delays after a scale-up, a deletion or a failure.
//! - [`selection`]: which unneeded nodes to delete now, within min sizes,
//!   resource limits and the parallelism budgets.
//! - [`actuation`]: taint, drain and delete, in the background.
//! - [`latencytracker`]: with `--node-removal-latency-tracking-enabled`,
//!   how long unneeded nodes waited past their threshold.
//!
//! Every reason a node stays is an [`Unremovable`] ([`unremovable`]); its
//! name is rendered only there.

pub mod actuation;
pub mod cooldown;
pub mod eligibility;
pub mod latencytracker;
pub mod nodeevaltracker;
pub mod orchestrator;
pub mod selection;
pub mod softtaint;
pub mod unneeded;
pub mod unremovable;
pub mod utilization;

pub use eligibility::SCALE_DOWN_DISABLED;
pub use selection::{DeletionBudget, GroupSize, Selection, select};
pub use unneeded::{CandidateNode, Planner, PlannerSettings, UnneededNode};
pub use unremovable::{Unremovable, UnremovableReason};
pub use utilization::{Utilization, UtilizationError, utilization};

#[cfg(test)]
mod tests;
