//! One `x-kubernetes-validations` entry: read, checked as
//! apiextensions-apiserver's CRD validation does (the static checks, then
//! compilation and type check), and compiled.

use cel::Program;
use serde::Deserialize;
use serde_json::Value;

use super::check::{self, Issue, Ty};
use super::compiled::{Reason, Rule};
use super::model::Node;
use crate::crd::schema::go_quote;
use crate::error::Cause;

/// A rule as written in the schema.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default)]
    rule: String,
    message: Option<String>,
    message_expression: Option<String>,
    reason: Option<String>,
    field_path: Option<String>,
    optional_old_self: Option<bool>,
}

impl Raw {
    /// The rule as Go's `%#v` renders the internal `ValidationRule`, the
    /// value compile errors quote.
    fn go_repr(&self) -> String {
        let text = |s: &Option<String>| go_quote(s.as_deref().unwrap_or_default());
        let pointer =
            |set: bool, ty: &str| format!("(*{ty})({})", if set { "0xc000010000" } else { "nil" });
        format!(
            "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{}, FieldPath:{}, OptionalOldSelf:{}}}",
            go_quote(&self.rule),
            text(&self.message),
            text(&self.message_expression),
            pointer(self.reason.is_some(), "apiextensions.FieldValueErrorReason"),
            text(&self.field_path),
            pointer(self.optional_old_self.is_some(), "bool"),
        )
    }
}

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// What the schema around a node forbids or has already got wrong.
pub(super) struct Context<'a> {
    /// The schema path of the node (`spec.versions[0].schema.openAPIV3Schema.properties[spec]`).
    pub path: &'a str,
    /// The highest list whose items can't be correlated, if the node is
    /// below one: `oldSelf` may not be used there.
    pub uncorrelatable: Option<&'a str>,
    /// Whether the schema at or below the node already has errors: rules
    /// are then not compiled.
    pub schema_errors: bool,
}

/// The rules of a node that compiled, and whether any failed the static
/// checks of its fields.
pub(super) struct Compiled {
    /// The compiled rules.
    pub rules: Vec<Rule>,
    /// Whether a static check failed (upstream then compiles no rule above).
    pub static_errors: bool,
}

/// Reads, checks and compiles the rules of `node` from `schema`, adding the
/// causes of anything wrong to `causes`.
pub(super) fn compile_all(
    schema: &Value,
    node: &Node,
    ctx: &Context<'_>,
    causes: &mut Vec<Cause>,
) -> Compiled {
    let mut compiled = Compiled {
        rules: Vec::new(),
        static_errors: false,
    };
    let Some(entries) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    else {
        return compiled;
    };
    let raws: Vec<Raw> = entries
        .iter()
        .map(|e| Raw::deserialize(e).unwrap_or_default())
        .collect();
    let before = causes.len();
    for (i, raw) in raws.iter().enumerate() {
        static_checks(
            raw,
            node,
            &format!("{}.x-kubernetes-validations[{i}]", ctx.path),
            causes,
        );
    }
    compiled.static_errors = causes.len() > before;
    if ctx.schema_errors || compiled.static_errors {
        return compiled;
    }
    if node.kind == super::model::Kind::Hidden {
        causes.push(Cause {
            reason: "InternalError",
            message: "Internal error: internal error: failed to retrieve type information for x-kubernetes-validations".into(),
            field: format!("{}.x-kubernetes-validations", ctx.path),
        });
        return compiled;
    }
    compiled.rules = raws
        .iter()
        .enumerate()
        .filter_map(|(i, raw)| {
            let path = format!("{}.x-kubernetes-validations[{i}]", ctx.path);
            compile(raw, node, ctx, &path, causes)
        })
        .collect();
    compiled
}

fn invalid(field: String, value: String, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        message: format!("Invalid value: {value}: {detail}"),
        field,
    }
}

fn required(field: String, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired",
        message: format!("Required value: {detail}"),
        field,
    }
}

const REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// The checks of a rule's fields, before it is compiled.
fn static_checks(raw: &Raw, node: &Node, path: &str, causes: &mut Vec<Cause>) {
    let rule = raw.rule.trim();
    let message = raw.message.as_deref().unwrap_or_default();
    if rule.is_empty() {
        causes.push(required(format!("{path}.rule"), "rule is not specified"));
    } else if !message.is_empty() && message.trim().is_empty() {
        causes.push(invalid(
            format!("{path}.message"),
            go_quote(message),
            "message must be non-empty if specified",
        ));
    } else if has_newlines(message.trim()) {
        causes.push(invalid(
            format!("{path}.message"),
            go_quote(message),
            "message must not contain line breaks",
        ));
    } else if has_newlines(rule) && message.trim().is_empty() {
        causes.push(required(
            format!("{path}.message"),
            "message must be specified if rule contains line breaks",
        ));
    }
    if let Some(expr) = &raw.message_expression
        && !expr.is_empty()
        && expr.trim().is_empty()
    {
        causes.push(required(
            format!("{path}.messageExpression"),
            "messageExpression must be non-empty if specified",
        ));
    }
    if let Some(reason) = &raw.reason
        && !REASONS.contains(&reason.as_str())
    {
        let supported: Vec<String> = REASONS.iter().map(|r| go_quote(r)).collect();
        causes.push(Cause {
            reason: "FieldValueNotSupported",
            message: format!(
                "Unsupported value: {}: supported values: {}",
                go_quote(reason),
                supported.join(", ")
            ),
            field: format!("{path}.reason"),
        });
    }
    if let Some(field_path) = raw.field_path.as_deref().filter(|f| !f.is_empty()) {
        let field = format!("{path}.fieldPath");
        if field_path.trim().is_empty() {
            causes.push(invalid(
                field.clone(),
                go_quote(field_path),
                "fieldPath must be non-empty if specified",
            ));
        }
        if has_newlines(field_path) {
            causes.push(invalid(
                field.clone(),
                go_quote(field_path),
                "fieldPath must not contain line breaks",
            ));
        }
        if super::field_path::normalize(field_path, node).is_none() {
            causes.push(invalid(
                field,
                go_quote(field_path),
                "fieldPath must be a valid path",
            ));
        }
    }
}

/// Compiles and checks one rule that passed the static checks.
fn compile(
    raw: &Raw,
    node: &Node,
    ctx: &Context<'_>,
    path: &str,
    causes: &mut Vec<Cause>,
) -> Option<Rule> {
    let optional_old_self = raw.optional_old_self.unwrap_or(false);
    let rule_field = format!("{path}.rule");
    let (program, checked) = match compile_expr(&raw.rule, node, optional_old_self) {
        Ok(compiled) => compiled,
        Err(detail) => {
            causes.push(invalid(
                rule_field,
                raw.go_repr(),
                &format!("compilation failed: {detail}"),
            ));
            return None;
        }
    };
    if checked.result.is_not(&Ty::Bool) {
        causes.push(invalid(
            rule_field,
            raw.go_repr(),
            "cel expression must evaluate to a bool",
        ));
        return None;
    }
    let uses_old_self = checked.uses_old_self;
    let mut message_expression = None;
    if let Some(source) = raw.message_expression.as_deref().filter(|s| !s.is_empty()) {
        let field = format!("{path}.messageExpression");
        match compile_expr(source, node, optional_old_self) {
            Err(detail) => {
                causes.push(invalid(
                    field,
                    raw.go_repr(),
                    &format!("messageExpression compilation failed: {detail}"),
                ));
            }
            Ok((_, checked)) if checked.result.is_not(&Ty::String) => {
                causes.push(invalid(
                    field,
                    raw.go_repr(),
                    "messageExpression must evaluate to a string",
                ));
            }
            Ok((program, _)) => message_expression = Some(program),
        }
    }
    if uses_old_self {
        if let Some(list) = ctx.uncorrelatable {
            let detail = format!(
                "oldSelf cannot be used on the uncorrelatable portion of the schema within {list}"
            );
            causes.push(invalid(rule_field, go_quote(&raw.rule), &detail));
        }
    } else if let Some(set) = raw.optional_old_self {
        causes.push(invalid(
            format!("{path}.optionalOldSelf"),
            set.to_string(),
            "may not be set if oldSelf is not used in rule",
        ));
    }
    let reason = match raw.reason.as_deref() {
        Some("FieldValueForbidden") => Reason::Forbidden,
        Some("FieldValueRequired") => Reason::Required,
        Some("FieldValueDuplicate") => Reason::Duplicate,
        _ => Reason::Invalid,
    };
    Some(Rule {
        source: raw.rule.trim().to_string(),
        message: raw
            .message
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(str::to_string),
        program,
        message_expression,
        reason,
        field_path: raw
            .field_path
            .as_deref()
            .and_then(|f| super::field_path::normalize(f, node)),
        optional_old_self,
        uses_old_self,
    })
}

/// Parses and checks an expression; the error is cel-go's rendering of its
/// issues.
fn compile_expr<'n>(
    source: &str,
    node: &'n Node,
    optional_old_self: bool,
) -> Result<(Program, check::Checked<'n>), String> {
    let program = kubecel::compile(source)?;
    let checked = check::check(program.expression(), node, optional_old_self);
    if checked.issues.is_empty() {
        return Ok((program, checked));
    }
    let rendered: Vec<String> = checked
        .issues
        .iter()
        .map(|Issue { id, message }| {
            let offset = program
                .source_info()
                .offset_for(*id)
                .map_or(0, |(start, _)| start);
            kubecel::render(source, offset, message)
        })
        .collect();
    Err(rendered.join("\n"))
}
