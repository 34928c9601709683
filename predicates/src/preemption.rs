//! Preemption (kube-scheduler's DefaultPreemption): which lower-priority
//! pods to remove so a pending pod fits, and on which node.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::filters::{PreFilter, Reason};
use crate::labels::selector_matches;
use crate::nodeinfo::{NodeInfo, PodInfo};

/// A PodDisruptionBudget as preemption sees it.
#[derive(Debug, Clone)]
pub struct Budget {
    /// The budget's namespace.
    pub namespace: String,
    /// Its selector.
    pub selector: LabelSelector,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
}

/// The chosen node and the pods to remove from it.
#[derive(Debug, Clone)]
pub struct Preemption {
    /// Index of the node in the slice given to [`preempt`].
    pub node: usize,
    /// Pods to delete.
    pub victims: Vec<PodInfo>,
    /// How many of them violate a PodDisruptionBudget.
    pub pdb_violations: usize,
}

/// Finds where `pod` can run by removing pods of lower priority, as
/// kube-scheduler does: only nodes whose failures preemption can resolve;
/// victims are chosen by reprieving as many pods as possible, those whose
/// eviction would violate a budget first; the node with the fewest budget
/// violations, then the lowest highest victim priority, the lowest priority
/// sum and the fewest victims wins. Pods with `preemptionPolicy: Never`
/// never preempt.
pub fn preempt(
    pod: &PodInfo,
    nodes: &[NodeInfo],
    failures: &[(usize, Vec<Reason>)],
    budgets: &[Budget],
) -> Option<Preemption> {
    let never = pod
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.preemption_policy.as_deref())
        == Some("Never");
    if never {
        return None;
    }
    let pre = PreFilter::new(pod, nodes);
    let mut best: Option<(Preemption, (usize, i32, i64, usize))> = None;
    for (i, reasons) in failures {
        if reasons.iter().any(Reason::unresolvable) {
            continue;
        }
        let Some(node) = nodes.get(*i) else { continue };
        if !node.pods.iter().any(|p| p.priority < pod.priority) {
            continue;
        }
        let Some(candidate) = victims_on_node(&pre, node, budgets) else {
            continue;
        };
        let highest = candidate
            .victims
            .iter()
            .map(|v| v.priority)
            .max()
            .unwrap_or(i32::MIN);
        let sum: i64 = candidate
            .victims
            .iter()
            .map(|v| i64::from(v.priority))
            .sum();
        let rank = (
            candidate.pdb_violations,
            highest,
            sum,
            candidate.victims.len(),
        );
        if best.as_ref().is_none_or(|(_, r)| rank < *r) {
            best = Some((
                Preemption {
                    node: *i,
                    ..candidate
                },
                rank,
            ));
        }
    }
    best.map(|(p, _)| p)
}

fn victims_on_node(pre: &PreFilter<'_>, node: &NodeInfo, budgets: &[Budget]) -> Option<Preemption> {
    let mut trial = node.clone();
    let mut potential: Vec<PodInfo> = node
        .pods
        .iter()
        .filter(|p| p.priority < pre.pod.priority)
        .cloned()
        .collect();
    for p in &potential {
        trial.remove_pod(&p.key);
    }
    pre.filter(&trial).ok()?;
    // Most important first: reprieve them first.
    potential.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then_with(|| start_time(a).cmp(&start_time(b)))
    });
    let mut allowed: Vec<(String, LabelSelector, i32)> = budgets
        .iter()
        .map(|b| {
            (
                b.namespace.clone(),
                b.selector.clone(),
                b.disruptions_allowed,
            )
        })
        .collect();
    let (mut violating, mut fine) = (Vec::new(), Vec::new());
    for p in potential {
        let mut violates = false;
        for (ns, sel, left) in &mut allowed {
            if ns == p.namespace() && selector_matches(sel, p.labels()) {
                *left -= 1;
                if *left < 0 {
                    violates = true;
                }
            }
        }
        if violates {
            violating.push(p)
        } else {
            fine.push(p)
        }
    }
    let mut victims = Vec::new();
    let mut pdb_violations = 0;
    for (group, is_violating) in [(violating, true), (fine, false)] {
        for p in group {
            trial.add_pod(p.clone());
            if pre.filter(&trial).is_err() {
                trial.remove_pod(&p.key);
                pdb_violations += usize::from(is_violating);
                victims.push(p);
            }
        }
    }
    Some(Preemption {
        node: 0,
        victims,
        pdb_violations,
    })
}

fn start_time(p: &PodInfo) -> Option<String> {
    p.pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| format!("{:?}", t.0))
}
