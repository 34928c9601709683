//! What the cache keeps for dynamic resource allocation
//! (`resource.k8s.io/v1`, watched as upstream's informers are, DRA being
//! locked on): DeviceClasses, ResourceClaims and ResourceSlices. A slice
//! local to a node (`spec.nodeName`) goes to that node's info; the others
//! are shared by every simulation. The claims carry their allocations, so
//! the simulation knows which devices are taken.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use predicates::DraObjects;
use predicates::dynamicresources::api::{DeviceClass, ResourceClaim, ResourceSlice};
use serde::{Deserialize, Deserializer};

use super::state::State;

/// A `resource.k8s.io/v1` object as the watch delivers it: its metadata
/// and the allocator's view of it.
#[derive(Debug, Clone)]
pub struct Dra<T> {
    /// Its metadata.
    pub metadata: ObjectMeta,
    /// The object.
    pub object: T,
}

impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for Dra<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        let metadata =
            serde_json::from_value(value["metadata"].clone()).map_err(serde::de::Error::custom)?;
        let object = serde_json::from_value(value).map_err(serde::de::Error::custom)?;
        Ok(Self { metadata, object })
    }
}

/// What makes a type a watchable `resource.k8s.io/v1` kind.
pub trait DraKind {
    /// The kind.
    const KIND: &'static str;
    /// Its plural.
    const PLURAL: &'static str;
    /// Namespaced or cluster-scoped.
    type Scope;
}

impl DraKind for DeviceClass {
    const KIND: &'static str = "DeviceClass";
    const PLURAL: &'static str = "deviceclasses";
    type Scope = k8s_openapi::ClusterResourceScope;
}

impl DraKind for ResourceClaim {
    const KIND: &'static str = "ResourceClaim";
    const PLURAL: &'static str = "resourceclaims";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl DraKind for ResourceSlice {
    const KIND: &'static str = "ResourceSlice";
    const PLURAL: &'static str = "resourceslices";
    type Scope = k8s_openapi::ClusterResourceScope;
}

impl<T: DraKind> Resource for Dra<T> {
    type DynamicType = ();
    type Scope = T::Scope;

    fn kind(_: &()) -> Cow<'_, str> {
        T::KIND.into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "resource.k8s.io".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        T::PLURAL.into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A DRA object a watch delivered.
#[derive(Debug)]
pub enum DraObject {
    /// A DeviceClass.
    Class(DeviceClass),
    /// A ResourceClaim.
    Claim(Box<ResourceClaim>),
    /// A ResourceSlice.
    Slice(Box<ResourceSlice>),
}

impl DraObject {
    /// Its kind, as relists record it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Class(_) => DeviceClass::KIND,
            Self::Claim(_) => ResourceClaim::KIND,
            Self::Slice(_) => ResourceSlice::KIND,
        }
    }

    /// Its key: `namespace/name` for claims, the name otherwise.
    pub fn key(&self) -> String {
        match self {
            Self::Class(c) => c.metadata.name.clone(),
            Self::Claim(c) => c.key(),
            Self::Slice(s) => s.metadata.name.clone(),
        }
    }
}

/// The DRA kinds, as relists record them.
pub const DRA_KINDS: [&str; 3] = [DeviceClass::KIND, ResourceClaim::KIND, ResourceSlice::KIND];

/// The DRA part of the cache's state.
#[derive(Debug, Clone, Default)]
pub struct DraCache {
    /// Classes, claims and the slices shared by all nodes, as the
    /// simulation reads them.
    pub objects: Arc<DraObjects>,
    /// Every slice by name.
    slices: BTreeMap<String, Arc<ResourceSlice>>,
    /// Node-local slice names by node.
    by_node: BTreeMap<String, BTreeSet<String>>,
}

impl DraCache {
    /// Whether any node has a slice of its own.
    pub fn has_node_slices(&self) -> bool {
        self.by_node.values().any(|s| !s.is_empty())
    }

    /// The slices local to `node`, by name.
    pub fn node_slices(&self, node: &str) -> Vec<Arc<ResourceSlice>> {
        self.by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|n| self.slices.get(n).cloned())
            .collect()
    }

    /// The node a slice is local to.
    fn node_of(slice: &ResourceSlice) -> Option<&str> {
        slice.spec.node_name.as_deref().filter(|n| !n.is_empty())
    }

    fn shared_changed(&mut self) {
        Arc::make_mut(&mut self.objects).shared_slices = self
            .slices
            .values()
            .filter(|s| Self::node_of(s).is_none())
            .cloned()
            .collect();
    }
}

impl State {
    /// Keeps a DRA object (a node-local slice changes its node's info).
    pub(super) fn put_dra(&mut self, obj: DraObject) {
        let key = obj.key();
        self.seen(obj.kind(), &key);
        match obj {
            DraObject::Class(c) => {
                Arc::make_mut(&mut self.dra.objects)
                    .classes
                    .insert(key, Arc::new(c));
            }
            DraObject::Claim(c) => {
                Arc::make_mut(&mut self.dra.objects).insert_claim(Arc::from(c));
            }
            DraObject::Slice(s) => {
                self.drop_dra(ResourceSlice::KIND, &key);
                let s: Arc<ResourceSlice> = Arc::from(s);
                match DraCache::node_of(&s) {
                    Some(node) => {
                        let node = node.to_string();
                        self.dra
                            .by_node
                            .entry(node.clone())
                            .or_default()
                            .insert(key.clone());
                        self.dra.slices.insert(key, s);
                        self.touch(&node);
                    }
                    None => {
                        self.dra.slices.insert(key, s);
                        self.dra.shared_changed();
                    }
                }
            }
        }
    }

    /// Forgets the DRA object of `kind` and `key`.
    pub(super) fn drop_dra(&mut self, kind: &str, key: &str) {
        match kind {
            "DeviceClass" => {
                Arc::make_mut(&mut self.dra.objects).classes.remove(key);
            }
            "ResourceClaim" => {
                Arc::make_mut(&mut self.dra.objects).remove_claim(key);
            }
            _ => {
                let Some(old) = self.dra.slices.remove(key) else {
                    return;
                };
                match DraCache::node_of(&old) {
                    Some(node) => {
                        let node = node.to_string();
                        if let Some(set) = self.dra.by_node.get_mut(&node) {
                            set.remove(key);
                        }
                        self.touch(&node);
                    }
                    None => self.dra.shared_changed(),
                }
            }
        }
    }

    /// Drops what a relist of the DRA `kind` did not contain.
    pub(super) fn dra_relisted(&mut self, kind: &str, seen: &BTreeSet<String>) {
        let known: Vec<String> = match kind {
            "DeviceClass" => self.dra.objects.classes.keys().cloned().collect(),
            "ResourceClaim" => self.dra.objects.claims.keys().cloned().collect(),
            _ => self.dra.slices.keys().cloned().collect(),
        };
        for key in known.iter().filter(|k| !seen.contains(*k)) {
            self.drop_dra(kind, key);
        }
    }

    /// The classes, claims and shared slices, shared with the loop's
    /// snapshot.
    pub fn dra_objects(&self) -> Arc<DraObjects> {
        self.dra.objects.clone()
    }
}
