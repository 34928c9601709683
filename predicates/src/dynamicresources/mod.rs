//! DynamicResources: kube-scheduler's plugin for pods with ResourceClaims
//! (`resource.k8s.io/v1`), shared by the testbed's scheduler and the
//! autoscaler's simulator.
//!
//! - [`api`]: the DRA objects as the allocator reads them.
//! - [`allocator`]: the structured-parameters allocator (devices of a
//!   node's slices for a pod's unallocated claims; selectors in CEL, from
//!   the `kubecel` crate).
//! - [`refusal`]: why a pod's claims keep it off a node, in
//!   kube-scheduler's words.
//!
//! A pod's claims are `spec.resourceClaims`: a claim by name, or one made
//! from a template, whose name `status.resourceClaimStatuses` gives. A
//! node fits when every claim is either allocated where the node can
//! reach it, or can be allocated there now ([`DraObjects::allocate`]).
//! Node-local slices travel with their node ([`crate::NodeInfo::slices`]);
//! slices for all nodes or a node selector are in [`DraObjects`].

pub mod allocator;
pub mod api;
pub mod refusal;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::labels::node_matches_selector;
use crate::nodeinfo::NodeInfo;
pub use allocator::Allocator;
use api::{AllocationResult, DeviceClass, DeviceId, ResourceClaim, ResourceSlice};
pub use refusal::{AllocationError, ClaimRefusal};

/// The cluster's DRA objects, as the plugin's listers see them.
#[derive(Debug, Clone, Default)]
pub struct DraObjects {
    /// DeviceClasses by name.
    pub classes: HashMap<String, Arc<DeviceClass>>,
    /// ResourceClaims by `namespace/name`.
    pub claims: HashMap<String, Arc<ResourceClaim>>,
    /// Slices not local to one node (`allNodes`, `nodeSelector`).
    pub shared_slices: Vec<Arc<ResourceSlice>>,
    /// The devices allocated to claims.
    pub allocated: HashSet<DeviceId>,
}

/// A pod's reference to one of its claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodClaim {
    /// The entry's name in `spec.resourceClaims`.
    pub name: String,
    /// The ResourceClaim's `namespace/name`.
    pub key: String,
}

/// Whether the pod asks for ResourceClaims.
pub fn has_claims(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .is_some_and(|c| !c.is_empty())
}

/// The pod's claims: by name, or the claim made from a template (named in
/// `status.resourceClaimStatuses`; not there yet: the claim is not
/// created yet). An entry whose status says no claim is needed is skipped.
pub fn pod_claims(pod: &Pod) -> Result<Vec<PodClaim>, ClaimRefusal> {
    claim_entries(pod).filter_map(Result::transpose).collect()
}

/// Each of the pod's claim entries resolved: its claim, none when it needs
/// no claim, or an error when its claim is not created yet.
fn claim_entries(pod: &Pod) -> impl Iterator<Item = Result<Option<PodClaim>, ClaimRefusal>> + '_ {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref());
    pod.spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
        .map(move |c| {
            let name = match (&c.resource_claim_name, &c.resource_claim_template_name) {
                (Some(n), _) => n.clone(),
                (None, Some(_)) => {
                    let status = statuses
                        .into_iter()
                        .flatten()
                        .find(|s| s.name == c.name)
                        .ok_or_else(|| {
                            let pod_name = pod.metadata.name.as_deref().unwrap_or("");
                            ClaimRefusal::NotCreatedYet(format!("{ns}/{pod_name}"))
                        })?;
                    match &status.resource_claim_name {
                        Some(n) => n.clone(),
                        None => return Ok(None),
                    }
                }
                (None, None) => return Ok(None),
            };
            Ok(Some(PodClaim {
                name: c.name.clone(),
                key: format!("{ns}/{name}"),
            }))
        })
}

impl DraObjects {
    /// Adds a claim, counting its allocated devices.
    pub fn insert_claim(&mut self, claim: Arc<ResourceClaim>) {
        self.remove_claim(&claim.key());
        if let Some(a) = &claim.status.allocation {
            self.allocated
                .extend(a.devices.results.iter().map(|r| r.id()));
        }
        self.claims.insert(claim.key(), claim);
    }

    /// Removes a claim, freeing its devices.
    pub fn remove_claim(&mut self, key: &str) -> Option<Arc<ResourceClaim>> {
        let old = self.claims.remove(key)?;
        if let Some(a) = &old.status.allocation {
            for r in &a.devices.results {
                self.allocated.remove(&r.id());
            }
        }
        Some(old)
    }

    /// The pod's claims, each with its object.
    pub fn claims_of(
        &self,
        pod: &Pod,
    ) -> Result<Vec<(PodClaim, Arc<ResourceClaim>)>, ClaimRefusal> {
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let mut out = Vec::new();
        for c in pod_claims(pod)? {
            let claim = self
                .claims
                .get(&c.key)
                .ok_or_else(|| ClaimRefusal::NotFound(c.key.clone()))?;
            if claim.metadata.deletion_timestamp.is_some() {
                return Err(ClaimRefusal::BeingDeleted(claim_name(&c.key)));
            }
            if claim.status.allocation.is_some()
                && !claim.reserved_for(uid)
                && claim.status.reserved_for.len() >= MAX_CONSUMERS
            {
                return Err(ClaimRefusal::ReservedForMaximum(claim_name(&c.key)));
            }
            if claim.status.allocation.is_none() {
                self.check_classes(claim)?;
            }
            out.push((c, claim.clone()));
        }
        Ok(out)
    }

    /// The pod's claims that are tracked here, whatever their state; a
    /// claim not created yet or not tracked is left out (upstream's
    /// `findPodClaims` with `ignoreNotTracked`, as CA 1.37 fixed it: it once
    /// left a hole that crashed the removal of such a pod).
    pub fn tracked_claims_of(&self, pod: &Pod) -> Vec<Arc<ResourceClaim>> {
        claim_entries(pod)
            .filter_map(|c| self.claims.get(&c.ok()??.key).cloned())
            .collect()
    }

    /// PreFilter's check of an unallocated claim: every class its requests
    /// (and their alternatives) name exists.
    fn check_classes(&self, claim: &ResourceClaim) -> Result<(), ClaimRefusal> {
        for r in &claim.spec.devices.requests {
            let named = r
                .exactly
                .iter()
                .map(|e| (r.name.clone(), &e.device_class_name))
                .chain(r.first_available.iter().map(|s| {
                    (
                        format!("{}/{}", r.name, s.name),
                        &s.request.device_class_name,
                    )
                }));
            for (request, class) in named {
                if !self.classes.contains_key(class) {
                    return Err(ClaimRefusal::Allocation(AllocationError::ClassNotFound {
                        claim: claim.key(),
                        request,
                        class: class.clone(),
                    }));
                }
            }
        }
        Ok(())
    }

    /// Whether the pod's claims can be met on `node`: the allocated ones
    /// reachable from it, the others allocatable there. The allocations
    /// for the unallocated claims (by `namespace/name`) on success.
    pub fn allocate(
        &self,
        pod: &Pod,
        node: &NodeInfo,
    ) -> Result<Vec<(String, AllocationResult)>, ClaimRefusal> {
        let claims = self.claims_of(pod)?;
        let mut pending: Vec<&ResourceClaim> = Vec::new();
        for (_, claim) in &claims {
            match &claim.status.allocation {
                Some(a) => {
                    let reachable = a
                        .node_selector
                        .as_ref()
                        .is_none_or(|sel| node_matches_selector(&node.node, sel));
                    if !reachable {
                        return Err(ClaimRefusal::NotAvailableOnNode);
                    }
                }
                None => pending.push(claim),
            }
        }
        if pending.is_empty() {
            return Ok(Vec::new());
        }
        let slices: Vec<&ResourceSlice> = node
            .slices
            .iter()
            .chain(&self.shared_slices)
            .map(Arc::as_ref)
            .collect();
        let allocator = Allocator {
            classes: &self.classes,
            allocated: &self.allocated,
        };
        match allocator.allocate(&pending, &node.node, &slices) {
            Ok(Some(results)) => Ok(pending.iter().map(|c| c.key()).zip(results).collect()),
            Ok(None) => Err(ClaimRefusal::CannotAllocate),
            Err(e) => Err(ClaimRefusal::Allocation(e)),
        }
    }
}

/// kube-apiserver's limit on `status.reservedFor`.
pub const MAX_CONSUMERS: usize = 256;

fn claim_name(key: &str) -> String {
    key.split_once('/').map_or(key, |(_, n)| n).to_string()
}

#[cfg(test)]
mod tests;
