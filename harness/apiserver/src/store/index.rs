//! The store's indexes: the objects of a resource by label (for
//! selections with an `In` requirement) and by the value of a selectable
//! field (kube-apiserver's watch cache indexes pods by `spec.nodeName`, so
//! a kubelet's or kwok's list of one node's pods reads only those).
//!
//! Keys are `(namespace, name)`, the store's own.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use apimachinery::labels::{LabelSelector, Operator};

/// The objects of one resource by label: namespace, then label key, then
/// value, then the names of the objects that carry it.
#[derive(Debug, Default)]
pub(super) struct LabelIndex {
    by_label: HashMap<String, HashMap<String, HashMap<String, BTreeSet<String>>>>,
}

impl LabelIndex {
    pub(super) fn add(&mut self, key: &(String, String), labels: &BTreeMap<String, String>) {
        let ns = self.by_label.entry(key.0.clone()).or_default();
        for (k, v) in labels {
            ns.entry(k.clone())
                .or_default()
                .entry(v.clone())
                .or_default()
                .insert(key.1.clone());
        }
    }

    pub(super) fn remove(&mut self, key: &(String, String), labels: &BTreeMap<String, String>) {
        let Some(ns) = self.by_label.get_mut(&key.0) else {
            return;
        };
        for (k, v) in labels {
            let Some(values) = ns.get_mut(k) else {
                continue;
            };
            if let Some(names) = values.get_mut(v) {
                names.remove(&key.1);
                if names.is_empty() {
                    values.remove(v);
                }
            }
            if values.is_empty() {
                ns.remove(k);
            }
        }
        if ns.is_empty() {
            self.by_label.remove(&key.0);
        }
    }

    /// The names, in order, of the objects of namespace `ns` that may match
    /// `selector`: those carrying a value of its most selective `In`
    /// requirement. `None` when it has no `In` requirement (any may match).
    pub(super) fn candidates(
        &self,
        ns: &str,
        selector: &LabelSelector,
    ) -> Option<BTreeSet<&String>> {
        let LabelSelector::All(reqs) = selector else {
            return Some(BTreeSet::new());
        };
        let labels = self.by_label.get(ns);
        reqs.iter()
            .filter(|r| r.operator == Operator::In)
            .map(|r| {
                let values = labels.and_then(|l| l.get(&r.key));
                r.values
                    .iter()
                    .filter_map(|v| values.and_then(|vs| vs.get(v)))
                    .collect::<Vec<_>>()
            })
            .min_by_key(|sets| sets.iter().map(|s| s.len()).sum::<usize>())
            .map(|sets| sets.into_iter().flatten().collect())
    }
}

/// The objects of one resource by the value of one selectable field: for
/// each value, the keys of the objects that have it, in key order (the
/// order of a list and of its continue tokens).
#[derive(Debug)]
pub(super) struct FieldIndex {
    /// The field's position in the resource's selectable-field table.
    pub(super) field: usize,
    by_value: HashMap<String, BTreeSet<(String, String)>>,
}

impl FieldIndex {
    pub(super) fn new(field: usize) -> Self {
        Self {
            field,
            by_value: HashMap::new(),
        }
    }

    /// Moves `key` from the value it had in `prev` (its selectable fields
    /// before the change) to the one in `next`; `None` for an object that
    /// did not exist, or no longer does.
    pub(super) fn change(
        &mut self,
        key: &(String, String),
        prev: Option<&[String]>,
        next: Option<&[String]>,
    ) {
        let old = prev.and_then(|f| f.get(self.field));
        let new = next.and_then(|f| f.get(self.field));
        if old == new {
            return;
        }
        if let Some(v) = old
            && let Some(keys) = self.by_value.get_mut(v)
        {
            keys.remove(key);
            if keys.is_empty() {
                self.by_value.remove(v);
            }
        }
        if let Some(v) = new {
            self.by_value
                .entry(v.clone())
                .or_default()
                .insert(key.clone());
        }
    }

    /// The keys of the objects whose field is `value`, in key order.
    pub(super) fn keys(&self, value: &str) -> Option<&BTreeSet<(String, String)>> {
        self.by_value.get(value)
    }
}
