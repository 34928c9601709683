//! Planning one scale-up (ca-compat §4.3–§4.5): estimate every usable
//! group, let the expander choose, cap by the limits and balance.

use std::collections::BTreeMap;
use std::time::Duration;

use predicates::PodInfo;

use super::balancing::{Balancing, balance, similar};
use super::equivalence::{PodGroup, equivalence_groups};
use super::estimator::estimate;
use super::limits::{LimitExceeded, Limits};
use super::{Candidate, ScaleUpInfo};
use crate::expander::{self, Priorities, PriorityNotice, ScaleUpOption};
use crate::simulator::{Snapshot, node_from_template};

/// The outcome of planning.
#[derive(Debug, Clone)]
pub enum Plan {
    /// Scale these groups; these pods would be helped.
    ScaleUp {
        /// Per-group changes.
        infos: Vec<ScaleUpInfo>,
        /// The chosen option.
        option: ScaleUpOption,
        /// Options considered (for decision records).
        considered: Vec<ScaleUpOption>,
        /// Per pod key: node group → chosen, not chosen, or why rejected.
        groups: BTreeMap<String, BTreeMap<String, String>>,
    },
    /// No option: why each pod was not helped (reason → number of groups).
    NoOptions {
        /// Per pod key.
        reasons: BTreeMap<String, BTreeMap<String, usize>>,
        /// Per pod key: node group → why it was rejected.
        groups: BTreeMap<String, BTreeMap<String, String>>,
    },
}

/// Inputs of [`plan`].
pub struct PlanInputs<'a> {
    /// Pending pods still unhelped after filtering.
    pub pods: &'a [PodInfo],
    /// Usable groups (healthy, not backed off, with templates).
    pub candidates: &'a [Candidate],
    /// Groups skipped before estimation, with their reason.
    pub skipped: &'a BTreeMap<String, String>,
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
}

/// Plans one scale-up.
pub fn plan(
    snapshot: &mut Snapshot,
    inputs: &PlanInputs<'_>,
    notices: &mut Vec<PriorityNotice>,
    limit_hits: &mut Vec<LimitExceeded>,
) -> Plan {
    let groups = equivalence_groups(inputs.pods);
    // per_group[pod group index]: node group -> why it was rejected
    let mut per_group: Vec<BTreeMap<String, Vec<String>>> = vec![BTreeMap::new(); groups.len()];
    for g in per_group.iter_mut() {
        for (id, reason) in inputs.skipped {
            g.insert(id.clone(), vec![reason.clone()]);
        }
    }
    // First, which pod groups fit each group's template at all, and how
    // many nodes the limits allow it.
    let mut probed: Vec<(&Candidate, usize, Vec<usize>)> = Vec::new();
    for c in inputs.candidates {
        let remaining = c.max.saturating_sub(c.target);
        if remaining == 0 {
            for g in per_group.iter_mut() {
                g.insert(c.id.clone(), vec!["max node group size reached".into()]);
            }
            continue;
        }
        let allowed = match inputs.limits.nodes_allowed(&c.template) {
            Ok(n) => n,
            Err(reason) => {
                for g in per_group.iter_mut() {
                    g.insert(c.id.clone(), vec![reason.to_string()]);
                }
                limit_hits.push(reason);
                continue;
            }
        };
        snapshot.fork();
        let probe = snapshot.add_node(node_from_template(
            &c.template,
            &format!("template-node-for-{}", c.id),
        ));
        let mut fitting = Vec::new();
        for (i, g) in groups.iter().enumerate() {
            match snapshot.fits(g.sample(), probe) {
                Ok(()) => fitting.push(i),
                Err(rs) => {
                    per_group[i].insert(c.id.clone(), rs.iter().map(ToString::to_string).collect());
                }
            }
        }
        snapshot.revert();
        if !fitting.is_empty() {
            probed.push((c, allowed, fitting));
        }
    }
    // Similar groups (with --balance-similar-node-groups): those whose
    // templates are alike and that fit every pod group this one fits.
    let similar_to = |c: &Candidate, fitting: &[usize]| -> Vec<&Candidate> {
        if !inputs.balancing.enabled {
            return Vec::new();
        }
        probed
            .iter()
            .filter(|(o, _, o_fitting)| {
                o.id != c.id
                    && fitting.iter().all(|i| o_fitting.contains(i))
                    && similar(&c.template, &o.template, inputs.balancing)
            })
            .map(|(o, _, _)| *o)
            .collect()
    };
    let mut options = Vec::new();
    let mut similar_groups: BTreeMap<String, Vec<&Candidate>> = BTreeMap::new();
    let started = std::time::Instant::now();
    for (c, allowed, fitting) in &probed {
        if started.elapsed() > inputs.max_binpacking_time {
            tracing::warn!(
                "--max-binpacking-time reached: node group {} and the ones after it are not estimated",
                c.id
            );
            break;
        }
        // The estimate may fill this group and its similar ones (upstream's
        // estimator limits binpacking by their joint remaining capacity).
        let similar = similar_to(c, fitting);
        let capacity: usize = std::iter::once(*c)
            .chain(similar.iter().copied())
            .map(|g| g.max.saturating_sub(g.target))
            .sum();
        let limit = capacity
            .min(inputs.limits.max_nodes_per_scaleup)
            .min(*allowed);
        let refs: Vec<&PodGroup> = fitting.iter().map(|&i| &groups[i]).collect();
        let est = estimate(
            snapshot,
            &c.template,
            &refs,
            limit,
            &format!("template-node-for-{}", c.id),
            inputs.max_group_binpacking_time,
        );
        for &i in fitting {
            let placed = groups[i].pods.iter().any(|p| est.pods.contains(&p.key));
            let note = if placed {
                format!("option of {} node(s)", est.node_count)
            } else {
                "does not fit a new node within the limits".to_string()
            };
            per_group[i].insert(c.id.clone(), vec![note]);
        }
        if est.node_count == 0 || est.pods.is_empty() {
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
    let considered = options.clone();
    let chosen_option = expander::choose(inputs.expanders, options, inputs.priorities, notices);
    // The record per pod: every node group and its verdict.
    let mut by_pod_groups = BTreeMap::new();
    let mut by_pod_counts = BTreeMap::new();
    for (i, g) in groups.iter().enumerate() {
        let mut verdicts: BTreeMap<String, String> = BTreeMap::new();
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for (id, rs) in &per_group[i] {
            let is_option = considered.iter().any(|o| &o.group == id);
            let verdict = match &chosen_option {
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
            let key = p.key.clone();
            by_pod_groups.insert(key.clone(), verdicts.clone());
            by_pod_counts.insert(key, counts.clone());
        }
    }
    let Some(option) = chosen_option else {
        return Plan::NoOptions {
            reasons: by_pod_counts,
            groups: by_pod_groups,
        };
    };
    // Cap by --max-nodes-total.
    let mut count = option.node_count;
    if inputs.limits.max_nodes_total > 0 {
        count = count.min(
            inputs
                .limits
                .max_nodes_total
                .saturating_sub(inputs.limits.nodes_now),
        );
    }
    let chosen = inputs.candidates.iter().find(|c| c.id == option.group);
    let infos = match chosen {
        None => Vec::new(),
        Some(c) if inputs.balancing.enabled => {
            let groups: Vec<(String, usize, usize)> = std::iter::once(c)
                .chain(similar_groups.remove(&c.id).unwrap_or_default())
                .map(|g| (g.id.clone(), g.target, g.max))
                .collect();
            balance(&groups, count)
        }
        Some(c) => vec![ScaleUpInfo {
            group: c.id.clone(),
            current: c.target,
            new: (c.target + count).min(c.max),
            max: c.max,
        }],
    };
    Plan::ScaleUp {
        infos,
        option,
        considered,
        groups: by_pod_groups,
    }
}
