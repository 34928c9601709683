//! Scale-up (docs/reference/ca-rules.md §4, upstream's `core/scaleup`).
//!
//! One loop's scale-up runs in this order (the loop, `crate::core`, runs
//! the processors of `crate::processors` around it):
//!
//! - [`pending`]: which pending pods count; the pod-list processors then
//!   drop those that other mechanisms own or that fit on existing or
//!   upcoming nodes, and add those of draining nodes.
//! - [`equivalence`]: pods that are the same for scheduling are checked once.
//! - [`plan`]: every usable group is estimated ([`estimator`]), within the
//!   cluster-wide [`limits`]; the expander chooses; similar groups share
//!   the increase ([`balancing`]).
//! - [`orchestrator`]: the loop step around the plan (`--max-nodes-total`,
//!   the wait for very new pods ([`new_pods`]), the node-group list, each
//!   pod's outcome for the status processors and the decision record).
//! - [`executor`]: the one place where node groups are increased, for the
//!   plan and for `--enforce-node-group-min-size` ([`minsize`]), one after
//!   the other or, with `--parallel-scale-up`, at once.
//! - [`salvo`]: with `--salvo-scale-up`, the loop runs scale-ups until the
//!   pods are helped or the budget is spent, the nodes of each added to
//!   the snapshot before the next.
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
pub mod salvo;
pub mod types;

pub use balancing::{Balancing, balance, similar};
pub use equivalence::{PodGroup, equivalence_groups, equivalent};
pub use estimator::{Estimate, estimate};
pub use limits::{LimitExceeded, Limits};
pub use pending::{POD_SCALE_UP_DELAY, old_enough, pending_pods};
pub use plan::{Plan, PlanInputs, ScaleUpPlan, plan};
pub use types::{Candidate, NotTriggered, ScaleUpInfo, ScaleUpStatus};

#[cfg(test)]
mod tests;
