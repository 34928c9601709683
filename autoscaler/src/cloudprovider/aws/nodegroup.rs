//! One ASG as a node group (upstream's `AwsNodeGroup`): its size is the
//! desired capacity; nodes go by TerminateInstanceInAutoScalingGroup.

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;

use super::ids::{
    CANNOT_BE_FULFILLED, PLACEHOLDER_PREFIX, parse_provider_id, provider_id, provider_id_of,
};
use super::state::{Group, Shared};
use super::template;
use crate::cloudprovider::{
    CloudError, ErrorClass, ErrorType, Instance, InstanceErrorInfo, InstanceState, NodeGroup,
    NodeGroupOptions, TemplateNodeInfo, lock,
};

/// Lifecycle states of an instance already on its way out.
const TERMINATING: [&str; 4] = [
    "Terminated",
    "Terminating",
    "Terminating:Wait",
    "Terminating:Proceed",
];

/// A handle on one ASG; its state is the provider's cache.
#[derive(Clone)]
pub struct AwsNodeGroup {
    pub(super) shared: Arc<Shared>,
    pub(super) name: String,
}

impl std::fmt::Debug for AwsNodeGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AwsNodeGroup({})", self.name)
    }
}

impl AwsNodeGroup {
    fn group(&self) -> Result<Group, CloudError> {
        lock(&self.shared.cache)
            .groups
            .get(&self.name)
            .cloned()
            .ok_or_else(|| CloudError::Failed {
                kind: ErrorType::NodeGroupDoesNotExist,
                message: format!("ASG {} does not exist", self.name),
                info: None,
            })
    }

    /// SetDesiredCapacity, then the cache follows.
    async fn set_desired(&self, desired: usize) -> Result<(), CloudError> {
        let started = self.shared.clock.now();
        tracing::info!("Setting asg {} size to {desired}", self.name);
        self.shared
            .api
            .set_desired_capacity(&self.name, desired)
            .await
            .map_err(|e| CloudError::provider(e.to_string()))?;
        let mut c = lock(&self.shared.cache);
        c.resized.insert(self.name.clone(), started);
        if let Some(g) = c.groups.get_mut(&self.name) {
            g.asg.desired = desired;
        }
        Ok(())
    }

    /// The placeholder instance ids of this group start with this.
    fn placeholder_prefix(&self) -> String {
        format!("{PLACEHOLDER_PREFIX}{}-", self.name)
    }
}

impl NodeGroup for AwsNodeGroup {
    fn id(&self) -> String {
        self.name.clone()
    }

    fn min_size(&self) -> usize {
        self.group().map(|g| g.asg.min).unwrap_or(0)
    }

    fn max_size(&self) -> usize {
        self.group().map(|g| g.asg.max).unwrap_or(0)
    }

    fn target_size(&self) -> Result<usize, CloudError> {
        self.group().map(|g| g.asg.desired)
    }

    fn increase_size(&self, delta: usize) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async move {
            if delta == 0 {
                return Err(CloudError::provider("size increase must be positive"));
            }
            let _resize = self.shared.resize.lock().await;
            let g = self.group()?;
            let desired = g.asg.desired + delta;
            if desired > g.asg.max {
                return Err(CloudError::provider(format!(
                    "size increase too large - desired:{desired} max:{}",
                    g.asg.max
                )));
            }
            self.set_desired(desired).await
        })
    }

    fn delete_nodes(&self, nodes: Vec<Node>) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async move {
            let _resize = self.shared.resize.lock().await;
            let g = self.group()?;
            if g.asg.desired <= g.asg.min {
                return Err(CloudError::provider(
                    "min size reached, nodes will not be deleted",
                ));
            }
            let mut placeholders = false;
            let mut instances = Vec::new();
            for node in &nodes {
                let node_name = node.metadata.name.as_deref().unwrap_or_default();
                let (_, instance) = parse_provider_id(provider_id_of(node))?;
                if instance.starts_with(&self.placeholder_prefix()) {
                    placeholders = true;
                    continue;
                }
                match lock(&self.shared.cache).by_instance.get(instance) {
                    None => {
                        return Err(CloudError::provider(format!(
                            "{node_name} doesn't belong to a known asg"
                        )));
                    }
                    Some(asg) if *asg != self.name => {
                        return Err(CloudError::provider(format!(
                            "{node_name} belongs to a different asg than {}",
                            self.name
                        )));
                    }
                    Some(_) => instances.push(instance.to_string()),
                }
            }
            if placeholders {
                // Placeholders are desired capacity AWS did not fill: the
                // desired capacity goes back to the instances that exist.
                let asgs = self
                    .shared
                    .api
                    .describe_asgs(std::slice::from_ref(&self.name), &Default::default())
                    .await
                    .map_err(|e| CloudError::api(e.to_string()))?;
                let real = asgs
                    .iter()
                    .find(|a| a.name == self.name)
                    .map_or(0, |a| a.instances.len());
                tracing::info!(
                    "Removing placeholder instances of ASG {}: desired capacity back to {real}",
                    self.name
                );
                self.set_desired(real).await?;
            }
            for instance in instances {
                let state = g
                    .asg
                    .instances
                    .iter()
                    .find(|i| i.id == instance)
                    .map(|i| i.lifecycle.clone())
                    .unwrap_or_default();
                if TERMINATING.contains(&state.as_str()) {
                    tracing::info!(
                        "instance {instance} is already terminating in state {state}, will skip instead"
                    );
                    continue;
                }
                tracing::info!("Terminating EC2 instance: {instance}");
                self.shared
                    .api
                    .terminate_instance(&instance)
                    .await
                    .map_err(|e| CloudError::provider(e.to_string()))?;
                let mut c = lock(&self.shared.cache);
                if let Some(g) = c.groups.get_mut(&self.name) {
                    g.asg.desired = g.asg.desired.saturating_sub(1);
                }
            }
            tracing::debug!(
                "DeleteInstances was called: scheduling an ASG list refresh for next main loop evaluation"
            );
            lock(&self.shared.cache).stale = true;
            Ok(())
        })
    }

    fn decrease_target_size(&self, delta: i64) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async move {
            if delta >= 0 {
                return Err(CloudError::provider("size decrease size must be negative"));
            }
            let _resize = self.shared.resize.lock().await;
            let g = self.group()?;
            let existing = g.asg.instances.len();
            let desired = i64::try_from(g.asg.desired).unwrap_or(i64::MAX) + delta;
            let desired = usize::try_from(desired).ok().filter(|d| *d >= existing);
            match desired {
                Some(d) => self.set_desired(d).await,
                None => Err(CloudError::provider(format!(
                    "attempt to delete existing nodes targetSize:{} delta:{delta} existingNodes: {existing}",
                    g.asg.desired
                ))),
            }
        })
    }

    fn nodes(&self) -> Result<Vec<Instance>, CloudError> {
        let g = self.group()?;
        let mut out: Vec<Instance> = g
            .asg
            .instances
            .iter()
            .map(|i| Instance {
                id: provider_id(&i.zone, &i.id),
                state: None,
                error: None,
            })
            .collect();
        let zone = g.asg.zones.first().cloned().unwrap_or_default();
        for n in g.asg.instances.len()..g.asg.desired {
            let id = provider_id(&zone, &format!("{}{n}", self.placeholder_prefix()));
            out.push(match &g.unavailable {
                None => Instance {
                    id,
                    state: None,
                    error: None,
                },
                Some(why) => Instance {
                    id,
                    state: Some(InstanceState::Creating),
                    error: Some(InstanceErrorInfo {
                        class: ErrorClass::OutOfResources,
                        code: CANNOT_BE_FULFILLED.to_string(),
                        message: format!(
                            "AWS cannot provision any more instances for this node group: {why}"
                        ),
                    }),
                },
            });
        }
        Ok(out)
    }

    fn template_node_info(&self) -> Result<TemplateNodeInfo, CloudError> {
        let g = self.group()?;
        let tags = g.tags.map_err(|e| CloudError::provider(e.to_string()))?;
        let zone = g.asg.zones.first().ok_or_else(|| {
            CloudError::provider(format!(
                "unable to get first AvailabilityZone for ASG {:?}",
                self.name
            ))
        })?;
        let (instance_type, shape) = g.instance_type.map_err(|e| {
            CloudError::provider(format!(
                "could not get instance type for {}: {e}",
                self.name
            ))
        })?;
        let node = template::template_node(
            &self.name,
            zone,
            &instance_type,
            shape,
            &tags,
            &self.shared.clock.rfc3339(),
        )
        .map_err(|e| CloudError::provider(format!("template node of {}: {e}", self.name)))?;
        Ok(TemplateNodeInfo {
            node,
            pods: vec![crate::cloudprovider::kube_proxy_pod(&self.name)],
            csi: None,
            slices: Vec::new(),
        })
    }

    fn get_options(
        &self,
        defaults: &NodeGroupOptions,
    ) -> Result<Option<NodeGroupOptions>, CloudError> {
        Ok(self
            .group()?
            .tags
            .ok()
            .and_then(|t| t.options.apply(defaults)))
    }
}
