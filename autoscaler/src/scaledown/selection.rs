//! Which unneeded nodes are deleted now (docs/reference/ca-rules.md §3.5): long enough
//! unneeded, groups kept at min size, resource limits kept, within
//! `--max-scale-down-parallelism` and `--max-drain-parallelism`.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};

use super::unneeded::{Planner, UnneededNode};
use super::unremovable::{Unremovable, UnremovableReason};

/// One node group's facts for choosing deletions.
#[derive(Debug, Clone)]
pub struct GroupSize {
    /// Target size.
    pub target: usize,
    /// Min size.
    pub min: usize,
    /// Deletions already in progress in the group.
    pub deleting: usize,
    /// `scaledownunneededtime` and `scaledownunreadytime` for the group.
    pub unneeded_time: Duration,
    /// Unready time.
    pub unready_time: Duration,
}

/// Deletions to start now.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Empty nodes.
    pub empty: Vec<String>,
    /// Nodes to drain.
    pub drain: Vec<String>,
    /// Unneeded nodes not deleted now, with why.
    pub kept: BTreeMap<String, Unremovable>,
}

/// Budgets (`--max-scale-down-parallelism`, `--max-drain-parallelism`)
/// minus deletions in progress.
#[derive(Debug, Clone, Copy)]
pub struct DeletionBudget {
    /// Total nodes that may be deleted in parallel, left.
    pub total: usize,
    /// Nodes needing drain, left.
    pub drain: usize,
}

/// Chooses the unneeded nodes to delete now (docs/reference/ca-rules.md §3.5). `keep_cores`
/// tells whether removing a node still respects the minimum resource
/// limits (and charges it when it does).
pub fn select(
    planner: &Planner,
    groups: &BTreeMap<String, GroupSize>,
    budget: DeletionBudget,
    now: SystemTime,
    mut keep_limits: impl FnMut(&str) -> bool,
) -> Selection {
    let mut out = Selection::default();
    let mut picked: HashMap<&str, usize> = HashMap::new();
    let mut ordered: Vec<(&String, &UnneededNode)> = planner.unneeded.iter().collect();
    // Empty nodes (those without on-completion pods first), then
    // non-risky drains, then risky ones.
    ordered.sort_by_key(|(_, u)| (!u.pods_to_move.is_empty(), u.on_completion > 0, u.risky));
    let (mut total, mut drains) = (budget.total, budget.drain.min(budget.total));
    for (name, u) in ordered {
        let Some(g) = groups.get(&u.group) else {
            out.kept.insert(
                name.clone(),
                Unremovable::Because(UnremovableReason::NotAutoscaled),
            );
            continue;
        };
        let threshold = if u.ready {
            g.unneeded_time
        } else {
            g.unready_time
        };
        if threshold.is_zero() || u.since + threshold >= now {
            let reason = if u.ready {
                Unremovable::Because(UnremovableReason::NotUnneededLongEnough)
            } else {
                Unremovable::Because(UnremovableReason::NotUnreadyLongEnough)
            };
            out.kept.insert(name.clone(), reason);
            continue;
        }
        let already = picked.get(u.group.as_str()).copied().unwrap_or(0);
        if g.target.saturating_sub(g.deleting + already) <= g.min {
            out.kept.insert(
                name.clone(),
                Unremovable::Because(UnremovableReason::NodeGroupMinSizeReached),
            );
            continue;
        }
        let empty = u.pods_to_move.is_empty();
        if u.on_completion == 0 && (total == 0 || (!empty && drains == 0)) {
            continue;
        }
        if !keep_limits(name) {
            out.kept.insert(
                name.clone(),
                Unremovable::Because(UnremovableReason::MinimalResourceLimitExceeded),
            );
            continue;
        }
        if u.on_completion > 0 {
            // Upstream checks the min size and the limits first, using
            // them up for this node, then leaves it (`NodesToDelete`).
            *picked.entry(u.group.as_str()).or_default() += 1;
            tracing::debug!("Node {name} has active on-completion pods, delaying scale down");
            out.kept.insert(
                name.clone(),
                Unremovable::Because(UnremovableReason::BlockedByOnCompletionPod),
            );
            continue;
        }
        total -= 1;
        *picked.entry(u.group.as_str()).or_default() += 1;
        if empty {
            out.empty.push(name.clone());
        } else {
            drains -= 1;
            out.drain.push(name.clone());
        }
    }
    out
}
