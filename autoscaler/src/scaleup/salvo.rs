//! `--salvo-scale-up` (CA 1.36, upstream's `runScaleUpSalvo`): several
//! scale-ups in one loop. After each successful scale-up the pods it helped
//! leave the salvo and the nodes it asked for join the loop's snapshot
//! (template copies named `<template>-<i>-salvo-<n>`, the helped pods
//! placed on them), so that the next scale-up plans the pods still left
//! with those nodes counted (`--max-nodes-total`, inter-pod affinity,
//! topology spread). There is always one scale-up; the next starts only
//! while `--salvo-scale-up-budget` (wall-clock time from the salvo's start)
//! is not spent. The salvo ends on the first scale-up that fails or is not
//! successful, when a scale-up helped no pod, when every pod was helped, or
//! when the budget is spent ([`SalvoEnd`], logged as upstream words it).

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::time::{Duration, Instant};

use predicates::{NodeInfo, PodInfo};

use super::orchestrator::ScaleUpOutcome;
use super::types::ScaleUpStatus;
use crate::simulator::{Snapshot, node_from_template};

/// The pods a salvo still has to help, and its budget.
pub struct Salvo {
    pods: Vec<PodInfo>,
    budget: Duration,
    started: Instant,
    /// The index of the scale-up under way (0 for the first).
    pub iteration: usize,
}

/// Why a salvo ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SalvoEnd {
    /// A scale-up failed.
    Failed,
    /// A scale-up ended otherwise than successfully.
    NotSuccessful(ScaleUpStatus),
    /// A successful scale-up named no pod it helped.
    NoPodHelped,
    /// Every pod was helped.
    AllHelped,
    /// The budget is spent.
    BudgetExhausted(Duration),
    /// The helped pods could not be placed on the new nodes.
    SnapshotUpdate(SnapshotUpdateError),
}

/// Why the nodes of a scale-up could not join the salvo's snapshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotUpdateError {
    /// A scaled-up node group has no template node.
    #[error("Failed to find template node info for node group {0:?}")]
    NoTemplate(String),
    /// A helped pod fits none of the new nodes.
    #[error(
        "Failed cluster snapshot update: couldn't schedule triggering pod {pod} on any of the nodes from scaled up node group(s) {groups:?}"
    )]
    PodUnplaced {
        /// The pod's `namespace/name`.
        pod: String,
        /// The node groups scaled up.
        groups: Vec<String>,
    },
}

impl fmt::Display for SalvoEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Failed => f.write_str("Scale up failed, finishing the scale up salvo"),
            Self::NotSuccessful(status) => write!(
                f,
                "Scale up not successful: {}, finishing the scale up salvo",
                status.upstream_name()
            ),
            Self::NoPodHelped => f.write_str(
                "Empty unfilteredPodsTriggeredScaleUp list - cannot update cluster snapshot, finishing the scale up salvo",
            ),
            Self::AllHelped => {
                f.write_str("All unschedulable pods have been helped, finishing the scale up salvo")
            }
            Self::BudgetExhausted(budget) => write!(
                f,
                "Scale up budget of {} exhausted, finishing the scale up salvo",
                simclock::format_go_duration(*budget)
            ),
            Self::SnapshotUpdate(e) => write!(
                f,
                "Failed to update cluster snapshot after scale up, finishing the scale up salvo: {e}"
            ),
        }
    }
}

impl Salvo {
    /// A salvo for these pods, starting now.
    pub fn start(pods: Vec<PodInfo>, budget: Duration) -> Self {
        tracing::info!(
            "Starting scale up salvo: {} pods to help, budget: {}",
            pods.len(),
            simclock::format_go_duration(budget)
        );
        Self {
            pods,
            budget,
            started: Instant::now(),
            iteration: 0,
        }
    }

    /// The pods still to help.
    pub fn pods(&self) -> Vec<PodInfo> {
        self.pods.clone()
    }

    /// After one scale-up: whether the salvo goes on. When it does, the
    /// new nodes are in the snapshot with the helped pods on them.
    pub fn after(
        &mut self,
        up: &ScaleUpOutcome,
        snapshot: &mut Snapshot,
        templates: &BTreeMap<String, NodeInfo>,
    ) -> Result<(), SalvoEnd> {
        match up.status {
            ScaleUpStatus::Successful => {}
            ScaleUpStatus::Error => return Err(SalvoEnd::Failed),
            other => return Err(SalvoEnd::NotSuccessful(other)),
        }
        if up.pods_triggered_scale_up.is_empty() {
            return Err(SalvoEnd::NoPodHelped);
        }
        let helped: HashSet<String> = up
            .pods_triggered_scale_up
            .iter()
            .map(|p| predicates::nodeinfo::pod_key(p))
            .collect();
        let (placed, left): (Vec<PodInfo>, Vec<PodInfo>) = std::mem::take(&mut self.pods)
            .into_iter()
            .partition(|p| helped.contains(&p.key));
        self.pods = left;
        if self.pods.is_empty() {
            return Err(SalvoEnd::AllHelped);
        }
        if self.started.elapsed() >= self.budget {
            return Err(SalvoEnd::BudgetExhausted(self.budget));
        }
        self.add_new_nodes(up, snapshot, templates, placed)
            .map_err(SalvoEnd::SnapshotUpdate)?;
        self.iteration += 1;
        Ok(())
    }

    /// The nodes of the last scale-up as template copies, the pods it
    /// helped placed on them (upstream's
    /// `addLatestScaleUpResultsToClusterSnapshot`).
    fn add_new_nodes(
        &self,
        up: &ScaleUpOutcome,
        snapshot: &mut Snapshot,
        templates: &BTreeMap<String, NodeInfo>,
        helped: Vec<PodInfo>,
    ) -> Result<(), SnapshotUpdateError> {
        let suffix = format!("salvo-{}", self.iteration);
        let first_new = snapshot.nodes().len();
        for info in &up.scaled {
            let template = templates
                .get(&info.group)
                .ok_or_else(|| SnapshotUpdateError::NoTemplate(info.group.clone()))?;
            let base = template.node.metadata.name.clone().unwrap_or_default();
            for i in 0..info.new.saturating_sub(info.current) {
                snapshot.add_node(node_from_template(
                    template,
                    &format!("{base}-{i}-{suffix}"),
                ));
            }
        }
        let new_nodes: Vec<String> = up.scaled.iter().map(|i| i.group.clone()).collect();
        for pod in helped {
            let node = snapshot
                .find_fit(&pod, first_new, |i| i >= first_new)
                .ok_or_else(|| SnapshotUpdateError::PodUnplaced {
                    pod: pod.key.clone(),
                    groups: new_nodes.clone(),
                })?;
            snapshot.add_pod(node, pod);
        }
        Ok(())
    }
}

/// One salvo's scale-ups as one loop outcome: the last one's status, the
/// increases and helped pods of them all, each pod's last verdict.
pub fn merge(mut outcomes: Vec<ScaleUpOutcome>) -> Option<ScaleUpOutcome> {
    let mut last = outcomes.pop()?;
    for earlier in outcomes.into_iter().rev() {
        let mut scaled = earlier.scaled;
        scaled.append(&mut last.scaled);
        last.scaled = scaled;
        let mut triggered = earlier.pods_triggered_scale_up;
        triggered.append(&mut last.pods_triggered_scale_up);
        last.pods_triggered_scale_up = triggered;
        for (pod, verdict) in earlier.pods {
            last.pods.entry(pod).or_insert(verdict);
        }
        for (group, count) in earlier.options {
            last.options.entry(group).or_insert(count);
        }
    }
    Some(last)
}
