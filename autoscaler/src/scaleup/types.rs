//! The values scale-up's steps hand each other: the groups it may use
//! ([`Candidate`]), one group's part of a scale-up ([`ScaleUpInfo`]), how
//! a loop's scale-up ended ([`ScaleUpStatus`]) and why a pod did not
//! trigger one ([`NotTriggered`]).

use std::collections::BTreeMap;
use std::fmt;

use predicates::NodeInfo;
use serde::{Deserialize, Serialize};

/// How a loop's scale-up ended (upstream's `ScaleUpResult` and the reasons
/// the loop stops before planning). Serialised as its variant name in the
/// decision record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScaleUpStatus {
    /// No pending pod needs a new node.
    NotNeeded,
    /// Every chosen group was increased.
    Successful,
    /// No node group can help the pending pods.
    NoOptionsAvailable,
    /// An increase failed.
    Error,
    /// Every pending pod is very new: the loop waits for more
    /// ([`new_pods`]).
    InCooldown,
    /// `--max-nodes-total` is reached.
    LimitedByMaxNodesTotal,
    /// The cluster is unhealthy: no scale-up at all.
    ClusterUnhealthy,
    /// Nothing was tried: the pods were a ProvisioningRequest's that no
    /// class here serves (upstream's `ScaleUpNotTried`).
    NotTried,
}

impl ScaleUpStatus {
    /// Upstream's name for it (`ScaleUpResult.String()`).
    pub fn upstream_name(self) -> &'static str {
        match self {
            Self::NotNeeded => "ScaleUpNotNeeded",
            Self::Successful => "ScaleUpSuccessful",
            Self::NoOptionsAvailable => "ScaleUpNoOptionsAvailable",
            Self::Error => "ScaleUpError",
            Self::InCooldown => "ScaleUpInCooldown",
            Self::LimitedByMaxNodesTotal => "ScaleUpLimitedByMaxNodesTotal",
            Self::ClusterUnhealthy => "ScaleUpClusterUnhealthy",
            Self::NotTried => "ScaleUpNotTried",
        }
    }
}

/// A node group that scale-up may use.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Group id.
    pub id: String,
    /// Template node (with its DaemonSet/mirror pods).
    pub template: NodeInfo,
    /// Target size.
    pub target: usize,
    /// Max size.
    pub max: usize,
}

/// One group's part of a scale-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleUpInfo {
    /// Group id.
    pub group: String,
    /// Current target.
    pub current: usize,
    /// New target.
    pub new: usize,
    /// Max size.
    pub max: usize,
}

/// Why a pending pod did not trigger a scale-up: the text of its
/// `NotTriggerScaleUp` event after "pod didn't trigger scale-up: ".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotTriggered {
    /// `--max-nodes-total` is reached.
    MaxNodesTotalReached,
    /// No node group could help: each reason with the number of groups
    /// that gave it.
    NoGroupCanHelp(BTreeMap<String, usize>),
}

impl fmt::Display for NotTriggered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MaxNodesTotalReached => f.write_str("max total nodes in cluster reached"),
            Self::NoGroupCanHelp(reasons) => {
                let text: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
                f.write_str(&text.join(", "))
            }
        }
    }
}

/// Increases as upstream prints them in its log and events:
/// `{group 1->3 (max: 10)}`, space-separated.
pub fn format_increases(infos: &[ScaleUpInfo]) -> String {
    let text: Vec<String> = infos
        .iter()
        .map(|i| format!("{{{} {}->{} (max: {})}}", i.group, i.current, i.new, i.max))
        .collect();
    text.join(" ")
}
