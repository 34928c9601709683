//! Unit tests of the kwok provider.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use serde_json::json;

use super::config::Grouping;
use super::templates::prepare_template;
use super::*;
use crate::cloudprovider::{ErrorClass, InstanceErrorInfo};

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
    let bad =
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: a}}\n";
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
        parse_fault("increase-size-error=OutOfResource:QUOTA_EXCEEDED:quota 'CPUS' exceeded: 8/8"),
        Ok(Fault::IncreaseSizeFails(InstanceErrorInfo {
            class: ErrorClass::OutOfResources,
            code: "QUOTA_EXCEEDED".into(),
            message: "quota 'CPUS' exceeded: 8/8".into(),
        }))
    );
    assert!(
        parse_fault("explode")
            .unwrap_err()
            .to_string()
            .contains("is not never-register")
    );
    assert!(
        parse_fault("increase-size-error=Weird:x:y")
            .unwrap_err()
            .to_string()
            .contains("error class \"Weird\"")
    );
    assert!(
        parse_fault("increase-size-error=Other")
            .unwrap_err()
            .to_string()
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

/// Properties of the provider's two ConfigMaps (the other
/// parsers' properties are in `conformance --test checks parsers::`): whatever the
/// text, no panic, and an error that names the ConfigMap.
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn yamlish() -> impl Strategy<Value = String> {
        proptest::string::string_regex(r"[a-zA-Z0-9 _.,:\-\[\]{}'\x22\n|>&*!%@#]{0,120}").unwrap()
    }

    proptest! {
        #[test]
        fn the_config_never_panics_and_errors_name_the_config_map(text in yamlish()) {
            if let Err(e) = parse_config("kwok-provider-config", &text) {
                prop_assert!(e.to_string().contains("ConfigMap kwok-provider-config"), "{}", e);
            }
        }

        #[test]
        fn config_fields_with_any_value_never_panic(
            field in prop::sample::select(vec!["readNodesFrom", "nodegroups", "fromNodeLabelKey", "configmap", "name", "key", "nodes", "skipTaint"]),
            value in yamlish(),
        ) {
            let text = format!("readNodesFrom: configmap\nnodegroups:\n  fromNodeLabelKey: g\n{field}: {value:?}\n");
            if let Err(e) = parse_config("kwok-provider-config", &text) {
                prop_assert!(e.to_string().contains("ConfigMap kwok-provider-config"), "{}", e);
            }
        }

        #[test]
        fn templates_never_panic_and_errors_name_the_source(text in yamlish(), annotation in yamlish()) {
            if let Err(e) = parse_templates("ConfigMap kwok-provider-templates", &text) {
                prop_assert!(e.to_string().contains("kwok-provider-templates"), "{}", e);
            }
            let node = format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: t\n  annotations:\n    cluster-autoscaler.kwok.nodegroup/max-count: {annotation:?}\nstatus:\n  allocatable: {{cpu: {annotation:?}}}\n");
            if let Err(e) = parse_templates("ConfigMap kwok-provider-templates", &node) {
                prop_assert!(e.to_string().contains("kwok-provider-templates"), "{}", e);
            }
        }
    }
}

#[test]
fn a_template_that_does_not_parse_is_refused_naming_it_and_the_annotation() {
    let parsed = parse_config(
        "kwok-provider-config",
        "readNodesFrom: configmap\nnodegroups: {fromNodeLabelKey: g}\nconfigmap: {name: t}",
    )
    .unwrap();
    let node = |annotations: &str| {
        let text = format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: bad\n  labels: {{g: bad}}\n  annotations: {annotations}\nstatus:\n  allocatable: {{cpu: '4'}}\n"
        );
        parse_templates("t", &text).unwrap().remove(0)
    };
    for (annotations, names) in [
        (
            "{cluster-autoscaler.kwok.nodegroup/max-count: lots}",
            "max-count",
        ),
        (
            "{cluster-autoscaler.kwok.nodegroup/min-count: '3', cluster-autoscaler.kwok.nodegroup/max-count: '2'}",
            "below min-count",
        ),
        (
            "{testbed.cluster-autoscaler.kwok/fault: explode}",
            FAULT_ANNOTATION,
        ),
    ] {
        let e = group_state(&node(annotations), "bad", &parsed)
            .err()
            .unwrap_or_else(|| panic!("{annotations} was taken"))
            .to_string();
        assert!(e.contains("bad") && e.contains(names), "{annotations}: {e}");
    }
    assert!(group_state(&node("{}"), "bad", &parsed).is_ok());
}

#[test]
fn members_are_the_kwok_nodes_that_name_the_group_and_follow_the_node_list() {
    let node = |name: &str, group: &str, provider: &str| -> Arc<Node> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "annotations": {templates::GROUP_NAME_ANNOTATION: group}},
                "spec": {"providerID": provider},
            }))
            .unwrap(),
        )
    };
    let a1 = node("a1", "a", "kwok://a1");
    let a2 = node("a2", "a", "kwok://a2");
    let b1 = node("b1", "b", "kwok://b1");
    let foreign = node("x", "a", "aws:///x");
    let names = |nodes: Vec<Arc<Node>>| -> Vec<String> {
        nodes
            .iter()
            .map(|n| n.metadata.name.clone().unwrap())
            .collect()
    };
    let mut members = state::Members::default();
    let list = vec![a1.clone(), b1.clone(), foreign.clone(), a2.clone()];
    assert_eq!(names(members.of("a", list.clone())), ["a1", "a2"]);
    assert_eq!(names(members.of("b", list.clone())), ["b1"]);
    assert!(members.of("c", list).is_empty());
    // A new version of a node (another object) is sorted again.
    let b1_moved = node("b1", "a", "kwok://b1");
    let list = vec![a1, b1_moved, foreign, a2];
    assert_eq!(names(members.of("a", list.clone())), ["a1", "b1", "a2"]);
    assert!(members.of("b", list).is_empty());
}
