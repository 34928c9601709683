//! apiextensions' own table for ValidateCustomResource
//! (pkg/apiserver/validation/validation_test.go, release-1.36), run on the
//! kube-openapi port directly: same schemas, same objects, same errors.

use std::collections::BTreeSet;

use serde_json::json;

use super::super::{decode, openapi};
use super::*;

/// The errors of `obj` against `schema`, as the upstream test collects them.
fn errors(schema: &Value, obj: Value) -> BTreeSet<String> {
    let mut errs = Vec::new();
    let node = decode::decode(schema, "", &mut errs);
    assert!(errs.is_empty(), "{errs:?}");
    let outcome = openapi::validate(&node, &obj, None, "");
    rendered(&openapi::to_causes(&outcome.findings, None))
        .into_iter()
        .collect()
}

fn set(expected: &[&str]) -> BTreeSet<String> {
    expected.iter().map(|s| s.to_string()).collect()
}

fn field(schema: Value) -> Value {
    json!({"type": "object", "properties": {"field": schema}})
}

#[test]
fn int_or_string_with_any_of() {
    // "nullable, x-kubernetes-int-or-string and user-provider anyOf".
    let s = field(json!({"nullable": true, "x-kubernetes-int-or-string": true,
        "anyOf": [{"type": "integer"}, {"type": "string"}]}));
    for ok in [
        json!({}),
        json!({"field": null}),
        json!({"field": 42}),
        json!({"field": "foo"}),
    ] {
        assert!(errors(&s, ok.clone()).is_empty(), "{ok}");
    }
    let any_of = r#"<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)"#;
    for (value, ty) in [
        (json!(true), "boolean"),
        (json!({}), "object"),
        (json!([]), "array"),
    ] {
        assert_eq!(
            errors(&s, json!({"field": value})),
            set(&[
                any_of,
                &format!(
                    r#"field: Invalid value: "{ty}": field in body must be of type integer,string: "{ty}""#
                ),
                &format!(
                    r#"field: Invalid value: "{ty}": field in body must be of type integer: "{ty}""#
                ),
            ])
        );
    }
    assert_eq!(
        errors(&s, json!({"field": 1.2})),
        set(&[
            any_of,
            r#"field: Invalid value: "number": field in body must be of type integer,string: "number""#,
            r#"field: Invalid value: "number": field in body must be of type integer: "number""#,
            r#"<nil>: Invalid value: "": Checked value must be of type integer (default format) in field"#,
        ])
    );
}

#[test]
fn int_or_string_with_all_of() {
    // "nullable, x-kubernetes-int-or-string and user-provider allOf".
    let s = field(json!({"nullable": true, "x-kubernetes-int-or-string": true,
        "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}]}));
    assert!(errors(&s, json!({"field": 42})).is_empty());
    assert_eq!(
        errors(&s, json!({"field": true})),
        set(&[
            r#"<nil>: Invalid value: "": "field" must validate all the schemas (allOf). None validated"#,
            r#"<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)"#,
            r#"field: Invalid value: "boolean": field in body must be of type integer,string: "boolean""#,
            r#"field: Invalid value: "boolean": field in body must be of type integer: "boolean""#,
        ])
    );
}

#[test]
fn required_and_enum() {
    // "required field" and "enum".
    let s = json!({"type": "object", "required": ["field"], "properties": {"field": {
        "type": "object", "required": ["nested"], "properties": {"nested": {}}}}});
    assert_eq!(
        errors(&s, json!({"test": "a"})),
        set(&["field: Required value"])
    );
    assert_eq!(
        errors(&s, json!({"field": {}})),
        set(&["field.nested: Required value"])
    );
    let s = field(
        json!({"type": "object", "required": ["nestedint", "nestedstring"], "properties": {
        "nestedint": {"type": "integer", "enum": [1, 2]},
        "nestedstring": {"type": "string", "enum": ["a", "b"]}}}),
    );
    assert_eq!(
        errors(&s, json!({"field": {}})),
        set(&[
            "field.nestedint: Required value",
            "field.nestedstring: Required value"
        ])
    );
    assert_eq!(
        errors(
            &s,
            json!({"field": {"nestedint": "x", "nestedstring": true}})
        ),
        set(&[
            r#"field.nestedint: Invalid value: "string": field.nestedint in body must be of type integer: "string""#,
            r#"field.nestedint: Unsupported value: "x": supported values: "1", "2""#,
            r#"field.nestedstring: Invalid value: "boolean": field.nestedstring in body must be of type string: "boolean""#,
            r#"field.nestedstring: Unsupported value: true: supported values: "a", "b""#,
        ])
    );
}

#[test]
fn counts_lengths_and_k8s_names() {
    // "maxProperties", "maxItems", "maxLength", "k8sLongName", "k8sShortName".
    let s = json!({"type": "object", "properties": {
        "p": {"type": "object", "maxProperties": 2},
        "i": {"type": "array", "maxItems": 2},
        "l": {"type": "string", "maxLength": 2},
        "long": {"type": "string", "format": "k8s-long-name"},
        "short": {"type": "string", "format": "k8s-short-name"},
    }});
    assert_eq!(
        errors(
            &s,
            json!({"p": {"a": true, "b": true, "c": true}, "i": ["a", "b", "c"], "l": "abc",
            "long": "a.-", "short": "a-"})
        ),
        set(&[
            "i: Too many: 3: must have at most 2 items",
            "l: Too long: may not be more than 2 bytes",
            r#"long: Invalid value: "a.-": long in body must be of type k8s-long-name: "a.-""#,
            "p: Too many: 3: must have at most 2 items",
            r#"short: Invalid value: "a-": short in body must be of type k8s-short-name: "a-""#,
        ])
    );
}

#[test]
fn numeric_formats() {
    // "numeric formats valid" / "numeric formats invalid".
    let s = json!({"type": "object", "properties": {
        "intThirtyTwo": {"type": "integer", "format": "int32"},
        "intSixtyFour": {"type": "integer", "format": "int64"},
        "floatThreeTwo": {"type": "number", "format": "float"},
        "floatSixFour": {"type": "number", "format": "double"},
    }});
    let max32 = f64::from(f32::MAX);
    for ok in [
        json!({"intThirtyTwo": i32::MIN, "intSixtyFour": i64::MIN, "floatThreeTwo": -max32, "floatSixFour": -f64::MAX}),
        json!({"intThirtyTwo": 0, "intSixtyFour": 0, "floatThreeTwo": 0.0, "floatSixFour": 0.0}),
        json!({"intThirtyTwo": i32::MAX, "intSixtyFour": i64::MAX, "floatThreeTwo": max32, "floatSixFour": f64::MAX}),
    ] {
        assert!(errors(&s, ok.clone()).is_empty(), "{ok}");
    }
    let int32 = r#"<nil>: Invalid value: "": Checked value must be of type integer with format int32 in intThirtyTwo"#;
    assert_eq!(
        errors(&s, json!({"intThirtyTwo": i64::from(i32::MAX) + 1})),
        set(&[int32])
    );
    assert_eq!(
        errors(&s, json!({"intThirtyTwo": i64::from(i32::MIN) - 1})),
        set(&[int32])
    );
    for big in [i64::MAX as f64 * 1.1, i64::MIN as f64 * 1.1] {
        assert_eq!(
            errors(&s, json!({"intSixtyFour": big})),
            set(&[
                r#"intSixtyFour: Invalid value: "float64": intSixtyFour in body must be of type int64: "float64""#,
                r#"<nil>: Invalid value: "": Checked value must be of type integer with format int64 in intSixtyFour"#,
            ])
        );
    }
    let float = r#"<nil>: Invalid value: "": Checked value must be of type number with format float in floatThreeTwo"#;
    assert_eq!(
        errors(&s, json!({"floatThreeTwo": max32 * 1.1})),
        set(&[float])
    );
    assert_eq!(
        errors(&s, json!({"floatThreeTwo": -max32 * 1.1})),
        set(&[float])
    );
}
