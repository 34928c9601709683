//! Node selector terms (`NodeSelectorTerm`, with `Gt`/`Lt` and
//! `matchFields`) and tolerations. Label selectors themselves are
//! `apimachinery::labels`, re-exported here for the predicates.

use apimachinery::labels::Operator;
use k8s_openapi::api::core::v1::{
    Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration,
};

pub use apimachinery::labels::{Labels, labels_of, selector_matches};

/// A node selector requirement (labels or fields) with the shared
/// operators; an unknown operator does not match.
fn node_requirement_matches(r: &NodeSelectorRequirement, value: Option<&String>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    Operator::from_name(&r.operator).is_some_and(|op| op.holds(value.map(String::as_str), values))
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
            let value = if r.key == "metadata.name" {
                node.metadata.name.as_ref()
            } else {
                None
            };
            node_requirement_matches(r, value)
        })
}

/// Whether a `NodeSelector` matches the node: any of its terms does.
pub fn node_matches_selector(node: &Node, selector: &NodeSelector) -> bool {
    selector
        .node_selector_terms
        .iter()
        .any(|t| node_selector_term_matches(t, node))
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
