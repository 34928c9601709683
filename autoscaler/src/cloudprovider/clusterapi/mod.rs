//! The `clusterapi` cloud provider (upstream's `cloudprovider/clusterapi`):
//! node groups are Cluster API MachineDeployments, and MachineSets that no
//! MachineDeployment owns, carrying the size annotations
//! `cluster.x-k8s.io/cluster-api-autoscaler-node-group-{min,max}-size`.
//!
//! - **Clusters**: the objects live in the management cluster
//!   (`--cloud-config` is its kubeconfig; without it the workload
//!   cluster's client serves both, unless
//!   `--clusterapi-cloud-config-authoritative`, which means in-cluster);
//!   nodes live in the workload cluster. The API group is `CAPI_GROUP`
//!   (default `cluster.x-k8s.io`, which also prefixes the annotations),
//!   the version `CAPI_VERSION` or the group's preferred version from
//!   discovery, so v1beta1 and v1beta2 both work.
//! - **Reading**: [`ClusterApiProvider::refresh`] (every loop) lists the
//!   MachineDeployments, MachineSets, Machines and the infrastructure
//!   templates they reference, and builds a [`Snapshot`]; the node group
//!   calls read it. Writes go to the live objects: the `scale` subresource
//!   (`{"spec":{"replicas":N}}`, so 0 works, unlike upstream 1.33.0) and,
//!   to delete a node, its Machine annotated
//!   `cluster.x-k8s.io/delete-machine` before the replicas are lowered, so
//!   that the MachineSet deletes that Machine and no other.
//! - **Nodes ↔ Machines**: by `spec.providerID`, compared on its last `/`
//!   segment as upstream normalises it; else by the Node's
//!   `cluster.x-k8s.io/machine` and `cluster.x-k8s.io/cluster-namespace`
//!   annotations. Machines that have no node yet, are being deleted or
//!   have failed (`status.failureMessage` in the `Failed` phase, as CA 1.37
//!   reads it) are instances with upstream's placeholder ids
//!   (`pending-machine-<ns>_<name>`, ...).
//! - **Scale from zero** ([`scalefromzero`]): the capacity annotations win,
//!   else the infrastructure template's `status.capacity` and
//!   `status.nodeInfo`; a group at zero with neither is not a node group,
//!   and says why once (a log line and a Warning event on the object).
//! - **Bad annotations**: a group whose size or capacity annotations do not
//!   parse is left out, with an error log and a Warning event naming the
//!   object and the annotation; the other groups keep working (upstream
//!   drops every group when one annotation is bad).
//!
//! Not implemented: MachinePools.

mod autodiscovery;
mod keys;
mod nodegroup;
mod options;
pub mod scalefromzero;
mod snapshot;
mod state;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

use super::{CloudError, CloudProvider, NodeGroup, lock};
use crate::events::{EventReason, EventRecorder, ObjectRef};

pub use autodiscovery::AutoDiscovery;
pub use keys::Keys;
pub use nodegroup::ClusterApiNodeGroup;
use scalefromzero::Capacity;
pub use snapshot::{
    DELETING_PREFIX, FAILED_PREFIX, GroupDef, PENDING_PREFIX, ScalableKind, Snapshot,
    normalize_provider_id,
};
use snapshot::{cluster_of, key_of, owner_named};
use state::Shared;
pub use state::{DEFAULT_GROUP, Settings};

/// The GPU label of this provider.
pub const GPU_LABEL: &str = "cluster-api/accelerator";

/// The `clusterapi` provider.
#[derive(Clone)]
pub struct ClusterApiProvider {
    shared: Arc<Shared>,
}

impl ClusterApiProvider {
    /// Finds the version to use and reads the objects once. `client` is
    /// the management cluster's.
    pub async fn new(
        client: Client,
        clock: simclock::Clock,
        settings: Settings,
    ) -> Result<Self, CloudError> {
        let group = settings.group.clone();
        let version = match &settings.version {
            Some(v) => v.clone(),
            None => preferred_version(&client, &group).await?,
        };
        tracing::info!("Using version {version:?} for API group {group:?}");
        let resources = client
            .list_api_group_resources(&format!("{group}/{version}"))
            .await
            .map_err(|e| {
                CloudError::configuration(format!(
                    "failed to validate if resource \"machinedeployments\" is available for group {group:?}: {e}"
                ))
            })?;
        let has_deployments = resources
            .resources
            .iter()
            .any(|r| r.name == "machinedeployments");
        let events = EventRecorder::new(
            client.clone(),
            clock.clone(),
            false,
            ObjectRef::config_map("kube-system", "cluster-autoscaler-status"),
            false,
        );
        let provider = Self {
            shared: Arc::new(Shared {
                client,
                keys: Keys {
                    group: group.clone(),
                },
                settings,
                version,
                has_deployments,
                events,
                clock,
                snapshot: Mutex::new(Snapshot::default()),
                reported: Mutex::new(BTreeSet::new()),
                resize: tokio::sync::Mutex::new(()),
            }),
        };
        provider.load().await?;
        Ok(provider)
    }

    fn group(&self, id: &str) -> ClusterApiNodeGroup {
        ClusterApiNodeGroup {
            shared: self.shared.clone(),
            id: id.to_string(),
        }
    }

    async fn list(&self, kind: &str) -> Result<Vec<DynamicObject>, CloudError> {
        let s = &self.shared;
        // Upstream watches the first namespace an auto-discovery spec names.
        let namespace = s
            .settings
            .discovery
            .iter()
            .find_map(|d| d.namespace.clone());
        let resource = s.resource(kind);
        let api: Api<DynamicObject> = match &namespace {
            Some(ns) => Api::namespaced_with(s.client.clone(), ns, &resource),
            None => Api::all_with(s.client.clone(), &resource),
        };
        api.list(&ListParams::default())
            .await
            .map(|l| l.items)
            .map_err(|e| CloudError::api(format!("listing {kind}s: {e}")))
    }

    /// Reads the objects and rebuilds the snapshot.
    async fn load(&self) -> Result<(), CloudError> {
        let s = &self.shared;
        let deployments = if s.has_deployments {
            self.list("MachineDeployment").await?
        } else {
            Vec::new()
        };
        let sets = self.list("MachineSet").await?;
        let machines = self.list("Machine").await?;
        let mut candidates: Vec<(ScalableKind, DynamicObject)> = Vec::new();
        candidates.extend(
            sets.iter()
                .filter(|ms| owner_named(ms, "MachineDeployment").is_none())
                .map(|ms| (ScalableKind::MachineSet, ms.clone())),
        );
        candidates.extend(
            deployments
                .into_iter()
                .map(|md| (ScalableKind::MachineDeployment, md)),
        );
        let templates = self.templates(&candidates).await;
        let mut groups = BTreeMap::new();
        for (kind, o) in candidates {
            let template = template_ref(&o).and_then(|r| templates.get(&r).cloned());
            if let Some(g) = self.group_def(kind, o, template) {
                groups.insert(g.id(), g);
            }
        }
        let mut by_provider_id = HashMap::new();
        let mut machine_map = BTreeMap::new();
        for m in machines {
            if let Some(p) = m.data.pointer("/spec/providerID").and_then(Value::as_str)
                && !p.is_empty()
            {
                by_provider_id.insert(normalize_provider_id(p).to_string(), key_of(&m));
            }
            machine_map.insert(key_of(&m), m);
        }
        *lock(&s.snapshot) = Snapshot {
            groups,
            machines: machine_map,
            by_provider_id,
            sets: sets.into_iter().map(|ms| (key_of(&ms), ms)).collect(),
        };
        Ok(())
    }

    /// The infrastructure templates the candidates reference, read once
    /// per kind and namespace.
    async fn templates(
        &self,
        candidates: &[(ScalableKind, DynamicObject)],
    ) -> HashMap<TemplateRef, Value> {
        let refs: BTreeSet<TemplateRef> = candidates
            .iter()
            .filter_map(|(_, o)| template_ref(o))
            .collect();
        let lists: BTreeSet<(String, String, String)> = refs
            .iter()
            .map(|r| (r.api_version.clone(), r.kind.clone(), r.namespace.clone()))
            .collect();
        let mut out = HashMap::new();
        for (api_version, kind, namespace) in lists {
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
            let resource = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(group, version, &kind),
                &format!("{}s", kind.to_lowercase()),
            );
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.shared.client.clone(), &namespace, &resource);
            match api.list(&ListParams::default()).await {
                Ok(list) => {
                    for t in list.items {
                        let r = TemplateRef {
                            api_version: api_version.clone(),
                            kind: kind.clone(),
                            namespace: namespace.clone(),
                            name: t.name_any(),
                        };
                        out.insert(r, t.data);
                    }
                }
                Err(e) => {
                    tracing::debug!(
                        "Unable to read infrastructure reference, error: listing {kind} in {namespace}: {e}"
                    );
                }
            }
        }
        out
    }

    /// The node group an object makes, or `None` (with why, once, when it
    /// is a mistake rather than a choice).
    fn group_def(
        &self,
        kind: ScalableKind,
        o: DynamicObject,
        template: Option<Value>,
    ) -> Option<GroupDef> {
        let s = &self.shared;
        let keys = &s.keys;
        let cluster = cluster_of(&o, keys);
        if !autodiscovery::allowed(
            &s.settings.discovery,
            &o.namespace().unwrap_or_default(),
            &cluster,
            o.labels(),
        ) {
            return None;
        }
        let annotations = o.annotations();
        if !annotations.contains_key(&keys.min_size())
            && !annotations.contains_key(&keys.max_size())
        {
            return None;
        }
        let (min, max) = match scalefromzero::size_annotations(annotations, keys) {
            Ok(sizes) => sizes,
            Err(e) => {
                s.report(
                    &o,
                    kind,
                    EventReason::InvalidNodeGroupAnnotation,
                    e.to_string(),
                );
                return None;
            }
        };
        if max == 0 || max < min {
            tracing::debug!("nodegroup {} has no scaling capacity, skipping", key_of(&o));
            return None;
        }
        let capacity = match Capacity::of(annotations, template.as_ref()) {
            Ok(c) => c,
            Err(e) => {
                s.report(
                    &o,
                    kind,
                    EventReason::InvalidNodeGroupAnnotation,
                    e.to_string(),
                );
                return None;
            }
        };
        let replicas = o
            .data
            .pointer("/spec/replicas")
            .and_then(Value::as_u64)
            .and_then(|r| usize::try_from(r).ok());
        if replicas == Some(0) && capacity.is_none() {
            s.report(
                &o,
                kind,
                EventReason::ScaleFromZeroUnavailable,
                scalefromzero::UNAVAILABLE.to_string(),
            );
            return None;
        }
        Some(GroupDef {
            kind,
            object: o,
            min,
            max,
            replicas,
            capacity,
            template,
        })
    }
}

/// An infrastructure template reference, resolved to the group's
/// namespace as upstream does.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TemplateRef {
    api_version: String,
    kind: String,
    namespace: String,
    name: String,
}

fn template_ref(o: &DynamicObject) -> Option<TemplateRef> {
    let r = o.data.pointer("/spec/template/spec/infrastructureRef")?;
    let field = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_string);
    Some(TemplateRef {
        api_version: field("apiVersion")?,
        kind: field("kind")?,
        namespace: o.namespace().unwrap_or_default(),
        name: field("name")?,
    })
}

/// The group's preferred version, from discovery.
async fn preferred_version(client: &Client, group: &str) -> Result<String, CloudError> {
    let groups = client.list_api_groups().await.map_err(|e| {
        CloudError::configuration(format!(
            "could not find preferred version for CAPI group {group:?}: failed to get ServerGroups: {e}"
        ))
    })?;
    let found = groups.groups.iter().find(|g| g.name == group).ok_or_else(|| {
        CloudError::configuration(format!(
            "could not find preferred version for CAPI group {group:?}: failed to find API group {group:?}"
        ))
    })?;
    found
        .preferred_version
        .as_ref()
        .map(|v| v.version.clone())
        .or_else(|| found.versions.first().map(|v| v.version.clone()))
        .ok_or_else(|| {
            CloudError::configuration(format!(
                "could not find preferred version for CAPI group {group:?}: no version served"
            ))
        })
}

impl CloudProvider for ClusterApiProvider {
    fn name(&self) -> &str {
        "clusterapi"
    }

    fn node_groups(&self) -> Vec<Arc<dyn NodeGroup>> {
        lock(&self.shared.snapshot)
            .groups
            .keys()
            .map(|id| Arc::new(self.group(id)) as Arc<dyn NodeGroup>)
            .collect()
    }

    fn node_group_for_node(&self, node: &Node) -> Result<Option<Arc<dyn NodeGroup>>, CloudError> {
        let snapshot = lock(&self.shared.snapshot);
        let Some(key) = snapshot.machine_key_of(&self.shared.keys, node) else {
            return Ok(None);
        };
        let Some(machine) = snapshot.machines.get(&key) else {
            return Ok(None);
        };
        Ok(snapshot
            .group_of_machine(machine)
            .map(|id| Arc::new(self.group(&id)) as Arc<dyn NodeGroup>))
    }

    fn has_instance(&self, node: &Node) -> Result<bool, CloudError> {
        let snapshot = lock(&self.shared.snapshot);
        let keys = &self.shared.keys;
        let a = node.metadata.annotations.clone().unwrap_or_default();
        let key = format!(
            "{}/{}",
            a.get(&keys.cluster_namespace())
                .cloned()
                .unwrap_or_default(),
            a.get(&keys.machine()).cloned().unwrap_or_default()
        );
        if snapshot.machines.contains_key(&key) {
            Ok(true)
        } else {
            Err(CloudError::provider(format!(
                "machine not found for node {}",
                node.metadata.name.as_deref().unwrap_or("")
            )))
        }
    }

    fn gpu_label(&self) -> String {
        GPU_LABEL.to_string()
    }

    fn refresh(&self) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(self.load())
    }
}
