//! Rules refused when the CRD is written, with apiextensions' causes.

use serde_json::json;

use super::{PATH, resource, shown, spec_errors};
use crate::crd::cel::Rules;

const RULE0: &str =
    "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0]";

/// `%#v` of a rule with only `rule` set.
fn repr(rule: &str) -> String {
    format!(
        "apiextensions.ValidationRule{{Rule:{rule:?}, Message:\"\", MessageExpression:\"\", \
         Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}}"
    )
}

fn spec_with(rule: serde_json::Value) -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "replicas": {"type": "integer"},
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        },
        "x-kubernetes-validations": [rule],
    })
}

/// validation.go (CRD): a syntax error is `compilation failed:` with
/// cel-go's error rendering, at `...x-kubernetes-validations[0].rule`.
#[test]
fn syntax_error_is_refused() {
    let causes = spec_errors(spec_with(json!({"rule": "self.replicas >"})));
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].field, format!("{RULE0}.rule"));
    assert_eq!(causes[0].reason, "FieldValueInvalid");
    let prefix = format!(
        "Invalid value: {}: compilation failed: ERROR: <input>:1:",
        repr("self.replicas >")
    );
    assert!(
        causes[0].message.starts_with(&prefix),
        "{}",
        causes[0].message
    );
    assert!(
        causes[0].message.contains("\n | self.replicas >\n | "),
        "{}",
        causes[0].message
    );
}

/// Kubernetes docs (validation rules, compilation failures): `no_such_field`.
#[test]
fn undefined_field_is_refused() {
    let causes = spec_errors(spec_with(json!({"rule": "self.nonExistingField > 0"})));
    assert_eq!(
        shown(&causes),
        vec![(
            format!("{RULE0}.rule"),
            format!(
                "Invalid value: {}: compilation failed: ERROR: <input>:1:5: undefined field 'nonExistingField'\n \
                 | self.nonExistingField > 0\n | ....^",
                repr("self.nonExistingField > 0")
            )
        )]
    );
}

/// Kubernetes docs (validation rules, compilation failures):
/// `no_matching_overload` for `self == true` on an integer.
#[test]
fn mismatched_equality_is_refused() {
    let spec = json!({
        "type": "object",
        "properties": {"replicas": {"type": "integer", "x-kubernetes-validations": [{"rule": "self == true"}]}},
    });
    let causes = spec_errors(spec);
    assert_eq!(
        causes[0].field,
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[replicas].x-kubernetes-validations[0].rule"
    );
    assert!(
        causes[0].message.ends_with(
            "compilation failed: ERROR: <input>:1:6: found no matching overload for '_==_' applied to '(int, bool)'\n \
             | self == true\n | .....^"
        ),
        "{}",
        causes[0].message
    );
}

/// cel-go checker: an unknown identifier is an undeclared reference.
#[test]
fn undeclared_reference_is_refused() {
    let causes = spec_errors(spec_with(json!({"rule": "replicas > 1"})));
    assert!(
        causes[0]
            .message
            .contains("ERROR: <input>:1:1: undeclared reference to 'replicas' (in container '')"),
        "{}",
        causes[0].message
    );
}

/// compilation.go: a rule must evaluate to a bool.
#[test]
fn non_bool_rule_is_refused() {
    let causes = spec_errors(spec_with(json!({"rule": "self.replicas + 1"})));
    assert_eq!(
        shown(&causes),
        vec![(
            format!("{RULE0}.rule"),
            format!(
                "Invalid value: {}: cel expression must evaluate to a bool",
                repr("self.replicas + 1")
            )
        )]
    );
}

/// validation.go (CRD): the static checks of a rule's fields.
#[test]
fn static_checks_of_rule_fields() {
    let cases = [
        (
            json!({"rule": "  "}),
            ".rule",
            "Required value: rule is not specified",
        ),
        (
            json!({"rule": "true", "message": " "}),
            ".message",
            "Invalid value: \" \": message must be non-empty if specified",
        ),
        (
            json!({"rule": "true", "message": "a\nb"}),
            ".message",
            "Invalid value: \"a\\nb\": message must not contain line breaks",
        ),
        (
            json!({"rule": "true &&\ntrue"}),
            ".message",
            "Required value: message must be specified if rule contains line breaks",
        ),
        (
            json!({"rule": "true", "messageExpression": " "}),
            ".messageExpression",
            "Required value: messageExpression must be non-empty if specified",
        ),
        (
            json!({"rule": "true", "fieldPath": ".nope"}),
            ".fieldPath",
            "Invalid value: \".nope\": fieldPath must be a valid path",
        ),
    ];
    for (rule, field, message) in cases {
        let causes = spec_errors(spec_with(rule.clone()));
        assert_eq!(
            shown(&causes),
            vec![(format!("{RULE0}{field}"), message.to_string())],
            "{rule}"
        );
    }
}

/// validation.go (CRD): `reason` must be one of the four supported.
#[test]
fn unsupported_reason_is_refused() {
    let causes = spec_errors(spec_with(
        json!({"rule": "true", "reason": "FieldValueTooLong"}),
    ));
    assert_eq!(causes[0].reason, "FieldValueNotSupported");
    assert_eq!(
        shown(&causes),
        vec![(
            format!("{RULE0}.reason"),
            "Unsupported value: \"FieldValueTooLong\": supported values: \"FieldValueDuplicate\", \
             \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""
                .into()
        )]
    );
}

/// validation.go (CRD): `oldSelf` is refused under a list that is not of
/// type map, naming the highest such list.
#[test]
fn old_self_under_a_set_is_refused() {
    let spec = json!({
        "type": "object",
        "properties": {"tags": {
            "type": "array",
            "x-kubernetes-list-type": "set",
            "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]},
        }},
    });
    let tags = "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[tags]";
    assert_eq!(
        shown(&spec_errors(spec)),
        vec![(
            format!("{tags}.items.x-kubernetes-validations[0].rule"),
            format!(
                "Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within {tags}"
            )
        )]
    );
}

/// validation.go (CRD): `optionalOldSelf` only with a transition rule.
#[test]
fn optional_old_self_without_old_self_is_refused() {
    let causes = spec_errors(spec_with(json!({"rule": "true", "optionalOldSelf": true})));
    assert_eq!(
        shown(&causes),
        vec![(
            format!("{RULE0}.optionalOldSelf"),
            "Invalid value: true: may not be set if oldSelf is not used in rule".into()
        )]
    );
}

/// compilation.go: `messageExpression` must compile and evaluate to a string.
#[test]
fn bad_message_expressions_are_refused() {
    let causes = spec_errors(spec_with(
        json!({"rule": "true", "messageExpression": "self.replicas"}),
    ));
    assert_eq!(causes[0].field, format!("{RULE0}.messageExpression"));
    assert!(
        causes[0]
            .message
            .ends_with(": messageExpression must evaluate to a string"),
        "{}",
        causes[0].message
    );
    let causes = spec_errors(spec_with(
        json!({"rule": "true", "messageExpression": "'a' +"}),
    ));
    assert!(
        causes[0].message.contains("MessageExpression:\"'a' +\""),
        "{}",
        causes[0].message
    );
    assert!(
        causes[0]
            .message
            .contains(": messageExpression compilation failed: ERROR: <input>:1:"),
        "{}",
        causes[0].message
    );
}

/// model/schemas.go (`WithTypeAndObjectMeta`): at the root, `metadata` has
/// only `name` and `generateName`.
#[test]
fn root_metadata_exposes_name_only() {
    let mut schema = resource(json!({"type": "object"}));
    schema["x-kubernetes-validations"] = json!([{"rule": "self.metadata.name.startsWith('a')"}]);
    assert!(Rules::compile(&schema, PATH).is_ok());
    schema["x-kubernetes-validations"] = json!([{"rule": "has(self.metadata.labels)"}]);
    let causes = Rules::compile(&schema, PATH).expect_err("labels are not visible");
    assert_eq!(
        causes[0].field,
        format!("{PATH}.x-kubernetes-validations[0].rule")
    );
    assert!(
        causes[0].message.contains("undefined field 'labels'"),
        "{}",
        causes[0].message
    );
}

/// compilation: a schema without rules compiles to nothing to evaluate.
#[test]
fn schema_without_rules_is_empty() {
    let rules = Rules::compile(&resource(json!({"type": "object"})), PATH).expect("compiles");
    assert!(rules.is_empty());
}
