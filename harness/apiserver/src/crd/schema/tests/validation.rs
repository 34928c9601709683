//! Validation: kube-openapi's validator as apiextensions reports it
//! (kubeOpenAPIResultToFieldErrors), embedded resources, list types,
//! ratcheting.

use serde_json::json;

use super::*;

fn buffer(spec: Value) -> Value {
    crate::crd::testing::buffer("b", spec)
}

fn condition(status: &str, time: &str) -> Value {
    json!({"type": "Ready", "status": status, "reason": "Provisioned", "message": "", "lastTransitionTime": time})
}

#[test]
fn capacity_buffer_replicas_string_is_a_type_error() {
    // kube-openapi typeValidator; apiextensions: InvalidTypeCode -> field.TypeInvalid.
    let causes = buffers().validate(&buffer(
        json!({"podTemplateRef": {"name": "t"}, "replicas": "abc"}),
    ));
    assert_eq!(
        rendered(&causes),
        [
            r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#
        ]
    );
    assert_eq!(causes[0].reason, "FieldValueTypeInvalid");
}

#[test]
fn valid_capacity_buffer_has_no_causes() {
    let obj = buffer(json!({
        "podTemplateRef": {"name": "t"},
        "replicas": 3,
        "limits": {"cpu": "500m", "memory": 1024},
        "provisioningStrategy": "buffer.x-k8s.io/active-capacity",
    }));
    assert_eq!(rendered(&buffers().validate(&obj)), Vec::<String>::new());
}

#[test]
fn minimum_is_reported_with_the_value() {
    // kube-openapi MinimumNativeType: "should be greater than or equal to".
    let causes = buffers().validate(&buffer(
        json!({"podTemplateRef": {"name": "t"}, "replicas": -1}),
    ));
    assert_eq!(
        rendered(&causes),
        [
            "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"
        ]
    );
    assert_eq!(causes[0].reason, "FieldValueInvalid");
}

#[test]
fn int32_overflow_is_a_range_error_at_nil() {
    // kube-openapi IsValueValidAgainstRange (a plain error: apiextensions
    // reports it on the nil path).
    let causes = buffers().validate(&buffer(
        json!({"podTemplateRef": {"name": "t"}, "replicas": 3_000_000_000_i64}),
    ));
    assert_eq!(
        rendered(&causes),
        [
            r#"<nil>: Invalid value: "": Checked value must be of type integer with format int32 in spec.replicas"#
        ]
    );
}

#[test]
fn required_field_is_field_required() {
    // kube-openapi objectValidator required -> field.Required.
    let causes = buffers().validate(&buffer(json!({"podTemplateRef": {}})));
    assert_eq!(
        rendered(&causes),
        ["spec.podTemplateRef.name: Required value"]
    );
    assert_eq!(causes[0].reason, "FieldValueRequired");
    let causes = buffers()
        .validate(&json!({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer"}));
    assert_eq!(rendered(&causes), ["spec: Required value"]);
}

#[test]
fn enum_format_and_pattern_in_list_items() {
    // EnumFailCode -> field.NotSupported; strfmt date-time -> TypeInvalid; pattern -> Invalid.
    let mut bad = condition("Maybe", "yesterday");
    bad["reason"] = json!("not ok");
    let mut obj = buffer(json!({"podTemplateRef": {"name": "t"}}));
    obj["status"] = json!({"conditions": [bad]});
    let causes = buffers().validate(&obj);
    assert_eq!(
        rendered(&causes),
        [
            r#"status.conditions[0].lastTransitionTime: Invalid value: "yesterday": status.conditions[0].lastTransitionTime in body must be of type date-time: "yesterday""#,
            r#"status.conditions[0].reason: Invalid value: "not ok": status.conditions[0].reason in body should match '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'"#,
            r#"status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown""#,
        ]
    );
    let reasons: Vec<_> = causes.iter().map(|c| c.reason).collect();
    assert_eq!(
        reasons,
        [
            "FieldValueTypeInvalid",
            "FieldValueInvalid",
            "FieldValueNotSupported"
        ]
    );
}

#[test]
fn list_map_duplicates_are_duplicate_values() {
    // listtype.ValidateListSetsAndMaps: the second appearance of a key.
    let mut obj = buffer(json!({"podTemplateRef": {"name": "t"}}));
    let ready = condition("True", "2024-01-01T00:00:00Z");
    obj["status"] = json!({"conditions": [ready.clone(), ready]});
    let causes = buffers().validate(&obj);
    assert_eq!(
        rendered(&causes),
        [r#"status.conditions[1]: Duplicate value: {"type":"Ready"}"#]
    );
    assert_eq!(causes[0].reason, "FieldValueDuplicate");
}

#[test]
fn list_set_duplicates_are_reported_once_per_value() {
    // listtype validateListSet: scalars by Go value, the second appearance only.
    let schema = json!({"type": "object", "properties": {
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}});
    let errors = spec_errors(schema, json!({"tags": ["a", "b", "a", "a", "b"]}));
    assert_eq!(
        errors,
        [
            r#"spec.tags[2]: Duplicate value: "a""#,
            r#"spec.tags[4]: Duplicate value: "b""#
        ]
    );
}

#[test]
fn int_or_string_value_of_wrong_type_reports_any_of() {
    // x-kubernetes-int-or-string: type [integer,string] plus the anyOf's
    // composite error (at <nil>) and its first branch's error.
    let causes = buffers().validate(&buffer(
        json!({"podTemplateRef": {"name": "t"}, "limits": {"cpu": true}}),
    ));
    assert_eq!(
        rendered(&causes),
        [
            r#"spec.limits.cpu: Invalid value: "boolean": spec.limits.cpu in body must be of type integer,string: "boolean""#,
            r#"<nil>: Invalid value: "": "spec.limits.cpu" must validate at least one schema (anyOf)"#,
            r#"spec.limits.cpu: Invalid value: "boolean": spec.limits.cpu in body must be of type integer: "boolean""#,
        ]
    );
    let causes = buffers().validate(&buffer(
        json!({"podTemplateRef": {"name": "t"}, "limits": {"cpu": "lots"}}),
    ));
    assert_eq!(causes.len(), 1);
    assert!(
        causes[0]
            .message
            .contains("spec.limits.cpu in body should match '^(\\+|-)?"),
        "{causes:?}"
    );
}

#[test]
fn string_lengths_count_runes() {
    // kube-openapi MaxLength/MinLength (utf8.RuneCount); TooLong says "bytes".
    let schema = json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 3, "minLength": 2}}});
    assert_eq!(
        spec_errors(schema.clone(), json!({"name": "abcd"})),
        ["spec.name: Too long: may not be more than 3 bytes"]
    );
    assert_eq!(
        spec_errors(schema.clone(), json!({"name": "a"})),
        [r#"spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long"#]
    );
    assert!(spec_errors(schema, json!({"name": "héé"})).is_empty());
}

#[test]
fn item_and_property_counts() {
    // MaxItems/TooManyProperties -> field.TooMany; MinItems/TooFewProperties -> Invalid.
    let schema = json!({"type": "object", "properties": {
        "list": {"type": "array", "items": {"type": "integer"}, "maxItems": 2, "minItems": 2},
        "map": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 1, "minProperties": 1},
    }});
    assert_eq!(
        spec_errors(
            schema.clone(),
            json!({"list": [1, 2, 3], "map": {"a": "x", "b": "y"}})
        ),
        [
            "spec.list: Too many: 3: must have at most 2 items",
            "spec.map: Too many: 2: must have at most 1 item"
        ]
    );
    assert_eq!(
        spec_errors(schema, json!({"list": [1], "map": {}})),
        [
            "spec.list: Invalid value: 1: spec.list in body should have at least 2 items",
            "spec.map: Invalid value: 0: spec.map in body should have at least 1 properties",
        ]
    );
}

#[test]
fn numbers_bounds_and_multiples() {
    // kube-openapi numberValidator: bounds as Go prints them (%v).
    let schema = json!({"type": "object", "properties": {
        "n": {"type": "integer", "multipleOf": 5, "maximum": 1000000},
        "x": {"type": "number", "multipleOf": 0.1, "maximum": 1000000, "exclusiveMaximum": true},
    }});
    assert_eq!(
        spec_errors(schema.clone(), json!({"n": 2000002, "x": 2e6})),
        [
            "spec.n: Invalid value: 2000002: spec.n in body should be a multiple of 5",
            "spec.n: Invalid value: 2000002: spec.n in body should be less than or equal to 1000000",
            "spec.x: Invalid value: 2e+06: spec.x in body should be less than 1e+06",
        ]
    );
    assert!(spec_errors(schema.clone(), json!({"n": 10, "x": 0.3})).is_empty());
    assert_eq!(
        spec_errors(schema, json!({"x": 0.35})),
        ["spec.x: Invalid value: 0.35: spec.x in body should be a multiple of 0.1"]
    );
}

#[test]
fn integers_accept_integral_floats_and_numbers_accept_integers() {
    // kube-openapi typeValidator isFloatInt / isIntFloat.
    let schema = json!({"type": "object", "properties": {"i": {"type": "integer"}, "f": {"type": "number"}}});
    assert!(spec_errors(schema.clone(), json!({"i": 2.0, "f": 3})).is_empty());
    assert_eq!(
        spec_errors(schema, json!({"i": 2.5})),
        [
            r#"spec.i: Invalid value: "number": spec.i in body must be of type integer: "number""#,
            r#"<nil>: Invalid value: "": Checked value must be of type integer (default format) in spec.i"#,
        ]
    );
}

#[test]
fn nullable_and_null_items() {
    // typeValidator: null passes only when nullable; null list items are not pruned.
    let schema = json!({"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}},
        "maybe": {"type": "array", "items": {"type": "string", "nullable": true}},
    }});
    assert_eq!(
        spec_errors(schema.clone(), json!({"tags": ["a", null]})),
        [
            r#"spec.tags[1]: Invalid value: "null": spec.tags[1] in body must be of type string: "null""#
        ]
    );
    assert!(spec_errors(schema, json!({"maybe": ["a", null]})).is_empty());
}

#[test]
fn enum_compares_as_go_converts() {
    // basicCommonValidator: the value converted to the enum value's Go type.
    let schema =
        json!({"type": "object", "properties": {"n": {"type": "number", "enum": [1, 2.5]}}});
    assert!(spec_errors(schema.clone(), json!({"n": 1.0})).is_empty());
    assert_eq!(
        spec_errors(schema, json!({"n": 3})),
        [r#"spec.n: Unsupported value: 3: supported values: "1", "2.5""#]
    );
}

#[test]
fn additional_properties_false_forbids_keys() {
    // objectValidator: PropertyNotAllowed, reported on the object.
    let schema = json!({"type": "object", "properties": {"closed": {"type": "object", "additionalProperties": false}}});
    assert_eq!(
        spec_errors(schema, json!({"closed": {"a": 1}})),
        [r#"spec.closed: Invalid value: "a": spec.closed.a in body is a forbidden property"#]
    );
}

#[test]
fn junctors_one_of_all_of_not() {
    // schemaPropsValidator: composite errors land on <nil>.
    let schema = json!({"type": "object", "properties": {
        "one": {"type": "integer", "oneOf": [{"minimum": 0}, {"maximum": 10}]},
        "all": {"type": "integer", "allOf": [{"minimum": 0}, {"maximum": 10}]},
        "not": {"type": "string", "not": {"enum": ["forbidden"]}},
    }});
    assert_eq!(
        spec_errors(schema, json!({"one": 5, "all": 11, "not": "forbidden"})),
        [
            "spec.all: Invalid value: 11: spec.all in body should be less than or equal to 10",
            r#"<nil>: Invalid value: "": "spec.all" must validate all the schemas (allOf)"#,
            r#"<nil>: Invalid value: "": "spec.not" must not validate the schema (not)"#,
            r#"<nil>: Invalid value: "": "spec.one" must validate one and only one schema (oneOf). Found 2 valid alternatives"#,
        ]
    );
}

#[test]
fn unique_items_at_runtime() {
    // kube-openapi UniqueItems (CRDs may not ask for it; the validator
    // still implements it).
    let mut errs = Vec::new();
    let schema = json!({"type": "array", "items": {"type": "integer"}, "uniqueItems": true});
    let node = super::super::decode::decode(&schema, "", &mut errs);
    let outcome = super::super::openapi::validate(&node, &json!([1, 2, 1]), None, "spec.list");
    assert_eq!(
        rendered(&super::super::openapi::to_causes(&outcome.findings, None)),
        [r#"spec.list: Invalid value: "": spec.list in body shouldn't contain duplicates"#]
    );
}

#[test]
fn embedded_resources_need_api_version_and_kind() {
    // objectmeta.Validate: embedded apiVersion and kind required, kind a DNS-1035 label.
    let schema = json!({"type": "object", "properties": {"template": {
        "type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}}});
    assert_eq!(
        spec_errors(schema.clone(), json!({"template": {"metadata": {}}})),
        [
            "spec.template.apiVersion: Required value",
            "spec.template.kind: Required value"
        ]
    );
    let errors = spec_errors(
        schema,
        json!({"template": {"apiVersion": "a/b/c", "kind": "Bad_Kind"}}),
    );
    assert_eq!(
        errors[0],
        r#"spec.template.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#
    );
    assert!(errors[1].starts_with(r#"spec.template.kind: Invalid value: "Bad_Kind": may have mixed case, but should otherwise match: a DNS-1035 label"#));
}

#[test]
fn metadata_name_schema_is_honoured_at_the_root() {
    // ValidateStructural lets the root restrict metadata.name; kube-openapi checks it.
    let s = parsed(json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}}}}));
    let obj = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "too-long", "labels": {"a": "b"}}});
    assert_eq!(
        rendered(&s.validate(&obj)),
        ["metadata.name: Too long: may not be more than 5 bytes"]
    );
}

#[test]
fn updates_ratchet_unchanged_fields() {
    // CRDValidationRatcheting: an invalid value the update leaves alone is not an error.
    let s = buffers();
    let old = buffer(json!({"podTemplateRef": {"name": "t"}, "replicas": -1}));
    let mut new = old.clone();
    new["spec"]["podTemplateRef"]["name"] = json!("u");
    assert_eq!(s.validate(&new).len(), 1);
    assert!(s.validate_update(&new, &old).is_empty());
    new["spec"]["replicas"] = json!(-2);
    assert_eq!(
        rendered(&s.validate_update(&new, &old)),
        [
            "spec.replicas: Invalid value: -2: spec.replicas in body should be greater than or equal to 0"
        ]
    );
}

#[test]
fn status_updates_validate_status_only() {
    // customResourceValidator.ValidateStatusUpdate: the status schema, rooted at "status".
    let s = buffers();
    let old = buffer(json!({"podTemplateRef": {"name": "t"}}));
    let mut new = old.clone();
    new["spec"]["replicas"] = json!("ignored");
    new["status"] = json!({"replicas": "x"});
    assert_eq!(
        rendered(&s.validate_status_update(&new, &old)),
        [
            r#"status.replicas: Invalid value: "string": replicas in body must be of type integer: "string""#
        ]
    );
}

#[test]
fn blocking_errors_stop_cel_rules() {
    // strategy.go hasBlockingErr: a type error blocks the CEL rules, a minimum does not.
    let s = buffers();
    let typed = s.validate(&buffer(
        json!({"podTemplateRef": {"name": "t"}, "replicas": "abc"}),
    ));
    let blocker = crate::crd::cel::blocked(&typed).unwrap();
    assert_eq!(
        rendered(&[blocker]),
        [
            "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
        ]
    );
    let minimum = s.validate(&buffer(
        json!({"podTemplateRef": {"name": "t"}, "replicas": -1}),
    ));
    assert!(crate::crd::cel::blocked(&minimum).is_none());
}
