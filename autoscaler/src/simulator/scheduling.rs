//! Where a pod goes in the simulation when its node is removed (upstream's
//! `simulator/scheduling` `HintingSimulator` and the predicate checker's
//! `FitsAnyNodeMatching`): first the node the same pod went to in the
//! previous simulation (its hint), else the first node that fits, looking
//! from just after the node the last search found and wrapping around.
//!
//! Both keep a scale-down simulation near linear in the cluster's size:
//! from one loop to the next most pods go back to their hinted node at one
//! filter each, and a search does not walk again over the nodes that
//! earlier searches filled. Upstream keeps the same two: the hints per
//! pod, dropped when a simulation does not use them, and the index where
//! the next search starts.

use std::collections::HashMap;

use predicates::PodInfo;

use super::Snapshot;
use crate::cache::LoopHasher;

/// A pod's hinted node, and the simulation that last placed it there.
#[derive(Debug)]
struct Hint {
    node: String,
    pass: u64,
}

/// Places pods on the snapshot's nodes with hints and a moving start.
#[derive(Debug, Default)]
pub struct HintingSimulator {
    /// Pod key (`namespace/name`) -> where it last went.
    hints: HashMap<String, Hint, LoopHasher>,
    /// Counts [`HintingSimulator::drop_old_hints`] calls.
    pass: u64,
    /// Where the next search starts.
    next: usize,
}

impl HintingSimulator {
    /// The node for `pod` (keyed `key`) among those `accept` allows and the
    /// snapshot has enabled: its hinted node if the pod still fits there,
    /// else the first that fits from where the last search ended. The
    /// caller adds the pod to the node returned.
    pub fn place(
        &mut self,
        snapshot: &Snapshot,
        pod: &PodInfo,
        key: &str,
        mut accept: impl FnMut(usize) -> bool,
    ) -> Option<usize> {
        let hinted = self
            .hints
            .get(key)
            .and_then(|h| snapshot.index_of(&h.node))
            .filter(|&i| snapshot.enabled(i) && accept(i) && snapshot.fits(pod, i).is_ok());
        let node = match hinted {
            Some(i) => i,
            None => {
                let n = snapshot.nodes().len();
                let start = if n == 0 { 0 } else { self.next % n };
                let i = snapshot.find_fit(pod, start, accept)?;
                self.next = (i + 1) % n;
                i
            }
        };
        let name = snapshot.node(node).name().to_string();
        let pass = self.pass;
        self.hints
            .entry(key.to_string())
            .and_modify(|h| {
                if h.node != name {
                    h.node.clone_from(&name);
                }
                h.pass = pass;
            })
            .or_insert(Hint { node: name, pass });
        Some(node)
    }

    /// Forgets the hints that the simulation since the last call did not
    /// set (upstream's `DropOldHints`, once per scale-down update).
    pub fn drop_old_hints(&mut self) {
        let pass = self.pass;
        self.hints.retain(|_, h| h.pass == pass);
        self.pass = self.pass.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::super::tests::{node, pod};
    use super::*;

    fn placed(s: &mut Snapshot, sim: &mut HintingSimulator, name: &str) -> Option<String> {
        let p = pod(name, "1");
        let key = format!("default/{name}");
        let i = sim.place(s, &p, &key, |_| true)?;
        s.add_pod(i, p);
        Some(s.node(i).name().to_string())
    }

    #[test]
    fn a_search_goes_on_after_the_node_the_last_one_found() {
        let mut s = Snapshot::new(vec![node("a", "2"), node("b", "2"), node("c", "2")]);
        let mut sim = HintingSimulator::default();
        let order: Vec<Option<String>> = ["p1", "p2", "p3", "p4"]
            .iter()
            .map(|p| placed(&mut s, &mut sim, p))
            .collect();
        // From 0: a; then from b (not a again, though a has room): b, c,
        // and wrapping around, a.
        assert_eq!(
            order,
            [Some("a"), Some("b"), Some("c"), Some("a")].map(|n| n.map(String::from))
        );
    }

    #[test]
    fn a_pod_goes_back_to_its_hinted_node_while_it_fits_and_the_hint_is_used() {
        let mut s = Snapshot::new(vec![node("a", "4"), node("b", "4")]);
        let mut sim = HintingSimulator {
            next: 1,
            ..HintingSimulator::default()
        };
        assert_eq!(placed(&mut s, &mut sim, "web").as_deref(), Some("b"));
        sim.drop_old_hints();
        // A fresh snapshot, the search starting at a: the hint wins.
        let mut s = Snapshot::new(vec![node("a", "4"), node("b", "4")]);
        sim.next = 0;
        assert_eq!(placed(&mut s, &mut sim, "web").as_deref(), Some("b"));
        // b full: the search.
        let mut s = Snapshot::new(vec![node("a", "4"), node("b", "0")]);
        sim.next = 0;
        assert_eq!(placed(&mut s, &mut sim, "web").as_deref(), Some("a"));
        // A hint not used by one whole update is dropped at its end.
        sim.drop_old_hints();
        sim.drop_old_hints();
        assert!(sim.hints.is_empty());
    }
}
