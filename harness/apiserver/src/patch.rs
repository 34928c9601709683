//! The three patch types the API server accepts: JSON patch (RFC 6902),
//! JSON merge patch (RFC 7386), and Kubernetes strategic merge patch for the
//! built-in types.
//!
//! Strategic merge patch follows `k8s.io/apimachinery/pkg/util/strategicpatch`:
//! lists with a merge key are merged item by item (`containers` by `name`,
//! `conditions` by `type`, `ownerReferences` by `uid`, ...), primitive lists
//! with the merge strategy (`finalizers`) are unioned, every other list is
//! replaced, `null` deletes a field, and the directives `$patch`
//! (`replace`, `delete`, `merge`), `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>` are
//! honoured. The merge keys come from the `patchMergeKey` /
//! `patchStrategy` tags of the Kubernetes API types, keyed by field name
//! (and, where one name has two keys, by the enclosing field).

use apimachinery::json::Lookup;
use serde_json::{Map, Value};

/// A failed patch, with the reason in the API server's words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct PatchError(pub String);

/// Applies an RFC 6902 JSON patch.
pub fn json_patch(target: &mut Value, patch: &[u8]) -> Result<(), PatchError> {
    let p: json_patch::Patch = serde_json::from_slice(patch)
        .map_err(|e| PatchError(format!("error decoding patch: {e}")))?;
    json_patch::patch(target, &p).map_err(|e| {
        PatchError(format!(
            "the server rejected our request due to an error in our request: {e}"
        ))
    })
}

/// Applies an RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &[u8]) -> Result<(), PatchError> {
    let p: Value = serde_json::from_slice(patch)
        .map_err(|e| PatchError(format!("error decoding patch: {e}")))?;
    if !p.is_object() {
        return Err(PatchError(
            "error decoding patch: a merge patch must be a JSON object".into(),
        ));
    }
    json_patch::merge(target, &p);
    Ok(())
}

/// Applies a strategic merge patch to a built-in object.
pub fn strategic_merge_patch(target: &mut Value, patch: &[u8]) -> Result<(), PatchError> {
    let p: Value = serde_json::from_slice(patch)
        .map_err(|e| PatchError(format!("error decoding patch: {e}")))?;
    let Value::Object(p) = p else {
        return Err(PatchError(
            "error decoding patch: a strategic merge patch must be a JSON object".into(),
        ));
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    replace_whole_maps(target, &p);
    if let Value::Object(t) = target {
        merge_map(t, p, "")?;
    }
    Ok(())
}

/// Map fields whose Go type carries `patchStrategy:"replace"`: a patch that
/// names them replaces them whole instead of merging, by kind and JSON pointer
/// of the parent object and field name.
const REPLACED_MAPS: &[(&str, &str, &str)] = &[("PodDisruptionBudget", "/spec", "selector")];

fn replace_whole_maps(target: &mut Value, patch: &Map<String, Value>) {
    let kind = target.get("kind").and_then(Value::as_str).unwrap_or("");
    let rules: Vec<_> = REPLACED_MAPS
        .iter()
        .filter(|(k, _, _)| *k == kind)
        .collect();
    if rules.is_empty() {
        return;
    }
    let patch = Value::Object(patch.clone());
    for (_, parent, field) in rules {
        let Some(v) = patch.lookup(&format!("{parent}/{field}")) else {
            continue;
        };
        if let Some(Value::Object(t)) = target.pointer_mut(parent) {
            t.insert(field.to_string(), v.clone());
        }
    }
}

/// How a list field is merged.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ListStrategy {
    /// Merge items that have the same value of this key.
    MergeKey(&'static str),
    /// Union of primitive values.
    MergePrimitives,
    /// Replace the whole list.
    Replace,
}

/// The strategy of list field `field` inside an object reached through `parent`.
fn list_strategy(parent: &str, field: &str) -> ListStrategy {
    use ListStrategy::*;
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "secrets"
        | "resourceClaims"
        | "schedulingGates" => MergeKey("name"),
        "volumeMounts" => MergeKey("mountPath"),
        "volumeDevices" => MergeKey("devicePath"),
        "ports"
            if matches!(
                parent,
                "containers" | "initContainers" | "ephemeralContainers"
            ) =>
        {
            MergeKey("containerPort")
        }
        "ports" if parent == "spec" => MergeKey("port"),
        "hostAliases" => MergeKey("ip"),
        "podIPs" | "hostIPs" => MergeKey("ip"),
        "conditions" | "addresses" => MergeKey("type"),
        "ownerReferences" => MergeKey("uid"),
        "topologySpreadConstraints" => MergeKey("topologyKey"),
        "finalizers" => MergePrimitives,
        _ => Replace,
    }
}

fn merge_map(
    target: &mut Map<String, Value>,
    mut patch: Map<String, Value>,
    parent: &str,
) -> Result<(), PatchError> {
    // `$patch` directive on a map.
    if let Some(d) = patch.remove("$patch") {
        match d.as_str() {
            Some("replace") => {
                strip_directives(&mut patch);
                *target = patch;
                return Ok(());
            }
            Some("delete") => {
                target.clear();
                return Ok(());
            }
            Some("merge") | None => {}
            Some(other) => return Err(PatchError(format!("unknown patch type: {other}"))),
        }
    }
    let retain = patch.remove("$retainKeys");
    let keys: Vec<String> = patch.keys().cloned().collect();
    // Primitive-list deletions first, so a union in the same patch applies after.
    for k in &keys {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            let del = patch.remove(k).unwrap_or(Value::Null);
            let del = del.as_array().cloned().unwrap_or_default();
            if let Some(Value::Array(items)) = target.get_mut(field) {
                items.retain(|i| !del.contains(i));
            }
        } else if k.starts_with("$setElementOrder/") {
            patch.remove(k);
        }
    }
    for (k, pv) in patch {
        if k.starts_with('$') {
            return Err(PatchError(format!("unknown patch directive: {k}")));
        }
        match pv {
            Value::Null => {
                target.remove(&k);
            }
            Value::Object(pm) => match target.get_mut(&k) {
                Some(Value::Object(tm)) => merge_map(tm, pm, &k)?,
                _ => {
                    let mut fresh = Map::new();
                    merge_map(&mut fresh, pm, &k)?;
                    // `$patch: delete` on an absent map leaves it absent.
                    if !fresh.is_empty() || !target.contains_key(&k) {
                        target.insert(k, Value::Object(fresh));
                    }
                }
            },
            Value::Array(pl) => {
                let merged = match target.remove(&k) {
                    Some(Value::Array(tl)) => merge_list(tl, pl, parent, &k)?,
                    _ => merge_list(Vec::new(), pl, parent, &k)?,
                };
                target.insert(k, Value::Array(merged));
            }
            other => {
                target.insert(k, other);
            }
        }
    }
    if let Some(Value::Array(retain)) = retain {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        target.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(())
}

fn merge_list(
    mut target: Vec<Value>,
    patch: Vec<Value>,
    parent: &str,
    field: &str,
) -> Result<Vec<Value>, PatchError> {
    match list_strategy(parent, field) {
        ListStrategy::Replace => {
            // A `$patch: replace` marker item may appear; drop it.
            Ok(patch
                .into_iter()
                .filter(|i| i.get("$patch").is_none())
                .map(|mut i| {
                    if let Value::Object(m) = &mut i {
                        strip_directives(m);
                    }
                    i
                })
                .collect())
        }
        ListStrategy::MergePrimitives => {
            for item in patch {
                if item.is_object() && item.get("$patch").and_then(Value::as_str) == Some("replace")
                {
                    return Ok(Vec::new());
                }
                if !target.contains(&item) {
                    target.push(item);
                }
            }
            Ok(target)
        }
        ListStrategy::MergeKey(key) => {
            // `[{"$patch": "replace"}, ...items]` replaces the list.
            if patch
                .iter()
                .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
            {
                return Ok(patch
                    .into_iter()
                    .filter(|i| i.get("$patch").is_none())
                    .collect());
            }
            for item in patch {
                let Value::Object(mut pm) = item else {
                    return Err(PatchError(format!(
                        "{field}: items of a merge list must be objects"
                    )));
                };
                let Some(kv) = pm.get(key).cloned() else {
                    return Err(PatchError(format!(
                        "map: {pm:?} does not contain declared merge key: {key}"
                    )));
                };
                let pos = target.iter().position(|t| t.get(key) == Some(&kv));
                let delete = pm.get("$patch").and_then(Value::as_str) == Some("delete");
                match (pos, delete) {
                    (Some(i), true) => {
                        target.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => {
                        if let Value::Object(tm) = &mut target[i] {
                            merge_map(tm, pm, field)?;
                        }
                    }
                    (None, false) => {
                        let mut fresh = Map::new();
                        pm.remove("$patch");
                        merge_map(&mut fresh, pm, field)?;
                        target.push(Value::Object(fresh));
                    }
                }
            }
            Ok(target)
        }
    }
}

fn strip_directives(m: &mut Map<String, Value>) {
    m.retain(|k, _| !k.starts_with('$'));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(mut t: Value, p: Value) -> Value {
        strategic_merge_patch(&mut t, p.to_string().as_bytes()).unwrap();
        t
    }

    #[test]
    fn merges_containers_by_name_and_replaces_tolerations() {
        let pod = json!({"spec": {
            "containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}],
            "tolerations": [{"key": "x", "operator": "Exists"}]
        }});
        let out = smp(
            pod,
            json!({"spec": {"containers": [{"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}],
                            "tolerations": [{"key": "y", "operator": "Exists"}]}}),
        );
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}])
        );
        assert_eq!(
            out["spec"]["tolerations"],
            json!([{"key": "y", "operator": "Exists"}])
        );
    }

    #[test]
    fn conditions_merge_by_type_and_delete_directive() {
        let node = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False"}, {"type": "MemoryPressure", "status": "False"}
        ]}});
        let out = smp(
            node,
            json!({"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "$patch": "delete"}]}}),
        );
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type": "Ready", "status": "True"}])
        );
    }

    #[test]
    fn null_deletes_and_finalizers_union() {
        let obj = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x"]}});
        let out = smp(
            obj,
            json!({"metadata": {"labels": {"a": null, "c": "3"}, "finalizers": ["y"],
                                "$deleteFromPrimitiveList/finalizers": ["x"]}}),
        );
        assert_eq!(out["metadata"]["labels"], json!({"b": "2", "c": "3"}));
        assert_eq!(out["metadata"]["finalizers"], json!(["y"]));
    }

    #[test]
    fn taints_are_replaced_as_kubectl_taint_expects() {
        let node = json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}});
        let out = smp(
            node,
            json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}], "unschedulable": true}}),
        );
        assert_eq!(
            out["spec"]["taints"],
            json!([{"key": "b", "effect": "NoExecute"}])
        );
        assert_eq!(out["spec"]["unschedulable"], json!(true));
    }

    #[test]
    fn replace_and_retain_keys_directives() {
        let obj = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        let out = smp(
            obj.clone(),
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
        );
        assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
        let out = smp(
            obj,
            json!({"spec": {"strategy": {"$patch": "replace", "type": "Recreate"}}}),
        );
        assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn pdb_selector_is_replaced_not_merged() {
        let pdb = json!({"kind": "PodDisruptionBudget", "spec": {"selector": {"matchLabels": {"a": "1"}}}});
        let out = smp(
            pdb,
            json!({"spec": {"selector": {"matchLabels": {"b": "2"}}}}),
        );
        assert_eq!(out["spec"]["selector"], json!({"matchLabels": {"b": "2"}}));
        let svc = json!({"kind": "Service", "spec": {"selector": {"a": "1"}}});
        let out = smp(svc, json!({"spec": {"selector": {"b": "2"}}}));
        assert_eq!(out["spec"]["selector"], json!({"a": "1", "b": "2"}));
    }

    #[test]
    fn malformed_patches_are_errors() {
        let mut t = json!({});
        assert!(strategic_merge_patch(&mut t, b"[1]").is_err());
        assert!(strategic_merge_patch(&mut t, b"{").is_err());
        assert!(
            strategic_merge_patch(&mut t, br#"{"spec": {"containers": [{"image": "x"}]}}"#)
                .is_err()
        );
        assert!(merge_patch(&mut t, b"3").is_err());
        assert!(json_patch(&mut t, br#"[{"op": "remove", "path": "/nope"}]"#).is_err());
        assert_eq!(t, json!({}));
    }

    #[test]
    fn service_ports_merge_by_port_container_ports_by_container_port() {
        let svc = json!({"spec": {"ports": [{"port": 80, "name": "http"}]}});
        let out = smp(
            svc,
            json!({"spec": {"ports": [{"port": 443, "name": "https"}]}}),
        );
        assert_eq!(out["spec"]["ports"].as_array().unwrap().len(), 2);
        let pod =
            json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80}]}]}});
        let out = smp(
            pod,
            json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 81}]}]}}),
        );
        assert_eq!(
            out["spec"]["containers"][0]["ports"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }
}
