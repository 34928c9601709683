//! What the controller manages and how (the kwok flags that matter here).

use std::time::Duration;

use apimachinery::labels::{LabelSelector, Operator, Requirement};

/// The annotation that marks a node as kwok's (`kwok.x-k8s.io/node=fake`),
/// which the controller manages by default.
pub const NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";

/// Which nodes this controller manages (docs/reference/kwok-rules.md §1.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeSelection {
    /// Every node (`--manage-all-nodes`).
    All,
    /// One node by name (`--manage-single-node`).
    Single(String),
    /// Nodes passing an annotation selector (evaluated here, with the
    /// label selector grammar) and a label selector (sent to the API
    /// server); both apply when both are set.
    Selectors {
        /// `--manage-nodes-with-annotation-selector`.
        annotation: LabelSelector,
        /// `--manage-nodes-with-label-selector`.
        label: String,
    },
}

/// Controller settings (the kwok flags that matter here).
#[derive(Debug, Clone)]
pub struct Config {
    /// Which nodes are managed; default: annotation `kwok.x-k8s.io/node=fake`.
    pub nodes: NodeSelection,
    /// Pod CIDR (`--cidr`).
    pub cidr: String,
    /// `--node-ip`.
    pub node_ip: String,
    /// `--node-name`.
    pub node_name: String,
    /// `--node-port` (written to `daemonEndpoints` when non-zero).
    pub node_port: u16,
    /// Node lease duration; zero turns leases (and lease gating) off.
    pub node_lease_duration: Duration,
    /// Lease holder identity.
    pub identity: String,
    /// Also read Stage objects (`kwok.x-k8s.io/v1alpha1`) from the cluster;
    /// added, changed and removed Stages take effect at once.
    pub stages_from_cluster: bool,
}

impl std::fmt::Display for NodeSelection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeSelection::All => f.write_str("all nodes"),
            NodeSelection::Single(name) => write!(f, "node {name}"),
            NodeSelection::Selectors { annotation, label } => {
                write!(
                    f,
                    "nodes with annotations {annotation:?} and labels {label:?}",
                    annotation = annotation.to_string()
                )
            }
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            nodes: NodeSelection::Selectors {
                annotation: LabelSelector::All(vec![Requirement::new(
                    NODE_ANNOTATION,
                    Operator::In,
                    ["fake"],
                )]),
                label: String::new(),
            },
            cidr: "10.0.0.0/24".into(),
            node_ip: "10.0.0.1".into(),
            node_name: String::new(),
            node_port: 0,
            node_lease_duration: Duration::from_secs(40),
            identity: "kwok-controller".into(),
            stages_from_cluster: false,
        }
    }
}
