//! PodDisruptionBudgets as the drainability rules and the scale-down
//! planner read them: each [`Budget`] with its remaining disruptions, and
//! [`Budgets`], which finds the budgets that select a pod without trying
//! every budget of the cluster (at 10,000 nodes a cluster has hundreds of
//! budgets, and every pod of every candidate node is checked twice per
//! loop).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use predicates::labels::{labels_of, selector_matches};

/// A PodDisruptionBudget as the rules need it, with its remaining
/// disruptions (charged as nodes are found removable in one pass).
#[derive(Debug, Clone)]
pub struct Budget {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Selector.
    pub selector: LabelSelector,
    /// Remaining `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
}

impl Budget {
    /// Whether the budget selects the pod.
    pub fn selects(&self, pod: &Pod) -> bool {
        pod.metadata.namespace.as_deref().unwrap_or("default") == self.namespace
            && selector_matches(&self.selector, labels_of(pod.metadata.labels.as_ref()))
    }
}

/// Label value -> the budgets that require it.
type ByValue = HashMap<String, Vec<usize>>;

/// The cluster's budgets, indexed by one label each requires: a budget
/// whose selector has `matchLabels` can only select a pod that has its
/// first pair, so a pod is checked against the budgets filed under its
/// own labels and those without `matchLabels`, never the others.
#[derive(Debug, Clone, Default)]
pub struct Budgets {
    list: Vec<Budget>,
    /// Namespace -> label key -> label value -> budgets.
    by_label: HashMap<String, HashMap<String, ByValue>>,
    /// Budgets without `matchLabels` (expressions only, or every pod).
    unlabelled: Vec<usize>,
}

impl Budgets {
    /// Indexes `list`.
    pub fn new(list: Vec<Budget>) -> Self {
        let mut by_label: HashMap<String, HashMap<String, ByValue>> = HashMap::new();
        let mut unlabelled = Vec::new();
        for (i, b) in list.iter().enumerate() {
            match b
                .selector
                .match_labels
                .as_ref()
                .and_then(|m| m.iter().next())
            {
                Some((k, v)) => by_label
                    .entry(b.namespace.clone())
                    .or_default()
                    .entry(k.clone())
                    .or_default()
                    .entry(v.clone())
                    .or_default()
                    .push(i),
                None => unlabelled.push(i),
            }
        }
        Self {
            list,
            by_label,
            unlabelled,
        }
    }

    /// Every budget, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = &Budget> {
        self.list.iter()
    }

    /// The indices of the budgets that select `pod`, in no fixed order.
    fn selecting_indices<'a>(&'a self, pod: &'a Pod) -> impl Iterator<Item = usize> + 'a {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let keys = self.by_label.get(ns);
        let filed = labels_of(pod.metadata.labels.as_ref())
            .iter()
            .filter_map(move |(k, v)| keys?.get(k)?.get(v))
            .flatten();
        filed
            .chain(&self.unlabelled)
            .copied()
            .filter(move |&i| self.list[i].selects(pod))
    }

    /// The budgets that select `pod`.
    pub fn selecting<'a>(&'a self, pod: &'a Pod) -> impl Iterator<Item = &'a Budget> + 'a {
        self.selecting_indices(pod).map(|i| &self.list[i])
    }

    /// Charges the budgets for pods that would be evicted; returns whether
    /// some budget is exceeded by these pods alone (a "risky" node).
    pub fn charge(&mut self, pods: &[Arc<Pod>]) -> bool {
        let mut counts: BTreeMap<usize, i32> = BTreeMap::new();
        for pod in pods {
            for i in self.selecting_indices(pod) {
                *counts.entry(i).or_default() += 1;
            }
        }
        let mut risky = false;
        for (i, n) in counts {
            let b = &mut self.list[i];
            risky |= n > b.disruptions_allowed;
            b.disruptions_allowed -= n;
        }
        risky
    }
}

impl FromIterator<Budget> for Budgets {
    fn from_iter<I: IntoIterator<Item = Budget>>(iter: I) -> Self {
        Self::new(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::{Value, json};

    fn budget(ns: &str, name: &str, selector: Value) -> Budget {
        Budget {
            namespace: ns.into(),
            name: name.into(),
            selector: serde_json::from_value(selector).unwrap(),
            disruptions_allowed: 1,
        }
    }

    fn pod(ns: &str, labels: Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": ns, "labels": labels}}),
        )
        .unwrap()
    }

    fn names<'a>(it: impl Iterator<Item = &'a Budget>) -> Vec<&'a str> {
        let mut v: Vec<&str> = it.map(|b| b.name.as_str()).collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn a_pod_is_selected_by_the_same_budgets_as_a_check_of_every_budget() {
        let budgets = Budgets::new(vec![
            budget("shop", "web", json!({"matchLabels": {"app": "web"}})),
            budget(
                "shop",
                "web-canary",
                json!({"matchLabels": {"app": "web", "track": "canary"}}),
            ),
            budget(
                "shop",
                "tier",
                json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}),
            ),
            budget("shop", "all", json!({})),
            budget("other", "web", json!({"matchLabels": {"app": "web"}})),
            budget("shop", "api", json!({"matchLabels": {"app": "api"}})),
        ]);
        let pods = [
            pod("shop", json!({"app": "web"})),
            pod(
                "shop",
                json!({"app": "web", "track": "canary", "tier": "front"}),
            ),
            pod("shop", json!({"app": "api", "tier": "back"})),
            pod("other", json!({"app": "web"})),
            pod("empty", json!({})),
        ];
        for p in &pods {
            let every = names(budgets.iter().filter(|b| b.selects(p)));
            assert_eq!(names(budgets.selecting(p)), every, "{:?}", p.metadata);
        }
        let canary = names(budgets.selecting(&pods[1]));
        assert_eq!(canary, ["all", "tier", "web", "web-canary"]);
    }

    #[test]
    fn charging_counts_each_budget_once_per_pod() {
        let mut budgets = Budgets::new(vec![
            budget("shop", "web", json!({"matchLabels": {"app": "web"}})),
            budget("shop", "all", json!({})),
        ]);
        let web = Arc::new(pod("shop", json!({"app": "web"})));
        assert!(!budgets.charge(std::slice::from_ref(&web)));
        let left: Vec<i32> = budgets.iter().map(|b| b.disruptions_allowed).collect();
        assert_eq!(left, [0, 0]);
        assert!(budgets.charge(&[web]), "a used-up budget charged again");
    }
}
