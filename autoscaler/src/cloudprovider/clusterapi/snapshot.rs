//! What a refresh reads ([`Snapshot`]): the node groups (MachineDeployments
//! and MachineSets with their sizes and scale-from-zero capacity), the
//! Machines and MachineSets, and how Machines map to nodes and groups.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::Value;

use super::keys::Keys;
use super::scalefromzero::Capacity;

/// Placeholder instance id prefixes for Machines without a usable node.
pub const PENDING_PREFIX: &str = "pending-machine-";
/// A Machine being deleted.
pub const DELETING_PREFIX: &str = "deleting-machine-";
/// A Machine that reports a failure.
pub const FAILED_PREFIX: &str = "failed-machine-";

/// Which kind a node group is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ScalableKind {
    /// A MachineDeployment.
    MachineDeployment,
    /// A MachineSet that no MachineDeployment owns.
    MachineSet,
}

impl ScalableKind {
    /// The kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MachineDeployment => "MachineDeployment",
            Self::MachineSet => "MachineSet",
        }
    }
}

/// One node group as the last refresh read it.
#[derive(Debug, Clone)]
pub struct GroupDef {
    /// Its kind.
    pub kind: ScalableKind,
    /// The object.
    pub object: DynamicObject,
    /// Min size.
    pub min: usize,
    /// Max size.
    pub max: usize,
    /// `spec.replicas` (updated when the provider scales it).
    pub replicas: Option<usize>,
    /// What a new node has, when known (scale from zero).
    pub capacity: Option<Capacity>,
    /// The infrastructure template, when there is one.
    pub template: Option<Value>,
}

impl GroupDef {
    /// `<Kind>/<namespace>/<name>`.
    pub fn id(&self) -> String {
        format!(
            "{}/{}/{}",
            self.kind.as_str(),
            self.object.namespace().unwrap_or_default(),
            self.object.name_any()
        )
    }

    /// The cluster the object belongs to: `spec.clusterName` when the
    /// field exists, else the cluster-name label.
    pub fn cluster(&self, keys: &Keys) -> String {
        cluster_of(&self.object, keys)
    }
}

pub(super) fn cluster_of(o: &DynamicObject, keys: &Keys) -> String {
    match o.data.pointer("/spec/clusterName").and_then(Value::as_str) {
        Some(c) => c.to_string(),
        None => o
            .labels()
            .get(&keys.cluster_name())
            .cloned()
            .unwrap_or_default(),
    }
}

/// What the last refresh read.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Node groups by id.
    pub groups: BTreeMap<String, GroupDef>,
    /// Machines by `namespace/name`.
    pub machines: BTreeMap<String, DynamicObject>,
    /// Machine keys by normalised providerID.
    pub by_provider_id: HashMap<String, String>,
    /// MachineSets by `namespace/name` (to find a Machine's group).
    pub sets: BTreeMap<String, DynamicObject>,
}

impl Snapshot {
    /// The id of the group a Machine belongs to: its MachineSet, or the
    /// MachineDeployment owning that set when it is a node group.
    pub fn group_of_machine(&self, machine: &DynamicObject) -> Option<String> {
        let ns = machine.namespace().unwrap_or_default();
        let set_name = owner_named(machine, "MachineSet")?;
        let set = self.sets.get(&format!("{ns}/{set_name}"))?;
        if let Some(md) = owner_named(set, "MachineDeployment") {
            let id = format!("MachineDeployment/{ns}/{md}");
            if self.groups.contains_key(&id) {
                return Some(id);
            }
        }
        let id = format!("MachineSet/{ns}/{set_name}");
        self.groups.contains_key(&id).then_some(id)
    }

    /// The Machine of a node: by providerID, else by its annotations.
    pub fn machine_key_of(&self, keys: &Keys, node: &Node) -> Option<String> {
        if let Some(p) = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()) {
            if let Some(k) = self.by_provider_id.get(normalize_provider_id(p)) {
                return Some(k.clone());
            }
            for prefix in [PENDING_PREFIX, DELETING_PREFIX, FAILED_PREFIX] {
                if let Some(rest) = p.strip_prefix(prefix) {
                    return Some(rest.replacen('_', "/", 1));
                }
            }
        }
        let a = node.metadata.annotations.as_ref()?;
        let machine = a.get(&keys.machine())?;
        let ns = a.get(&keys.cluster_namespace())?;
        Some(format!("{ns}/{machine}"))
    }
}

/// A providerID as upstream compares them: its last `/` segment
/// (`aws:///us-east-1a/i-abc` → `i-abc`, `kwok://m-1` → `m-1`).
pub fn normalize_provider_id(id: &str) -> &str {
    if id.starts_with("azure://") && id.contains("virtualMachineScaleSets") {
        return id;
    }
    id.rsplit('/').next().unwrap_or(id)
}

pub(super) fn key_of(o: &DynamicObject) -> String {
    format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())
}

/// The owner of `kind` named in `o`'s owner references.
pub(super) fn owner_named<'a>(o: &'a DynamicObject, kind: &str) -> Option<&'a str> {
    o.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.kind == kind && !r.name.is_empty())
        .map(|r| r.name.as_str())
}
