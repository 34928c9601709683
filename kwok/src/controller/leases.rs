//! Node leases: one task renews the Lease of every managed node, and tells
//! the controller which ones it holds.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tokio::sync::mpsc;

use super::shared::{Change, LeaseMsg, Shared};

/// Holds the leases of the selected nodes (docs/reference/kwok-rules.md §1.4): takes a lease
/// that is free, ours or expired, renews every duration/4 (±4 %), and
/// tells the controller whenever it gains or loses a node.
pub(super) async fn lease_task(shared: Arc<Shared>, mut inbox: mpsc::UnboundedReceiver<LeaseMsg>) {
    let duration = shared.config.node_lease_duration;
    let api: Api<Lease> = Api::namespaced(shared.client.clone(), "kube-node-lease");
    let mut nodes: BTreeMap<String, (String, bool)> = BTreeMap::new();
    let period = || (duration / 4).mul_f64(0.96 + fastrand::f64() * 0.08);
    let mut next = tokio::time::Instant::now() + period();
    loop {
        tokio::select! {
            msg = inbox.recv() => match msg {
                None => return,
                Some(LeaseMsg::Forget(node)) => { nodes.remove(&node); }
                Some(LeaseMsg::Manage { node, uid }) => {
                    let held = try_hold(&shared, &api, &node, &uid).await;
                    nodes.insert(node.clone(), (uid, held));
                    if held {
                        let _ = shared.feedback.send(Change::Lease { node, held });
                    }
                }
            },
            _ = tokio::time::sleep_until(next) => {
                for (node, (uid, was)) in nodes.iter_mut() {
                    let held = try_hold(&shared, &api, node, uid).await;
                    if held != *was {
                        *was = held;
                        let _ = shared.feedback.send(Change::Lease { node: node.clone(), held });
                    }
                }
                next = tokio::time::Instant::now() + period();
            }
        }
    }
}

/// Takes or renews one node's lease; false when another controller holds
/// it and it has not expired, or when the API call fails.
pub(super) async fn try_hold(shared: &Shared, api: &Api<Lease>, node: &str, uid: &str) -> bool {
    let config = &shared.config;
    let now = shared.clock.now();
    let current = match api.get_opt(node).await {
        Ok(l) => l,
        Err(e) => {
            tracing::debug!("reading the lease of node {node}: {e}");
            return false;
        }
    };
    let spec = current
        .as_ref()
        .and_then(|l| l.spec.clone())
        .unwrap_or_default();
    let holder = spec.holder_identity.unwrap_or_default();
    let mut transitions = spec.lease_transitions.unwrap_or(0);
    if !holder.is_empty() && holder != config.identity {
        let expires = spec.renew_time.map(|t| {
            let secs = u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
            SystemTime::from(t.0) + Duration::from_secs(secs)
        });
        if expires.is_some_and(|e| e > now) {
            return false;
        }
        transitions += 1;
    }
    let renew = jiff::Timestamp::try_from(now)
        .map(|t| format!("{t:.6}"))
        .unwrap_or_default();
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": node, "namespace": "kube-node-lease",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}]},
        "spec": {"holderIdentity": config.identity,
            "leaseDurationSeconds": config.node_lease_duration.as_secs(), "renewTime": renew,
            "leaseTransitions": transitions},
    });
    let params = PatchParams::apply(&config.identity).force();
    match api.patch(node, &params, &Patch::Apply(lease)).await {
        Ok(_) => true,
        Err(e) => {
            tracing::debug!("renewing the lease of node {node}: {e}");
            false
        }
    }
}
