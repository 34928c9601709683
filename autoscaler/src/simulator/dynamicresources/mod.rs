//! The simulator's side of dynamic resource allocation (upstream's
//! `simulator/dynamicresources`): what placing a pod with claims, and
//! taking it off, does to the claims, and the slices a node made from a
//! template gets.
//!
//! - Placing ([`reserve`], the scheduler's Reserve): the pod's claims not
//!   allocated yet are allocated from the node's devices (the allocator of
//!   the `predicates` crate), and every claim lists the pod in
//!   `reservedFor`.
//! - Taking off ([`unreserve`]): the pod leaves `reservedFor`; a claim the
//!   pod owns (made from its template), or one nobody else uses, loses its
//!   allocation, so the pod can be placed elsewhere (removal simulation).
//!   A claim of the pod that is not tracked is skipped, as CA 1.37 does.
//! - A node made from a template ([`slices_for_node`]) gets the
//!   template's node-local slices as its own: renamed after it, with pools
//!   of its own (`<pool>-<node>`), so its devices are not the template's
//!   nor another copy's.
//! - [`comparator`]: how far ready nodes' devices are from their
//!   templates' (a metric and a warning).
//!
//! Not simulated: the claims of a template's DaemonSet pods (a template's
//! devices start free; upstream copies pod-owned allocated claims).

pub mod comparator;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use predicates::DraObjects;
use predicates::NodeInfo;
use predicates::dynamicresources::api::{ConsumerReference, ResourceClaim, ResourceSlice};

/// The claims as they are once `pod` is placed on `node` (only those that
/// change); none when its claims cannot be resolved or met there.
pub fn reserve(dra: &DraObjects, pod: &Pod, node: &NodeInfo) -> Vec<ResourceClaim> {
    let allocations = match dra.allocate(pod, node) {
        Ok(a) => a,
        Err(e) => {
            tracing::debug!(
                "claims of pod {}/{} on node {}: {e}",
                pod.metadata.namespace.as_deref().unwrap_or(""),
                pod.metadata.name.as_deref().unwrap_or(""),
                node.name()
            );
            return Vec::new();
        }
    };
    let Ok(claims) = dra.claims_of(pod) else {
        return Vec::new();
    };
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let mut out = Vec::new();
    for (_, claim) in claims {
        let key = claim.key();
        let allocation = allocations.iter().find(|(k, _)| *k == key).map(|(_, a)| a);
        let reserved = claim.reserved_for(&uid);
        if reserved && allocation.is_none() {
            continue;
        }
        let mut c = (*claim).clone();
        if let Some(a) = allocation {
            c.status.allocation = Some(a.clone());
        }
        if !reserved {
            c.status.reserved_for.push(ConsumerReference {
                api_group: String::new(),
                resource: "pods".into(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                uid: uid.clone(),
            });
        }
        out.push(c);
    }
    out
}

/// The claims as they are once `pod` is taken off its node (only those
/// that change). A claim that is not tracked is skipped; the others are
/// released all the same.
pub fn unreserve(dra: &DraObjects, pod: &Pod) -> Vec<ResourceClaim> {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let mut out = Vec::new();
    for claim in dra.tracked_claims_of(pod) {
        if !claim.reserved_for(uid) && !claim.owned_by(uid) {
            continue;
        }
        let mut c = (*claim).clone();
        c.status.reserved_for.retain(|r| r.uid != uid);
        if claim.owned_by(uid) || c.status.reserved_for.is_empty() {
            c.status.allocation = None;
        }
        out.push(c);
    }
    out
}

/// A template's node-local slices, made the node `node`'s own.
pub fn slices_for_node(slices: &[Arc<ResourceSlice>], node: &str) -> Vec<Arc<ResourceSlice>> {
    slices
        .iter()
        .map(|s| {
            let mut s = (**s).clone();
            s.metadata.name = format!("{}-{node}", s.metadata.name);
            s.spec.pool.name = format!("{}-{node}", s.spec.pool.name);
            s.spec.node_name = Some(node.to_string());
            Arc::new(s)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::simulator::{Snapshot, node_from_template};
    use predicates::PodInfo;
    use serde_json::{Value, json};

    fn gpu_node(name: &str, gpus: usize) -> NodeInfo {
        let mut n = NodeInfo::new(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name,
                "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}))
            .unwrap(),
        ));
        let devices: Vec<Value> = (0..gpus)
            .map(|i| json!({"name": format!("gpu-{i}")}))
            .collect();
        n.slices.push(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": format!("{name}-gpu")},
                "spec": {"driver": "gpu.example.com", "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices}}))
            .unwrap(),
        ));
        n
    }

    fn dra(claims: &[&str]) -> Arc<DraObjects> {
        let mut o = DraObjects::default();
        o.classes.insert(
            "gpu".into(),
            Arc::new(
                serde_json::from_value(json!({"metadata": {"name": "gpu"},
                    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}))
                .unwrap(),
            ),
        );
        for c in claims {
            o.insert_claim(Arc::new(
                serde_json::from_value(json!({"metadata": {"name": c, "namespace": "default"},
                    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}))
                .unwrap(),
            ));
        }
        Arc::new(o)
    }

    fn pod(name: &str, claim: &str) -> PodInfo {
        PodInfo::new(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default",
                    "uid": format!("uid-{name}")},
                "spec": {"containers": [{"name": "c", "image": "i"}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}}))
            .unwrap(),
        ))
    }

    fn holder(s: &Snapshot, claim: &str) -> Option<String> {
        let c = &s.dra().claims[&format!("default/{claim}")];
        c.status
            .allocation
            .as_ref()
            .map(|a| a.devices.results[0].pool.clone())
    }

    #[test]
    fn placing_a_pod_allocates_its_claim_and_revert_undoes_it() {
        let mut s = Snapshot::new(vec![gpu_node("n1", 1)]).with_dra(dra(&["a", "b"]));
        s.fork();
        let (a, b) = (pod("a", "a"), pod("b", "b"));
        assert_eq!(s.find_fit(&a, 0, |_| true), Some(0));
        s.add_pod(0, a.clone());
        assert_eq!(holder(&s, "a").as_deref(), Some("n1"));
        assert!(s.dra().claims["default/a"].reserved_for("uid-a"));
        assert_eq!(s.find_fit(&b, 0, |_| true), None, "the one GPU is a's");
        s.revert();
        assert_eq!(holder(&s, "a"), None, "reverted with the pod");
        assert_eq!(s.find_fit(&b, 0, |_| true), Some(0));
    }

    #[test]
    fn taking_a_pod_off_frees_its_devices_for_the_next() {
        let mut s = Snapshot::new(vec![gpu_node("n1", 1)]).with_dra(dra(&["a", "b"]));
        s.add_pod(0, pod("a", "a"));
        s.commit();
        s.fork();
        s.remove_pod(0, "default/a");
        assert_eq!(holder(&s, "a"), None, "no consumer left: deallocated");
        assert_eq!(s.find_fit(&pod("b", "b"), 0, |_| true), Some(0));
        s.revert();
        assert_eq!(holder(&s, "a").as_deref(), Some("n1"));
    }

    #[test]
    fn taking_a_pod_off_releases_its_tracked_claims_when_another_is_gone() {
        let mut s = Snapshot::new(vec![gpu_node("n1", 2)]).with_dra(dra(&["a", "gone"]));
        let x = PodInfo::new(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "x", "namespace": "default",
                    "uid": "uid-x"},
                "spec": {"containers": [{"name": "c", "image": "i"}],
                    "resourceClaims": [{"name": "one", "resourceClaimName": "a"},
                        {"name": "two", "resourceClaimName": "gone"}]}}))
            .unwrap(),
        ));
        s.add_pod(0, x);
        assert_eq!(holder(&s, "a").as_deref(), Some("n1"));
        let mut without = (*s.dra()).clone();
        without.remove_claim("default/gone");
        let mut s = s.with_dra(Arc::new(without));
        s.commit();
        assert!(s.remove_pod(0, "default/x").is_some());
        assert_eq!(
            holder(&s, "a"),
            None,
            "released although its sibling is gone"
        );
        assert!(!s.dra().claims["default/a"].reserved_for("uid-x"));
    }

    #[test]
    fn a_node_from_a_template_has_devices_of_its_own() {
        let template = gpu_node("template-node-for-pool", 1);
        let mut s = Snapshot::new(Vec::new()).with_dra(dra(&["a", "b"]));
        let one = s.add_node(node_from_template(&template, "pool-e-0"));
        let two = s.add_node(node_from_template(&template, "pool-e-1"));
        assert_eq!(
            s.node(one).slices[0].spec.node_name.as_deref(),
            Some("pool-e-0")
        );
        s.add_pod(one, pod("a", "a"));
        assert_eq!(
            s.find_fit(&pod("b", "b"), 0, |_| true),
            Some(two),
            "the second copy's GPU is not the first's"
        );
        assert_eq!(
            holder(&s, "a").as_deref(),
            Some("template-node-for-pool-pool-e-0")
        );
        let no_devices = NodeInfo::new(template.node.clone());
        let mut s = Snapshot::new(Vec::new()).with_dra(dra(&["a"]));
        s.add_node(node_from_template(&no_devices, "pool-e-0"));
        assert_eq!(s.find_fit(&pod("a", "a"), 0, |_| true), None);
    }
}
