//! Owners derived from their pods. A `/snapshotz` holds pods and no
//! workloads, and a dump may hold pods without their ReplicaSets: a pod
//! whose controller is missing would block its node's scale-down
//! (upstream's `ControllerNotFound`) and, evicted, never come back. For
//! each ReplicaSet or DaemonSet that pods name as their controller and
//! the input does not hold, one is made from its pods: their common
//! labels as its selector, the first pod's spec as its template (less
//! what binds it to a node), as many replicas as pods. Other controller
//! kinds (StatefulSets, Jobs) are not made up; the plan counts their
//! references as missing owners.

use std::collections::{BTreeMap, BTreeSet};

use apimachinery::json::Lookup;
use serde_json::{Map, Value, json};

use crate::input::{Input, Object};
use crate::kinds::Kind;

/// Owners to add to `input`, made from their pods.
pub fn derive(input: &Input) -> Vec<Object> {
    let known: BTreeSet<&str> = input.objects.iter().filter_map(Object::uid).collect();
    let mut wanted: BTreeMap<String, (Kind, String, Vec<&Object>)> = BTreeMap::new();
    for pod in input.of(Kind::Pod) {
        let Some(owner) = controller(&pod.value) else {
            continue;
        };
        let kind = match owner.get("kind").and_then(Value::as_str) {
            Some("ReplicaSet") => Kind::ReplicaSet,
            Some("DaemonSet") => Kind::DaemonSet,
            _ => continue,
        };
        let (Some(uid), Some(name)) = (
            owner.get("uid").and_then(Value::as_str),
            owner.get("name").and_then(Value::as_str),
        ) else {
            continue;
        };
        if known.contains(uid) {
            continue;
        }
        wanted
            .entry(uid.to_string())
            .or_insert_with(|| (kind, name.to_string(), Vec::new()))
            .2
            .push(pod);
    }
    wanted
        .into_iter()
        .map(|(uid, (kind, name, pods))| Object {
            kind,
            value: owner(kind, &uid, &name, &pods),
            file: "(derived from its pods)".into(),
        })
        .collect()
}

/// A pod's controller reference.
fn controller(pod: &Value) -> Option<&Value> {
    pod.lookup("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
}

/// The labels every pod has alike.
fn common_labels(pods: &[&Object]) -> Map<String, Value> {
    let labels = |p: &Object| {
        p.value
            .lookup("/metadata/labels")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let mut common = pods.first().map(|p| labels(p)).unwrap_or_default();
    for p in pods.iter().skip(1) {
        let l = labels(p);
        common.retain(|k, v| l.get(k) == Some(v));
    }
    common
}

fn owner(kind: Kind, uid: &str, name: &str, pods: &[&Object]) -> Value {
    let first = pods.first().map(|p| &p.value);
    let namespace = first
        .and_then(|p| p.lookup("/metadata/namespace"))
        .cloned()
        .unwrap_or(json!("default"));
    let labels = common_labels(pods);
    let mut spec = first
        .and_then(|p| p.get("spec"))
        .cloned()
        .unwrap_or(json!({}));
    if let Some(s) = spec.as_object_mut() {
        s.remove("nodeName");
    }
    if kind == Kind::DaemonSet {
        without_node_pinning(&mut spec);
    }
    let template = json!({"metadata": {"labels": labels}, "spec": spec});
    let mut owner = json!({
        "apiVersion": "apps/v1", "kind": kind.name(),
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "labels": labels},
        "spec": {"selector": {"matchLabels": labels}, "template": template},
    });
    if kind == Kind::ReplicaSet {
        owner["spec"]["replicas"] = json!(pods.len());
    }
    owner
}

/// A DaemonSet pod's spec less the node affinity term the DaemonSet
/// controller adds to pin it to its node.
fn without_node_pinning(spec: &mut Value) {
    let Some(terms) = spec
        .pointer_mut("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for term in terms.iter_mut() {
        if let Some(t) = term.as_object_mut() {
            t.remove("matchFields");
        }
    }
    terms.retain(|t| t.as_object().is_some_and(|t| !t.is_empty()));
    if terms.is_empty()
        && let Some(affinity) = spec.get_mut("affinity").and_then(Value::as_object_mut)
    {
        affinity.remove("nodeAffinity");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_missing_replicaset_is_made_from_its_pods() {
        let pod = |name: &str, node: &str, hash: &str| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "shop", "labels": {"app": "web", "pod-template-hash": hash, "extra": name},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u-rs", "controller": true}]},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}})
        };
        let mut input = Input::default();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": [pod("a", "n1", "h"), pod("b", "n2", "h")]});
        input.read_text("pods.json", &list.to_string()).unwrap();
        let derived = derive(&input);
        assert_eq!(derived.len(), 1);
        let rs = &derived[0].value;
        assert_eq!(derived[0].kind, Kind::ReplicaSet);
        assert_eq!(rs["metadata"]["uid"], "u-rs");
        assert_eq!(rs["spec"]["replicas"], 2);
        assert_eq!(
            rs["spec"]["selector"]["matchLabels"],
            json!({"app": "web", "pod-template-hash": "h"})
        );
        assert!(rs["spec"]["template"]["spec"].get("nodeName").is_none());
    }

    #[test]
    fn a_daemonset_made_up_is_not_pinned_to_one_node() {
        let mut spec = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}});
        without_node_pinning(&mut spec);
        assert_eq!(spec, json!({"affinity": {}}));
    }
}
