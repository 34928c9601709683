//! What the cache keeps for NodeVolumeLimits: each node's CSINode and the
//! claims, volumes and classes a pod's volumes resolve through. Watched
//! whatever the flags, as upstream's informers are: real nodes' CSI limits
//! count in every simulation; `--enable-csi-node-aware-scheduling` adds
//! them to template and upcoming nodes.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::ResourceExt;
use predicates::{CsiNode, VolumeObjects};

use super::state::State;

/// A storage object a watch delivered.
#[derive(Debug)]
pub enum StorageObject {
    /// A node's CSINode (named as the node).
    CsiNode(CSINode),
    /// A PersistentVolumeClaim.
    Claim(Box<PersistentVolumeClaim>),
    /// A PersistentVolume.
    Volume(Box<PersistentVolume>),
    /// A StorageClass.
    Class(StorageClass),
}

impl StorageObject {
    /// Its kind, as relists record it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::CsiNode(_) => "CSINode",
            Self::Claim(_) => "PersistentVolumeClaim",
            Self::Volume(_) => "PersistentVolume",
            Self::Class(_) => "StorageClass",
        }
    }

    /// Its key: `namespace/name` for claims, the name otherwise.
    pub fn key(&self) -> String {
        match self {
            Self::CsiNode(c) => c.name_any(),
            Self::Claim(c) => format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any()),
            Self::Volume(v) => v.name_any(),
            Self::Class(c) => c.name_any(),
        }
    }
}

impl State {
    /// Keeps a storage object (a CSINode changes its node's info).
    pub(super) fn put_storage(&mut self, obj: StorageObject) {
        let key = obj.key();
        self.seen(obj.kind(), &key);
        match obj {
            StorageObject::CsiNode(c) => {
                self.csi_nodes
                    .insert(key.clone(), Arc::new(CsiNode::from_object(&c)));
                self.touch(&key);
            }
            StorageObject::Claim(c) => {
                Arc::make_mut(&mut self.volumes)
                    .claims
                    .insert(key, Arc::from(c));
            }
            StorageObject::Volume(v) => {
                Arc::make_mut(&mut self.volumes)
                    .volumes
                    .insert(key, Arc::from(v));
            }
            StorageObject::Class(c) => {
                Arc::make_mut(&mut self.volumes)
                    .classes
                    .insert(key, Arc::new(c));
            }
        }
    }

    /// Forgets the storage object of `kind` and `key`.
    pub(super) fn drop_storage(&mut self, kind: &str, key: &str) {
        match kind {
            "CSINode" => {
                self.csi_nodes.remove(key);
                self.touch(key);
            }
            "PersistentVolumeClaim" => {
                Arc::make_mut(&mut self.volumes).claims.remove(key);
            }
            "PersistentVolume" => {
                Arc::make_mut(&mut self.volumes).volumes.remove(key);
            }
            _ => {
                Arc::make_mut(&mut self.volumes).classes.remove(key);
            }
        }
    }

    /// Drops what a relist of the storage `kind` did not contain.
    pub(super) fn storage_relisted(
        &mut self,
        kind: &str,
        seen: &std::collections::BTreeSet<String>,
    ) {
        let gone: Vec<String> = match kind {
            "CSINode" => self.csi_nodes.keys().cloned().collect(),
            "PersistentVolumeClaim" => self.volumes.claims.keys().cloned().collect(),
            "PersistentVolume" => self.volumes.volumes.keys().cloned().collect(),
            _ => self.volumes.classes.keys().cloned().collect(),
        };
        for key in gone.iter().filter(|k| !seen.contains(*k)) {
            self.drop_storage(kind, key);
        }
    }

    /// The claims, volumes and classes, shared with the loop's snapshot.
    pub fn volume_objects(&self) -> Arc<VolumeObjects> {
        self.volumes.clone()
    }
}

/// The storage kinds, as relists record them.
pub const STORAGE_KINDS: [&str; 4] = [
    "CSINode",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
];
