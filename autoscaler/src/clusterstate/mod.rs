//! Cluster state (docs/reference/ca-rules.md §4.6): the readiness of every node, counted per
//! node group and cluster-wide; instances that never registered; scale-up
//! requests in flight and the upcoming nodes they stand for; per-group
//! exponential backoff after failures; and cluster and group health
//! (`--max-total-unready-percentage`, `--ok-total-unready-count`). What the
//! loop reads from each node again and again (readiness, capacity, GPU) is
//! read once per version of the node (`facts`).

mod backoff;
pub mod facts;
mod metrics;
mod nodes;
mod notices;
mod registry;

pub use backoff::{Backoff, BackoffRecord};
pub use facts::{NodeFacts, NodeFactsMemo, cluster_resources};
pub use metrics::update_cluster_metrics;
pub use nodes::{Readiness, node_capacity, node_ready};
pub use notices::{Notice, report_notices, revert_timed_out_scale_ups};
pub use registry::{ClusterStateRegistry, GroupState, NodeCounts, ScaleUpRequest, Settings};
