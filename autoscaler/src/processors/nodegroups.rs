//! Node-group list processors (upstream's `processors/nodegroups`): a
//! chance to change the node groups scale-up considers, after the groups
//! that cannot scale up now are set aside and before any estimate (upstream
//! adds node groups that autoprovisioning would create here). The default
//! chain is empty, as upstream's default is its no-op processor.

use std::collections::BTreeMap;

use predicates::PodInfo;

use crate::scaleup::types::Candidate;

/// The node groups scale-up may use, and the ones it may not with why.
#[derive(Debug, Clone, Default)]
pub struct NodeGroupList {
    /// Usable groups, with their templates.
    pub candidates: Vec<Candidate>,
    /// Group id → why it cannot scale up now.
    pub skipped: BTreeMap<String, String>,
}

/// One processor of the node-group list (upstream's
/// `NodeGroupListProcessor`).
pub trait NodeGroupListProcessor: Send + Sync {
    /// The processor's name.
    fn name(&self) -> &'static str;
    /// The node groups to consider for these pending pods.
    fn process(&self, groups: NodeGroupList, pods: &[PodInfo]) -> NodeGroupList;
}

/// Runs the processors in order.
pub fn process_all(
    processors: &[Box<dyn NodeGroupListProcessor>],
    groups: NodeGroupList,
    pods: &[PodInfo],
) -> NodeGroupList {
    processors
        .iter()
        .fold(groups, |groups, p| p.process(groups, pods))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Arc;

    use predicates::NodeInfo;

    use super::*;

    fn candidate(id: &str) -> Candidate {
        let node = serde_json::from_value(serde_json::json!({"metadata": {"name": id}})).unwrap();
        Candidate {
            id: id.into(),
            template: NodeInfo::new(Arc::new(node)),
            target: 0,
            max: 1,
        }
    }

    /// Sets a group aside, as a distribution's processor might.
    struct Without(&'static str);

    impl NodeGroupListProcessor for Without {
        fn name(&self) -> &'static str {
            "Without"
        }

        fn process(&self, mut groups: NodeGroupList, _pods: &[PodInfo]) -> NodeGroupList {
            groups.candidates.retain(|c| c.id != self.0);
            groups.skipped.insert(self.0.into(), "set aside".into());
            groups
        }
    }

    #[test]
    fn the_processors_decide_the_groups_in_order() {
        let groups = NodeGroupList {
            candidates: vec![candidate("a"), candidate("b"), candidate("c")],
            skipped: BTreeMap::new(),
        };
        let chain: Vec<Box<dyn NodeGroupListProcessor>> =
            vec![Box::new(Without("a")), Box::new(Without("c"))];
        let out = process_all(&chain, groups.clone(), &[]);
        let ids: Vec<&str> = out.candidates.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["b"]);
        assert_eq!(out.skipped.keys().collect::<Vec<_>>(), ["a", "c"]);
        let none = process_all(&[], groups, &[]);
        assert_eq!(
            none.candidates.len(),
            3,
            "the default chain changes nothing"
        );
    }
}
