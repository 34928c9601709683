//! The provider's settings, and the state it shares with its node groups:
//! the parsed configuration and each group's sizes, template and fault.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Node;
use kube::Client;

use super::config::Parsed;
use super::faults::{FAULT_ANNOTATION, Fault, Faults, parse_fault};
use super::templates::{
    DEFAULT_MAX_COUNT, DESIRED_COUNT_ANNOTATION, GROUP_NAME_ANNOTATION, MAX_COUNT_ANNOTATION,
    MIN_COUNT_ANNOTATION, annotation, prepare_template, size_annotation,
};
use crate::cache::node_memo::NodeVersionMemo;
use crate::cloudprovider::{CloudError, InstanceErrorInfo, NodeLister};

/// Where the provider finds its configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Namespace of the ConfigMaps (`$POD_NAMESPACE`).
    pub namespace: String,
    /// Name of the config ConfigMap (`$KWOK_PROVIDER_CONFIGMAP`).
    pub config_map: String,
}

impl Settings {
    /// From the environment, as upstream: `POD_NAMESPACE` (else the service
    /// account's namespace file) and `KWOK_PROVIDER_CONFIGMAP`.
    pub fn from_env() -> Result<Self, CloudError> {
        let namespace = std::env::var("POD_NAMESPACE")
            .ok()
            .filter(|s| !s.is_empty())
            .or_else(|| {
                std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                    .ok()
                    .map(|s| s.trim().to_string())
            })
            .ok_or_else(|| {
                CloudError::configuration(
                    "kwok provider: POD_NAMESPACE is not set and there is no service account namespace file",
                )
            })?;
        let config_map = std::env::var("KWOK_PROVIDER_CONFIGMAP")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "kwok-provider-config".into());
        Ok(Self {
            namespace,
            config_map,
        })
    }
}

/// One group's mutable state.
#[derive(Debug, Clone)]
pub(super) struct GroupState {
    pub(super) template: Node,
    pub(super) min: usize,
    pub(super) max: usize,
    pub(super) target: usize,
    /// Instances accepted but never registered (fault injection), by name.
    pub(super) phantom: BTreeSet<String>,
    /// A fault from the template's annotation.
    pub(super) fault: Option<Fault>,
    /// Instances that failed to be created, by name.
    pub(super) failed: BTreeMap<String, InstanceErrorInfo>,
}

pub(super) struct Shared {
    pub(super) client: Client,
    pub(super) nodes: NodeLister,
    pub(super) settings: Settings,
    pub(super) faults: Arc<Faults>,
    pub(super) config: Mutex<Option<Parsed>>,
    pub(super) groups: Mutex<BTreeMap<String, GroupState>>,
    /// Templates refused so far (logged once each).
    pub(super) refused: Mutex<BTreeSet<String>>,
    /// The resourceVersions of the configuration and templates ConfigMaps
    /// the groups were last built from (none while the templates come from
    /// the cluster's nodes).
    pub(super) loaded_from: Mutex<Option<(String, String)>>,
    /// Each node's group as its labels and annotations name it, read once
    /// per version of the node; cleared when the configuration is read
    /// anew.
    pub(super) group_names: NodeVersionMemo<Option<String>>,
    /// The kwok nodes of each group, as last sorted from the node list.
    pub(super) members: Mutex<Members>,
}

/// The kwok nodes of each group (by the group-name annotation the provider
/// puts on its nodes), sorted from one node list: read again only when
/// the list holds other node objects. Every loop asks each group for its
/// nodes; with the list unchanged that is a pointer compare per node, not
/// an annotation lookup per node and group.
#[derive(Default)]
pub(super) struct Members {
    /// The node list the groups were sorted from.
    from: Vec<Arc<Node>>,
    /// The kwok nodes of each group, in the list's order.
    by_group: BTreeMap<String, Vec<Arc<Node>>>,
}

impl Members {
    /// The kwok nodes of group `id` in `nodes`.
    pub(super) fn of(&mut self, id: &str, nodes: Vec<Arc<Node>>) -> Vec<Arc<Node>> {
        let same = self.from.len() == nodes.len()
            && self.from.iter().zip(&nodes).all(|(a, b)| Arc::ptr_eq(a, b));
        if !same {
            self.by_group.clear();
            for n in &nodes {
                if !super::is_kwok(n) {
                    continue;
                }
                if let Some(group) = annotation(n, GROUP_NAME_ANNOTATION) {
                    self.by_group
                        .entry(group.to_string())
                        .or_default()
                        .push(n.clone());
                }
            }
            self.from = nodes;
        }
        self.by_group.get(id).cloned().unwrap_or_default()
    }
}

/// A group's state from its template: its sizes, its fault and the
/// template nodes are made from. Errors name the template and annotation.
pub(super) fn group_state(
    t: &Node,
    group: &str,
    parsed: &Parsed,
) -> Result<GroupState, CloudError> {
    let min = size_annotation(t, MIN_COUNT_ANNOTATION, 0)?;
    let max = size_annotation(t, MAX_COUNT_ANNOTATION, DEFAULT_MAX_COUNT)?;
    let desired = size_annotation(t, DESIRED_COUNT_ANNOTATION, min)?;
    let tname = t.metadata.name.as_deref().unwrap_or("");
    if max < min {
        return Err(CloudError::configuration(format!(
            "kwok provider: template node {tname:?}: max-count {max} is below min-count {min}"
        )));
    }
    if desired < min || desired > max {
        return Err(CloudError::configuration(format!(
            "kwok provider: template node {tname:?}: desired-count {desired} is outside [{min}, {max}]"
        )));
    }
    let fault = annotation(t, FAULT_ANNOTATION)
        .map(|v| {
            parse_fault(v).map_err(|e| {
                CloudError::configuration(format!(
                    "kwok provider: template node {tname:?}: annotation {FAULT_ANNOTATION}: {e}"
                ))
            })
        })
        .transpose()?;
    Ok(GroupState {
        fault,
        failed: BTreeMap::new(),
        template: prepare_template(t, group, parsed.skip_taint)?,
        min,
        max,
        target: if parsed.from_cluster { 1 } else { desired },
        phantom: BTreeSet::new(),
    })
}
