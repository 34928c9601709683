//! Templates (upstream's `kwok_helpers.go`): group names and sizes from
//! a template's labels and annotations, and the template as CA sees it
//! (taint, labels, the kube-proxy pod).

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

use super::config::Grouping;
use super::faults::FAULT_ANNOTATION;
use crate::cloudprovider::CloudError;

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

pub(super) fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

pub(super) fn size_annotation(node: &Node, key: &str, default: usize) -> Result<usize, CloudError> {
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
pub(super) fn group_of(node: &Node, grouping: &Grouping) -> Option<String> {
    annotation(node, GROUP_NAME_ANNOTATION)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .or_else(|| grouping.value(node))
}

/// Prepares a template (docs/reference/ca-rules.md §10.4/§10.5): identity cleared, kwok and
/// group annotations, the provider taint unless skipped, status reduced to
/// capacity, allocatable and node info (kwok fills in the rest).
pub(super) fn prepare_template(
    node: &Node,
    group: &str,
    skip_taint: bool,
) -> Result<Node, CloudError> {
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
