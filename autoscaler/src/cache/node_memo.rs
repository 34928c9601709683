//! [`NodeVersionMemo`]: what was read from one version of a node, kept
//! until the node object is replaced. A node changes far less often than
//! the loop reads it (a kubelet reports its status every few minutes), so a
//! value read from a node's labels, conditions or quantities need not be
//! read again at every walk over the nodes.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::Node;

/// Values read from nodes, by node name, each with the node object it was
/// read from.
#[derive(Debug)]
pub struct NodeVersionMemo<T> {
    known: Mutex<Known<T>>,
}

#[derive(Debug)]
struct Known<T> {
    by_name: HashMap<String, Entry<T>>,
    /// How many names were kept at the last [`NodeVersionMemo::forget_gone`].
    after_forget: usize,
}

/// A value and the node object it was read from: the object's address and
/// resourceVersion (an address alone could be reused by a later object; a
/// resourceVersion alone is not set on nodes built in memory).
#[derive(Debug)]
struct Entry<T> {
    address: usize,
    resource_version: String,
    value: T,
}

impl<T> Default for NodeVersionMemo<T> {
    fn default() -> Self {
        Self {
            known: Mutex::new(Known {
                by_name: HashMap::new(),
                after_forget: 0,
            }),
        }
    }
}

impl<T: Clone> NodeVersionMemo<T> {
    /// The value kept for this very node object, else `read()` (kept when
    /// the node has a name and a resourceVersion).
    pub fn get_or_read(&self, node: &Node, read: impl FnOnce() -> T) -> T {
        let (Some(name), Some(rv)) = (
            node.metadata.name.as_deref(),
            node.metadata.resource_version.as_deref(),
        ) else {
            return read();
        };
        let address = std::ptr::from_ref(node) as usize;
        if let Some(known) = self.lock()
            && let Some(e) = known.by_name.get(name)
            && e.address == address
            && e.resource_version == rv
        {
            return e.value.clone();
        }
        let value = read();
        if let Some(mut known) = self.lock() {
            let entry = Entry {
                address,
                resource_version: rv.to_string(),
                value: value.clone(),
            };
            known.by_name.insert(name.to_string(), entry);
        }
        value
    }

    /// Forgets every value (what they were read with has changed).
    pub fn clear(&self) {
        if let Some(mut known) = self.lock() {
            known.by_name.clear();
        }
    }

    /// Forgets the nodes that are no longer in the cluster, once the memo
    /// holds more than twice the names it kept last time (and 64 more):
    /// `nodes` is called only then.
    pub fn forget_gone(&self, nodes: impl FnOnce() -> Vec<Arc<Node>>) {
        let grown = self
            .lock()
            .is_some_and(|k| k.by_name.len() > 2 * k.after_forget + 64);
        if !grown {
            return;
        }
        // Listed without the memo's lock: the lister takes locks of its own.
        let nodes = nodes();
        let present: HashSet<&str> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        if let Some(mut known) = self.lock() {
            known
                .by_name
                .retain(|name, _| present.contains(name.as_str()));
            known.after_forget = known.by_name.len();
        }
    }

    fn lock(&self) -> Option<MutexGuard<'_, Known<T>>> {
        self.known.lock().ok()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().map_or(0, |k| k.by_name.len())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn node(name: &str, rv: &str) -> Arc<Node> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "resourceVersion": rv}
            }))
            .unwrap(),
        )
    }

    #[test]
    fn a_value_is_read_once_per_node_object() {
        let memo = NodeVersionMemo::default();
        let first = node("n1", "1");
        assert_eq!(memo.get_or_read(&first, || 1), 1);
        assert_eq!(
            memo.get_or_read(&first, || 2),
            1,
            "kept for the same object"
        );
        let second = node("n1", "2");
        assert_eq!(memo.get_or_read(&second, || 3), 3, "a new version");
        let copy = node("n1", "2");
        assert_eq!(
            memo.get_or_read(&copy, || 4),
            4,
            "the same resourceVersion in another object"
        );
        let unversioned: Node =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "n1"}})).unwrap();
        assert_eq!(memo.get_or_read(&unversioned, || 5), 5);
        assert_eq!(memo.get_or_read(&unversioned, || 6), 6, "never kept");
        memo.clear();
        assert_eq!(memo.get_or_read(&copy, || 7), 7, "cleared");
    }

    #[test]
    fn gone_nodes_are_forgotten_once_the_memo_outgrows_the_cluster() {
        let memo = NodeVersionMemo::default();
        let nodes: Vec<Arc<Node>> = (0..100).map(|i| node(&format!("n{i}"), "1")).collect();
        for n in &nodes[..50] {
            memo.get_or_read(n, || ());
        }
        memo.forget_gone(|| panic!("not listed while the memo is small"));
        for n in &nodes[50..] {
            memo.get_or_read(n, || ());
        }
        memo.forget_gone(|| nodes[..10].to_vec());
        assert_eq!(memo.len(), 10);
    }
}
