//! The provider's configuration (upstream's `kwok_config.go`): the
//! `kwok-provider-config` ConfigMap (`readNodesFrom`, grouping, `nodes`,
//! templates reference) and the templates (a `v1 List` or a stream of Nodes).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;
use serde::Deserialize;
use serde_json::Value;

use crate::cloudprovider::CloudError;

/// The `config` key of the provider ConfigMap.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ProviderConfig {
    #[serde(default)]
    pub(super) read_nodes_from: String,
    #[serde(default)]
    pub(super) nodegroups: Option<GroupingConfig>,
    #[serde(default)]
    pub(super) nodes: Option<NodesConfig>,
    #[serde(default)]
    pub(super) configmap: Option<TemplatesRef>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct GroupingConfig {
    #[serde(default)]
    pub(super) from_node_label_key: String,
    #[serde(default)]
    pub(super) from_node_label_annotation: String,
    #[serde(default)]
    pub(super) from_node_annotation: String,
    #[serde(default)]
    pub(super) from_node_annotation_key: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct NodesConfig {
    #[serde(default)]
    pub(super) skip_taint: bool,
    #[serde(default)]
    pub(super) gpu_config: Option<GpuConfig>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct GpuConfig {
    #[serde(default)]
    pub(super) gpu_label_key: String,
    #[serde(default, rename = "availableGPUTypes")]
    pub(super) available_gpu_types: Option<BTreeMap<String, Value>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct TemplatesRef {
    #[serde(default)]
    pub(super) name: String,
    #[serde(default)]
    pub(super) key: String,
}

/// How nodes map to groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Grouping {
    Label(String),
    Annotation(String),
}

impl Grouping {
    pub(super) fn value(&self, node: &Node) -> Option<String> {
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
pub(super) struct Parsed {
    pub(super) from_cluster: bool,
    pub(super) grouping: Grouping,
    pub(super) skip_taint: bool,
    pub(super) gpu_label: String,
    pub(super) gpu_types: BTreeSet<String>,
    pub(super) templates_config_map: String,
    pub(super) templates_key: String,
}

pub(super) fn parse_config(name: &str, text: &str) -> Result<Parsed, CloudError> {
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
pub(super) fn parse_templates(source: &str, text: &str) -> Result<Vec<Node>, CloudError> {
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
