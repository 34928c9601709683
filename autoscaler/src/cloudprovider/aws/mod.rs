//! The `aws` cloud provider (upstream's `cloudprovider/aws`): node groups
//! are EC2 Auto Scaling groups, reached with the official AWS SDK.
//!
//! - **Groups**: the ASGs named by `--nodes=<min>:<max>:<name>` (the flag's
//!   min and max win over the ASG's) and those carrying every tag of
//!   `--node-group-auto-discovery=asg:tag=<key>[=<value>],...`
//!   ([`autodiscovery`]). A group's id is the ASG's name.
//! - **Reading** ([`AwsProvider::refresh`]): every minute (and on the loop
//!   after a deletion) DescribeAutoScalingGroups rebuilds the cache: sizes,
//!   zones, instances, tags, and each group's instance type (launch
//!   configuration, launch template version, or a mixed instances policy's
//!   first override; cached 20 minutes). An ASG whose desired capacity
//!   exceeds its instances gets placeholder instances
//!   (`i-placeholder-<asg>-<n>`); when its newest scaling activities since
//!   our last resize failed (insufficient capacity, a quota), they carry
//!   upstream's OutOfResource error `placeholder-cannot-be-fulfilled`, so
//!   the scale-up is abandoned and the group backed off.
//! - **Writing**: SetDesiredCapacity to grow (and to drop placeholders),
//!   TerminateInstanceInAutoScalingGroup with `ShouldDecrementDesiredCapacity`
//!   to remove a node. Throttling is retried by the SDK; an error that
//!   remains fails the action with the error AWS gave (a `cloudProviderError`,
//!   as upstream).
//! - **Nodes ↔ instances**: a node's `spec.providerID` is
//!   `aws:///<zone>/<instance id>`.
//! - **Scale from zero** ([`template`]): the instance type's vCPUs, memory
//!   and GPUs from the shipped table (else DescribeInstanceTypes), the
//!   generic labels, and the `k8s.io/cluster-autoscaler/node-template/`
//!   label, taint and resource tags.
//! - **Bad tags**: an ASG whose node template tags do not parse is no node
//!   group (no scale action on it), said once in an error log and a
//!   Warning event `InvalidNodeGroupTag` on the status ConfigMap naming the
//!   ASG and the tag; the other groups keep working.
//!
//! Not implemented: EKS managed node group lookups, instance requirements
//! (attribute-based instance types), `--cloud-config` service overrides.

mod api;
pub mod autodiscovery;
mod ids;
mod instance_types;
mod nodegroup;
pub mod shape;
mod state;
pub mod template;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube::Client;

use super::{CloudError, CloudProvider, NodeGroup, lock};
use crate::events::{EventReason, EventRecorder, ObjectRef};

pub use api::{Activity, Asg, AsgInstance, AwsApi, AwsError, Connection, LaunchSpec, http_client};
use ids::provider_id_of;
pub use ids::{CANNOT_BE_FULFILLED, PLACEHOLDER_PREFIX, parse_provider_id, provider_id};
pub use nodegroup::AwsNodeGroup;
pub use state::Settings;
use state::{Cache, Group, InstanceTypeError, InstanceTypeOf, Shared};

/// The GPU label of this provider.
pub const GPU_LABEL: &str = "k8s.amazonaws.com/accelerator";
/// The GPU types upstream's AWS provider knows.
pub const GPU_TYPES: [&str; 8] = [
    "nvidia-tesla-k80",
    "nvidia-tesla-p100",
    "nvidia-tesla-v100",
    "nvidia-tesla-t4",
    "nvidia-tesla-a100",
    "nvidia-a10g",
    "nvidia-l4",
    "nvidia-l40s",
];
/// How often the cache is rebuilt (upstream's refresh interval).
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(60);
/// How long an ASG's instance type is kept.
const INSTANCE_TYPE_TTL: Duration = Duration::from_secs(20 * 60);

/// The `aws` provider.
#[derive(Clone)]
pub struct AwsProvider {
    shared: Arc<Shared>,
}

impl AwsProvider {
    /// Connects to AWS and reads the groups once (a failure is fatal, as
    /// upstream's first refresh). `client` is the cluster's, for events.
    pub async fn new(
        client: Client,
        clock: simclock::Clock,
        settings: Settings,
    ) -> Result<Self, CloudError> {
        if settings.static_groups.is_empty() && settings.discovery.is_empty() {
            tracing::warn!(
                "no ASGs: neither --nodes nor --node-group-auto-discovery=asg:tag=... is given"
            );
        }
        let api = AwsApi::connect(&settings.connection)
            .await
            .map_err(|e| CloudError::configuration(format!("connecting to AWS: {e}")))?;
        let events = EventRecorder::new(
            client,
            clock.clone(),
            false,
            ObjectRef::config_map("kube-system", "cluster-autoscaler-status"),
            false,
        );
        let provider = Self {
            shared: Arc::new(Shared {
                api,
                settings,
                clock,
                events,
                cache: Mutex::new(Cache::default()),
                reported: Mutex::new(BTreeSet::new()),
                resize: tokio::sync::Mutex::new(()),
            }),
        };
        provider.regenerate().await?;
        Ok(provider)
    }

    fn group(&self, name: &str) -> AwsNodeGroup {
        AwsNodeGroup {
            shared: self.shared.clone(),
            name: name.to_string(),
        }
    }

    /// Reads every group again and replaces the cache.
    async fn regenerate(&self) -> Result<(), CloudError> {
        let s = &self.shared;
        let now = s.clock.now();
        let names: Vec<String> = s
            .settings
            .static_groups
            .iter()
            .map(|g| g.name.clone())
            .collect();
        let found = s
            .api
            .describe_asgs(&names, &s.settings.discovery)
            .await
            .map_err(|e| CloudError::api(format!("failed to regenerate ASG cache: {e}")))?;
        let mut asgs: BTreeMap<String, Asg> = BTreeMap::new();
        for asg in found {
            asgs.entry(asg.name.clone()).or_insert(asg);
        }
        for spec in &s.settings.static_groups {
            match asgs.get_mut(&spec.name) {
                Some(asg) => (asg.min, asg.max) = (spec.min, spec.max),
                None => tracing::warn!(
                    "ASG {} of --nodes={}:{}:{} does not exist",
                    spec.name,
                    spec.min,
                    spec.max,
                    spec.name
                ),
            }
        }
        let (resized, mut types) = {
            let c = lock(&s.cache);
            (c.resized.clone(), c.types.clone())
        };
        types.retain(|_, (at, _)| now.duration_since(*at).unwrap_or_default() < INSTANCE_TYPE_TTL);
        let mut groups = BTreeMap::new();
        let mut by_instance = HashMap::new();
        for (name, asg) in asgs {
            let key = format!("{:?}", asg.launch);
            let instance_type = match types.get(&key) {
                Some((_, t)) => t.clone(),
                None => {
                    let t = self.instance_type(&asg.launch).await;
                    types.insert(key, (now, t.clone()));
                    t
                }
            };
            let unavailable = if asg.desired > asg.instances.len() {
                tracing::debug!(
                    "Instance group {name} has only {} instances created while requested count is {}. Creating placeholder instances.",
                    asg.instances.len(),
                    asg.desired
                );
                match s.api.scaling_activities(&name).await {
                    Ok(activities) => failed_activity(&activities, resized.get(&name).copied()),
                    Err(e) => {
                        tracing::warn!("reading the scaling activities of ASG {name}: {e}");
                        None
                    }
                }
            } else {
                None
            };
            if let Some(why) = &unavailable {
                tracing::warn!("ASG {name} scaling failed with description: {why}");
                tracing::warn!("Instance group {name} cannot provision any more nodes!");
            }
            let tags = template::parse_tags(&asg.tags);
            if let Err(bad) = &tags {
                s.report(&name, EventReason::InvalidNodeGroupTag, bad.to_string());
            }
            for i in &asg.instances {
                by_instance.insert(i.id.clone(), name.clone());
            }
            groups.insert(
                name,
                Group {
                    asg,
                    tags,
                    unavailable,
                    instance_type,
                },
            );
        }
        let mut c = lock(&s.cache);
        c.groups = groups;
        c.by_instance = by_instance;
        c.types = types;
        c.refreshed = Some(now);
        c.stale = false;
        tracing::debug!("Refreshed ASG list, next refresh after {REFRESH_INTERVAL:?}");
        Ok(())
    }

    /// The instance type an ASG launches, and its shape.
    async fn instance_type(&self, launch: &LaunchSpec) -> InstanceTypeOf {
        let api = &self.shared.api;
        let name = match launch {
            LaunchSpec::Configuration(lc) => api.launch_configuration_type(lc).await,
            LaunchSpec::Template {
                name,
                by_id,
                version,
            } => api.launch_template_type(name, *by_id, version).await,
            LaunchSpec::Mixed {
                overrides,
                template,
            } => match (overrides.first(), template.as_deref()) {
                (Some(t), _) => Ok(t.clone()),
                (
                    None,
                    Some(LaunchSpec::Template {
                        name,
                        by_id,
                        version,
                    }),
                ) => api.launch_template_type(name, *by_id, version).await,
                _ => return Err(InstanceTypeError::MixedNamesNoType),
            },
            LaunchSpec::Unknown => return Err(InstanceTypeError::NoLaunchSpec),
        }?;
        match template::lookup(&name) {
            Some(shape) => Ok((name, shape)),
            None => {
                tracing::info!("instance type {name} is not in the shipped table: asking EC2");
                let shape = api.instance_type(&name).await?;
                Ok((name, shape))
            }
        }
    }
}

/// Why the newest scaling activities since `since` (our last resize; all of
/// the first page when we made none) say AWS cannot add instances.
pub fn failed_activity(activities: &[Activity], since: Option<SystemTime>) -> Option<String> {
    activities
        .iter()
        .take_while(|a| match (since, a.start) {
            (Some(since), Some(start)) => start >= since,
            _ => true,
        })
        .find(|a| a.failed)
        .map(|a| a.message.clone())
}

impl CloudProvider for AwsProvider {
    fn name(&self) -> &str {
        "aws"
    }

    fn node_groups(&self) -> Vec<Arc<dyn NodeGroup>> {
        lock(&self.shared.cache)
            .groups
            .iter()
            .filter(|(_, g)| g.is_node_group())
            .map(|(name, _)| Arc::new(self.group(name)) as Arc<dyn NodeGroup>)
            .collect()
    }

    fn node_group_for_node(&self, node: &Node) -> Result<Option<Arc<dyn NodeGroup>>, CloudError> {
        let id = provider_id_of(node);
        if id.is_empty() {
            tracing::warn!(
                "Node {} has no providerId",
                node.metadata.name.as_deref().unwrap_or_default()
            );
            return Ok(None);
        }
        let Ok((_, instance)) = parse_provider_id(id) else {
            return Ok(None);
        };
        let c = lock(&self.shared.cache);
        Ok(c.by_instance
            .get(instance)
            .filter(|name| c.groups.get(*name).is_some_and(Group::is_node_group))
            .map(|name| Arc::new(self.group(name)) as Arc<dyn NodeGroup>))
    }

    fn has_instance(&self, node: &Node) -> Result<bool, CloudError> {
        let disabled = node
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("k8s.io/cluster-autoscaler-enabled"))
            .is_some_and(|v| v == "false");
        if disabled {
            return Ok(false);
        }
        let id = provider_id_of(node);
        let (_, instance) = parse_provider_id(id)?;
        if lock(&self.shared.cache).by_instance.contains_key(instance) {
            Ok(true)
        } else {
            Err(CloudError::provider(format!(
                "node is not present in aws: could not find instance {id}"
            )))
        }
    }

    fn gpu_label(&self) -> String {
        GPU_LABEL.to_string()
    }

    fn available_gpu_types(&self) -> BTreeSet<String> {
        GPU_TYPES.iter().map(|t| t.to_string()).collect()
    }

    fn refresh(&self) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async move {
            let due = {
                let c = lock(&self.shared.cache);
                let now = self.shared.clock.now();
                c.stale
                    || c.refreshed.is_none_or(|at| {
                        now.duration_since(at).unwrap_or_default() >= REFRESH_INTERVAL
                    })
            };
            if !due {
                return Ok(());
            }
            self.regenerate().await.inspect_err(|e| {
                tracing::error!("Failed to regenerate ASG cache: {e}");
            })
        })
    }
}
