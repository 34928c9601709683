//! Defaulting: pkg/apiserver/schema/defaulting/algorithm.go.

use serde_json::json;

use super::*;

#[test]
fn capacity_buffer_provisioning_strategy_is_defaulted() {
    // Default(): a missing property of a present object takes its default.
    let s = buffers();
    let mut obj = json!({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
        "metadata": {"name": "b"}, "spec": {"podTemplateRef": {"name": "t"}}});
    s.apply_defaults(&mut obj);
    assert_eq!(
        obj["spec"]["provisioningStrategy"],
        "buffer.x-k8s.io/active-capacity"
    );
    // A given value stays; an absent parent is not created.
    let mut given = obj.clone();
    given["spec"]["provisioningStrategy"] = json!("mine");
    s.apply_defaults(&mut given);
    assert_eq!(given["spec"]["provisioningStrategy"], "mine");
    let mut no_spec =
        json!({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer"});
    s.apply_defaults(&mut no_spec);
    assert!(no_spec.get("spec").is_none());
}

#[test]
fn defaults_are_defaulted_in_turn() {
    // Default(): the copied default is walked like any other value.
    let s = with_spec(json!({"type": "object", "properties": {"outer": {
        "type": "object", "default": {},
        "properties": {"inner": {"type": "string", "default": "x"}, "other": {"type": "string"}}}}}));
    let mut obj = object(json!({}));
    s.apply_defaults(&mut obj);
    assert_eq!(obj["spec"], json!({"outer": {"inner": "x"}}));
}

#[test]
fn defaults_inside_list_items_and_null_items() {
    // Default() on arrays: each item defaulted; a non-nullable null item takes the items' default.
    let s = with_spec(json!({"type": "object", "properties": {
        "ports": {"type": "array", "items": {"type": "object", "properties": {"port": {"type": "integer", "default": 80}}}},
        "names": {"type": "array", "items": {"type": "string", "default": "z"}},
    }}));
    let mut obj = object(json!({"ports": [{}, {"port": 1}], "names": ["a", null]}));
    s.apply_defaults(&mut obj);
    assert_eq!(
        obj["spec"],
        json!({"ports": [{"port": 80}, {"port": 1}], "names": ["a", "z"]})
    );
}

#[test]
fn defaults_inside_map_values() {
    // Default() on additionalProperties values.
    let s = with_spec(
        json!({"type": "object", "properties": {"byName": {"type": "object",
        "additionalProperties": {"type": "object", "properties": {"weight": {"type": "integer", "default": 1}}}}}}),
    );
    let mut obj = object(json!({"byName": {"a": {}, "b": {"weight": 5}}}));
    s.apply_defaults(&mut obj);
    assert_eq!(
        obj["spec"],
        json!({"byName": {"a": {"weight": 1}, "b": {"weight": 5}}})
    );
}

#[test]
fn nullable_nulls_are_not_defaulted() {
    // isNonNullableNull: only non-nullable nulls take the default.
    let s = with_spec(json!({"type": "object", "properties": {
        "keep": {"type": "string", "nullable": true, "default": "d"},
        "fill": {"type": "string", "default": "d"},
    }}));
    let mut obj = object(json!({"keep": null, "fill": null}));
    s.apply_defaults(&mut obj);
    assert_eq!(obj["spec"], json!({"keep": null, "fill": "d"}));
}
