//! Label selectors (`metav1.LabelSelector`), node selector terms
//! (`NodeSelectorTerm`, with `Gt`/`Lt` and `matchFields`), and tolerations.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// Labels of an object (empty when absent).
pub type Labels = BTreeMap<String, String>;

static EMPTY: Labels = BTreeMap::new();

/// The labels of an object's metadata, or an empty map.
pub fn labels_of(labels: Option<&Labels>) -> &Labels {
    labels.unwrap_or(&EMPTY)
}

/// Whether a `metav1.LabelSelector` selects `labels`. An empty selector
/// selects everything; an unknown operator selects nothing.
pub fn selector_matches(selector: &LabelSelector, labels: &Labels) -> bool {
    selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
        && selector
            .match_expressions
            .iter()
            .flatten()
            .all(|r| requirement_matches(r, labels))
}

fn requirement_matches(r: &LabelSelectorRequirement, labels: &Labels) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let value = labels.get(&r.key);
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        _ => false,
    }
}

fn node_requirement_matches(r: &NodeSelectorRequirement, value: Option<&String>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let as_int = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), [bound]) = (value.and_then(|v| as_int(v)), values) else {
                return false;
            };
            let Some(bound) = as_int(bound) else {
                return false;
            };
            if r.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

/// Whether one `NodeSelectorTerm` matches the node: all its expressions
/// (on labels) and fields (`metadata.name`) hold. An empty term matches
/// nothing, as in Kubernetes.
pub fn node_selector_term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = labels_of(node.metadata.labels.as_ref());
    exprs
        .iter()
        .all(|r| node_requirement_matches(r, labels.get(&r.key)))
        && fields.iter().all(|r| {
            let value = (r.key == "metadata.name")
                .then(|| node.metadata.name.clone())
                .flatten();
            node_requirement_matches(r, value.as_ref())
        })
}

/// Whether a toleration tolerates a taint (kube's `ToleratesTaint`).
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = t.effect.as_deref()
        && !effect.is_empty()
        && effect != taint.effect
    {
        return false;
    }
    let key = t.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match t.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        _ => false,
    }
}

/// Whether any toleration in the list tolerates the taint.
pub fn tolerated_by(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{from_value, json};

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selector_operators() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let sel = |v| from_value::<LabelSelector>(v).unwrap();
        assert!(selector_matches(&sel(json!({})), &l));
        assert!(selector_matches(
            &sel(json!({"matchLabels": {"app": "web"}})),
            &l
        ));
        assert!(!selector_matches(
            &sel(json!({"matchLabels": {"app": "db"}})),
            &l
        ));
        for (op, values, want) in [
            ("In", json!(["web", "x"]), true),
            ("In", json!(["x"]), false),
            ("NotIn", json!(["x"]), true),
            ("NotIn", json!(["web"]), false),
            ("Exists", json!(null), true),
            ("DoesNotExist", json!(null), false),
            ("Bogus", json!(null), false),
        ] {
            let s = sel(
                json!({"matchExpressions": [{"key": "app", "operator": op, "values": values}]}),
            );
            assert_eq!(selector_matches(&s, &l), want, "{op}");
        }
        let s = sel(
            json!({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}),
        );
        assert!(selector_matches(&s, &l), "NotIn matches a missing key");
    }

    #[test]
    fn node_selector_terms_with_gt_lt_and_fields() {
        let node: Node =
            from_value(json!({"metadata": {"name": "n1", "labels": {"cores": "8", "zone": "a"}}}))
                .unwrap();
        let term = |v| from_value::<NodeSelectorTerm>(v).unwrap();
        let expr = |op: &str, key: &str, values: serde_json::Value| {
            term(json!({"matchExpressions": [{"key": key, "operator": op, "values": values}]}))
        };
        assert!(node_selector_term_matches(
            &expr("Gt", "cores", json!(["4"])),
            &node
        ));
        assert!(!node_selector_term_matches(
            &expr("Gt", "cores", json!(["8"])),
            &node
        ));
        assert!(node_selector_term_matches(
            &expr("Lt", "cores", json!(["9"])),
            &node
        ));
        assert!(!node_selector_term_matches(
            &expr("Lt", "zone", json!(["9"])),
            &node
        ));
        assert!(node_selector_term_matches(
            &expr("In", "zone", json!(["a", "b"])),
            &node
        ));
        assert!(node_selector_term_matches(
            &expr("DoesNotExist", "gpu", json!(null)),
            &node
        ));
        assert!(
            !node_selector_term_matches(&term(json!({})), &node),
            "empty term"
        );
        let by_name = term(
            json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}),
        );
        assert!(node_selector_term_matches(&by_name, &node));
    }

    #[test]
    fn tolerations_match_taints_by_key_value_and_effect() {
        let taint: Taint =
            from_value(json!({"key": "k", "value": "v", "effect": "NoSchedule"})).unwrap();
        let tol = |v| from_value::<Toleration>(v).unwrap();
        assert!(tolerates(&tol(json!({"key": "k", "value": "v"})), &taint));
        assert!(tolerates(
            &tol(json!({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"})),
            &taint
        ));
        assert!(!tolerates(&tol(json!({"key": "k", "value": "w"})), &taint));
        assert!(tolerates(
            &tol(json!({"key": "k", "operator": "Exists"})),
            &taint
        ));
        assert!(
            tolerates(&tol(json!({"operator": "Exists"})), &taint),
            "empty key + Exists tolerates all"
        );
        assert!(!tolerates(
            &tol(json!({"key": "k", "operator": "Exists", "effect": "NoExecute"})),
            &taint
        ));
        assert!(!tolerates(
            &tol(json!({"key": "other", "operator": "Exists"})),
            &taint
        ));
    }
}
