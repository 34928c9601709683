//! CSI drivers on the testbed's nodes. A real node's kubelet creates its
//! CSINode, and each CSI driver's node plugin adds itself with the volumes
//! the node can attach; kwok nodes have neither. `Given every node runs
//! the CSI driver "d" attaching at most N volumes` starts a
//! [`spawn_registrar`] task that plays both: every node, existing or new,
//! gets a CSINode (named as the node, owned by it) listing the drivers.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::CSINode;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt, api::PostParams};
use serde_json::json;

/// A CSI driver every node runs: its name and how many volumes it attaches
/// to one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiDriver {
    /// The driver's name (`ebs.csi.aws.com`).
    pub name: String,
    /// `allocatable.count` on each node.
    pub max_volumes: i32,
}

/// The CSINode a node's kubelet and driver plugins would make.
fn csi_node(node: &Node, drivers: &[CsiDriver]) -> serde_json::Value {
    let name = node.name_any();
    let drivers: Vec<serde_json::Value> = drivers
        .iter()
        .map(|d| {
            json!({"name": d.name, "nodeID": name, "topologyKeys": null,
                "allocatable": {"count": d.max_volumes}})
        })
        .collect();
    json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {"name": name, "ownerReferences": [{"apiVersion": "v1", "kind": "Node",
            "name": name, "uid": node.uid().unwrap_or_default()}]},
        "spec": {"drivers": drivers}
    })
}

/// Gives every node, now and to come, a CSINode with `drivers`, until the
/// task is aborted.
pub fn spawn_registrar(client: Client, drivers: Vec<CsiDriver>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let csi: Api<CSINode> = Api::all(client.clone());
        let mut nodes =
            watcher::watcher(Api::<Node>::all(client), watcher::Config::default()).boxed();
        while let Some(ev) = nodes.next().await {
            let node = match ev {
                Ok(Event::Apply(n) | Event::InitApply(n)) => n,
                Ok(_) => continue,
                Err(_) => {
                    // The watch retries; the next event is a relist.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            let Ok(obj) = serde_json::from_value::<CSINode>(csi_node(&node, &drivers)) else {
                continue;
            };
            match csi.create(&PostParams::default(), &obj).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => eprintln!("CSI registrar: CSINode {}: {e}", node.name_any()),
            }
        }
    })
}

/// Waits until every node has its CSINode (the registrar's first round),
/// so that the autoscaler's first loop sees them.
pub async fn wait_registered(client: &Client, timeout: Duration) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let nodes = Api::<Node>::all(client.clone())
            .list(&Default::default())
            .await
            .map_err(|e| format!("listing nodes: {e}"))?;
        let csi = Api::<CSINode>::all(client.clone())
            .list(&Default::default())
            .await
            .map_err(|e| format!("listing CSINodes: {e}"))?;
        let missing: Vec<String> = nodes
            .items
            .iter()
            .map(|n| n.name_any())
            .filter(|n| !csi.items.iter().any(|c| c.name_any() == *n))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("nodes without a CSINode: {}", missing.join(", ")));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
