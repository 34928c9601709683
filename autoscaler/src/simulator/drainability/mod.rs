//! Drainability: which pods block removing their node (docs/reference/ca-rules.md §2). The
//! rules are a list, [`rules::DEFAULT`], one type per rule in upstream's
//! order (`simulator/drainability/rules`); [`evaluate`] runs them and the
//! first with an opinion wins. The types, the flags and the functions the
//! rules share are in [`context`].

pub mod budgets;
pub mod context;
pub mod rules;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

pub use self::budgets::{Budget, Budgets};
pub use self::context::{
    BlockingReason, Context, ControllerState, Controllers, DAEMONSET_POD, DrainRules, MIRROR,
    Outcome, SAFE_TO_EVICT, SAFE_TO_EVICT_LOCAL_VOLUMES, controller_of, controller_ref,
    controller_uid, is_daemonset_pod, is_long_terminating, is_mirror_pod,
};
use self::rules::Rule;

/// Runs the rules on one pod: [`rules::DEFAULT`], in upstream's order.
pub fn evaluate(pod: &Pod, ctx: &Context<'_>) -> Outcome {
    evaluate_with(rules::DEFAULT, pod, ctx)
}

/// Runs `list` on one pod (upstream's `Rules.Drainable`): the rules the
/// flags turn on, in order; the first outcome other than
/// [`Outcome::Undefined`] wins.
pub fn evaluate_with(list: &[&dyn Rule], pod: &Pod, ctx: &Context<'_>) -> Outcome {
    list.iter()
        .filter(|rule| rule.enabled(&ctx.rules))
        .map(|rule| rule.drainable(pod, ctx))
        .find(|outcome| *outcome != Outcome::Undefined)
        .unwrap_or(Outcome::Undefined)
}

/// The pods of a node sorted by what removal does with them.
#[derive(Debug, Clone, Default)]
pub struct NodeDrain {
    /// Pods that must be rescheduled elsewhere.
    pub pods_to_move: Vec<Arc<Pod>>,
    /// DaemonSet pods (evicted per the DaemonSet eviction flags).
    pub daemonset_pods: Vec<Arc<Pod>>,
    /// `safe-to-evict: on-completion` pods.
    pub on_completion: Vec<Arc<Pod>>,
}

/// A pod that blocks its node.
#[derive(Debug, Clone)]
pub struct BlockingPod {
    /// The pod.
    pub pod: Arc<Pod>,
    /// Why.
    pub reason: BlockingReason,
    /// Upstream's error text.
    pub message: String,
}

/// Sorts a node's pods (`GetPodsToMove`); the first blocking pod stops the
/// evaluation.
pub fn pods_to_move(pods: &[Arc<Pod>], ctx: &Context<'_>) -> Result<NodeDrain, BlockingPod> {
    let mut out = NodeDrain::default();
    for pod in pods {
        match evaluate(pod, ctx) {
            Outcome::Undefined | Outcome::DrainOk => {
                if is_daemonset_pod(pod) {
                    out.daemonset_pods.push(pod.clone());
                } else {
                    out.pods_to_move.push(pod.clone());
                }
            }
            Outcome::WaitForCompletion => out.on_completion.push(pod.clone()),
            Outcome::Skip => {}
            Outcome::Block(reason, message) => {
                return Err(BlockingPod {
                    pod: pod.clone(),
                    reason,
                    message,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
