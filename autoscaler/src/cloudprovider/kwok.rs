//! The `kwok` cloud provider (ca-compat §10): node groups made of fake
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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    CloudError, CloudProvider, ErrorClass, Instance, InstanceErrorInfo, InstanceState, NodeGroup,
    NodeLister, TemplateNodeInfo,
};

/// Annotation that names a node's group.
pub const GROUP_NAME_ANNOTATION: &str = "cluster-autoscaler.kwok.nodegroup/name";
/// Template annotation: minimum size (default 0).
pub const MIN_COUNT_ANNOTATION: &str = "cluster-autoscaler.kwok.nodegroup/min-count";
/// Template annotation: maximum size (default 200).
pub const MAX_COUNT_ANNOTATION: &str = "cluster-autoscaler.kwok.nodegroup/max-count";
/// Template annotation: initial target (default min).
pub const DESIRED_COUNT_ANNOTATION: &str = "cluster-autoscaler.kwok.nodegroup/desired-count";
/// kwok's marker annotation.
pub const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";
/// Taint added to templates unless `nodes.skipTaint`.
pub const PROVIDER_TAINT: &str = "kwok-provider";
/// Default max size of a group.
pub const DEFAULT_MAX_COUNT: usize = 200;
/// Template annotation that injects a fault into the group (beyond
/// upstream, for test clusters driven from outside the process):
/// `never-register`, `increase-size-error=<Class>:<code>:<message>`,
/// `creation-error=<Class>:<code>:<message>` (Class `OutOfResource` or
/// `Other`) or `delete-error=<message>`.
pub const FAULT_ANNOTATION: &str = "testbed.cluster-autoscaler.kwok/fault";

/// Parses a [`FAULT_ANNOTATION`] value.
pub fn parse_fault(value: &str) -> Result<Fault, String> {
    if value.trim() == "never-register" {
        return Ok(Fault::NeverRegister);
    }
    let (creation, spec) = match value.trim().split_once('=') {
        Some(("increase-size-error", spec)) => (false, spec),
        Some(("creation-error", spec)) => (true, spec),
        Some(("delete-error", message)) if !message.trim().is_empty() => {
            return Ok(Fault::DeleteFails(message.trim().to_string()));
        }
        _ => {
            return Err(format!(
                "{value:?} is not never-register, increase-size-error=<Class>:<code>:<message>, creation-error=<Class>:<code>:<message> or delete-error=<message>"
            ));
        }
    };
    let mut parts = spec.splitn(3, ':');
    let (Some(class), Some(code), Some(message)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("{value:?}: want <kind>=<Class>:<code>:<message>"));
    };
    let class = match class {
        "OutOfResource" => ErrorClass::OutOfResources,
        "Other" => ErrorClass::Other,
        other => {
            return Err(format!(
                "{value:?}: error class {other:?} is not OutOfResource or Other"
            ));
        }
    };
    let info = InstanceErrorInfo {
        class,
        code: code.to_string(),
        message: message.to_string(),
    };
    Ok(if creation {
        Fault::CreationFails(info)
    } else {
        Fault::IncreaseSizeFails(info)
    })
}

/// Where the provider finds its configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Namespace of the ConfigMaps (`$POD_NAMESPACE`).
    pub namespace: String,
    /// Name of the config ConfigMap (`$KWOK_PROVIDER_CONFIGMAP`).
    pub config_map: String,
}

impl Settings {
    /// From the environment, as upstream: `POD_NAMESPACE` (else the service
    /// account's namespace file) and `KWOK_PROVIDER_CONFIGMAP`.
    pub fn from_env() -> Result<Self, CloudError> {
        let namespace = std::env::var("POD_NAMESPACE")
            .ok()
            .filter(|s| !s.is_empty())
            .or_else(|| {
                std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                    .ok()
                    .map(|s| s.trim().to_string())
            })
            .ok_or_else(|| {
                CloudError::configuration(
                    "kwok provider: POD_NAMESPACE is not set and there is no service account namespace file",
                )
            })?;
        let config_map = std::env::var("KWOK_PROVIDER_CONFIGMAP")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "kwok-provider-config".into());
        Ok(Self {
            namespace,
            config_map,
        })
    }
}

/// The `config` key of the provider ConfigMap.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProviderConfig {
    #[serde(default)]
    read_nodes_from: String,
    #[serde(default)]
    nodegroups: Option<GroupingConfig>,
    #[serde(default)]
    nodes: Option<NodesConfig>,
    #[serde(default)]
    configmap: Option<TemplatesRef>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupingConfig {
    #[serde(default)]
    from_node_label_key: String,
    #[serde(default)]
    from_node_label_annotation: String,
    #[serde(default)]
    from_node_annotation: String,
    #[serde(default)]
    from_node_annotation_key: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodesConfig {
    #[serde(default)]
    skip_taint: bool,
    #[serde(default)]
    gpu_config: Option<GpuConfig>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GpuConfig {
    #[serde(default)]
    gpu_label_key: String,
    #[serde(default, rename = "availableGPUTypes")]
    available_gpu_types: Option<BTreeMap<String, Value>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct TemplatesRef {
    #[serde(default)]
    name: String,
    #[serde(default)]
    key: String,
}

/// How nodes map to groups.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Grouping {
    Label(String),
    Annotation(String),
}

impl Grouping {
    fn value(&self, node: &Node) -> Option<String> {
        let map = match self {
            Self::Label(_) => node.metadata.labels.as_ref(),
            Self::Annotation(_) => node.metadata.annotations.as_ref(),
        };
        let key = match self {
            Self::Label(k) | Self::Annotation(k) => k,
        };
        map.and_then(|m| m.get(key))
            .filter(|v| !v.is_empty())
            .cloned()
    }
}

/// The validated configuration.
#[derive(Debug, Clone)]
struct Parsed {
    from_cluster: bool,
    grouping: Grouping,
    skip_taint: bool,
    gpu_label: String,
    gpu_types: BTreeSet<String>,
    templates_config_map: String,
    templates_key: String,
}

fn parse_config(name: &str, text: &str) -> Result<Parsed, CloudError> {
    let bad = |m: String| {
        CloudError::configuration(format!(
            "kwok provider config (ConfigMap {name}, key config): {m}"
        ))
    };
    let c: ProviderConfig =
        serde_saphyr::from_str(text).map_err(|e| bad(format!("not valid YAML: {e}")))?;
    let from_cluster = match c.read_nodes_from.as_str() {
        "configmap" => false,
        "cluster" => true,
        other => {
            return Err(bad(format!(
                "'readNodesFrom' is invalid (expected: 'configmap' or 'cluster'): {other:?}"
            )));
        }
    };
    let g = c
        .nodegroups
        .ok_or_else(|| bad("'nodegroups' is missing".into()))?;
    let annotation = [
        &g.from_node_label_annotation,
        &g.from_node_annotation,
        &g.from_node_annotation_key,
    ]
    .into_iter()
    .find(|s| !s.is_empty())
    .cloned()
    .unwrap_or_default();
    let grouping = match (g.from_node_label_key.is_empty(), annotation.is_empty()) {
        (false, true) => Grouping::Label(g.from_node_label_key),
        (true, false) => Grouping::Annotation(annotation),
        _ => {
            return Err(bad(
                "please specify either 'nodegroups.fromNodeLabelKey' or 'nodegroups.fromNodeAnnotation' (one of them, not both)".into(),
            ));
        }
    };
    let nodes = c.nodes.unwrap_or_default();
    let (gpu_label, gpu_types) = match nodes.gpu_config {
        None => (String::new(), BTreeSet::new()),
        Some(gc) => match gc.available_gpu_types {
            Some(types) if !gc.gpu_label_key.is_empty() => {
                (gc.gpu_label_key, types.into_keys().collect())
            }
            _ => {
                return Err(bad(
                    "nodes.gpuConfig.gpuLabelKey or nodes.gpuConfig.availableGPUTypes is empty"
                        .into(),
                ));
            }
        },
    };
    let templates = c.configmap.unwrap_or_default();
    if !from_cluster && templates.name.trim().is_empty() {
        return Err(bad(
            "'configmap.name' is required when readNodesFrom is 'configmap'".into(),
        ));
    }
    Ok(Parsed {
        from_cluster,
        grouping,
        skip_taint: nodes.skip_taint,
        gpu_label,
        gpu_types,
        templates_config_map: templates.name,
        templates_key: templates.key,
    })
}

/// Parses the templates: a `v1 List` of Nodes or a multi-document stream
/// (non-Node documents are skipped).
fn parse_templates(source: &str, text: &str) -> Result<Vec<Node>, CloudError> {
    let bad =
        |m: String| CloudError::configuration(format!("kwok provider templates ({source}): {m}"));
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| bad(format!("not valid YAML: {e}")))?;
    let mut nodes = Vec::new();
    let list = docs.len() == 1 && docs[0].get("kind").and_then(Value::as_str) == Some("List");
    let items: Vec<Value> = if list {
        docs[0]
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    } else {
        docs
    };
    for (i, item) in items.into_iter().enumerate() {
        if item.get("kind").and_then(Value::as_str) != Some("Node") {
            if list {
                return Err(bad(format!(
                    "item {i} of the List is not a Node (found something other than nodes in the file)"
                )));
            }
            continue;
        }
        let name = item
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        nodes.push(
            serde_json::from_value(item)
                .map_err(|e| bad(format!("template node {name:?} is not a valid Node: {e}")))?,
        );
    }
    Ok(nodes)
}

/// An injected fault for one node group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// `increase_size` fails with this error (quota, stock-out...).
    IncreaseSizeFails(InstanceErrorInfo),
    /// New instances are accepted but never register (no Node object).
    NeverRegister,
    /// New instances are accepted, then reported as failed to create
    /// (`Creating` with this error), as a cloud out of stock does.
    CreationFails(InstanceErrorInfo),
    /// Deleting registered nodes fails with this message (scale-down
    /// failures); instances that never came up are still given up.
    DeleteFails(String),
}

/// Fault injection for tests and the conformance suite, per group id.
#[derive(Debug, Default)]
pub struct Faults {
    by_group: Mutex<BTreeMap<String, Fault>>,
}

impl Faults {
    /// Injects a fault into a group.
    pub fn set(&self, group: &str, fault: Fault) {
        lock(&self.by_group).insert(group.to_string(), fault);
    }

    /// Removes a group's fault.
    pub fn clear(&self, group: &str) {
        lock(&self.by_group).remove(group);
    }

    fn get(&self, group: &str) -> Option<Fault> {
        lock(&self.by_group).get(group).cloned()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One group's mutable state.
#[derive(Debug, Clone)]
struct GroupState {
    template: Node,
    min: usize,
    max: usize,
    target: usize,
    /// Instances accepted but never registered (fault injection), by name.
    phantom: BTreeSet<String>,
    /// A fault from the template's annotation.
    fault: Option<Fault>,
    /// Instances that failed to be created, by name.
    failed: BTreeMap<String, InstanceErrorInfo>,
}

struct Shared {
    client: Client,
    nodes: NodeLister,
    settings: Settings,
    faults: Arc<Faults>,
    config: Mutex<Option<Parsed>>,
    groups: Mutex<BTreeMap<String, GroupState>>,
}

/// The kwok provider.
#[derive(Clone)]
pub struct KwokProvider {
    shared: Arc<Shared>,
}

/// A handle on one kwok node group.
#[derive(Clone)]
pub struct KwokNodeGroup {
    shared: Arc<Shared>,
    id: String,
}

impl std::fmt::Debug for KwokNodeGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KwokNodeGroup({})", self.id)
    }
}

fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn size_annotation(node: &Node, key: &str, default: usize) -> Result<usize, CloudError> {
    match annotation(node, key) {
        None => Ok(default),
        Some(v) => v.trim().parse::<usize>().map_err(|_| {
            CloudError::configuration(format!(
                "kwok provider: template node {:?}: annotation {key}={v:?} is not a non-negative integer",
                node.metadata.name.as_deref().unwrap_or("")
            ))
        }),
    }
}

/// The group name of a node under this grouping: the name annotation, or
/// the label/annotation value.
fn group_of(node: &Node, grouping: &Grouping) -> Option<String> {
    annotation(node, GROUP_NAME_ANNOTATION)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .or_else(|| grouping.value(node))
}

/// Prepares a template (ca-compat §10.4/§10.5): identity cleared, kwok and
/// group annotations, the provider taint unless skipped, status reduced to
/// capacity, allocatable and node info (kwok fills in the rest).
fn prepare_template(node: &Node, group: &str, skip_taint: bool) -> Result<Node, CloudError> {
    let mut v = serde_json::to_value(node).map_err(|e| CloudError::configuration(e.to_string()))?;
    let name = node.metadata.name.clone().unwrap_or_default();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "resourceVersion",
            "generation",
            "uid",
            "creationTimestamp",
            "managedFields",
            "ownerReferences",
            "deletionTimestamp",
            "finalizers",
        ] {
            meta.remove(k);
        }
        meta.insert("name".into(), json!(format!("kwok-fake-{name}")));
    }
    if let Some(a) = v["metadata"]["annotations"].as_object_mut() {
        a.remove(FAULT_ANNOTATION);
    }
    v["metadata"]["annotations"][KWOK_NODE_ANNOTATION] = json!("fake");
    v["metadata"]["annotations"][GROUP_NAME_ANNOTATION] = json!(group);
    let status = v.get("status").cloned().unwrap_or(json!({}));
    let mut info = status.get("nodeInfo").cloned().unwrap_or(json!({}));
    info["kubeletVersion"] = json!("fake");
    v["status"] = json!({
        "capacity": status.get("capacity").cloned().unwrap_or(json!({})),
        "allocatable": status.get("allocatable").cloned().or_else(|| status.get("capacity").cloned()).unwrap_or(json!({})),
        "nodeInfo": info,
    });
    let spec = v
        .get("spec")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or(json!({}));
    v["spec"] = spec;
    if let Some(s) = v["spec"].as_object_mut() {
        s.remove("providerID");
        s.remove("podCIDR");
        s.remove("podCIDRs");
    }
    if !skip_taint {
        let mut taints = v["spec"]["taints"].as_array().cloned().unwrap_or_default();
        if !taints
            .iter()
            .any(|t| t.get("key").and_then(Value::as_str) == Some(PROVIDER_TAINT))
        {
            taints.push(json!({"key": PROVIDER_TAINT, "value": "true", "effect": "NoSchedule"}));
        }
        v["spec"]["taints"] = json!(taints);
    }
    serde_json::from_value(v).map_err(|e| {
        CloudError::configuration(format!(
            "kwok provider: template node {name:?} cannot be prepared: {e}"
        ))
    })
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

    /// (Re)reads the configuration and templates and rebuilds the groups;
    /// existing groups keep their target size.
    async fn load(&self) -> Result<(), CloudError> {
        let name = self.shared.settings.config_map.clone();
        let cm = self.read_config_map(&name).await?;
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get("config"))
            .ok_or_else(|| {
                CloudError::configuration(format!("configmap '{name}' doesn't have 'config' key"))
            })?;
        let parsed = parse_config(&name, text)?;
        let templates: Vec<Node> = if parsed.from_cluster {
            (self.shared.nodes)()
                .iter()
                .map(|n| (**n).clone())
                .collect()
        } else {
            let tname = parsed.templates_config_map.clone();
            let tcm = self.read_config_map(&tname).await?;
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
                // one more member (ca-compat §10.5 step 3).
                if parsed.from_cluster {
                    existing.target += 1;
                }
                continue;
            }
            let min = size_annotation(t, MIN_COUNT_ANNOTATION, 0)?;
            let max = size_annotation(t, MAX_COUNT_ANNOTATION, DEFAULT_MAX_COUNT)?;
            let desired = size_annotation(t, DESIRED_COUNT_ANNOTATION, min)?;
            let tname = t.metadata.name.as_deref().unwrap_or("");
            if max < min {
                return Err(CloudError::configuration(format!(
                    "kwok provider: template node {tname:?}: max-count {max} is below min-count {min}"
                )));
            }
            if desired < min || desired > max {
                return Err(CloudError::configuration(format!(
                    "kwok provider: template node {tname:?}: desired-count {desired} is outside [{min}, {max}]"
                )));
            }
            let fault = annotation(t, FAULT_ANNOTATION)
                .map(|v| {
                    parse_fault(v).map_err(|e| {
                        CloudError::configuration(format!(
                            "kwok provider: template node {tname:?}: annotation {FAULT_ANNOTATION}: {e}"
                        ))
                    })
                })
                .transpose()?;
            built.insert(
                group.clone(),
                GroupState {
                    fault,
                    failed: BTreeMap::new(),
                    template: prepare_template(t, &group, parsed.skip_taint)?,
                    min,
                    max,
                    target: if parsed.from_cluster { 1 } else { desired },
                    phantom: BTreeSet::new(),
                },
            );
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
        Ok(())
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
                group.create_nodes(missing).await?;
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

impl KwokNodeGroup {
    /// Registered nodes of this group (from the autoscaler's node cache).
    fn registered(&self) -> Vec<Arc<Node>> {
        (self.shared.nodes)()
            .into_iter()
            .filter(|n| annotation(n, GROUP_NAME_ANNOTATION) == Some(self.id.as_str()))
            .filter(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .is_some_and(|p| p.starts_with("kwok"))
            })
            .collect()
    }

    /// The injected fault: the in-process handle's, else the template's.
    fn fault(&self) -> Option<Fault> {
        self.shared
            .faults
            .get(&self.id)
            .or_else(|| self.with_state(|g| g.fault.clone()).ok().flatten())
    }

    fn with_state<R>(&self, f: impl FnOnce(&mut GroupState) -> R) -> Result<R, CloudError> {
        let mut groups = lock(&self.shared.groups);
        let g = groups.get_mut(&self.id).ok_or_else(|| CloudError::Failed {
            kind: super::ErrorType::NodeGroupDoesNotExist,
            message: format!("kwok node group {} does not exist", self.id),
            info: None,
        })?;
        Ok(f(g))
    }

    /// Creates `count` nodes from the template (or phantom instances when
    /// the group is set never to register).
    async fn create_nodes(&self, count: usize) -> Result<(), CloudError> {
        let template = self.with_state(|g| g.template.clone())?;
        let fault = self.fault();
        let api: Api<Node> = Api::all(self.shared.client.clone());
        for _ in 0..count {
            let name = format!("{}-{}", self.id, apimachinery::rand::suffix(5));
            match &fault {
                Some(Fault::NeverRegister) => {
                    self.with_state(|g| g.phantom.insert(name.clone()))?;
                    continue;
                }
                Some(Fault::CreationFails(info)) => {
                    self.with_state(|g| g.failed.insert(name.clone(), info.clone()))?;
                    continue;
                }
                _ => {}
            }
            let mut node = template.clone();
            node.metadata.name = Some(name.clone());
            node.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert("kubernetes.io/hostname".into(), name.clone());
            node.spec.get_or_insert_with(Default::default).provider_id =
                Some(format!("kwok:{name}"));
            api.create(&PostParams::default(), &node)
                .await
                .map_err(|e| {
                    CloudError::api(format!(
                        "kwok node group {}: creating node {name}: {e}",
                        self.id
                    ))
                })?;
        }
        Ok(())
    }
}

impl NodeGroup for KwokNodeGroup {
    fn id(&self) -> String {
        self.id.clone()
    }

    fn min_size(&self) -> usize {
        self.with_state(|g| g.min).unwrap_or(0)
    }

    fn max_size(&self) -> usize {
        self.with_state(|g| g.max).unwrap_or(0)
    }

    fn target_size(&self) -> Result<usize, CloudError> {
        self.with_state(|g| g.target)
    }

    fn increase_size(&self, delta: usize) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async move {
            if delta == 0 {
                return Err(CloudError::provider("size increase must be positive"));
            }
            let (target, max) = self.with_state(|g| (g.target, g.max))?;
            if target + delta > max {
                return Err(CloudError::provider(format!(
                    "size increase too large, desired: {} max: {max}",
                    target + delta
                )));
            }
            if let Some(Fault::IncreaseSizeFails(info)) = self.fault() {
                return Err(CloudError::Failed {
                    kind: super::ErrorType::CloudProvider,
                    message: format!("kwok node group {}: {}", self.id, info.message),
                    info: Some(info),
                });
            }
            self.create_nodes(delta).await?;
            self.with_state(|g| g.target += delta)
        })
    }

    fn delete_nodes(&self, nodes: Vec<Node>) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async move {
            let (target, min) = self.with_state(|g| (g.target, g.min))?;
            if target <= min {
                return Err(CloudError::provider(
                    "min size reached, nodes will not be deleted",
                ));
            }
            if target < min + nodes.len() {
                return Err(CloudError::provider(
                    "can't delete nodes because nodegroup size would go below min size",
                ));
            }
            let api: Api<Node> = Api::all(self.shared.client.clone());
            for node in &nodes {
                let name = node.metadata.name.clone().unwrap_or_default();
                // Instances that never registered are handed over as fake
                // nodes named after the instance.
                let phantom = name.strip_prefix("kwok:").unwrap_or(&name).to_string();
                if self.with_state(|g| {
                    g.phantom.remove(&phantom) || g.failed.remove(&phantom).is_some()
                })? {
                    self.with_state(|g| g.target = g.target.saturating_sub(1))?;
                    continue;
                }
                if annotation(node, KWOK_NODE_ANNOTATION) != Some("fake") {
                    return Err(CloudError::provider(format!(
                        "can't delete node '{name}' because it is not managed by kwok"
                    )));
                }
                if let Some(Fault::DeleteFails(message)) = self.fault() {
                    return Err(CloudError::provider(format!(
                        "kwok node group {}: deleting node {name}: {message}",
                        self.id
                    )));
                }
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => {
                        return Err(CloudError::api(format!(
                            "kwok node group {}: deleting node {name}: {e}",
                            self.id
                        )));
                    }
                }
                self.with_state(|g| g.target = g.target.saturating_sub(1))?;
            }
            Ok(())
        })
    }

    fn decrease_target_size(&self, delta: i64) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async move {
            if delta >= 0 {
                return Err(CloudError::provider("size decrease must be negative"));
            }
            let existing = self.registered().len();
            let target = self.target_size()?;
            let decrease = usize::try_from(delta.unsigned_abs()).unwrap_or(usize::MAX);
            if target < existing + decrease {
                return Err(CloudError::provider(format!(
                    "attempt to delete existing nodes, targetSize: {target} delta: {delta} existingNodes: {existing}"
                )));
            }
            self.with_state(|g| {
                g.target -= decrease;
                // Phantom instances beyond the target are given up.
                while g.phantom.len() > g.target.saturating_sub(existing) {
                    g.phantom.pop_last();
                }
            })
        })
    }

    fn nodes(&self) -> Result<Vec<Instance>, CloudError> {
        let mut out: Vec<Instance> = self
            .registered()
            .iter()
            .map(|n| Instance {
                id: n
                    .spec
                    .as_ref()
                    .and_then(|s| s.provider_id.clone())
                    .unwrap_or_default(),
                state: Some(InstanceState::Running),
                error: None,
            })
            .collect();
        let (phantom, failed) = self.with_state(|g| (g.phantom.clone(), g.failed.clone()))?;
        out.extend(phantom.into_iter().map(|name| Instance {
            id: format!("kwok:{name}"),
            state: Some(InstanceState::Running),
            error: None,
        }));
        out.extend(failed.into_iter().map(|(name, error)| Instance {
            id: format!("kwok:{name}"),
            state: Some(InstanceState::Creating),
            error: Some(error),
        }));
        Ok(out)
    }

    fn template_node_info(&self) -> Result<TemplateNodeInfo, CloudError> {
        let node = self.with_state(|g| g.template.clone())?;
        Ok(TemplateNodeInfo {
            pods: vec![kube_proxy_pod(&self.id)],
            node,
        })
    }
}

/// The kube-proxy pseudo-pod upstream adds to templates (100m CPU).
fn kube_proxy_pod(group: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("kube-proxy-{group}-{}", apimachinery::rand::suffix(5)), "namespace": "kube-system",
            "annotations": {"kubernetes.io/config.mirror": "kube-proxy"}},
        "spec": {"priorityClassName": "system-node-critical", "priority": 2_000_001_000,
            "containers": [{"name": "kube-proxy", "image": "kube-proxy", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Running"},
    }))
    .unwrap_or_default()
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
        let kwok = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .is_some_and(|p| p.starts_with("kwok"));
        if !kwok {
            return Ok(None);
        }
        let grouping = lock(&self.shared.config)
            .as_ref()
            .map(|c| c.grouping.clone());
        let Some(grouping) = grouping else {
            return Ok(None);
        };
        let Some(id) = group_of(node, &grouping) else {
            return Ok(None);
        };
        if !lock(&self.shared.groups).contains_key(&id) {
            return Ok(None);
        }
        Ok(Some(Arc::new(self.group(&id))))
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

/// The class named in an injected error, for tests that build one.
pub fn quota_exceeded(message: &str) -> InstanceErrorInfo {
    InstanceErrorInfo {
        class: ErrorClass::OutOfResources,
        code: "QUOTA_EXCEEDED".into(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn config_errors_name_the_field() {
        let err = |t: &str| {
            parse_config("kwok-provider-config", t)
                .unwrap_err()
                .to_string()
        };
        assert!(
            err("readNodesFrom: label\nnodegroups: {fromNodeLabelKey: a}")
                .contains("expected: 'configmap' or 'cluster'")
        );
        assert!(err("readNodesFrom: cluster").contains("'nodegroups' is missing"));
        assert!(err("readNodesFrom: cluster\nnodegroups: {}").contains("please specify either"));
        assert!(
            err("readNodesFrom: cluster\nnodegroups: {fromNodeLabelKey: a, fromNodeAnnotation: b}")
                .contains("not both")
        );
        assert!(
            err("readNodesFrom: configmap\nnodegroups: {fromNodeLabelKey: a}")
                .contains("'configmap.name' is required")
        );
        assert!(err("readNodesFrom: cluster\nnodegroups: {fromNodeLabelKey: a}\nnodes: {gpuConfig: {gpuLabelKey: x}}").contains("availableGPUTypes is empty"));
        assert!(err("readNodesFrom: [").contains("not valid YAML"));
        for key in [
            "fromNodeLabelAnnotation",
            "fromNodeAnnotation",
            "fromNodeAnnotationKey",
        ] {
            let p = parse_config(
                "c",
                &format!("readNodesFrom: cluster\nnodegroups: {{{key}: eks/ng}}"),
            )
            .unwrap();
            assert_eq!(p.grouping, Grouping::Annotation("eks/ng".into()), "{key}");
        }
    }

    #[test]
    fn templates_parse_as_list_or_stream() {
        let list = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: a}}\n- {apiVersion: v1, kind: Node, metadata: {name: b}}\n";
        assert_eq!(parse_templates("t", list).unwrap().len(), 2);
        let stream = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n";
        assert_eq!(parse_templates("t", stream).unwrap().len(), 1);
        let bad = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: a}}\n";
        assert!(
            parse_templates("t", bad)
                .unwrap_err()
                .to_string()
                .contains("something other than nodes")
        );
    }

    #[test]
    fn fault_annotations() {
        assert_eq!(parse_fault("never-register"), Ok(Fault::NeverRegister));
        assert_eq!(
            parse_fault("delete-error=instance is protected"),
            Ok(Fault::DeleteFails("instance is protected".into()))
        );
        assert!(parse_fault("delete-error=").is_err());
        assert_eq!(
            parse_fault(
                "increase-size-error=OutOfResource:QUOTA_EXCEEDED:quota 'CPUS' exceeded: 8/8"
            ),
            Ok(Fault::IncreaseSizeFails(InstanceErrorInfo {
                class: ErrorClass::OutOfResources,
                code: "QUOTA_EXCEEDED".into(),
                message: "quota 'CPUS' exceeded: 8/8".into(),
            }))
        );
        assert!(
            parse_fault("explode")
                .unwrap_err()
                .contains("is not never-register")
        );
        assert!(
            parse_fault("increase-size-error=Weird:x:y")
                .unwrap_err()
                .contains("error class \"Weird\"")
        );
        assert!(
            parse_fault("increase-size-error=Other")
                .unwrap_err()
                .contains("want <kind>=")
        );
    }

    #[test]
    fn templates_are_prepared_as_upstream() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "m5", "uid": "u", "resourceVersion": "9", "labels": {"pool": "m5"}},
            "spec": {"providerID": "aws:///i-1"},
            "status": {"capacity": {"cpu": "4"}, "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
        let t = prepare_template(&node, "m5", false).unwrap();
        assert_eq!(t.metadata.name.as_deref(), Some("kwok-fake-m5"));
        assert!(t.metadata.uid.is_none() && t.metadata.resource_version.is_none());
        assert_eq!(annotation(&t, KWOK_NODE_ANNOTATION), Some("fake"));
        assert_eq!(annotation(&t, GROUP_NAME_ANNOTATION), Some("m5"));
        let taints = t.spec.as_ref().unwrap().taints.clone().unwrap();
        assert_eq!(taints[0].key, PROVIDER_TAINT);
        assert_eq!(taints[0].effect, "NoSchedule");
        let status = t.status.unwrap();
        assert!(status.conditions.is_none(), "kwok decides readiness");
        assert_eq!(status.node_info.unwrap().kubelet_version, "fake");
        assert!(
            prepare_template(&node, "m5", true)
                .unwrap()
                .spec
                .unwrap()
                .taints
                .is_none()
        );
    }
}
