//! `--node-deletion-batcher-interval` (upstream's `NodeDeletionBatcher`,
//! `core/scaledown/actuation/delete_in_batch.go`): with an interval above
//! zero, the nodes of one node group that reach the cloud deletion step
//! are gathered and deleted with one `DeleteNodes` call, made exactly one
//! interval after the first of them arrived (a fixed window: nodes that
//! arrive after it open the next one). Drained and empty nodes share the
//! batch. The call's outcome is every node's: a failure fails them all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use crate::cloudprovider::{CloudError, NodeGroup};

/// One group's nodes waiting for the call, and who waits for its outcome.
struct Bucket {
    group: Arc<dyn NodeGroup>,
    nodes: Vec<Node>,
    waiting: Vec<oneshot::Sender<Result<(), CloudError>>>,
}

/// The buckets, one per node group, and the timers that flush them.
#[derive(Clone)]
pub struct Batcher {
    interval: Duration,
    buckets: Arc<Mutex<HashMap<String, Bucket>>>,
    timers: Arc<Mutex<JoinSet<()>>>,
}

impl Batcher {
    /// A batcher flushing each group's nodes `interval` after the first.
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            buckets: Arc::default(),
            timers: Arc::default(),
        }
    }

    /// Drops every waiting batch, as a process that exits does (with the
    /// actuator's deletions).
    pub fn abort(&self) {
        self.timers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .abort_all();
        self.buckets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Deletes `node` of `group` with the other nodes of its window;
    /// resolves when the call is made, with its outcome.
    pub async fn delete(&self, group: Arc<dyn NodeGroup>, node: Node) -> Result<(), CloudError> {
        let (tx, rx) = oneshot::channel();
        let id = group.id();
        let first = {
            let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
            let bucket = buckets.entry(id.clone()).or_insert_with(|| Bucket {
                group,
                nodes: Vec::new(),
                waiting: Vec::new(),
            });
            bucket.nodes.push(node);
            bucket.waiting.push(tx);
            bucket.nodes.len() == 1
        };
        if first {
            let this = self.clone();
            let id = id.clone();
            let mut timers = self.timers.lock().unwrap_or_else(|e| e.into_inner());
            while timers.try_join_next().is_some() {}
            timers.spawn(async move {
                tokio::time::sleep(this.interval).await;
                this.flush(&id).await;
            });
        }
        rx.await.unwrap_or_else(|_| {
            Err(CloudError::provider(format!(
                "the deletion batch of node group {id} was dropped"
            )))
        })
    }

    /// Deletes a group's window of nodes in one call.
    async fn flush(&self, id: &str) {
        let Some(bucket) = self
            .buckets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id)
        else {
            return;
        };
        let names: Vec<String> = bucket
            .nodes
            .iter()
            .map(|n| n.metadata.name.clone().unwrap_or_default())
            .collect();
        tracing::info!(
            "Deleting {} nodes of node group {id} in one batch: {}",
            names.len(),
            names.join(", ")
        );
        let result = bucket
            .group
            .delete_nodes(bucket.nodes)
            .await
            .map_err(|e| match e {
                CloudError::Failed {
                    kind,
                    message,
                    info,
                } => CloudError::Failed {
                    kind,
                    message: format!("failed to delete nodes from group {id}: {message}"),
                    info,
                },
                other => other,
            });
        for waiting in bucket.waiting {
            let _ = waiting.send(result.clone());
        }
    }
}
