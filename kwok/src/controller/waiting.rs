//! Bound pods whose node this controller does not manage (yet), by node:
//! when a node becomes managed (its lease taken), its pods are taken at
//! once, without a look at the pods waiting on every other node (a
//! scale-up of thousands of nodes has pods bound to many nodes whose
//! leases come one by one).

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

#[derive(Default)]
pub(super) struct WaitingPods {
    /// Pods by node, then by `namespace/name` (in order: a node's pods
    /// are taken, and their stages played, in the same order every run).
    by_node: HashMap<String, BTreeMap<String, Value>>,
    /// Each waiting pod's node.
    node_of: HashMap<String, String>,
}

impl WaitingPods {
    /// Keeps `pod` (`key` is `namespace/name`) until `node` is managed.
    pub(super) fn insert(&mut self, key: String, node: String, pod: Value) {
        self.remove(&key);
        self.by_node
            .entry(node.clone())
            .or_default()
            .insert(key.clone(), pod);
        self.node_of.insert(key, node);
    }

    /// Forgets the pod `key`, returning it if it was waiting.
    pub(super) fn remove(&mut self, key: &str) -> Option<Value> {
        let node = self.node_of.remove(key)?;
        let pods = self.by_node.get_mut(&node)?;
        let pod = pods.remove(key);
        if pods.is_empty() {
            self.by_node.remove(&node);
        }
        pod
    }

    /// Takes every pod waiting for `node`, in `namespace/name` order.
    pub(super) fn take_node(&mut self, node: &str) -> Vec<(String, Value)> {
        let pods = self.by_node.remove(node).unwrap_or_default();
        for key in pods.keys() {
            self.node_of.remove(key);
        }
        pods.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_node_takes_its_own_pods_only_and_a_pod_waits_on_one_node() {
        let mut w = WaitingPods::default();
        w.insert("ns/a".into(), "n1".into(), json!({"n": 1}));
        w.insert("ns/b".into(), "n2".into(), json!({"n": 2}));
        w.insert("ns/c".into(), "n1".into(), json!({"n": 3}));
        // The same pod again, now on n2: it waits there only.
        w.insert("ns/c".into(), "n2".into(), json!({"n": 4}));
        let mut n1 = w.take_node("n1");
        n1.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(n1, vec![("ns/a".to_string(), json!({"n": 1}))]);
        assert!(w.take_node("n1").is_empty());
        assert_eq!(w.remove("ns/c"), Some(json!({"n": 4})));
        assert_eq!(w.remove("ns/c"), None);
        assert_eq!(
            w.take_node("n2"),
            vec![("ns/b".to_string(), json!({"n": 2}))]
        );
        w.insert("ns/z".into(), "n3".into(), json!({"n": 5}));
        w.insert("ns/y".into(), "n3".into(), json!({"n": 6}));
        let keys: Vec<String> = w.take_node("n3").into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["ns/y", "ns/z"], "in name order, every run");
        assert!(w.by_node.is_empty() && w.node_of.is_empty());
    }
}
