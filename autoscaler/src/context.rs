//! What every step of the loop shares (upstream's `context.AutoscalingContext`):
//! the API client, the clock, the flags, the provider, the cache, the event
//! recorder and the metrics. Steps borrow it; the state a step keeps across
//! loops is its own (the registry, the planner, the actuator...).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use kube::Client;

use crate::cache::ClusterCache;
use crate::cloudprovider::{CloudProvider, NodeGroup, NodeGroupOptions};
use crate::clusterstate::facts::NodeFactsMemo;
use crate::config::{Flags, Validated};
use crate::events::EventRecorder;
use crate::metrics::Metrics;
use crate::resourcequotas::Quota;
use crate::taints::TaintConfig;

/// The shared context of one autoscaler.
pub struct AutoscalingContext {
    /// The API client.
    pub client: Client,
    /// Real or virtual time.
    pub clock: simclock::Clock,
    /// The command-line flags.
    pub flags: Flags,
    /// What validation derived from them.
    pub validated: Validated,
    /// The cloud provider.
    pub provider: Arc<dyn CloudProvider>,
    /// Nodes, pods and controllers from watches.
    pub cache: Arc<ClusterCache>,
    /// Events.
    pub events: EventRecorder,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Per-group option defaults, from the flags.
    pub group_defaults: NodeGroupOptions,
    /// Startup and status taints (`--startup-taint`, `--status-taint`...).
    pub taints: TaintConfig,
    /// Each node's readiness, capacity and GPU resource, read once per
    /// version of the node.
    pub node_facts: Arc<NodeFactsMemo>,
    /// The valid CapacityQuotas (`--capacity-quotas-enabled`), as the
    /// loop's start read them.
    pub quotas: RwLock<Vec<Quota>>,
}

impl AutoscalingContext {
    /// The valid CapacityQuotas scale-up enforces.
    pub fn capacity_quotas(&self) -> Vec<Quota> {
        self.quotas.read().map(|q| q.clone()).unwrap_or_default()
    }

    /// A group's options: its own (from annotations or tags) over the flags.
    pub fn options_for(&self, g: &dyn NodeGroup) -> NodeGroupOptions {
        g.get_options(&self.group_defaults)
            .ok()
            .flatten()
            .unwrap_or_else(|| self.group_defaults.clone())
    }

    /// The provider's node groups by id.
    pub fn node_groups_by_id(&self) -> HashMap<String, Arc<dyn NodeGroup>> {
        self.provider
            .node_groups()
            .into_iter()
            .map(|g| (g.id(), g))
            .collect()
    }
}
