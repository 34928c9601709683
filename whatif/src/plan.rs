//! What is created in the embedded cluster, in what order, made from the
//! input: each object without what the API server sets (uid, resource
//! version, timestamps, status), nodes as kwok nodes of their groups,
//! pods bound where they were and pending ones pending, ownerReferences
//! kept when the owner is in the input (the loader points them at the
//! owner's new uid) and dropped, counted by owner kind, when it is not.

use std::collections::{BTreeMap, BTreeSet};

use apimachinery::json::Lookup;
use serde_json::{Map, Value, json};

use harness::kwok_provider::{GROUP_LABEL, GROUP_NAME_ANNOTATION};

use crate::groups::{Grouping, is_state_taint};
use crate::input::{Input, Object};
use crate::kinds::Kind;

/// The priority expander's ConfigMap, the one ConfigMap the what-if loads.
pub const PRIORITY_EXPANDER_CONFIG_MAP: (&str, &str) =
    ("kube-system", "cluster-autoscaler-priority-expander");

/// kwok's marker: the nodes it keeps Ready.
const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";

/// Labels of a Job's pods that carry the Job's uid.
pub const JOB_UID_LABELS: &[&str] = &["controller-uid", "batch.kubernetes.io/controller-uid"];

/// Why the input cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A pod is bound to a node the input does not hold.
    #[error("{file}: {pod}: field spec.nodeName: node {node} is not in the input")]
    PodOnMissingNode {
        /// The file.
        file: String,
        /// The pod.
        pod: String,
        /// The node.
        node: String,
    },
    /// Nothing to run on.
    #[error(
        "the input holds no Node and no node group template (/snapshotz's or the kwok provider's): there is no cluster to run"
    )]
    NoNodes,
}

/// An object to create.
#[derive(Debug, Clone)]
pub struct Planned {
    /// Its kind.
    pub kind: Kind,
    /// The object to create.
    pub value: Value,
    /// Its uid in the input, to point its dependents at its new one.
    pub old_uid: Option<String>,
    /// The status to write once it is created: a custom resource's, which
    /// no controller of the cluster rebuilds (a ProvisioningRequest's
    /// conditions, say); for a pod bound to a node, the input's pod IP,
    /// from which the loader writes the Running status kwok's `pod-ready`
    /// stage would (the pod was running where it is bound).
    pub status: Option<Value>,
}

/// What the input held that the cluster will not, counted.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dropped {
    /// Pods that had finished (Succeeded or Failed).
    pub finished_pods: usize,
    /// Objects being deleted.
    pub terminating: usize,
    /// ownerReferences to owners not in the input, by owner kind.
    pub owners_missing: BTreeMap<String, usize>,
    /// ConfigMaps other than the priority expander's.
    pub config_maps: usize,
    /// Nodes that were not Ready in the input (they start Ready).
    pub not_ready_nodes: usize,
}

/// The objects to create, in order.
#[derive(Debug, Default)]
pub struct Plan {
    /// In creation order: owners before what they own.
    pub objects: Vec<Planned>,
    /// What was left out.
    pub dropped: Dropped,
    /// Pods bound to nodes.
    pub bound_pods: usize,
    /// Pods pending.
    pub pending_pods: usize,
}

impl Plan {
    /// Whether anything planned is a DRA object or asks for ResourceClaims
    /// ([`uses_claims`]).
    pub fn uses_claims(&self) -> bool {
        self.objects.iter().any(|o| uses_claims(o.kind, &o.value))
    }
}

/// Whether an object is a DRA object or asks for ResourceClaims: a pod, a
/// workload's pod template, anything with a `resourceClaims` field. A
/// cluster without any runs no ResourceClaim controller.
pub fn uses_claims(kind: Kind, value: &Value) -> bool {
    fn mentions_claims(v: &Value) -> bool {
        match v {
            Value::Object(m) => m
                .iter()
                .any(|(k, v)| k == "resourceClaims" || mentions_claims(v)),
            Value::Array(a) => a.iter().any(mentions_claims),
            _ => false,
        }
    }
    matches!(
        kind,
        Kind::DeviceClass | Kind::ResourceSlice | Kind::ResourceClaimTemplate | Kind::ResourceClaim
    ) || mentions_claims(value)
}

/// The plan for `input` with `grouping`.
pub fn plan(input: &Input, grouping: &Grouping) -> Result<Plan, PlanError> {
    if input.of(Kind::Node).next().is_none() && grouping.groups.is_empty() {
        return Err(PlanError::NoNodes);
    }
    let mut plan = Plan::default();
    let nodes: BTreeSet<&str> = input.of(Kind::Node).map(Object::name).collect();
    let uids: BTreeSet<&str> = input.objects.iter().filter_map(Object::uid).collect();
    let group_of: BTreeMap<&str, &str> = grouping
        .groups
        .iter()
        .flat_map(|g| g.nodes.iter().map(|n| (n.as_str(), g.name.as_str())))
        .collect();
    let mut namespaces: BTreeSet<String> = input
        .of(Kind::Namespace)
        .map(|o| o.name().to_string())
        .collect();
    for kind in Kind::ALL {
        for o in input.of(kind) {
            if o.value.lookup("/metadata/deletionTimestamp").is_some() {
                plan.dropped.terminating += 1;
                continue;
            }
            let mut value = o.value.clone();
            let mut running = false;
            match kind {
                Kind::Pod => {
                    let phase = value.lookup("/status/phase").and_then(Value::as_str);
                    if matches!(phase, Some("Succeeded" | "Failed")) {
                        plan.dropped.finished_pods += 1;
                        continue;
                    }
                    match value.lookup("/spec/nodeName").and_then(Value::as_str) {
                        Some(node) if !nodes.contains(node) => {
                            return Err(PlanError::PodOnMissingNode {
                                file: o.file.to_string(),
                                pod: o.describe(),
                                node: node.into(),
                            });
                        }
                        Some(_) => {
                            plan.bound_pods += 1;
                            running = true;
                        }
                        None => plan.pending_pods += 1,
                    }
                }
                Kind::Node => {
                    if !node_ready(&value) {
                        plan.dropped.not_ready_nodes += 1;
                    }
                    value = kwok_node(&value, group_of.get(o.name()).copied());
                }
                Kind::ConfigMap if (o.namespace(), o.name()) != PRIORITY_EXPANDER_CONFIG_MAP => {
                    plan.dropped.config_maps += 1;
                    continue;
                }
                Kind::Job => without_generated_selector(&mut value),
                _ => {}
            }
            let mut status = None;
            if kind != Kind::Node
                && let Some(s) = value.as_object_mut()
            {
                let was = s.remove("status");
                if kind.is_custom() {
                    status = was;
                } else if running {
                    status = Some(running_seed(was.as_ref()));
                }
            }
            clean_metadata(&mut value, &uids, &mut plan.dropped.owners_missing);
            if kind.namespaced() {
                namespaces.insert(o.namespace().to_string());
            }
            plan.objects.push(Planned {
                kind,
                value,
                old_uid: o.uid().map(str::to_string),
                status,
            });
        }
    }
    // Namespaces the objects name but the input does not list.
    let listed: BTreeSet<String> = input
        .of(Kind::Namespace)
        .map(|o| o.name().to_string())
        .collect();
    let extra: Vec<Planned> = namespaces
        .difference(&listed)
        .map(|ns| Planned {
            kind: Kind::Namespace,
            value: json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            old_uid: None,
            status: None,
        })
        .collect();
    plan.objects.splice(0..0, extra);
    Ok(plan)
}

/// What a bound pod's status keeps of the input's: its pod IP.
fn running_seed(status: Option<&Value>) -> Value {
    match status.and_then(|s| s.get("podIP")).and_then(Value::as_str) {
        Some(ip) => json!({ "podIP": ip }),
        None => json!({}),
    }
}

/// Whether the node's Ready condition is True.
fn node_ready(node: &Value) -> bool {
    node.lookup("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// The node as a kwok node: kwok's marker, and for a node of a group the
/// group's label and annotation and a `kwok:` provider ID (so that the
/// kwok provider counts it in the group); its capacity, allocatable and
/// node info kept, its conditions and addresses left to kwok, the taints
/// of its state now (not ready, unreachable) left out.
fn kwok_node(node: &Value, group: Option<&str>) -> Value {
    let mut node = node.clone();
    let name = node
        .lookup("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let meta = &mut node["metadata"];
    meta["annotations"][KWOK_NODE_ANNOTATION] = json!("fake");
    if let Some(group) = group {
        meta["labels"][GROUP_LABEL] = json!(group);
        meta["annotations"][GROUP_NAME_ANNOTATION] = json!(group);
        node["spec"]["providerID"] = json!(format!("kwok:{name}"));
    }
    if let Some(spec) = node.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("podCIDR");
        spec.remove("podCIDRs");
        if let Some(Value::Array(taints)) = spec.get_mut("taints") {
            taints.retain(|t| !is_state_taint(t));
        }
    }
    let mut status = Map::new();
    for f in ["capacity", "allocatable", "nodeInfo"] {
        if let Some(v) = node.lookup(&format!("/status/{f}")) {
            status.insert(f.into(), v.clone());
        }
    }
    node["status"] = Value::Object(status);
    node
}

/// A Job without the selector and labels the API server generated from
/// its old uid: it generates them again from the new one (and the loader
/// gives its pods the new uid in those labels).
fn without_generated_selector(job: &mut Value) {
    let manual = job
        .lookup("/spec/manualSelector")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if manual {
        return;
    }
    if let Some(spec) = job.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("selector");
    }
    if let Some(labels) = job
        .pointer_mut("/spec/template/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        for l in JOB_UID_LABELS {
            labels.remove(*l);
        }
    }
}

/// The metadata fields the API server sets, which a create must not send.
pub(crate) const SET_BY_THE_SERVER: [&str; 9] = [
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
];

/// Metadata as a client would send it to create the object: without what
/// the API server sets, and without ownerReferences to owners the input
/// does not hold (counted by kind in `missing`).
fn clean_metadata(value: &mut Value, uids: &BTreeSet<&str>, missing: &mut BTreeMap<String, usize>) {
    let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    for f in SET_BY_THE_SERVER {
        meta.remove(f);
    }
    if let Some(Value::Object(a)) = meta.get_mut("annotations") {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    if let Some(Value::Array(refs)) = meta.get_mut("ownerReferences") {
        refs.retain(|r| {
            let known = r
                .get("uid")
                .and_then(Value::as_str)
                .is_some_and(|u| uids.contains(u));
            if !known {
                let kind = r.get("kind").and_then(Value::as_str).unwrap_or("?");
                *missing.entry(kind.to_string()).or_default() += 1;
            }
            known
        });
        if refs.is_empty() {
            meta.remove("ownerReferences");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::groups::infer;

    const NODES: &str = r#"{"apiVersion":"v1","kind":"List","items":[
      {"apiVersion":"v1","kind":"Node","metadata":{"name":"a","uid":"u-a","labels":{"pool":"web"}},
       "spec":{"providerID":"aws:///i-1","podCIDR":"10.0.0.0/24"},
       "status":{"allocatable":{"cpu":"4"},"conditions":[{"type":"Ready","status":"False"}]}},
      {"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-1","namespace":"shop","uid":"u-rs",
       "ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"u-d","controller":true}]},
       "spec":{"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}},
      {"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1-x","namespace":"shop","uid":"u-p",
       "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","uid":"u-rs","controller":true}]},
       "spec":{"nodeName":"a","containers":[{"name":"c","image":"i"}]},"status":{"phase":"Running","podIP":"10.1.0.7"}},
      {"apiVersion":"v1","kind":"Pod","metadata":{"name":"done","namespace":"shop"},
       "spec":{"containers":[{"name":"c","image":"i"}]},"status":{"phase":"Succeeded"}}
    ]}"#;

    #[test]
    fn claims_are_used_by_dra_objects_and_what_asks_for_claims() {
        let mut input = Input::default();
        input.read_text("dump.json", NODES).unwrap();
        let grouping = infer(&input, Some("pool"), &[]).unwrap();
        assert!(!plan(&input, &grouping).unwrap().uses_claims());

        let template = serde_json::json!({"spec": {"template": {"spec": {
            "containers": [{"name": "c"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]}}}});
        assert!(uses_claims(Kind::Deployment, &template));
        let pod = serde_json::json!({"spec": {"containers": [{"name": "c"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}]}});
        assert!(uses_claims(Kind::Pod, &pod));
        assert!(uses_claims(Kind::ResourceSlice, &serde_json::json!({})));
        assert!(!uses_claims(
            Kind::Pod,
            &serde_json::json!({"spec": {"containers": [{"name": "c"}]}})
        ));
    }

    #[test]
    fn objects_are_ordered_cleaned_and_their_missing_owners_counted() {
        let mut input = Input::default();
        input.read_text("dump.json", NODES).unwrap();
        let grouping = infer(&input, Some("pool"), &[]).unwrap();
        let plan = plan(&input, &grouping).unwrap();
        let order: Vec<(Kind, &str)> = plan
            .objects
            .iter()
            .map(|p| (p.kind, p.value["metadata"]["name"].as_str().unwrap()))
            .collect();
        assert_eq!(
            order,
            vec![
                (Kind::Namespace, "shop"),
                (Kind::Node, "a"),
                (Kind::ReplicaSet, "web-1"),
                (Kind::Pod, "web-1-x")
            ]
        );
        let node = &plan.objects[1].value;
        assert_eq!(node["spec"]["providerID"], "kwok:a");
        assert_eq!(node["metadata"]["labels"]["kwok-nodegroup"], "web");
        assert!(node["status"].get("conditions").is_none());
        assert!(node["spec"].get("podCIDR").is_none());
        let rs = &plan.objects[2].value;
        assert!(rs["metadata"].get("ownerReferences").is_none());
        assert!(rs["metadata"].get("uid").is_none());
        assert_eq!(
            plan.objects[3].value["metadata"]["ownerReferences"][0]["uid"],
            "u-rs"
        );
        assert_eq!(plan.objects[3].old_uid.as_deref(), Some("u-p"));
        // Loaded running, with the pod IP it had.
        assert!(plan.objects[3].value.get("status").is_none());
        assert_eq!(plan.objects[3].status, Some(json!({"podIP": "10.1.0.7"})));
        assert_eq!(plan.dropped.owners_missing["Deployment"], 1);
        assert_eq!(plan.dropped.finished_pods, 1);
        assert_eq!(plan.dropped.not_ready_nodes, 1);
        assert_eq!((plan.bound_pods, plan.pending_pods), (1, 0));
    }

    #[test]
    fn a_pod_on_a_node_not_in_the_input_is_refused() {
        let mut input = Input::default();
        input
            .read_text(
                "pods.yaml",
                "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec: {nodeName: gone, containers: [{name: c, image: i}]}\n",
            )
            .unwrap();
        let grouping = infer(&input, None, &[]).unwrap();
        let e = plan(&input, &grouping).unwrap_err();
        assert_eq!(
            e.to_string(),
            "pods.yaml: Pod default/p: field spec.nodeName: node gone is not in the input"
        );
    }
}
