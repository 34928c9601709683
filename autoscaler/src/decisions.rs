//! The decision record of a loop (beyond upstream): what scale-up and
//! scale-down decided and why, as structured data, served at `/decisions`
//! and read by the conformance suite's `@extension` steps.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
    pub unremovable: BTreeMap<String, String>,
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
