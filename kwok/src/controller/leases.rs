//! Node leases: one task renews the Lease of every managed node, and tells
//! the controller which ones it holds.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::mpsc;

use super::shared::{Change, LeaseMsg, Shared};

/// Holds the leases of the selected nodes (docs/reference/kwok-rules.md §1.4): takes a lease
/// that is free, ours or expired, renews every duration/4 (±4 %), and
/// tells the controller whenever it gains or loses a node.
pub(super) async fn lease_task(shared: Arc<Shared>, mut inbox: mpsc::UnboundedReceiver<LeaseMsg>) {
    let duration = shared.config.node_lease_duration;
    let api: Api<Lease> = Api::namespaced(shared.client.clone(), "kube-node-lease");
    // Per node: its uid and the lease as last written while held.
    let mut nodes: BTreeMap<String, (String, Option<Lease>)> = BTreeMap::new();
    let period = || (duration / 4).mul_f64(0.96 + fastrand::f64() * 0.08);
    let mut next = tokio::time::Instant::now() + period();
    loop {
        tokio::select! {
            msg = inbox.recv() => match msg {
                None => return,
                Some(LeaseMsg::Forget(node)) => { nodes.remove(&node); }
                Some(LeaseMsg::Manage { node, uid }) => {
                    let held = try_hold(&shared, &api, &node, &uid).await;
                    if held.is_some() {
                        let _ = shared.feedback.send(Change::Lease { node: node.clone(), held: true });
                    }
                    nodes.insert(node, (uid, held));
                }
            },
            _ = tokio::time::sleep_until(next) => {
                for (node, (uid, last)) in nodes.iter_mut() {
                    let was = last.is_some();
                    let renewed = match last.take() {
                        Some(lease) => renew(&shared, &api, node, lease).await,
                        None => None,
                    };
                    *last = match renewed {
                        Some(l) => Some(l),
                        None => try_hold(&shared, &api, node, uid).await,
                    };
                    if last.is_some() != was {
                        let _ = shared.feedback.send(Change::Lease { node: node.clone(), held: !was });
                    }
                }
                next = tokio::time::Instant::now() + period();
            }
        }
    }
}

/// The lease's renewal time, now: RFC 3339 with microseconds.
fn renew_time(shared: &Shared) -> String {
    jiff::Timestamp::try_from(shared.clock.now())
        .map(|t| format!("{t:.6}"))
        .unwrap_or_default()
}

/// Renews a lease held since the last write, as the kubelet does: the
/// lease as written then, with a new `renewTime`, replaced in one request
/// (its resourceVersion makes it fail when anyone else wrote it since).
async fn renew(shared: &Shared, api: &Api<Lease>, node: &str, mut lease: Lease) -> Option<Lease> {
    let renew = renew_time(shared);
    let spec = lease.spec.get_or_insert_with(Default::default);
    spec.renew_time = serde_json::from_value(json!(renew)).ok();
    match api.replace(node, &PostParams::default(), &lease).await {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::debug!("renewing the lease of node {node} in one update: {e}");
            None
        }
    }
}

/// Takes or renews one node's lease; false when another controller holds
/// it and it has not expired, or when the API call fails; else the lease
/// as written.
pub(super) async fn try_hold(
    shared: &Shared,
    api: &Api<Lease>,
    node: &str,
    uid: &str,
) -> Option<Lease> {
    let config = &shared.config;
    let now = shared.clock.now();
    let current = match api.get_opt(node).await {
        Ok(l) => l,
        Err(e) => {
            tracing::debug!("reading the lease of node {node}: {e}");
            return None;
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
            return None;
        }
        transitions += 1;
    }
    let renew = renew_time(shared);
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
        Ok(l) => Some(l),
        Err(e) => {
            tracing::debug!("renewing the lease of node {node}: {e}");
            None
        }
    }
}
