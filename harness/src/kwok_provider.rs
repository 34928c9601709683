//! The ConfigMaps that upstream's kwok cloud provider (and ours) reads in
//! `kube-system`: its configuration (node groups by the `kwok-nodegroup`
//! label, templates from a ConfigMap) and the group templates, each a Node
//! whose annotations give the group's name and size bounds. The suite's
//! scenarios and the what-if both describe their node groups this way.

use serde_json::{Value, json};

/// The provider's configuration: groups by [`GROUP_LABEL`], templates
/// from [`TEMPLATES_CONFIG_MAP`], no provider taint on new nodes.
const PROVIDER_CONFIG: &str = "readNodesFrom: configmap\nnodegroups:\n  fromNodeLabelKey: kwok-nodegroup\nnodes:\n  skipTaint: true\nconfigmap:\n  name: kwok-provider-templates\n";

/// Name of the ConfigMap holding the node group templates.
pub const TEMPLATES_CONFIG_MAP: &str = "kwok-provider-templates";

/// The node label naming a node's group.
pub const GROUP_LABEL: &str = "kwok-nodegroup";

/// Template (and node) annotation: the group's name as given (without it
/// upstream's kwok provider names the group `<label value>-<unix seconds>`).
pub const GROUP_NAME_ANNOTATION: &str = "cluster-autoscaler.kwok.nodegroup/name";

/// The template annotation of a size bound: `min-count`, `max-count` or
/// `desired-count`.
pub fn size_annotation(bound: &str) -> String {
    format!("cluster-autoscaler.kwok.nodegroup/{bound}")
}

/// The provider's configuration ConfigMap.
pub fn provider_config_map() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kwok-provider-config", "namespace": "kube-system"},
        "data": {"config": PROVIDER_CONFIG}})
}

/// The templates ConfigMap holding `templates` (Nodes).
pub fn templates_config_map(templates: Vec<Value>) -> Value {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": templates});
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": TEMPLATES_CONFIG_MAP, "namespace": "kube-system"},
        "data": {"templates": list.to_string()}})
}
