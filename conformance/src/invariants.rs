//! The safety invariants, watched over a whole scenario rather than
//! checked at its end: whatever the faults, an autoscaler must keep them.
//!
//! An [`Observer`] watches nodes, pods and PodDisruptionBudgets through the
//! testbed's own client (which faults never hit) and records a
//! [`Violation`] the moment one happens:
//!
//! - a node group above its max, or brought below its min by the
//!   autoscaler (a deletion of a node it had tainted
//!   `ToBeDeletedByClusterAutoscaler`; nodes the scenario itself deletes do
//!   not count);
//! - a pod that blocks removal evicted from a node the autoscaler removes,
//!   or still on it when the node is deleted: a pod annotated
//!   `safe-to-evict: "false"`, or one with no controller and no
//!   `safe-to-evict: "true"`;
//! - a pod evicted from a node being removed while its PDB allowed no
//!   disruption: after its removal fewer pods are healthy than
//!   `minAvailable`, or more than `maxUnavailable` of `expectedPods` are
//!   not.
//!
//! At the end ([`Observer::check_end`]): no node that stays has the
//! `ToBeDeletedByClusterAutoscaler` taint, and every ReplicaSet's pods
//! are back and ready (counted from the pods, not the ReplicaSet's
//! status, which lags them). The most nodes a group ever had is kept for "no
//! duplicate scale-up" ([`Observer::max_nodes`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};

use crate::world::groups::node_group_of;

/// The taint the autoscaler puts on a node it removes.
const TO_BE_DELETED: &str = "ToBeDeletedByClusterAutoscaler";
const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";

/// A broken promise, when it broke (scenario seconds since the observer
/// started) and what was seen.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// Seconds since the observer started.
    pub at_seconds: u64,
    /// What happened.
    pub what: String,
}

/// A node group's bounds.
#[derive(Debug, Clone)]
pub struct Bounds {
    /// Min size.
    pub min: usize,
    /// Max size.
    pub max: usize,
}

#[derive(Debug, Default)]
struct State {
    bounds: BTreeMap<String, Bounds>,
    nodes: HashMap<String, Node>,
    pods: HashMap<String, Pod>,
    budgets: HashMap<String, PodDisruptionBudget>,
    max_nodes: BTreeMap<String, usize>,
    violations: Vec<Violation>,
    started: Option<tokio::time::Instant>,
}

/// Watches a cluster for broken safety promises while a scenario runs.
pub struct Observer {
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

enum Change {
    Node(Box<Event<Node>>),
    Pod(Box<Event<Pod>>),
    Budget(Box<Event<PodDisruptionBudget>>),
}

impl Observer {
    /// Starts watching through `client` (the testbed's own), with the
    /// groups' bounds.
    pub fn start(client: Client, bounds: BTreeMap<String, Bounds>) -> Self {
        let state = Arc::new(Mutex::new(State {
            bounds,
            started: Some(tokio::time::Instant::now()),
            ..State::default()
        }));
        let cfg = watcher::Config::default;
        let nodes = watcher::watcher(Api::<Node>::all(client.clone()), cfg())
            .default_backoff()
            .filter_map(|e| async move { e.ok().map(|e| Change::Node(Box::new(e))) })
            .boxed();
        let pods = watcher::watcher(Api::<Pod>::all(client.clone()), cfg())
            .default_backoff()
            .filter_map(|e| async move { e.ok().map(|e| Change::Pod(Box::new(e))) })
            .boxed();
        let budgets = watcher::watcher(Api::<PodDisruptionBudget>::all(client), cfg())
            .default_backoff()
            .filter_map(|e| async move { e.ok().map(|e| Change::Budget(Box::new(e))) })
            .boxed();
        let mut changes = futures::stream::select_all([nodes, pods, budgets]);
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Some(change) = changes.next().await {
                let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
                s.apply(change);
            }
        });
        Self { state, task }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every violation seen so far.
    pub fn violations(&self) -> Vec<Violation> {
        self.state().violations.clone()
    }

    /// The most nodes `group` had at any time.
    pub fn max_nodes(&self, group: &str) -> usize {
        self.state().max_nodes.get(group).copied().unwrap_or(0)
    }

    /// The end-of-run promises, read from the cluster now: no node keeps
    /// the deletion taint, every ReplicaSet is back to its replicas, ready.
    pub async fn check_end(&self, client: &Client) -> Result<Vec<String>, String> {
        let mut broken = Vec::new();
        let nodes = Api::<Node>::all(client.clone())
            .list(&Default::default())
            .await
            .map_err(|e| format!("listing nodes: {e}"))?;
        for n in &nodes.items {
            if n.metadata.deletion_timestamp.is_none() && has_taint(n, TO_BE_DELETED) {
                broken.push(format!(
                    "node {} stays with the {TO_BE_DELETED} taint",
                    n.metadata.name.as_deref().unwrap_or_default()
                ));
            }
        }
        let sets = Api::<ReplicaSet>::all(client.clone())
            .list(&Default::default())
            .await
            .map_err(|e| format!("listing ReplicaSets: {e}"))?;
        let pods = Api::<Pod>::all(client.clone())
            .list(&Default::default())
            .await
            .map_err(|e| format!("listing pods: {e}"))?;
        for rs in &sets.items {
            let want = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let ready = ready_pods_of(rs, &pods.items);
            if ready < want {
                broken.push(format!(
                    "ReplicaSet {}/{} has {ready} of {want} pods ready",
                    rs.metadata.namespace.as_deref().unwrap_or_default(),
                    rs.metadata.name.as_deref().unwrap_or_default()
                ));
            }
        }
        Ok(broken)
    }
}

impl State {
    fn seconds(&self) -> u64 {
        self.started.map_or(0, |s| s.elapsed().as_secs())
    }

    fn violate(&mut self, what: String) {
        let at_seconds = self.seconds();
        eprintln!("invariant violated at {at_seconds} s: {what}");
        self.violations.push(Violation { at_seconds, what });
    }

    fn apply(&mut self, change: Change) {
        match change {
            Change::Node(e) => self.node_event(*e),
            Change::Pod(e) => self.pod_event(*e),
            Change::Budget(e) => self.budget_event(*e),
        }
    }

    fn node_event(&mut self, e: Event<Node>) {
        match e {
            Event::Apply(n) | Event::InitApply(n) => {
                let name = n.metadata.name.clone().unwrap_or_default();
                self.nodes.insert(name, n);
                self.check_group_sizes(None);
            }
            Event::Delete(n) => self.node_deleted(&n),
            Event::Init | Event::InitDone => {}
        }
    }

    fn pod_event(&mut self, e: Event<Pod>) {
        match e {
            Event::Apply(p) | Event::InitApply(p) => {
                let key = key_of(&p.metadata.namespace, &p.metadata.name);
                if p.metadata.deletion_timestamp.is_some() {
                    self.pod_removed(&key, &p);
                }
                self.pods.insert(key, p);
            }
            Event::Delete(p) => {
                let key = key_of(&p.metadata.namespace, &p.metadata.name);
                self.pod_removed(&key, &p);
                self.pods.remove(&key);
            }
            Event::Init | Event::InitDone => {}
        }
    }

    fn budget_event(&mut self, e: Event<PodDisruptionBudget>) {
        match e {
            Event::Apply(b) | Event::InitApply(b) => {
                let key = key_of(&b.metadata.namespace, &b.metadata.name);
                self.budgets.insert(key, b);
            }
            Event::Delete(b) => {
                self.budgets
                    .remove(&key_of(&b.metadata.namespace, &b.metadata.name));
            }
            Event::Init | Event::InitDone => {}
        }
    }

    fn group_size(&self, group: &str) -> usize {
        self.nodes
            .values()
            .filter(|n| node_group_of(n) == Some(group))
            .count()
    }

    /// Max always; min only when `removed_by_autoscaler` names the group of
    /// a node the autoscaler just deleted.
    fn check_group_sizes(&mut self, removed_by_autoscaler: Option<&str>) {
        let groups: Vec<(String, Bounds)> = self
            .bounds
            .iter()
            .map(|(g, b)| (g.clone(), b.clone()))
            .collect();
        for (group, b) in groups {
            let size = self.group_size(&group);
            let max = self.max_nodes.entry(group.clone()).or_default();
            let above = size > b.max && size > *max;
            *max = (*max).max(size);
            if above {
                self.violate(format!(
                    "node group {group} has {size} nodes, above its max {}",
                    b.max
                ));
            }
            if removed_by_autoscaler == Some(group.as_str()) && size < b.min {
                self.violate(format!(
                    "the autoscaler brought node group {group} to {size} nodes, below its min {}",
                    b.min
                ));
            }
        }
    }

    fn node_deleted(&mut self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let last = self.nodes.remove(&name);
        let seen = last.as_ref().unwrap_or(node);
        if !has_taint(seen, TO_BE_DELETED) && !has_taint(node, TO_BE_DELETED) {
            // The scenario (or the cloud) removed it, not the autoscaler.
            return;
        }
        let blocking: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, p)| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name.as_str())
                    && p.metadata.deletion_timestamp.is_none()
                    && !finished(p)
                    && blocks_removal(p)
            })
            .map(|(k, _)| k.clone())
            .collect();
        if !blocking.is_empty() {
            self.violate(format!(
                "node {name} was deleted while {} ran on it, which block its removal",
                blocking.join(", ")
            ));
        }
        let group = node_group_of(seen).map(str::to_string);
        self.check_group_sizes(group.as_deref());
    }

    /// A pod deleted or being deleted: if it was evicted from a node being
    /// removed, its budget must have allowed it.
    fn pod_removed(&mut self, key: &str, pod: &Pod) {
        let Some(before) = self.pods.get(key) else {
            return;
        };
        if before.metadata.deletion_timestamp.is_some() || !healthy(before) {
            return;
        }
        let node = before.spec.as_ref().and_then(|s| s.node_name.clone());
        let draining = node
            .as_ref()
            .and_then(|n| self.nodes.get(n))
            .is_some_and(|n| has_taint(n, TO_BE_DELETED));
        if !draining {
            return;
        }
        let mut broken = Vec::new();
        if blocks_removal(before) {
            broken.push(format!(
                "pod {key}, which blocks its node's removal, was removed from node {} while the autoscaler removed it",
                node.as_deref().unwrap_or_default()
            ));
        }
        for (name, b) in &self.budgets {
            if !budget_selects(b, pod) {
                continue;
            }
            let healthy_after = self
                .pods
                .iter()
                .filter(|(k, p)| {
                    k.as_str() != key
                        && p.metadata.namespace == pod.metadata.namespace
                        && p.metadata.deletion_timestamp.is_none()
                        && healthy(p)
                        && budget_selects(b, p)
                })
                .count() as i64;
            let spec = b.spec.clone().unwrap_or_default();
            let expected = b.status.as_ref().map_or(0, |s| i64::from(s.expected_pods));
            let floor = match (&spec.min_available, &spec.max_unavailable) {
                (Some(m), _) => int_or_percent(m, expected),
                (None, Some(u)) => expected - int_or_percent(u, expected),
                (None, None) => 0,
            };
            if healthy_after < floor {
                broken.push(format!(
                    "pod {key} was evicted leaving {healthy_after} healthy pods under PDB {name}, which needs {floor}"
                ));
            }
        }
        for b in broken {
            self.violate(b);
        }
    }
}

fn key_of(ns: &Option<String>, name: &Option<String>) -> String {
    format!(
        "{}/{}",
        ns.as_deref().unwrap_or_default(),
        name.as_deref().unwrap_or_default()
    )
}

fn has_taint(n: &Node, key: &str) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == key))
}

/// The pods of a ReplicaSet that are ready and not terminating, counted
/// from the pods themselves as the ReplicaSet controller counts
/// `readyReplicas` (its status, written a moment after a pod turns
/// ready, can lag the step that waited for that pod).
fn ready_pods_of(rs: &ReplicaSet, pods: &[Pod]) -> i32 {
    let Some(uid) = rs.metadata.uid.as_deref() else {
        return 0;
    };
    let count =
        pods.iter()
            .filter(|p| {
                p.metadata.namespace == rs.metadata.namespace
                    && p.metadata.deletion_timestamp.is_none()
                    && !finished(p)
                    && healthy(p)
                    && p.metadata.owner_references.as_ref().is_some_and(|o| {
                        o.iter().any(|o| o.controller == Some(true) && o.uid == uid)
                    })
            })
            .count();
    i32::try_from(count).unwrap_or(i32::MAX)
}

fn finished(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn healthy(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A pod that keeps its node: annotated not safe to evict, or without a
/// controller and not annotated safe to evict (DaemonSet and mirror pods
/// never block).
fn blocks_removal(p: &Pod) -> bool {
    let annotation = p
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SAFE_TO_EVICT))
        .map(String::as_str);
    if annotation == Some("false") {
        return true;
    }
    let mirror = p
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let controlled = p
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|o| o.iter().any(|o| o.controller == Some(true)));
    !controlled && !mirror && annotation != Some("true")
}

fn budget_selects(b: &PodDisruptionBudget, p: &Pod) -> bool {
    if b.metadata.namespace != p.metadata.namespace {
        return false;
    }
    let Some(selector) = b.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return false;
    };
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let wanted = selector.match_labels.clone().unwrap_or_default();
    wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty)
}

fn int_or_percent(v: &IntOrString, total: i64) -> i64 {
    match v {
        IntOrString::Int(i) => i64::from(*i),
        IntOrString::String(s) => {
            let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            (total * pct + 99) / 100
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn node(name: &str, tainted: bool) -> Node {
        let taints = if tainted {
            json!([{"key": TO_BE_DELETED, "value": "1", "effect": "NoSchedule"}])
        } else {
            json!([])
        };
        serde_json::from_value(
            json!({"metadata": {"name": name, "labels": {"kwok-nodegroup": "pool"}},
            "spec": {"taints": taints}}),
        )
        .unwrap()
    }

    fn pod(name: &str, node: &str, owned: bool, ready: bool) -> Pod {
        let owners = if owned {
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true}])
        } else {
            json!([])
        };
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default",
                "labels": {"app": "web"}, "ownerReferences": owners},
            "spec": {"nodeName": node, "containers": []},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}}))
        .unwrap()
    }

    #[test]
    fn a_replica_set_counts_its_own_ready_pods_that_stay() {
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": "rs", "namespace": "default", "uid": "u"},
            "spec": {"replicas": 3, "selector": {}}}))
        .unwrap();
        let mut terminating = pod("c", "n1", true, true);
        terminating.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().unwrap(),
            ));
        let mut other_set = pod("e", "n1", true, true);
        other_set.metadata.owner_references.as_mut().unwrap()[0].uid = "v".into();
        let pods = vec![
            pod("a", "n1", true, true),
            pod("b", "n1", true, true),
            terminating,
            pod("d", "n1", true, false),
            other_set,
            pod("f", "n1", false, true),
        ];
        assert_eq!(ready_pods_of(&rs, &pods), 2);
    }

    fn state(min: usize, max: usize) -> State {
        State {
            bounds: [("pool".to_string(), Bounds { min, max })].into(),
            ..State::default()
        }
    }

    #[test]
    fn a_group_above_max_or_taken_below_min_by_the_autoscaler_is_a_violation() {
        let mut s = state(1, 2);
        for i in 0..3 {
            s.apply(Change::Node(Box::new(Event::Apply(node(
                &format!("n{i}"),
                false,
            )))));
        }
        assert_eq!(s.violations.len(), 1, "{:?}", s.violations);
        assert!(s.violations[0].what.contains("above its max 2"));
        assert_eq!(s.max_nodes["pool"], 3);
        // The scenario deleting nodes is not the autoscaler.
        s.apply(Change::Node(Box::new(Event::Delete(node("n0", false)))));
        s.apply(Change::Node(Box::new(Event::Delete(node("n1", false)))));
        assert_eq!(s.violations.len(), 1);
        s.apply(Change::Node(Box::new(Event::Apply(node("n2", true)))));
        s.apply(Change::Node(Box::new(Event::Delete(node("n2", true)))));
        assert!(
            s.violations[1].what.contains("below its min 1"),
            "{:?}",
            s.violations
        );
    }

    #[test]
    fn deleting_a_node_under_a_blocking_pod_is_a_violation() {
        let mut s = state(0, 5);
        s.apply(Change::Node(Box::new(Event::Apply(node("n0", true)))));
        s.apply(Change::Node(Box::new(Event::Apply(node("n1", true)))));
        s.apply(Change::Pod(Box::new(Event::Apply(pod(
            "bare", "n0", false, true,
        )))));
        s.apply(Change::Pod(Box::new(Event::Apply(pod(
            "owned", "n1", true, true,
        )))));
        s.apply(Change::Node(Box::new(Event::Delete(node("n1", true)))));
        assert!(s.violations.is_empty(), "a replicated pod does not block");
        s.apply(Change::Node(Box::new(Event::Delete(node("n0", true)))));
        assert_eq!(s.violations.len(), 1);
        assert!(s.violations[0].what.contains("default/bare"));
        // Evicted by a drain, before the node goes: also a violation.
        s.apply(Change::Node(Box::new(Event::Apply(node("n2", true)))));
        let bare = pod("bare2", "n2", false, true);
        s.apply(Change::Pod(Box::new(Event::Apply(bare.clone()))));
        s.apply(Change::Pod(Box::new(Event::Delete(bare))));
        assert_eq!(s.violations.len(), 2, "{:?}", s.violations);
        assert!(s.violations[1].what.contains("default/bare2"));
    }

    #[test]
    fn an_eviction_below_the_budget_is_a_violation() {
        let mut s = state(0, 5);
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"expectedPods": 3, "currentHealthy": 3, "desiredHealthy": 2, "disruptionsAllowed": 1}}))
        .unwrap();
        s.apply(Change::Budget(Box::new(Event::Apply(pdb))));
        s.apply(Change::Node(Box::new(Event::Apply(node("n0", true)))));
        for i in 0..3 {
            let p = pod(&format!("p{i}"), "n0", true, true);
            s.apply(Change::Pod(Box::new(Event::Apply(p))));
        }
        s.apply(Change::Pod(Box::new(Event::Delete(pod(
            "p0", "n0", true, true,
        )))));
        assert!(s.violations.is_empty(), "3 -> 2 is allowed");
        s.apply(Change::Pod(Box::new(Event::Delete(pod(
            "p1", "n0", true, true,
        )))));
        assert_eq!(s.violations.len(), 1, "2 -> 1 is not");
        assert!(s.violations[0].what.contains("needs 2"));
    }
}
