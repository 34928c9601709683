//! The decision record of a loop (beyond upstream): what scale-up and
//! scale-down decided and why, as structured data, served at `/decisions`
//! and read by the conformance suite's `@extension` steps.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::scaledown::Unremovable;
use crate::scaleup::ScaleUpStatus;
use crate::scaleup::orchestrator::ScaleUpOutcome;

/// The last loop's decisions, as the loop leaves them for its readers
/// (the `/decisions` endpoint, the decision log's): shared, not copied.
pub type LastDecisions = std::sync::Arc<std::sync::Mutex<std::sync::Arc<Decisions>>>;

/// What one loop decided, as structured data (served at `/decisions`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Decisions {
    /// Loop time (RFC 3339).
    pub time: String,
    /// How scale-up ended (absent when the loop stopped before it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_up: Option<ScaleUpStatus>,
    /// Per pending pod: group id → why not (or `chosen`).
    pub pods: BTreeMap<String, BTreeMap<String, String>>,
    /// Options the expander chose among: group → node count.
    pub options: BTreeMap<String, usize>,
    /// Groups and sizes of the executed scale-up.
    pub scaled_up: BTreeMap<String, String>,
    /// Unneeded nodes: name → since (RFC 3339) and utilization.
    pub unneeded: BTreeMap<String, String>,
    /// Nodes that stay: name → reason (`BlockedByPod: ns/pod NotReplicated`...).
    pub unremovable: Kept,
    /// Nodes whose deletion started this loop.
    pub scaled_down: Vec<String>,
}

impl Decisions {
    /// Records what the scale-up step did.
    pub fn record_scale_up(&mut self, up: ScaleUpOutcome) {
        self.scale_up = Some(up.status);
        self.pods = up.pods;
        self.options = up.options;
        self.scaled_up = up
            .scaled
            .iter()
            .map(|i| (i.group.clone(), format!("{}->{}", i.current, i.new)))
            .collect();
    }
}

/// The nodes a loop kept and why: the scale-down planner's reasons, shared
/// with it (a cluster of 10,000 nodes has a reason for nearly every node at
/// every loop), and the few the selection kept. Rendered as a map of node
/// name to [`Unremovable::text`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Kept {
    planner: Arc<BTreeMap<String, Unremovable>>,
    selection: BTreeMap<String, Unremovable>,
}

impl Kept {
    /// The planner's reasons.
    pub fn set_planner(&mut self, reasons: Arc<BTreeMap<String, Unremovable>>) {
        self.planner = reasons;
    }

    /// A node the selection kept (the planner gave it no reason).
    pub fn insert(&mut self, node: String, why: Unremovable) {
        self.selection.insert(node, why);
    }

    /// Why `node` was kept (the planner's reason first: the selection
    /// keeps only nodes the planner found unneeded).
    pub fn get(&self, node: &str) -> Option<&Unremovable> {
        self.planner.get(node).or_else(|| self.selection.get(node))
    }

    /// How many nodes were kept.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.planner.is_empty() && self.selection.is_empty()
    }

    /// Every node kept and the text of why ([`Unremovable::text`]).
    pub fn texts(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(node, why)| (node.clone(), why.text()))
            .collect()
    }

    /// Every node kept and why, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Unremovable)> {
        let mut planner = self.planner.iter().peekable();
        let mut selection = self.selection.iter().peekable();
        std::iter::from_fn(move || match (planner.peek(), selection.peek()) {
            (Some((a, _)), Some((b, _))) if a < b => planner.next(),
            (Some((a, _)), Some((b, _))) if a == b => {
                selection.next();
                planner.next()
            }
            (_, Some(_)) => selection.next(),
            (Some(_), None) => planner.next(),
            (None, None) => None,
        })
    }
}

impl Serialize for Kept {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter().map(|(node, why)| (node, why.text())))
    }
}

impl<'de> Deserialize<'de> for Kept {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let texts = BTreeMap::<String, String>::deserialize(d)?;
        let mut kept = Self::default();
        for (node, text) in texts {
            let why = Unremovable::from_text(&text).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "node {node}: unknown unremovable reason {text:?}"
                ))
            })?;
            kept.insert(node, why);
        }
        Ok(kept)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::scaledown::UnremovableReason;
    use crate::simulator::drainability::BlockingReason;

    #[test]
    fn the_nodes_kept_are_one_map_in_name_order_and_read_back() {
        let planner: BTreeMap<String, Unremovable> = [
            ("a", UnremovableReason::NotUnderutilized.into()),
            ("c", UnremovableReason::NoPlaceToMovePods.into()),
        ]
        .into_iter()
        .map(|(n, r)| (n.to_string(), r))
        .collect();
        let mut kept = Kept::default();
        kept.set_planner(Arc::new(planner));
        kept.insert("b".into(), UnremovableReason::NotUnneededLongEnough.into());
        kept.insert(
            "d".into(),
            Unremovable::BlockedByPod {
                pod: "ns/p".into(),
                reason: BlockingReason::NotEnoughPdb,
            },
        );
        let json = serde_json::to_string(&kept).unwrap();
        assert_eq!(
            json,
            r#"{"a":"NotUnderutilized","b":"NotUnneededLongEnough","c":"NoPlaceToMovePods","d":"BlockedByPod: ns/p NotEnoughPdb"}"#
        );
        assert_eq!(kept.len(), 4);
        let back: Kept = serde_json::from_str(&json).unwrap();
        assert_eq!(back.iter().count(), 4);
        assert_eq!(back.get("d"), kept.get("d"));
        let refused = serde_json::from_str::<Kept>(r#"{"a":"Tired"}"#).unwrap_err();
        assert!(
            refused
                .to_string()
                .starts_with(r#"node a: unknown unremovable reason "Tired""#),
            "{refused}"
        );
    }
}
