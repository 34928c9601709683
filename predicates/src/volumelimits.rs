//! NodeVolumeLimits (its CSI part, kube-scheduler's `CSILimits`): a node
//! whose CSINode gives a driver an `allocatable.count` takes at most that
//! many distinct volumes of that driver.
//!
//! A pod's volumes are found through its PersistentVolumeClaims
//! (`persistentVolumeClaim` and generic `ephemeral` volumes; inline volumes
//! are not counted): a claim bound to a CSI PersistentVolume is
//! `<driver>/<volumeHandle>`; an unbound claim counts under its
//! StorageClass's provisioner as `<driver>/-<namespace>/<claim>` (one
//! volume per claim, as kube-scheduler's random-prefixed handle). A volume
//! two pods share counts once. A node without a CSINode, or whose driver
//! has no count, has no limit. An incoming pod whose claim does not exist
//! fits nowhere (`persistentvolumeclaim "<name>" not found`, the
//! VolumeBinding plugin's refusal); an existing pod's missing claim is not
//! counted.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;

pub use crate::nodeinfo::CsiNode;
use crate::nodeinfo::NodeInfo;

/// Why a pod's volumes keep it off a node (the filter turns it into a
/// [`crate::Reason`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeRefusal {
    /// A driver's volume count would pass its limit.
    MaxVolumeCount,
    /// The pod's claim of this name does not exist.
    ClaimNotFound(String),
}

/// The claims, volumes and classes a pod's volumes resolve through (the
/// listers kube-scheduler's plugin reads).
#[derive(Debug, Clone, Default)]
pub struct VolumeObjects {
    /// Claims by `namespace/name`.
    pub claims: HashMap<String, Arc<PersistentVolumeClaim>>,
    /// PersistentVolumes by name.
    pub volumes: HashMap<String, Arc<PersistentVolume>>,
    /// StorageClasses by name.
    pub classes: HashMap<String, Arc<StorageClass>>,
}

/// A pod's attachable CSI volumes: unique volume name → driver.
pub type Attachable = BTreeMap<String, String>;

impl VolumeObjects {
    /// The CSI volumes `pod` attaches. For an incoming pod (`new_pod`) a
    /// missing claim is an error; for a pod already on the node it is
    /// skipped.
    pub fn attachable(&self, pod: &Pod, new_pod: bool) -> Result<Attachable, VolumeRefusal> {
        let mut out = Attachable::new();
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let pod_name = pod.metadata.name.as_deref().unwrap_or("");
        let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
        for v in volumes {
            let claim_name = match (&v.persistent_volume_claim, &v.ephemeral) {
                (Some(c), _) => c.claim_name.clone(),
                (None, Some(_)) => format!("{pod_name}-{}", v.name),
                (None, None) => continue,
            };
            let Some(claim) = self.claims.get(&format!("{ns}/{claim_name}")) else {
                if new_pod {
                    return Err(VolumeRefusal::ClaimNotFound(claim_name));
                }
                continue;
            };
            if let Some((driver, handle)) = self.csi_driver(ns, claim) {
                out.insert(format!("{driver}/{handle}"), driver);
            }
        }
        Ok(out)
    }

    /// The driver and volume handle of a claim: from its bound CSI volume,
    /// else from its StorageClass's provisioner.
    fn csi_driver(&self, ns: &str, claim: &PersistentVolumeClaim) -> Option<(String, String)> {
        let spec = claim.spec.as_ref();
        let bound = spec
            .and_then(|s| s.volume_name.as_deref())
            .filter(|n| !n.is_empty())
            .and_then(|n| self.volumes.get(n));
        if let Some(pv) = bound {
            let csi = pv.spec.as_ref()?.csi.as_ref()?;
            return Some((csi.driver.clone(), csi.volume_handle.clone()));
        }
        let class = spec
            .and_then(|s| s.storage_class_name.as_deref())
            .or_else(|| {
                claim
                    .metadata
                    .annotations
                    .as_ref()?
                    .get("volume.beta.kubernetes.io/storage-class")
                    .map(String::as_str)
            })
            .filter(|c| !c.is_empty())?;
        let provisioner = &self.classes.get(class)?.provisioner;
        let name = claim.metadata.name.as_deref().unwrap_or("");
        Some((provisioner.clone(), format!("-{ns}/{name}")))
    }
}

/// The filter for one node, given the incoming pod's attachable volumes:
/// `node(s) exceed max volume count` when a driver's volumes (the node's
/// pods' and the new ones, each counted once) pass the CSINode's count.
pub fn volume_limits_fit(
    new: &Attachable,
    node: &NodeInfo,
    objects: &VolumeObjects,
) -> Result<(), VolumeRefusal> {
    let Some(csi) = node.csi.as_deref() else {
        return Ok(());
    };
    if new.is_empty() || csi.limits().next().is_none() {
        return Ok(());
    }
    let mut attached = Attachable::new();
    for p in node.pods.iter() {
        if let Ok(a) = objects.attachable(&p.pod, false) {
            attached.extend(a);
        }
    }
    for (driver, limit) in csi.limits() {
        let fresh = new
            .iter()
            .filter(|(v, d)| *d == driver && !attached.contains_key(*v))
            .count();
        if fresh == 0 {
            continue;
        }
        let used = attached.values().filter(|d| *d == driver).count();
        if i64::try_from(used + fresh).unwrap_or(i64::MAX) > limit {
            return Err(VolumeRefusal::MaxVolumeCount);
        }
    }
    Ok(())
}
