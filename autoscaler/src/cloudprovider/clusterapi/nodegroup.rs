//! One Cluster API node group (upstream's `clusterapi_nodegroup.go`): a
//! MachineDeployment or a MachineSet, sized through its `scale`
//! subresource; nodes are deleted by marking their Machines.

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::options::options_from;
use super::scalefromzero;
use super::snapshot::{
    DELETING_PREFIX, FAILED_PREFIX, GroupDef, PENDING_PREFIX, Snapshot, cluster_of, key_of,
};
use super::state::Shared;
use crate::cloudprovider::{
    CloudError, ErrorClass, ErrorType, Instance, InstanceErrorInfo, InstanceState, NodeGroup,
    NodeGroupOptions, TemplateNodeInfo, lock,
};

/// A handle on one node group; its state is the provider's snapshot.
#[derive(Clone)]
pub struct ClusterApiNodeGroup {
    pub(super) shared: Arc<Shared>,
    pub(super) id: String,
}

impl std::fmt::Debug for ClusterApiNodeGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClusterApiNodeGroup({})", self.id)
    }
}

impl ClusterApiNodeGroup {
    fn def(&self) -> Result<GroupDef, CloudError> {
        lock(&self.shared.snapshot)
            .groups
            .get(&self.id)
            .cloned()
            .ok_or_else(|| CloudError::Failed {
                kind: ErrorType::NodeGroupDoesNotExist,
                message: format!("node group {} does not exist", self.id),
                info: None,
            })
    }

    fn api(&self, def: &GroupDef) -> kube::Api<DynamicObject> {
        self.shared.api(
            def.kind.as_str(),
            &def.object.namespace().unwrap_or_default(),
        )
    }

    /// `spec.replicas` as the `scale` subresource has it now.
    async fn replicas(&self, def: &GroupDef) -> Result<usize, CloudError> {
        let scale = self
            .api(def)
            .get_scale(&def.object.name_any())
            .await
            .map_err(|e| {
                CloudError::api(format!(
                    "failed to fetch resource scale: {} {}: {e}",
                    def.kind.as_str(),
                    key_of(&def.object)
                ))
            })?;
        Ok(scale
            .spec
            .and_then(|s| s.replicas)
            .and_then(|r| usize::try_from(r).ok())
            .unwrap_or(0))
    }

    /// Sets `spec.replicas` through the `scale` subresource, within
    /// min..=max.
    async fn set_size(&self, def: &GroupDef, n: usize) -> Result<(), CloudError> {
        if n > def.max {
            return Err(CloudError::provider(format!(
                "size increase too large - desired:{n} max:{}",
                def.max
            )));
        }
        if n < def.min {
            return Err(CloudError::provider(format!(
                "size decrease too large - desired:{n} min:{}",
                def.min
            )));
        }
        self.api(def)
            .patch_scale(
                &def.object.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": n}})),
            )
            .await
            .map_err(|e| {
                CloudError::api(format!(
                    "scaling {} {} to {n}: {e}",
                    def.kind.as_str(),
                    key_of(&def.object)
                ))
            })?;
        if let Some(g) = lock(&self.shared.snapshot).groups.get_mut(&self.id) {
            g.replicas = Some(n);
        }
        Ok(())
    }

    /// Adds or removes the delete-machine annotation on a Machine.
    async fn mark(&self, machine_key: &str, marked: bool) -> Result<(), CloudError> {
        let (ns, name) = machine_key.split_once('/').unwrap_or(("", machine_key));
        let api = self.shared.api("Machine", ns);
        let mut m = api
            .get(name)
            .await
            .map_err(|e| CloudError::api(format!("reading Machine {machine_key}: {e}")))?;
        let key = self.shared.keys.delete_machine();
        let annotations = m.annotations_mut();
        if marked {
            annotations.insert(key, self.shared.clock.rfc3339());
        } else {
            annotations.remove(&key);
        }
        api.replace(name, &PostParams::default(), &m)
            .await
            .map_err(|e| {
                CloudError::api(format!(
                    "{} Machine {machine_key} for deletion: {e}",
                    if marked { "marking" } else { "unmarking" }
                ))
            })?;
        Ok(())
    }

    /// The Machines of the group: in its namespace, matching its selector
    /// and its cluster.
    fn machines<'a>(&self, snapshot: &'a Snapshot, def: &GroupDef) -> Vec<&'a DynamicObject> {
        let ns = def.object.namespace().unwrap_or_default();
        let selector = apimachinery::labels::LabelSelector::from_value(
            def.object.data.pointer("/spec/selector"),
        )
        .unwrap_or(apimachinery::labels::LabelSelector::Nothing);
        let cluster = def.cluster(&self.shared.keys);
        snapshot
            .machines
            .values()
            .filter(|m| m.namespace().as_deref() == Some(ns.as_str()))
            .filter(|m| selector.matches(m.labels()))
            .filter(|m| cluster.is_empty() || cluster_of(m, &self.shared.keys) == cluster)
            .collect()
    }
}

/// A Machine as an instance (upstream's order: failure, deletion, no
/// node yet, then the providerID). A Machine with a node but no
/// providerID is left out: its node is matched by its annotations.
fn instance(m: &DynamicObject) -> Option<Instance> {
    let ns = m.namespace().unwrap_or_default();
    let name = m.name_any();
    let placeholder = |prefix: &str| format!("{prefix}{ns}_{name}");
    let deleting = m.metadata.deletion_timestamp.is_some();
    let has_node = m.data.pointer("/status/nodeRef").is_some();
    // A failure counts only in the Failed phase (CA 1.37): a leftover
    // message on a Machine that went on is not a failed instance.
    let failed = m.data.pointer("/status/failureMessage").is_some()
        && m.data.pointer("/status/phase").and_then(Value::as_str) == Some("Failed");
    if failed {
        let (state, code, message) = if deleting {
            (
                InstanceState::Deleting,
                "DeletingFailed",
                "Machine deletion failed",
            )
        } else if !has_node {
            (
                InstanceState::Creating,
                "ProvisioningFailed",
                "Machine provisioning failed",
            )
        } else {
            return Some(Instance {
                id: placeholder(FAILED_PREFIX),
                state: None,
                error: None,
            });
        };
        return Some(Instance {
            id: placeholder(FAILED_PREFIX),
            state: Some(state),
            error: Some(InstanceErrorInfo {
                class: ErrorClass::Other,
                code: code.to_string(),
                message: message.to_string(),
            }),
        });
    }
    if deleting {
        return Some(Instance {
            id: placeholder(DELETING_PREFIX),
            state: Some(InstanceState::Deleting),
            error: None,
        });
    }
    if !has_node {
        return Some(Instance {
            id: placeholder(PENDING_PREFIX),
            state: Some(InstanceState::Creating),
            error: None,
        });
    }
    let id = match m.data.pointer("/spec/providerID").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => p.to_string(),
        _ => {
            tracing::warn!("Machine {name:?} has no providerID");
            return None;
        }
    };
    Some(Instance {
        id,
        state: Some(InstanceState::Running),
        error: None,
    })
}

impl NodeGroup for ClusterApiNodeGroup {
    fn id(&self) -> String {
        self.id.clone()
    }

    fn min_size(&self) -> usize {
        self.def().map(|d| d.min).unwrap_or(0)
    }

    fn max_size(&self) -> usize {
        self.def().map(|d| d.max).unwrap_or(0)
    }

    fn target_size(&self) -> Result<usize, CloudError> {
        self.def()?
            .replicas
            .ok_or_else(|| CloudError::provider(format!("{}: unable to find replicas", self.id)))
    }

    fn increase_size(&self, delta: usize) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async move {
            if delta == 0 {
                return Err(CloudError::provider("size increase must be positive"));
            }
            let _resizing = self.shared.resize.lock().await;
            let def = self.def()?;
            let replicas = self.replicas(&def).await?;
            self.set_size(&def, replicas + delta).await
        })
    }

    fn delete_nodes(&self, nodes: Vec<Node>) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async move {
            let _resizing = self.shared.resize.lock().await;
            let def = self.def()?;
            let mut replicas = self.replicas(&def).await?;
            if replicas <= def.min {
                return Err(CloudError::provider(
                    "min size reached, nodes will not be deleted",
                ));
            }
            if replicas < def.min + nodes.len() {
                return Err(CloudError::provider(format!(
                    "unable to delete {} machines in {:?}, machine replicas are {replicas}, minSize is {}",
                    nodes.len(),
                    self.id,
                    def.min
                )));
            }
            for node in &nodes {
                let node_name = node.metadata.name.clone().unwrap_or_default();
                let provider_id = node
                    .spec
                    .as_ref()
                    .and_then(|s| s.provider_id.clone())
                    .unwrap_or_default();
                let machine_key = {
                    let snapshot = lock(&self.shared.snapshot);
                    let key = snapshot
                        .machine_key_of(&self.shared.keys, node)
                        .filter(|k| snapshot.machines.contains_key(k))
                        .ok_or_else(|| {
                            CloudError::provider(format!(
                                "unknown machine for node {provider_id:?}"
                            ))
                        })?;
                    let machine = &snapshot.machines[&key];
                    let group = snapshot.group_of_machine(machine);
                    if group.as_deref() != Some(self.id.as_str()) {
                        return Err(CloudError::provider(format!(
                            "node {node_name:?} doesn't belong to node group {:?}",
                            self.id
                        )));
                    }
                    if machine.metadata.deletion_timestamp.is_some() {
                        // Already going: its set counts it no more.
                        continue;
                    }
                    key
                };
                self.mark(&machine_key, true).await?;
                if let Err(e) = self.set_size(&def, replicas - 1).await {
                    if let Err(undo) = self.mark(&machine_key, false).await {
                        tracing::warn!("{undo}");
                    }
                    return Err(e);
                }
                replicas -= 1;
            }
            Ok(())
        })
    }

    fn decrease_target_size(&self, delta: i64) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async move {
            if delta >= 0 {
                return Err(CloudError::provider("size decrease must be negative"));
            }
            let _resizing = self.shared.resize.lock().await;
            let def = self.def()?;
            let size = self.replicas(&def).await?;
            let existing = self
                .nodes()?
                .iter()
                .filter(|i| {
                    ![PENDING_PREFIX, DELETING_PREFIX, FAILED_PREFIX]
                        .iter()
                        .any(|p| i.id.starts_with(p))
                })
                .count();
            let decrease = usize::try_from(delta.unsigned_abs()).unwrap_or(usize::MAX);
            if size < existing + decrease {
                return Err(CloudError::provider(format!(
                    "node group {}: attempt to delete existing nodes currentReplicas:{size} delta:{delta} existingNodes: {existing}",
                    def.object.name_any()
                )));
            }
            self.set_size(&def, size - decrease).await
        })
    }

    fn nodes(&self) -> Result<Vec<Instance>, CloudError> {
        let def = self.def()?;
        let snapshot = lock(&self.shared.snapshot);
        let machines = self.machines(&snapshot, &def);
        Ok(machines.into_iter().filter_map(instance).collect())
    }

    fn template_node_info(&self) -> Result<TemplateNodeInfo, CloudError> {
        let def = self.def()?;
        let Some(capacity) = def.capacity.as_ref() else {
            return Err(CloudError::NotImplemented);
        };
        scalefromzero::template_node(
            &def.object,
            capacity,
            &self.shared.settings.default_arch,
            &self.shared.clock.rfc3339(),
        )
        .map_err(|e| CloudError::provider(format!("template node of {}: {e}", self.id)))
    }

    fn get_options(
        &self,
        defaults: &NodeGroupOptions,
    ) -> Result<Option<NodeGroupOptions>, CloudError> {
        let def = self.def()?;
        Ok(options_from(
            def.object.annotations(),
            &self.shared.keys,
            &self.id,
            defaults,
        ))
    }

    fn debug(&self) -> String {
        match self.def() {
            Ok(d) => format!(
                "{} (min: {}, max: {}, replicas: {})",
                self.id,
                d.min,
                d.max,
                d.replicas.unwrap_or(0)
            ),
            Err(e) => format!("{} ({e})", self.id),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn machine(status: Value) -> DynamicObject {
        serde_json::from_value(
            json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
            "metadata": {"name": "m", "namespace": "ns"},
            "spec": {"providerID": "kwok://node-m"}, "status": status}),
        )
        .unwrap()
    }

    #[test]
    fn a_failure_message_counts_only_in_the_failed_phase() {
        let failed = instance(&machine(
            json!({"phase": "Failed", "failureMessage": "boom"}),
        ))
        .unwrap();
        assert_eq!(failed.id, "failed-machine-ns_m");
        assert_eq!(failed.state, Some(InstanceState::Creating));
        assert_eq!(failed.error.unwrap().code, "ProvisioningFailed");
        // A message left over while the Machine goes on provisioning.
        let pending = instance(&machine(
            json!({"phase": "Provisioning", "failureMessage": "transient"}),
        ))
        .unwrap();
        assert_eq!(pending.id, "pending-machine-ns_m");
        assert_eq!(pending.state, Some(InstanceState::Creating));
        assert!(pending.error.is_none());
        // And once it has its node.
        let running = instance(&machine(
            json!({"phase": "Running", "failureMessage": "transient",
            "nodeRef": {"kind": "Node", "name": "node-m"}}),
        ))
        .unwrap();
        assert_eq!(running.id, "kwok://node-m");
        assert_eq!(running.state, Some(InstanceState::Running));
    }
}
