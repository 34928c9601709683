//! The `kwok` cloud provider (docs/reference/ca-rules.md §10): node groups made of fake
//! nodes. "Creating an instance" creates a Node object annotated
//! `kwok.x-k8s.io/node: fake` (the kwok controller then makes it Ready);
//! "deleting" deletes the Node object.
//!
//! Configuration is upstream's: ConfigMap `kwok-provider-config` (env
//! `KWOK_PROVIDER_CONFIGMAP`) in `$POD_NAMESPACE`, key `config`, with
//! `readNodesFrom: configmap|cluster`, grouping by `nodegroups.fromNodeLabelKey`
//! or by an annotation, `nodes.skipTaint`, `nodes.gpuConfig`; templates in
//! the ConfigMap `configmap.name`, key `templates` (a `v1 List` or a
//! multi-document stream of Nodes). Sizes come from the template annotations
//! `cluster-autoscaler.kwok.nodegroup/{min,max,desired}-count`.
//!
//! Upstream 1.29's bugs are fixed, each where it applies:
//! - group names are the label/annotation value (or the `.../name`
//!   annotation), without a per-node timestamp, so templates with the same
//!   value always form one group;
//! - `delete_nodes` lowers the target size;
//! - `refresh` re-reads both ConfigMaps (new groups appear, removed ones go,
//!   existing ones keep their target);
//! - the annotation grouping key is accepted under all three spellings
//!   (`fromNodeLabelAnnotation`, the documented `fromNodeAnnotation`, and
//!   master's `fromNodeAnnotationKey`), and the `readNodesFrom` error names
//!   the expected values;
//! - the template is never mutated by a scale-up; new nodes get their own
//!   hostname label.
//!
//! Fault injection ([`Faults`]) makes `increase_size` fail with an error
//! class and code (quota, stock-out), or makes new instances never register
//! (no Node object is created, so CA sees long-unregistered instances).

mod config;
mod faults;
mod nodegroup;
mod state;
mod templates;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::DeleteParams;
use kube::{Api, Client};

use super::{CloudError, CloudProvider, NodeGroup, NodeLister, lock};
use crate::cache::node_memo::NodeVersionMemo;
use config::{parse_config, parse_templates};
pub use faults::{FAULT_ANNOTATION, Fault, FaultError, Faults, parse_fault, quota_exceeded};
pub use nodegroup::KwokNodeGroup;
pub use state::Settings;
use state::{GroupState, Members, Shared, group_state};
pub use templates::{
    DEFAULT_MAX_COUNT, DESIRED_COUNT_ANNOTATION, GROUP_NAME_ANNOTATION, KWOK_NODE_ANNOTATION,
    MAX_COUNT_ANNOTATION, MIN_COUNT_ANNOTATION, PROVIDER_TAINT,
};
use templates::{annotation, group_of};

/// The kwok provider.
#[derive(Clone)]
pub struct KwokProvider {
    shared: Arc<Shared>,
}

impl KwokProvider {
    /// Reads the ConfigMaps and builds the groups. `nodes` is the
    /// autoscaler's node cache (a reflector store).
    pub async fn new(
        client: Client,
        nodes: NodeLister,
        settings: Settings,
    ) -> Result<Self, CloudError> {
        let provider = Self {
            shared: Arc::new(Shared {
                client,
                nodes,
                settings,
                faults: Arc::new(Faults::default()),
                config: Mutex::new(None),
                groups: Mutex::new(BTreeMap::new()),
                refused: Mutex::new(BTreeSet::new()),
                loaded_from: Mutex::new(None),
                group_names: NodeVersionMemo::default(),
                members: Mutex::new(Members::default()),
            }),
        };
        provider.load().await?;
        provider.create_desired().await?;
        Ok(provider)
    }

    /// The fault-injection hook.
    pub fn faults(&self) -> Arc<Faults> {
        self.shared.faults.clone()
    }

    async fn read_config_map(&self, name: &str) -> Result<ConfigMap, CloudError> {
        let api: Api<ConfigMap> =
            Api::namespaced(self.shared.client.clone(), &self.shared.settings.namespace);
        api.get(name).await.map_err(|e| {
            CloudError::configuration(format!(
                "failed to get configmap '{name}' in namespace {}: {e}",
                self.shared.settings.namespace
            ))
        })
    }

    /// (Re)reads the configuration and templates and rebuilds the groups
    /// (a template that does not parse leaves its group out, logged once);
    /// existing groups keep their target size. ConfigMaps unchanged since
    /// the last build leave the groups as they are.
    async fn load(&self) -> Result<(), CloudError> {
        let name = self.shared.settings.config_map.clone();
        let cm = self.read_config_map(&name).await?;
        let config_version = cm.metadata.resource_version.clone().unwrap_or_default();
        let built_from = lock(&self.shared.loaded_from).clone();
        let templates_name = lock(&self.shared.config)
            .as_ref()
            .map(|c| c.templates_config_map.clone());
        if let Some((config, templates)) = &built_from
            && *config == config_version
            && let Some(tname) = templates_name
        {
            let tcm = self.read_config_map(&tname).await?;
            if tcm.metadata.resource_version.as_deref() == Some(templates.as_str()) {
                self.shared
                    .group_names
                    .forget_gone(|| (self.shared.nodes)());
                return Ok(());
            }
        }
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get("config"))
            .ok_or_else(|| {
                CloudError::configuration(format!("configmap '{name}' doesn't have 'config' key"))
            })?;
        let parsed = parse_config(&name, text)?;
        let mut templates_version = None;
        let templates: Vec<Node> = if parsed.from_cluster {
            (self.shared.nodes)()
                .iter()
                .map(|n| (**n).clone())
                .collect()
        } else {
            let tname = parsed.templates_config_map.clone();
            let tcm = self.read_config_map(&tname).await?;
            templates_version = tcm.metadata.resource_version.clone();
            let data = tcm.data.unwrap_or_default();
            let key =
                if !parsed.templates_key.is_empty() && data.contains_key(&parsed.templates_key) {
                    parsed.templates_key.clone()
                } else {
                    "templates".to_string()
                };
            let text = data
                .get(&key)
                .filter(|t| !t.trim().is_empty())
                .ok_or_else(|| {
                    CloudError::configuration(format!(
                        "configmap '{tname}' doesn't have 'templates' key"
                    ))
                })?;
            parse_templates(&format!("ConfigMap {tname}, key {key}"), text)?
        };
        let mut built: BTreeMap<String, GroupState> = BTreeMap::new();
        for t in &templates {
            let Some(group) = group_of(t, &parsed.grouping) else {
                continue;
            };
            if let Some(existing) = built.get_mut(&group) {
                // Every further node of a group read from the cluster is
                // one more member (docs/reference/ca-rules.md §10.5 step 3).
                if parsed.from_cluster {
                    existing.target += 1;
                }
                continue;
            }
            // A template that does not parse leaves its group out, and the
            // others go on (upstream's provider exits at start instead).
            match group_state(t, &group, &parsed) {
                Ok(g) => {
                    built.insert(group, g);
                }
                Err(e) => {
                    let message =
                        format!("{e}; node group {group:?} is left out until it is fixed");
                    if lock(&self.shared.refused).insert(message.clone()) {
                        tracing::error!("{message}");
                    }
                }
            }
        }
        let existing = (self.shared.nodes)();
        {
            let mut groups = lock(&self.shared.groups);
            for (id, g) in built.iter_mut() {
                if let Some(old) = groups.get(id) {
                    g.target = old.target;
                    g.phantom = old.phantom.clone();
                    g.failed = old.failed.clone();
                } else if !parsed.from_cluster {
                    // After a restart the group's nodes are already there:
                    // they count towards the target.
                    let members = existing
                        .iter()
                        .filter(|n| annotation(n, GROUP_NAME_ANNOTATION) == Some(id.as_str()))
                        .count();
                    g.target = g.target.max(members.min(g.max));
                }
            }
            *groups = built;
        }
        *lock(&self.shared.config) = Some(parsed);
        self.shared.group_names.clear();
        *lock(&self.shared.loaded_from) = templates_version.map(|t| (config_version, t));
        Ok(())
    }

    /// The group the node's labels or annotation name, as last read from
    /// this node object, else read now.
    fn group_name(&self, node: &Node) -> Option<String> {
        self.shared
            .group_names
            .get(node)
            .unwrap_or_else(|| self.read_group_name(node))
    }

    /// The group the node's labels or annotation name, read once per node
    /// object.
    fn kept_group_name(&self, node: &Arc<Node>) -> Option<String> {
        self.shared
            .group_names
            .get_or_read(node, || self.read_group_name(node))
    }

    fn read_group_name(&self, node: &Node) -> Option<String> {
        lock(&self.shared.config)
            .as_ref()
            .and_then(|c| group_of(node, &c.grouping))
    }

    /// The group `id`, when it exists.
    fn existing(&self, id: Option<String>) -> Option<String> {
        let id = id?;
        lock(&self.shared.groups).contains_key(&id).then_some(id)
    }

    /// Creates the nodes that the initial targets ask for and that do not
    /// exist yet (after a restart, the existing ones count).
    async fn create_desired(&self) -> Result<(), CloudError> {
        let ids: Vec<String> = lock(&self.shared.groups).keys().cloned().collect();
        for id in ids {
            let group = self.group(&id);
            let missing = {
                let groups = lock(&self.shared.groups);
                let Some(g) = groups.get(&id) else { continue };
                g.target.saturating_sub(group.registered().len())
            };
            if missing > 0 {
                group.create_nodes(missing).await.1?;
            }
        }
        Ok(())
    }

    fn group(&self, id: &str) -> KwokNodeGroup {
        KwokNodeGroup {
            shared: self.shared.clone(),
            id: id.to_string(),
        }
    }
}

impl CloudProvider for KwokProvider {
    fn name(&self) -> &str {
        "kwok"
    }

    fn node_groups(&self) -> Vec<Arc<dyn NodeGroup>> {
        lock(&self.shared.groups)
            .keys()
            .map(|id| Arc::new(self.group(id)) as Arc<dyn NodeGroup>)
            .collect()
    }

    fn node_group_for_node(&self, node: &Node) -> Result<Option<Arc<dyn NodeGroup>>, CloudError> {
        if !is_kwok(node) {
            return Ok(None);
        }
        let id = self.existing(self.group_name(node));
        Ok(id.map(|id| Arc::new(self.group(&id)) as Arc<dyn NodeGroup>))
    }

    fn node_group_id(&self, node: &Arc<Node>) -> Result<Option<String>, CloudError> {
        if !is_kwok(node) {
            return Ok(None);
        }
        Ok(self.existing(self.kept_group_name(node)))
    }

    fn has_instance(&self, _node: &Node) -> Result<bool, CloudError> {
        Ok(true)
    }

    fn gpu_label(&self) -> String {
        lock(&self.shared.config)
            .as_ref()
            .map(|c| c.gpu_label.clone())
            .unwrap_or_default()
    }

    fn available_gpu_types(&self) -> BTreeSet<String> {
        lock(&self.shared.config)
            .as_ref()
            .map(|c| c.gpu_types.clone())
            .unwrap_or_default()
    }

    fn refresh(&self) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(self.load())
    }

    fn cleanup(&self) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async move {
            // As upstream: the fake nodes go with the autoscaler.
            let ids: Vec<String> = lock(&self.shared.groups).keys().cloned().collect();
            let api: Api<Node> = Api::all(self.shared.client.clone());
            for id in ids {
                for n in self.group(&id).registered() {
                    let name = n.metadata.name.clone().unwrap_or_default();
                    if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
                        tracing::warn!("kwok provider cleanup: deleting node {name}: {e}");
                    }
                }
            }
            Ok(())
        })
    }
}

/// A node of this provider: its providerID is kwok's.
fn is_kwok(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .is_some_and(|p| p.starts_with("kwok"))
}
