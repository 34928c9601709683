//! Pruning: pkg/apiserver/schema/pruning and defaulting/prunenulls.go.

use serde_json::json;

use super::*;

#[test]
fn unknown_fields_are_pruned_and_named() {
    // pruning.PruneWithOptions(isResourceRoot=true): TypeMeta and ObjectMeta
    // kept at the root, unknown paths as strict field validation names them.
    let mut obj = json!({
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityBuffer",
        "metadata": {"name": "b", "unknownMeta": 1},
        "extra": true,
        "spec": {"foo": 1, "podTemplateRef": {"name": "t", "bar": "x"}, "replicas": 1},
    });
    let pruned = buffers().prune(&mut obj);
    assert_eq!(pruned, ["extra", "spec.foo", "spec.podTemplateRef.bar"]);
    assert_eq!(
        obj,
        json!({
            "apiVersion": "autoscaling.x-k8s.io/v1beta1",
            "kind": "CapacityBuffer",
            "metadata": {"name": "b", "unknownMeta": 1},
            "spec": {"podTemplateRef": {"name": "t"}, "replicas": 1},
        })
    );
}

#[test]
fn list_items_and_map_values_are_pruned() {
    // prune() into items (`[i]`) and additionalProperties (`.key`).
    let s = with_spec(json!({"type": "object", "properties": {
        "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
        "labels": {"type": "object", "additionalProperties": {"type": "object", "properties": {"a": {"type": "string"}}}},
    }}));
    let mut obj =
        object(json!({"items": [{"a": "x", "foo": 1}], "labels": {"k": {"a": "x", "b": 1}}}));
    assert_eq!(s.prune(&mut obj), ["spec.items[0].foo", "spec.labels.k.b"]);
    assert_eq!(
        obj["spec"],
        json!({"items": [{"a": "x"}], "labels": {"k": {"a": "x"}}})
    );
}

#[test]
fn preserve_unknown_fields_keeps_unknown_but_prunes_specified() {
    // skipPrune: unknown fields stay; specified properties are pruned by their schema.
    let s = with_spec(
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
        "known": {"type": "object", "properties": {"a": {"type": "string"}}}}}),
    );
    let mut obj = object(json!({"anything": {"x": [1, {"y": 2}]}, "known": {"a": "x", "b": 2}}));
    assert_eq!(s.prune(&mut obj), ["spec.known.b"]);
    assert_eq!(
        obj["spec"],
        json!({"anything": {"x": [1, {"y": 2}]}, "known": {"a": "x"}})
    );
}

#[test]
fn embedded_resources_keep_type_and_object_meta() {
    // x-kubernetes-embedded-resource: apiVersion, kind, metadata kept as they are.
    let s = with_spec(json!({"type": "object", "properties": {"template": {
        "type": "object", "x-kubernetes-embedded-resource": true,
        "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}}}}));
    let template = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "whatever": 1},
        "spec": {"x": "", "y": 1}, "other": 1});
    let mut obj = object(json!({"template": template}));
    assert_eq!(
        s.prune(&mut obj),
        ["spec.template.other", "spec.template.spec.y"]
    );
    assert_eq!(
        obj["spec"]["template"],
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "whatever": 1}, "spec": {"x": ""}})
    );
}

#[test]
fn meta_fields_are_pruned_below_the_root() {
    // prune(): "metadata" is only special at a resource; elsewhere it is unknown.
    let s = with_spec(json!({"type": "object", "properties": {"a": {"type": "string"}}}));
    let mut obj = object(json!({"a": "x", "metadata": {}, "kind": "K"}));
    assert_eq!(s.prune(&mut obj), ["spec.kind", "spec.metadata"]);
}

#[test]
fn additional_properties_true_prunes_nested_objects() {
    // additionalProperties without a schema prunes against no schema: objects
    // below lose their fields, scalars stay.
    let s = with_spec(
        json!({"type": "object", "properties": {"free": {"type": "object", "additionalProperties": true}}}),
    );
    let mut obj = object(json!({"free": {"k": {"deep": 1}, "n": 1}}));
    assert_eq!(s.prune(&mut obj), ["spec.free.k.deep"]);
    assert_eq!(obj["spec"], json!({"free": {"k": {}, "n": 1}}));
}

#[test]
fn non_nullable_nulls_without_default_are_dropped() {
    // PruneNonNullableNullsWithoutDefaults, then Default for the defaulted one.
    let s = with_spec(json!({"type": "object", "properties": {
        "a": {"type": "string"},
        "b": {"type": "string", "nullable": true},
        "c": {"type": "string", "default": "d"},
    }}));
    let mut obj = object(json!({"a": null, "b": null, "c": null}));
    assert!(s.prune(&mut obj).is_empty());
    assert_eq!(obj["spec"], json!({"b": null, "c": null}));
    s.apply_defaults(&mut obj);
    assert_eq!(obj["spec"], json!({"b": null, "c": "d"}));
}
