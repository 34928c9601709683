//! Scale-up (ca-compat §4, upstream's `core/scaleup`).
//!
//! One loop's scale-up runs in this order:
//!
//! - [`pending`]: which pending pods count, and which already fit on
//!   existing or upcoming nodes (`filter_out_schedulable`).
//! - [`equivalence`]: pods that are the same for scheduling are checked once.
//! - [`plan`]: every usable group is estimated ([`estimator`]), within the
//!   cluster-wide [`limits`]; the expander chooses; similar groups share
//!   the increase ([`balancing`]).
//! - [`orchestrator`]: the loop step around the plan (pods of draining
//!   nodes, `--max-nodes-total`, the wait for very new pods ([`new_pods`]),
//!   events, the decision record).
//! - [`executor`]: the one place where node groups are increased, for the
//!   plan and for `--enforce-node-group-min-size` ([`minsize`]).
//!
//! Everything before the executor is pure computation on the snapshot.

pub mod balancing;
pub mod equivalence;
pub mod estimator;
pub mod executor;
pub mod limits;
pub mod minsize;
pub mod new_pods;
pub mod orchestrator;
pub mod pending;
pub mod plan;

use predicates::NodeInfo;
use serde::{Deserialize, Serialize};

pub use balancing::{Balancing, balance, similar};
pub use equivalence::{PodGroup, equivalence_groups, equivalent};
pub use estimator::{Estimate, estimate};
pub use limits::{LimitExceeded, Limits};
pub use pending::{POD_SCALE_UP_DELAY, filter_out_schedulable, old_enough, pending_pods};
pub use plan::{Plan, PlanInputs, plan};

/// How a loop's scale-up ended (upstream's `ScaleUpResult` and the reasons
/// the loop stops before planning). Serialised as its variant name in the
/// decision record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScaleUpStatus {
    /// No pending pod needs a new node.
    NotNeeded,
    /// Every chosen group was increased.
    Successful,
    /// No node group can help the pending pods.
    NoOptionsAvailable,
    /// An increase failed.
    Error,
    /// Every pending pod is very new: the loop waits for more
    /// ([`new_pods`]).
    InCooldown,
    /// `--max-nodes-total` is reached.
    LimitedByMaxNodesTotal,
    /// The cluster is unhealthy: no scale-up at all.
    ClusterUnhealthy,
}

/// A node group that scale-up may use.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Group id.
    pub id: String,
    /// Template node (with its DaemonSet/mirror pods).
    pub template: NodeInfo,
    /// Target size.
    pub target: usize,
    /// Max size.
    pub max: usize,
}

/// One group's part of a scale-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleUpInfo {
    /// Group id.
    pub group: String,
    /// Current target.
    pub current: usize,
    /// New target.
    pub new: usize,
    /// Max size.
    pub max: usize,
}

#[cfg(test)]
mod tests;
