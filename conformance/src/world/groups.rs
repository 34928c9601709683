//! The node groups a scenario declares ([`GroupSpec`]) and the kwok
//! provider's ConfigMaps made of them: its configuration, the group
//! templates, the priority expander's priorities.

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

use harness::kwok_provider::{GROUP_LABEL, GROUP_NAME_ANNOTATION, size_annotation};
pub use harness::kwok_provider::{TEMPLATES_CONFIG_MAP, provider_config_map};

/// Cluster API mode: where a group advertises its nodes' capacity for scale
/// from zero ([`crate::capi`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ZeroCapacity {
    /// The `capacity.cluster-autoscaler.kubernetes.io/*` annotations on
    /// the MachineDeployment (the usual way).
    #[default]
    Annotations,
    /// The infrastructure template's `status.capacity` and
    /// `status.nodeInfo` only.
    TemplateStatus,
    /// Both (the annotations should win).
    Both,
    /// Neither: the group cannot scale from zero.
    Nowhere,
}

/// A node group declared by a scenario.
#[derive(Debug, Clone)]
pub struct GroupSpec {
    /// Group name (the `kwok-nodegroup` label value).
    pub name: String,
    /// CPU per node.
    pub cpu: String,
    /// Memory per node.
    pub memory: String,
    /// Min size.
    pub min: usize,
    /// Max size.
    pub max: usize,
    /// Nodes at start.
    pub initial: usize,
    /// Extra node labels.
    pub labels: serde_json::Map<String, Value>,
    /// Node taints (`key=value:Effect`).
    pub taints: Vec<Value>,
    /// Extra template annotations (faults, ...).
    pub annotations: serde_json::Map<String, Value>,
    /// Extra allocatable resources (GPUs, ...).
    pub resources: serde_json::Map<String, Value>,
    /// Cluster API mode: where the group advertises its capacity.
    pub zero_capacity: ZeroCapacity,
    /// Cluster API mode: the scenario's own MachineDeployment annotations.
    pub machine_deployment_annotations: serde_json::Map<String, Value>,
    /// Devices each node publishes through kwok's fake DRA driver.
    pub devices: Option<Devices>,
}

/// Alike devices on each node of a group (kwok's fake DRA driver).
#[derive(Debug, Clone)]
pub struct Devices {
    /// The driver.
    pub driver: String,
    /// How many per node.
    pub count: usize,
    /// Their `model` attribute, if any.
    pub model: Option<String>,
    /// How long after a node starts the driver publishes them.
    pub publish_delay: Option<std::time::Duration>,
}

impl Devices {
    /// The node annotations kwok's fake driver reads: the devices, and
    /// the publish delay when there is one.
    pub fn annotations(&self) -> serde_json::Map<String, Value> {
        let mut out = serde_json::Map::new();
        out.insert(
            kwok::DRA_DEVICES_ANNOTATION.into(),
            json!(self.annotation()),
        );
        if let Some(d) = self.publish_delay {
            out.insert(
                kwok::DRA_PUBLISH_DELAY_ANNOTATION.into(),
                json!(format!("{}ms", d.as_millis())),
            );
        }
        out
    }

    /// The `kwok.x-k8s.io/dra-devices` annotation value.
    pub fn annotation(&self) -> String {
        let attributes = match &self.model {
            Some(m) => json!({"model": {"string": m}}),
            None => json!({}),
        };
        json!([{"driver": self.driver, "name": "device", "count": self.count,
            "attributes": attributes}])
        .to_string()
    }
}

impl GroupSpec {
    /// A group of `cpu`/`memory` nodes sized `min..=max`, starting at min.
    pub fn new(name: &str, cpu: &str, memory: &str, min: usize, max: usize) -> Self {
        Self {
            name: name.into(),
            cpu: cpu.into(),
            memory: memory.into(),
            min,
            max,
            initial: 0,
            labels: Default::default(),
            taints: Vec::new(),
            annotations: Default::default(),
            resources: Default::default(),
            zero_capacity: Default::default(),
            machine_deployment_annotations: Default::default(),
            devices: None,
        }
    }

    /// The `i`th starting node: the template with a name and a provider
    /// ID, and the annotations the kwok providers give their nodes.
    pub fn starting_node(&self, i: usize) -> Value {
        let mut node = self.template();
        let name = format!("{}-start{i}", self.name);
        node["metadata"]["name"] = json!(name);
        node["metadata"]["labels"]["kubernetes.io/hostname"] = json!(name);
        node["metadata"]["annotations"]["kwok.x-k8s.io/node"] = json!("fake");
        node["spec"]["providerID"] = json!(format!("kwok:{name}"));
        node
    }

    /// The group's template node, as the kwok provider reads it.
    pub fn template(&self) -> Value {
        let mut labels = self.labels.clone();
        labels.insert(GROUP_LABEL.into(), json!(self.name));
        let mut annotations = self.annotations.clone();
        if let Some(d) = &self.devices {
            annotations.extend(d.annotations());
        }
        // The group's name as given: without it upstream's kwok provider
        // names the group `<label value>-<unix seconds>`.
        annotations.insert(GROUP_NAME_ANNOTATION.into(), json!(self.name));
        for (k, v) in [
            ("min-count", self.min),
            ("max-count", self.max),
            ("desired-count", self.initial.max(self.min)),
        ] {
            // A scenario's own value (a malformed one, say) stays.
            annotations
                .entry(size_annotation(k))
                .or_insert_with(|| json!(v.to_string()));
        }
        let mut resources = self.resources.clone();
        resources.insert("cpu".into(), json!(self.cpu));
        resources.insert("memory".into(), json!(self.memory));
        resources.insert("pods".into(), json!("110"));
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.name, "labels": labels, "annotations": annotations},
            "spec": {"taints": self.taints},
            "status": {"capacity": resources, "allocatable": resources}})
    }
}

/// The node group templates as the kwok provider's templates ConfigMap.
pub fn templates_config_map(groups: &[GroupSpec]) -> Value {
    harness::kwok_provider::templates_config_map(groups.iter().map(GroupSpec::template).collect())
}

/// The group label of a node.
pub fn node_group_of(n: &Node) -> Option<&str> {
    n.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(GROUP_LABEL))
        .map(String::as_str)
}

/// The priority expander's ConfigMap (`cluster-autoscaler-priority-expander`).
pub fn priority_expander_config_map(
    priorities: &std::collections::BTreeMap<i64, Vec<String>>,
) -> Value {
    let mut text = String::new();
    for (value, patterns) in priorities {
        text.push_str(&format!("{value}:\n"));
        for p in patterns {
            text.push_str(&format!(
                "  - {}\n",
                serde_json::to_string(p).unwrap_or_default()
            ));
        }
    }
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cluster-autoscaler-priority-expander", "namespace": "kube-system"},
        "data": {"priorities": text}})
}
