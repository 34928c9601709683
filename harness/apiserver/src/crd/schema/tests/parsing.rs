//! CRD-time schema checks: ValidateStructural, the OpenAPI checks of
//! apiextensions' CRD validation, ValidateDefaults.

use serde_json::json;

use super::*;

/// The rendered causes of parsing `schema` (which must be refused).
fn refusals(schema: Value) -> Vec<String> {
    match Structural::parse(&schema, "openAPIV3Schema") {
        Ok(_) => panic!("accepted: {schema}"),
        Err(causes) => rendered(&causes),
    }
}

/// A root schema whose `spec` has these properties.
fn spec_with(properties: Value) -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": properties}}})
}

#[test]
fn cluster_autoscaler_crds_are_structural() {
    // The CA 1.37 CRDs are accepted by kube-apiserver.
    for name in ["capacitybuffers", "capacityquotas", "provisioningrequests"] {
        let crd = crd(name);
        for (i, v) in crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
            let parsed = Structural::parse(&v["schema"]["openAPIV3Schema"], &path);
            assert!(parsed.is_ok(), "{name} {}: {:?}", v["name"], parsed.err());
        }
    }
}

#[test]
fn untyped_field_is_not_structural() {
    // ValidateStructural: "must not be empty for specified object fields".
    let errors = refusals(spec_with(json!({"foo": {"description": "x"}})));
    assert_eq!(
        errors,
        [
            "openAPIV3Schema.properties[spec].properties[foo].type: Required value: must not be empty for specified object fields"
        ]
    );
    let path_errors = match Structural::parse(
        &spec_with(json!({"foo": {}})),
        "spec.versions[0].schema.openAPIV3Schema",
    ) {
        Err(causes) => causes,
        Ok(_) => panic!("accepted"),
    };
    assert!(
        path_errors[0]
            .field
            .starts_with("spec.versions[0].schema.openAPIV3Schema.properties[spec]")
    );
    assert_eq!(path_errors[0].reason, "FieldValueRequired");
}

#[test]
fn array_needs_items_and_root_needs_object() {
    // ValidateStructural: items "must be specified"; "must be object at the root".
    assert_eq!(
        refusals(spec_with(json!({"list": {"type": "array"}}))),
        [
            "openAPIV3Schema.properties[spec].properties[list].items: Required value: must be specified"
        ]
    );
    assert_eq!(
        refusals(json!({"type": "string"})),
        [r#"openAPIV3Schema.type: Invalid value: "string": must be object at the root"#]
    );
    assert_eq!(
        refusals(json!({"type": "object", "additionalProperties": {"type": "string"}})),
        ["openAPIV3Schema.additionalProperties: Forbidden: must not be used at the root"]
    );
}

#[test]
fn metadata_may_only_restrict_name_and_generate_name() {
    // validateStructuralMetadataInvariants.
    let schema = json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}});
    assert_eq!(
        refusals(schema),
        [
            "openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
        ]
    );
    let schema =
        json!({"type": "object", "properties": {"metadata": {"type": "object", "default": {}}}});
    assert_eq!(
        refusals(schema),
        [
            "openAPIV3Schema.properties[metadata].default: Forbidden: must not be set in top-level metadata"
        ]
    );
}

#[test]
fn junctors_must_not_carry_structure() {
    // validateNestedValueValidation; the int-or-string anyOf is the exception.
    assert_eq!(
        refusals(spec_with(
            json!({"x": {"type": "string", "anyOf": [{"type": "string"}, {"description": "d"}]}})
        )),
        [
            "openAPIV3Schema.properties[spec].properties[x].anyOf[0].type: Forbidden: must be empty to be structural",
            "openAPIV3Schema.properties[spec].properties[x].anyOf[1].description: Forbidden: must be empty to be structural",
        ]
    );
    let int_or_string = json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]});
    parsed(spec_with(json!({"x": int_or_string})));
}

#[test]
fn junctor_properties_must_exist_structurally() {
    // complete.go: "because it is defined in".
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}},
        "anyOf": [{"properties": {"spec": {"properties": {"x": {"minimum": 1}}}}}]});
    assert_eq!(
        refusals(schema),
        [
            "openAPIV3Schema.properties[spec].properties[x]: Required value: because it is defined in openAPIV3Schema.anyOf[0].properties[spec].properties[x]"
        ]
    );
}

#[test]
fn openapi_checks_of_crd_validation() {
    // ValidateCustomResourceDefinitionOpenAPISchema / specStandardValidatorV3.
    assert_eq!(
        refusals(spec_with(json!({"x": {"type": "foo"}}))),
        [
            r#"openAPIV3Schema.properties[spec].properties[x].type: Unsupported value: "foo": supported values: "array", "boolean", "integer", "number", "object", "string""#
        ]
    );
    assert_eq!(
        refusals(spec_with(
            json!({"x": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}})
        )),
        [
            "openAPIV3Schema.properties[spec].properties[x].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
        ]
    );
    assert_eq!(
        refusals(spec_with(
            json!({"x": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}})
        )),
        [
            "openAPIV3Schema.properties[spec].properties[x].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        ]
    );
    let mut nullable_root = spec_with(json!({}));
    nullable_root["nullable"] = json!(true);
    assert_eq!(
        refusals(nullable_root),
        ["openAPIV3Schema.nullable: Forbidden: nullable cannot be true at the root"]
    );
}

#[test]
fn list_map_keys_must_be_required_or_defaulted() {
    // validateMapListKeysMapSet.
    let list = json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {"name": {"type": "string"}}}});
    assert_eq!(
        refusals(spec_with(json!({"list": list}))),
        [
            "openAPIV3Schema.properties[spec].properties[list].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
        ]
    );
    let list = json!({"type": "array", "x-kubernetes-list-type": "map",
        "items": {"type": "object", "properties": {"name": {"type": "string"}}}});
    assert_eq!(
        refusals(spec_with(json!({"list": list}))),
        [
            "openAPIV3Schema.properties[spec].properties[list].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"
        ]
    );
}

#[test]
fn defaults_must_be_pruned_and_valid() {
    // ValidateDefaults: "must not have unknown fields"; the default validated
    // by a validator rooted at the default (hence " in body").
    let spec = json!({"type": "object", "default": {"a": 1, "b": 2}, "properties": {"a": {"type": "integer"}}});
    assert_eq!(
        refusals(json!({"type": "object", "properties": {"spec": spec}})),
        [
            r#"openAPIV3Schema.properties[spec].default: Invalid value: {"a":1,"b":2}: must not have unknown fields"#
        ]
    );
    assert_eq!(
        refusals(spec_with(
            json!({"x": {"type": "integer", "default": "abc"}})
        )),
        [
            r#"openAPIV3Schema.properties[spec].properties[x].default: Invalid value: "string":  in body must be of type integer: "string""#
        ]
    );
}

#[test]
fn patterns_must_compile_and_unsupported_fields_are_refused() {
    // validateValueValidation pattern; NewStructural's unsupported fields.
    let errors = refusals(spec_with(json!({"x": {"type": "string", "pattern": "("}})));
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].starts_with(r#"openAPIV3Schema.properties[spec].properties[x].pattern: Invalid value: "(": must be a valid regular expression, but isn't: error parsing regexp"#),
        "{errors:?}"
    );
    let mut schema = spec_with(json!({}));
    schema["$schema"] = json!("http://json-schema.org/draft-04/schema#");
    assert_eq!(
        refusals(schema),
        [r#"openAPIV3Schema: Invalid value: "": OpenAPIV3Schema 'schema' is not supported"#]
    );
    assert_eq!(
        refusals(spec_with(json!({"x": {"$ref": "#/definitions/x"}}))),
        ["openAPIV3Schema.properties[spec].properties[x].$ref: Forbidden: $ref is not supported",]
    );
}

#[test]
fn malformed_schema_fields_are_refused() {
    // JSONSchemaProps decoding: a field of the wrong JSON type.
    assert_eq!(
        refusals(spec_with(json!({"x": {"type": 5}}))),
        ["openAPIV3Schema.properties[spec].properties[x].type: Invalid value: 5: must be a string"]
    );
}
