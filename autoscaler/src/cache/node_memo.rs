//! [`NodeVersionMemo`]: what was read from one version of a node, kept
//! until the node object is replaced. A node changes far less often than
//! the loop reads it (a kubelet reports its status every few minutes), so a
//! value read from a node's labels, conditions or quantities need not be
//! read again at every walk over the nodes.

use std::collections::{HashMap, HashSet};

use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::Node;

/// Values read from nodes, by the address of the node object they were
/// read from (hashing an address is far cheaper than hashing a name, and
/// the memo is asked about every node several times a loop).
#[derive(Debug)]
pub struct NodeVersionMemo<T> {
    known: Mutex<Known<T>>,
}

#[derive(Debug)]
struct Known<T> {
    by_address: HashMap<usize, Entry<T>, super::LoopHasher>,
    /// How many entries were kept at the last [`NodeVersionMemo::forget_gone`].
    after_forget: usize,
}

/// A value and the node object it was read from. The entry holds the
/// object, so no other object can take its address while the entry lives:
/// an object at the same address is this one, which no one can change
/// (it is shared).
#[derive(Debug)]
struct Entry<T> {
    node: Arc<Node>,
    value: T,
}

impl<T> Default for NodeVersionMemo<T> {
    fn default() -> Self {
        Self {
            known: Mutex::new(Known {
                by_address: HashMap::default(),
                after_forget: 0,
            }),
        }
    }
}

impl<T: Clone> NodeVersionMemo<T> {
    /// The value kept for this very node object, else `read()` (kept when
    /// the node comes from the API: it has a resourceVersion; nodes built
    /// in memory, templates say, come and go every loop).
    pub fn get_or_read(&self, node: &Arc<Node>, read: impl FnOnce() -> T) -> T {
        if let Some(value) = self.get(node) {
            return value;
        }
        let value = read();
        if node.metadata.resource_version.is_some()
            && let Some(mut known) = self.lock()
        {
            let entry = Entry {
                node: node.clone(),
                value: value.clone(),
            };
            known.by_address.insert(address(node), entry);
        }
        value
    }

    /// The value kept for this very node object, if there is one.
    pub fn get(&self, node: &Node) -> Option<T> {
        let known = self.lock()?;
        let e = known.by_address.get(&address(node))?;
        std::ptr::eq(Arc::as_ptr(&e.node), node).then(|| e.value.clone())
    }

    /// Forgets every value (what they were read with has changed).
    pub fn clear(&self) {
        if let Some(mut known) = self.lock() {
            known.by_address.clear();
        }
    }

    /// Forgets the node objects that are no longer the cluster's (gone
    /// nodes and replaced versions), once the memo holds more than twice
    /// the entries it kept last time (and 64 more): `nodes` is called only
    /// then.
    pub fn forget_gone(&self, nodes: impl FnOnce() -> Vec<Arc<Node>>) {
        let grown = self
            .lock()
            .is_some_and(|k| k.by_address.len() > 2 * k.after_forget + 64);
        if !grown {
            return;
        }
        // Listed without the memo's lock: the lister takes locks of its own.
        let nodes = nodes();
        let present: HashSet<usize> = nodes.iter().map(|n| address(n)).collect();
        if let Some(mut known) = self.lock() {
            known
                .by_address
                .retain(|address, _| present.contains(address));
            known.after_forget = known.by_address.len();
        }
    }

    fn lock(&self) -> Option<MutexGuard<'_, Known<T>>> {
        self.known.lock().ok()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().map_or(0, |k| k.by_address.len())
    }
}

/// Where a node object lives.
fn address(node: &Node) -> usize {
    std::ptr::from_ref::<Node>(node) as usize
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
        let unversioned: Arc<Node> = Arc::new(
            serde_json::from_value(serde_json::json!({"metadata": {"name": "n1"}})).unwrap(),
        );
        assert_eq!(memo.get_or_read(&unversioned, || 5), 5);
        assert_eq!(memo.get_or_read(&unversioned, || 6), 6, "never kept");
        memo.clear();
        assert_eq!(memo.get_or_read(&copy, || 7), 7, "cleared");
        assert_eq!(memo.get(&copy), Some(7), "found from a plain reference");
        let elsewhere: Node = (*copy).clone();
        assert_eq!(memo.get(&elsewhere), None, "an equal object elsewhere");
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
