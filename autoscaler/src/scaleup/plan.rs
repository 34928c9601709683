//! Planning one scale-up (docs/reference/ca-rules.md §4.3–§4.5): estimate every usable
//! group, let the expander choose, cap by the limits and balance.

use std::collections::BTreeMap;
use std::time::Duration;

use predicates::{NodeInfo, PodInfo};

use super::balancing::{Balancing, balance, similar};
use super::equivalence::{PodGroup, equivalence_groups};
use super::estimator::estimate;
use super::limits::{LimitExceeded, Limits};
use super::types::{Candidate, ScaleUpInfo};
use crate::expander::{self, Priorities, PriorityNotice, ScaleUpOption};
use crate::simulator::{Snapshot, node_from_template};

/// Per pod key: node group → its verdict for the pod.
pub type PodVerdicts = BTreeMap<String, BTreeMap<String, String>>;

/// Per pod key: why node groups could not help it → how many groups.
pub type PodReasons = BTreeMap<String, BTreeMap<String, usize>>;

/// What planning decided.
#[derive(Debug, Clone)]
pub enum Plan {
    /// Scale these groups for the chosen option.
    ScaleUp {
        /// Per-group changes (empty when the chosen group is gone).
        infos: Vec<ScaleUpInfo>,
        /// The chosen option.
        option: ScaleUpOption,
    },
    /// No group can help any pod.
    NoOptions,
}

/// One planned scale-up: the decision, the options the expander chose
/// among, and for every pod the verdict of every group.
#[derive(Debug, Clone)]
pub struct ScaleUpPlan {
    /// What to do.
    pub decision: Plan,
    /// The options considered (for decision records).
    pub considered: Vec<ScaleUpOption>,
    /// Per pod key: node group → chosen, not chosen, or why rejected.
    pub verdicts: PodVerdicts,
    /// Per pod key: why groups could not help it → number of groups (the
    /// groups that made options are not counted).
    pub reasons: PodReasons,
    /// The groups skipped for a cluster-wide limit.
    pub limit_hits: Vec<LimitExceeded>,
    /// What the priority expander noticed of its configuration.
    pub priority_notices: Vec<PriorityNotice>,
    /// With the skipped groups' simulation, the time it took (upstream's
    /// `scaleUp:skippedNodeGroupsSimulation` function duration).
    pub skipped_simulation: Option<Duration>,
}

/// Inputs of [`plan`].
pub struct PlanInputs<'a> {
    /// Pending pods still unhelped after filtering.
    pub pods: &'a [PodInfo],
    /// Usable groups (healthy, not backed off, with templates).
    pub candidates: &'a [Candidate],
    /// Groups skipped before estimation, with their reason.
    pub skipped: &'a BTreeMap<String, String>,
    /// `--scaleup-simulation-for-skipped-node-groups-enabled`: the template
    /// nodes of the groups skipped (before estimation, at their max size or
    /// over a limit), against which each pod is checked so that a group it
    /// could never run on gives its scheduling reason, not the skip reason.
    pub skipped_templates: Option<&'a BTreeMap<String, NodeInfo>>,
    /// Limits.
    pub limits: &'a Limits,
    /// Expander chain.
    pub expanders: &'a [crate::config::ExpanderName],
    /// Priority expander config.
    pub priorities: Option<&'a Priorities>,
    /// Balancing.
    pub balancing: &'a Balancing,
    /// `--max-binpacking-time`: estimation of all groups together.
    pub max_binpacking_time: Duration,
    /// `--max-nodegroup-binpacking-duration`: one group's estimate.
    pub max_group_binpacking_time: Duration,
    /// `--fastpath-binpacking-enabled`.
    pub fastpath_binpacking: bool,
    /// All or nothing (a best-effort-atomic ProvisioningRequest): an option
    /// must place every pod, and the increase must not be capped.
    pub all_or_nothing: bool,
}

/// Why an all-or-nothing scale-up left a group (upstream's
/// `AllOrNothingReason`).
pub const ALL_OR_NOTHING_REASON: &str =
    "not all pods would fit and scale-up is using all-or-nothing strategy";

/// Plans one scale-up (docs/reference/ca-rules.md §4.3–§4.5): which pod groups fit
/// which node group's template within the limits, one estimate per usable
/// group, the expander's choice, then the count capped and balanced.
pub fn plan(snapshot: &mut Snapshot, inputs: &PlanInputs<'_>) -> ScaleUpPlan {
    let groups = equivalence_groups(inputs.pods);
    let mut planner = Planner {
        inputs,
        rejected: vec![BTreeMap::new(); groups.len()],
        groups,
        limit_hits: Vec::new(),
        skipped_simulation: Duration::ZERO,
    };
    for (id, reason) in inputs.skipped {
        planner.skip(snapshot, id, vec![reason.clone()]);
    }
    let probed = planner.probe(snapshot);
    let (options, mut similar_groups) = planner.estimate(snapshot, &probed);
    let considered = options.clone();
    let mut priority_notices = Vec::new();
    let chosen = expander::choose(
        inputs.expanders,
        options,
        inputs.priorities,
        &mut priority_notices,
    );
    let (verdicts, mut reasons) = planner.verdicts(&considered, chosen.as_ref());
    let decision = match chosen {
        None => Plan::NoOptions,
        Some(option) => {
            let similar = similar_groups.remove(&option.group).unwrap_or_default();
            let infos = planner.increases(&option, similar);
            let total: usize = infos.iter().map(|i| i.new - i.current).sum();
            if inputs.all_or_nothing && total < option.node_count {
                tracing::info!(
                    "Not attempting scale-up due to all-or-nothing strategy: not all pods would be accommodated"
                );
                for r in reasons.values_mut() {
                    *r = BTreeMap::from([(ALL_OR_NOTHING_REASON.to_string(), 1)]);
                }
                Plan::NoOptions
            } else {
                Plan::ScaleUp { infos, option }
            }
        }
    };
    ScaleUpPlan {
        decision,
        considered,
        verdicts,
        reasons,
        limit_hits: planner.limit_hits,
        priority_notices,
        skipped_simulation: inputs.skipped_templates.map(|_| planner.skipped_simulation),
    }
}

/// A node group whose template fits some pod groups: how many nodes the
/// limits allow it, and which pod groups fit.
struct Probed<'a> {
    candidate: &'a Candidate,
    allowed: usize,
    fitting: Vec<usize>,
}

/// The state of one planning: the pods' equivalence groups and, per pod
/// group, why each node group was rejected (or the option it made).
struct Planner<'a> {
    inputs: &'a PlanInputs<'a>,
    groups: Vec<PodGroup>,
    rejected: Vec<BTreeMap<String, Vec<String>>>,
    limit_hits: Vec<LimitExceeded>,
    /// The time spent checking pods against skipped groups' templates.
    skipped_simulation: Duration,
}

impl<'a> Planner<'a> {
    /// A group left out for `reasons`; with the skipped groups' simulation,
    /// the pod groups that do not fit its template get their scheduling
    /// reasons instead (upstream's `getRemainingPodsConsideringSkippedNodeGroups`).
    fn skip(&mut self, snapshot: &mut Snapshot, group: &str, reasons: Vec<String>) {
        let Some(template) = self.inputs.skipped_templates.and_then(|t| t.get(group)) else {
            self.reject_for_all_with(group, reasons);
            return;
        };
        let started = std::time::Instant::now();
        snapshot.fork();
        let probe = snapshot.add_node(node_from_template(
            template,
            &format!("template-node-for-{group}"),
        ));
        for (i, g) in self.groups.iter().enumerate() {
            let why = match snapshot.fits(g.sample(), probe) {
                Ok(()) => reasons.clone(),
                Err(rs) => rs.iter().map(ToString::to_string).collect(),
            };
            self.rejected[i].insert(group.to_string(), why);
        }
        snapshot.revert();
        self.skipped_simulation += started.elapsed();
    }

    fn reject_for_all_with(&mut self, group: &str, reasons: Vec<String>) {
        for r in self.rejected.iter_mut() {
            r.insert(group.to_string(), reasons.clone());
        }
    }

    /// Which pod groups fit each candidate's template at all, and how many
    /// nodes the limits allow it; the others are rejected with the reason.
    fn probe(&mut self, snapshot: &mut Snapshot) -> Vec<Probed<'a>> {
        let mut probed = Vec::new();
        for c in self.inputs.candidates {
            if c.max.saturating_sub(c.target) == 0 {
                self.skip(snapshot, &c.id, vec!["max node group size reached".into()]);
                continue;
            }
            let allowed = match self.inputs.limits.nodes_allowed(&c.template) {
                Ok(n) => n,
                Err(reason) => {
                    self.skip(snapshot, &c.id, reason.reasons());
                    self.limit_hits.push(reason);
                    continue;
                }
            };
            snapshot.fork();
            let probe = snapshot.add_node(node_from_template(
                &c.template,
                &format!("template-node-for-{}", c.id),
            ));
            let mut fitting = Vec::new();
            for (i, g) in self.groups.iter().enumerate() {
                match snapshot.fits(g.sample(), probe) {
                    Ok(()) => fitting.push(i),
                    Err(rs) => {
                        let reasons = rs.iter().map(ToString::to_string).collect();
                        self.rejected[i].insert(c.id.clone(), reasons);
                    }
                }
            }
            snapshot.revert();
            if !fitting.is_empty() {
                probed.push(Probed {
                    candidate: c,
                    allowed,
                    fitting,
                });
            }
        }
        probed
    }

    /// The groups similar to `c` (with --balance-similar-node-groups):
    /// those whose templates are alike and that fit every pod group `c`
    /// fits.
    fn similar_to(&self, probed: &[Probed<'a>], p: &Probed<'a>) -> Vec<&'a Candidate> {
        if !self.inputs.balancing.enabled {
            return Vec::new();
        }
        probed
            .iter()
            .filter(|o| {
                o.candidate.id != p.candidate.id
                    && p.fitting.iter().all(|i| o.fitting.contains(i))
                    && similar(
                        &p.candidate.template,
                        &o.candidate.template,
                        self.inputs.balancing,
                    )
            })
            .map(|o| o.candidate)
            .collect()
    }

    /// One binpacking estimate per probed group, within
    /// `--max-binpacking-time`: the options, and each option's similar
    /// groups.
    fn estimate(
        &mut self,
        snapshot: &mut Snapshot,
        probed: &[Probed<'a>],
    ) -> (Vec<ScaleUpOption>, BTreeMap<String, Vec<&'a Candidate>>) {
        let mut options = Vec::new();
        let mut similar_groups = BTreeMap::new();
        let started = std::time::Instant::now();
        for p in probed {
            let c = p.candidate;
            if started.elapsed() > self.inputs.max_binpacking_time {
                tracing::warn!(
                    "--max-binpacking-time reached: node group {} and the ones after it are not estimated",
                    c.id
                );
                break;
            }
            // The estimate may fill this group and its similar ones
            // (upstream's estimator limits binpacking by their joint
            // remaining capacity).
            let similar = self.similar_to(probed, p);
            let capacity: usize = std::iter::once(c)
                .chain(similar.iter().copied())
                .map(|g| g.max.saturating_sub(g.target))
                .sum();
            let limit = capacity
                .min(self.inputs.limits.max_nodes_per_scaleup)
                .min(p.allowed);
            let refs: Vec<&PodGroup> = p.fitting.iter().map(|&i| &self.groups[i]).collect();
            let est = estimate(
                snapshot,
                &c.template,
                &refs,
                limit,
                &format!("template-node-for-{}", c.id),
                self.inputs.max_group_binpacking_time,
                self.inputs.fastpath_binpacking,
            );
            for &i in &p.fitting {
                let placed = self.groups[i]
                    .pods
                    .iter()
                    .any(|p| est.pods.contains(&p.key));
                let note = if placed {
                    format!("option of {} node(s)", est.node_count)
                } else {
                    "does not fit a new node within the limits".to_string()
                };
                self.rejected[i].insert(c.id.clone(), vec![note]);
            }
            if est.node_count == 0 || est.pods.is_empty() {
                continue;
            }
            if self.inputs.all_or_nothing && est.pods.len() < self.inputs.pods.len() {
                tracing::debug!(
                    "Some pods can't fit to {}, giving up due to all-or-nothing scale-up strategy",
                    c.id
                );
                for &i in &p.fitting {
                    self.rejected[i].insert(c.id.clone(), vec![ALL_OR_NOTHING_REASON.into()]);
                }
                continue;
            }
            similar_groups.insert(c.id.clone(), similar);
            let cap = predicates::resources::Resources::from_list(
                c.template
                    .node
                    .status
                    .as_ref()
                    .and_then(|s| s.capacity.as_ref()),
            );
            options.push(ScaleUpOption {
                group: c.id.clone(),
                node_count: est.node_count,
                pods: est.pods,
                pod_requests: est.requests,
                node_capacity: (cap.milli_cpu, cap.memory),
            });
        }
        (options, similar_groups)
    }

    /// The record per pod: every node group and its verdict, and the
    /// reasons of the groups that made no option, counted.
    fn verdicts(
        &self,
        considered: &[ScaleUpOption],
        chosen: Option<&ScaleUpOption>,
    ) -> (PodVerdicts, PodReasons) {
        let mut by_pod_verdicts = BTreeMap::new();
        let mut by_pod_counts = BTreeMap::new();
        for (i, g) in self.groups.iter().enumerate() {
            let mut verdicts: BTreeMap<String, String> = BTreeMap::new();
            let mut counts: BTreeMap<String, usize> = BTreeMap::new();
            for (id, rs) in &self.rejected[i] {
                let is_option = considered.iter().any(|o| &o.group == id);
                let verdict = match chosen {
                    Some(o) if &o.group == id && is_option => "chosen".to_string(),
                    Some(_) if is_option => "not chosen by the expander".to_string(),
                    _ => rs.join("; "),
                };
                if !is_option {
                    for r in rs {
                        *counts.entry(r.clone()).or_default() += 1;
                    }
                }
                verdicts.insert(id.clone(), verdict);
            }
            for p in &g.pods {
                by_pod_verdicts.insert(p.key.clone(), verdicts.clone());
                by_pod_counts.insert(p.key.clone(), counts.clone());
            }
        }
        (by_pod_verdicts, by_pod_counts)
    }

    /// The increases for the chosen option: its count capped by
    /// `--max-nodes-total`, then shared with its similar groups when
    /// balancing, each group's share cut to what its CapacityQuotas leave
    /// (upstream's `capScaleUpsByQuota`: the rest is not given to another
    /// group).
    fn increases(&self, option: &ScaleUpOption, similar: Vec<&Candidate>) -> Vec<ScaleUpInfo> {
        let limits = self.inputs.limits;
        let mut count = option.node_count;
        if limits.max_nodes_total > 0 {
            count = count.min(limits.max_nodes_total.saturating_sub(limits.nodes_now));
        }
        let chosen = self.inputs.candidates.iter().find(|c| c.id == option.group);
        match chosen {
            None => Vec::new(),
            Some(c) if self.inputs.balancing.enabled => {
                let similar: Vec<&Candidate> = similar
                    .into_iter()
                    .filter(|g| limits.nodes_allowed(&g.template).is_ok())
                    .collect();
                let members: Vec<&Candidate> = std::iter::once(c).chain(similar).collect();
                let groups: Vec<(String, usize, usize)> = members
                    .iter()
                    .map(|g| (g.id.clone(), g.target, g.max))
                    .collect();
                let mut left = limits.clone();
                balance(&groups, count)
                    .into_iter()
                    .filter_map(|mut info| {
                        let g = members.iter().find(|g| g.id == info.group)?;
                        let taken = left.consume(&g.template, info.new - info.current);
                        info.new = info.current + taken;
                        (taken > 0).then_some(info)
                    })
                    .collect()
            }
            Some(c) => vec![ScaleUpInfo {
                group: c.id.clone(),
                current: c.target,
                new: (c.target + count).min(c.max),
                max: c.max,
            }],
        }
    }
}
