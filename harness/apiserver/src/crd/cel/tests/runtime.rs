//! Rules evaluated on objects: messages, paths, reasons, typing,
//! correlation of old values and ratcheting.

use serde_json::{Value, json};

use super::{PATH, causes_of, object, on_x, passes, resource, shown, spec_rules};
use crate::crd::cel::{Rules, blocked};
use crate::error::Cause;

fn replicas_spec(rule: Value) -> Rules {
    spec_rules(json!({
        "type": "object",
        "properties": {"replicas": {"type": "integer"}, "max": {"type": "integer"}},
        "x-kubernetes-validations": [rule],
    }))
}

fn too_many() -> Value {
    object(json!({"replicas": 5, "max": 3}))
}

/// validation.go (`ruleMessageOrDefault`): without a message, `failed rule: <rule>`.
#[test]
fn default_message_names_the_rule() {
    let rules = replicas_spec(json!({"rule": "self.replicas <= self.max"}));
    assert_eq!(
        shown(&rules.validate(&too_many(), None)),
        vec![(
            "spec".into(),
            "Invalid value: \"object\": failed rule: self.replicas <= self.max".into()
        )]
    );
}

/// validation.go: `messageExpression`'s result is the message.
#[test]
fn message_expression_is_the_message() {
    let rules = replicas_spec(json!({
        "rule": "self.replicas <= self.max",
        "message": "static",
        "messageExpression": "'replicas ' + string(self.replicas) + ' exceeds ' + string(self.max)",
    }));
    assert_eq!(
        shown(&rules.validate(&too_many(), None)),
        vec![(
            "spec".into(),
            "Invalid value: \"object\": replicas 5 exceeds 3".into()
        )]
    );
}

/// validation.go (`evalMessageExpression`): a `messageExpression` that fails
/// or yields an empty string falls back to the message.
#[test]
fn failing_message_expression_falls_back_to_the_message() {
    for expression in ["'x' + string(self.replicas / (self.max - 3))", "'  '"] {
        let rules = replicas_spec(json!({
            "rule": "self.replicas <= self.max",
            "message": "too many",
            "messageExpression": expression,
        }));
        assert_eq!(
            shown(&rules.validate(&too_many(), None)),
            vec![("spec".into(), "Invalid value: \"object\": too many".into())],
            "{expression}"
        );
    }
}

/// validation.go: `fieldPath` is appended to the node's path.
#[test]
fn field_path_is_appended() {
    let rules = replicas_spec(
        json!({"rule": "self.replicas <= self.max", "message": "m", "fieldPath": ".replicas"}),
    );
    assert_eq!(
        shown(&rules.validate(&too_many(), None))[0].0,
        "spec.replicas"
    );
}

/// validation.go (`fieldErrorForReason`): each reason's rendering.
#[test]
fn reasons_render_as_upstream() {
    let cases = [
        (
            "FieldValueForbidden",
            "FieldValueForbidden",
            "Forbidden: too many",
        ),
        (
            "FieldValueRequired",
            "FieldValueRequired",
            "Required value: too many",
        ),
        (
            "FieldValueDuplicate",
            "FieldValueDuplicate",
            "Duplicate value: \"object\"",
        ),
        (
            "FieldValueInvalid",
            "FieldValueInvalid",
            "Invalid value: \"object\": too many",
        ),
    ];
    for (reason, want_reason, message) in cases {
        let rules = replicas_spec(
            json!({"rule": "self.replicas <= self.max", "message": "too many", "reason": reason}),
        );
        let causes = rules.validate(&too_many(), None);
        assert_eq!(
            causes,
            vec![Cause {
                reason: want_reason,
                message: message.into(),
                field: "spec".into()
            }]
        );
    }
}

/// validation.go: a rule at the resource root fails at Go's nil path.
#[test]
fn root_rule_fails_at_nil_path() {
    let mut schema = resource(json!({"type": "object"}));
    schema["x-kubernetes-validations"] = json!([{"rule": "self.metadata.name.startsWith('a')"}]);
    let rules = Rules::compile(&schema, PATH).expect("compiles");
    assert_eq!(
        shown(&rules.validate(&object(json!({})), None)),
        vec![(
            "<nil>".into(),
            "Invalid value: \"object\": failed rule: self.metadata.name.startsWith('a')".into()
        )]
    );
}

/// validation.go: `no such key: <field>` for an absent field.
#[test]
fn absent_field_is_an_evaluation_error() {
    let rules = replicas_spec(json!({"rule": "self.replicas <= self.max", "message": "m"}));
    assert_eq!(
        shown(&rules.validate(&object(json!({"replicas": 1})), None)),
        vec![(
            "spec".into(),
            "Invalid value: \"object\": no such key: max evaluating rule: m".into()
        )]
    );
}

/// model/schemas.go: int-or-string is `dyn`, typed by its value.
#[test]
fn int_or_string_is_int_or_string() {
    let schema = json!({"x-kubernetes-int-or-string": true});
    let rule = "type(self) == int ? self >= 0 : self.endsWith('%')";
    assert!(passes(schema.clone(), rule, json!(3)));
    assert!(passes(schema.clone(), rule, json!("50%")));
    assert!(!passes(schema.clone(), rule, json!(-1)));
    assert!(!passes(schema, rule, json!("50")));
}

/// validation.go: a runtime overload mismatch (int-or-string used as a
/// string while it is an int) has its own message.
#[test]
fn int_or_string_overload_error() {
    let causes = causes_of(
        json!({"x-kubernetes-int-or-string": true}),
        "self.startsWith('a')",
        json!(3),
    );
    assert_eq!(
        causes,
        vec![(
            "spec.x".into(),
            "Invalid value: \"\": 'no such overload': call arguments did not match a supported operator, \
             function or macro signature for rule: self.startsWith('a')"
                .into()
        )]
    );
}

/// model/schemas.go: `number` is `double` even when written as an integer,
/// `integer` is `int`.
#[test]
fn numbers_are_doubles_and_integers_ints() {
    assert!(passes(
        json!({"type": "number"}),
        "type(self) == double && self > 1.5",
        json!(2)
    ));
    assert!(passes(
        json!({"type": "integer"}),
        "type(self) == int && self == 2",
        json!(2)
    ));
    assert!(passes(json!({"type": "boolean"}), "self", json!(true)));
    assert!(passes(
        json!({"type": "string", "format": "byte"}),
        "self == b'hi'",
        json!("aGk=")
    ));
}

/// escaping.go: properties that are not CEL identifiers are escaped.
#[test]
fn property_names_are_escaped() {
    let schema = json!({"type": "object", "properties": {
        "foo-bar": {"type": "integer"}, "namespace": {"type": "string"}, "a.b": {"type": "integer"},
    }});
    let rule = "self.foo__dash__bar == 1 && self.__namespace__ == 'ns' && !has(self.a__dot__b)";
    assert!(passes(
        schema,
        rule,
        json!({"foo-bar": 1, "namespace": "ns"})
    ));
}

/// validation.go: null values are not validated.
#[test]
fn null_values_are_skipped() {
    assert!(passes(
        json!({"type": "integer", "nullable": true}),
        "self > 0",
        Value::Null
    ));
}

/// validation.go (`validateMap`): old values correlate by map key; a new
/// key has none, so its transition rule does not run.
#[test]
fn transition_rules_correlate_map_values_by_key() {
    let rules = spec_rules(json!({"type": "object", "properties": {"labels": {
        "type": "object",
        "additionalProperties": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]},
    }}}));
    let old = object(json!({"labels": {"a": "1", "b": "2"}}));
    let new = object(json!({"labels": {"a": "1", "b": "3", "c": "4"}}));
    assert_eq!(
        shown(&rules.validate(&new, Some(&old))),
        vec![(
            "spec.labels[b]".into(),
            "Invalid value: \"string\": immutable".into()
        )]
    );
}

/// validation.go (`validateArray`, maplist.go): items of a list of type map
/// correlate by their keys, whatever their order.
#[test]
fn transition_rules_correlate_map_list_items_by_key() {
    let rules = spec_rules(json!({"type": "object", "properties": {"pools": {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "size": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.size >= oldSelf.size", "message": "may not shrink"}],
        },
    }}}));
    let old = object(json!({"pools": [{"name": "a", "size": 3}, {"name": "b", "size": 3}]}));
    let new = object(
        json!({"pools": [{"name": "b", "size": 4}, {"name": "a", "size": 2}, {"name": "c", "size": 0}]}),
    );
    assert_eq!(
        shown(&rules.validate(&new, Some(&old))),
        vec![(
            "spec.pools[1]".into(),
            "Invalid value: \"object\": may not shrink".into()
        )]
    );
}

/// validation.go: with `optionalOldSelf`, a transition rule also runs on
/// create, `oldSelf` being `optional.none()`.
#[test]
fn optional_old_self_runs_on_create() {
    let rules = spec_rules(json!({"type": "object", "properties": {"replicas": {
        "type": "integer",
        "x-kubernetes-validations": [{
            "rule": "oldSelf.hasValue() ? self >= oldSelf.value() : self > 0",
            "optionalOldSelf": true,
            "message": "bad",
        }],
    }}}));
    let at = |n: i64| object(json!({"replicas": n}));
    assert_eq!(rules.validate(&at(0), None).len(), 1, "runs on create");
    assert_eq!(rules.validate(&at(1), None), vec![]);
    assert_eq!(
        rules.validate(&at(2), Some(&at(3))).len(),
        1,
        "compares on update"
    );
    assert_eq!(rules.validate(&at(4), Some(&at(3))), vec![]);
}

/// validation.go (ratcheting): on update, a failing non-transition rule on
/// an unchanged value is not an error; on a changed value, or on status
/// updates (no ratcheting), it is.
#[test]
fn unchanged_values_are_ratcheted() {
    let rules = spec_rules(json!({"type": "object", "properties": {
        "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() < 3", "message": "long"}]},
        "other": {"type": "integer"},
    }}));
    let old = object(json!({"name": "long", "other": 1}));
    let unchanged = object(json!({"name": "long", "other": 2}));
    assert_eq!(rules.validate(&unchanged, Some(&old)), vec![]);
    assert_eq!(rules.validate(&unchanged, None).len(), 1, "create");
    assert_eq!(
        rules.validate_status(&unchanged, Some(&old)).len(),
        1,
        "status"
    );
    let changed = object(json!({"name": "longer", "other": 1}));
    assert_eq!(
        shown(&rules.validate(&changed, Some(&old))),
        vec![("spec.name".into(), "Invalid value: \"string\": long".into())]
    );
}

/// strategy.go (`hasBlockingErr`): schema errors that block rules.
#[test]
fn blocking_schema_errors_skip_rules() {
    assert_eq!(blocked(&[Cause::invalid("spec.x", "a", "bad")]), None);
    assert_eq!(
        blocked(&[Cause::required("spec.x")]),
        Some(Cause {
            reason: "FieldValueInvalid",
            message: "Invalid value: \"null\": some validation rules were not checked because the object was invalid; \
                      correct the existing errors to complete validation"
                .into(),
            field: "<nil>".into(),
        })
    );
}

/// The macros and operators upstream CRDs use most.
#[test]
fn macros_and_operators() {
    let list = json!({"type": "array", "items": {"type": "integer"}});
    for rule in [
        "self.all(x, x > 0)",
        "self.exists(x, x == 2)",
        "self.exists_one(x, x == 3)",
        "self.map(x, x * 2) == [2, 4, 6]",
        "self.filter(x, x > 1).size() == 2",
        "size(self) == 3 && self[0] == 1",
        "2 in self",
        "self.size() > 2 ? true : false",
        "type(self) == list",
    ] {
        assert!(passes(list.clone(), rule, json!([1, 2, 3])), "{rule}");
    }
    let obj =
        json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}});
    assert!(passes(
        obj.clone(),
        "has(self.a) && !has(self.b)",
        json!({"a": "x"})
    ));
    assert!(passes(
        obj,
        "self.?b.orValue('none') == 'none'",
        json!({"a": "x"})
    ));
}

/// on_x sanity: a rule that holds yields no cause.
#[test]
fn passing_rule_has_no_cause() {
    let rules = on_x(json!({"type": "string"}), "self == 'a'");
    assert!(!rules.is_empty());
    assert_eq!(rules.validate(&object(json!({"x": "a"})), None), vec![]);
}
