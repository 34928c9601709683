//! Evaluating the compiled rules on an object, as apiextensions-apiserver's
//! `Validator.Validate` does: each node's rules with `self` (and `oldSelf`
//! where an old value correlates), then its children; failures and
//! evaluation errors as field causes; ratcheting on updates.

use cel::common::types::CelOptional;
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::{Context, ExecutionError, Program, Value as CelValue};
use serde_json::Value;

use super::compiled::{Reason, Rule};
use super::model::{ListType, Node};
use super::value::to_val;
use crate::error::Cause;
use kubecel::ENV;

/// The longest message a `messageExpression` may produce.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// Validates `new` (with `old`, its stored version on an update) against the
/// rules under `root`; `ratcheting` drops failures of non-transition rules on
/// values the update did not change.
pub(super) fn validate(
    root: &Node,
    new: &Value,
    old: Option<&Value>,
    ratcheting: bool,
) -> Vec<Cause> {
    let ratchet = match old {
        Some(old) if ratcheting => Ratchet {
            current: Some(Correlation {
                new,
                old,
                node: root,
            }),
            parent: None,
        },
        _ => Ratchet::default(),
    };
    let mut causes = Vec::new();
    walk(root, "", new, old, ratchet, &mut causes);
    causes
}

fn child_path(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn walk(
    node: &Node,
    path: &str,
    new: &Value,
    old: Option<&Value>,
    ratchet: Ratchet<'_>,
    causes: &mut Vec<Cause>,
) {
    if new.is_null() {
        // Only non-null values are validated.
        return;
    }
    let old = old.filter(|o| !o.is_null());
    if !node.rules.is_empty() {
        evaluate(node, path, new, old, ratchet, causes);
    }
    match new {
        Value::Object(map) => {
            let old_of = |k: &str| old.and_then(|o| o.get(k));
            if let Some(child) = node.additional.as_deref().filter(|n| n.has_rules) {
                for (k, v) in map {
                    let path = format!("{path}[{k}]");
                    walk(child, &path, v, old_of(k), ratchet.key(k), causes);
                }
            }
            for (k, v) in map {
                if let Some(child) = node.properties.get(k).filter(|n| n.has_rules) {
                    walk(
                        child,
                        &child_path(path, k),
                        v,
                        old_of(k),
                        ratchet.key(k),
                        causes,
                    );
                }
            }
        }
        Value::Array(items) => {
            let Some(child) = node.items.as_deref().filter(|n| n.has_rules) else {
                return;
            };
            // Only items of lists of type map have old values, by key.
            let old_items = match (&node.list_type, old.and_then(Value::as_array)) {
                (ListType::Map(keys), Some(olds)) => Some((keys, olds)),
                _ => None,
            };
            for (i, item) in items.iter().enumerate() {
                let old_item = old_items.and_then(|(keys, olds)| by_keys(keys, item, olds));
                walk(
                    child,
                    &format!("{path}[{i}]"),
                    item,
                    old_item,
                    ratchet.index(i),
                    causes,
                );
            }
        }
        _ => {}
    }
}

/// `self` and `oldSelf` for one evaluation, borrowed.
struct Vars<'a> {
    this: &'a (dyn Val + 'a),
    old: Option<&'a (dyn Val + 'a)>,
}

impl VariableResolver for Vars<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        match variable {
            "self" => Some(CowVal::Borrowed(self.this)),
            "oldSelf" => self.old.map(CowVal::Borrowed),
            _ => None,
        }
    }
}

fn run(program: &Program, vars: &Vars<'_>) -> Result<CelValue, ExecutionError> {
    let mut context = Context::with_env(ENV.clone());
    context.set_variable_resolver(vars);
    program.execute(&context)
}

/// Runs the rules of `node` on its value.
fn evaluate(
    node: &Node,
    path: &str,
    new: &Value,
    old: Option<&Value>,
    ratchet: Ratchet<'_>,
    causes: &mut Vec<Cause>,
) {
    let this = to_val(node, new);
    let uses_old = node.rules.iter().any(|r| r.uses_old_self);
    let old_val = old.filter(|_| uses_old).map(|o| to_val(node, o));
    let optional_old: Option<Box<dyn Val + '_>> =
        node.rules.iter().any(|r| r.optional_old_self).then(|| {
            let optional = match &old_val {
                Some(v) => CelOptional::of(v.clone_as_boxed()),
                None => CelOptional::none(),
            };
            Box::new(optional) as Box<dyn Val>
        });
    let plain = Vars {
        this: this.as_ref(),
        old: old_val.as_deref(),
    };
    let optional = Vars {
        this: this.as_ref(),
        old: optional_old.as_deref(),
    };
    for rule in &node.rules {
        if rule.uses_old_self && old.is_none() && !rule.optional_old_self {
            // Transition rules run only where an old value correlates.
            continue;
        }
        let vars = if rule.optional_old_self {
            &optional
        } else {
            &plain
        };
        match run(&rule.program, vars) {
            Ok(CelValue::Bool(true)) => {}
            Ok(_) => {
                if rule.uses_old_self || !ratchet.unchanged() {
                    let detail = message(rule, &plain);
                    causes.push(failure(rule, path, &node.type_name, detail));
                }
            }
            Err(error) => causes.push(Cause::invalid(
                field(path),
                &node.type_name,
                evaluation_error(&error, rule),
            )),
        }
    }
}

/// A cause's field for a node path: the root is Go's nil path.
fn field(path: &str) -> String {
    if path.is_empty() {
        "<nil>".into()
    } else {
        path.into()
    }
}

/// The message of a failed rule: its `messageExpression`'s, else its
/// `message`, else `failed rule: <rule>`.
fn message(rule: &Rule, vars: &Vars<'_>) -> String {
    let evaluated = rule
        .message_expression
        .as_ref()
        .and_then(|program| match run(program, vars) {
            Ok(CelValue::String(s)) => Some(s.trim().to_string()),
            _ => None,
        })
        .filter(|m| !m.is_empty() && m.len() <= MAX_MESSAGE_BYTES && !m.contains('\n'));
    evaluated.unwrap_or_else(|| rule.default_message())
}

/// The cause of a failed rule, by its `reason`, at its `fieldPath`.
fn failure(rule: &Rule, path: &str, type_name: &str, detail: String) -> Cause {
    let field = match &rule.field_path {
        Some(fp) => child_path(path, fp),
        None => field(path),
    };
    match rule.reason {
        Reason::Invalid => Cause::invalid(field, type_name, detail),
        Reason::Forbidden => Cause::forbidden(field, detail),
        Reason::Required => Cause {
            reason: "FieldValueRequired",
            message: format!("Required value: {detail}"),
            field,
        },
        Reason::Duplicate => Cause {
            reason: "FieldValueDuplicate",
            message: format!("Duplicate value: {type_name:?}"),
            field,
        },
    }
}

/// The detail of an evaluation error, in cel-go's words.
fn evaluation_error(error: &ExecutionError, rule: &Rule) -> String {
    if kubecel::is_no_such_overload(error) {
        return format!(
            "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {}",
            rule.describe()
        );
    }
    format!(
        "{} evaluating rule: {}",
        kubecel::runtime_error(error),
        rule.describe()
    )
}

/// The old item of a list of type map with the same keys as `item`.
fn by_keys<'a>(keys: &[String], item: &Value, olds: &'a [Value]) -> Option<&'a Value> {
    let key = composite_key(keys, item)?;
    olds.iter()
        .find(|old| composite_key(keys, old).as_ref() == Some(&key))
}

/// The values of an item's map keys, if all are there and scalar.
fn composite_key<'v>(keys: &[String], item: &'v Value) -> Option<Vec<&'v Value>> {
    if keys.is_empty() {
        return None;
    }
    keys.iter()
        .map(|k| {
            item.get(k)
                .filter(|v| v.is_string() || v.is_number() || v.is_boolean())
        })
        .collect()
}

/// A new value with the old value it correlates with, for ratcheting.
#[derive(Clone, Copy)]
struct Correlation<'a> {
    new: &'a Value,
    old: &'a Value,
    node: &'a Node,
}

/// apiextensions' ratcheting options: the node's correlation, if any, and
/// its nearest correlated ancestor's.
#[derive(Clone, Copy, Default)]
struct Ratchet<'a> {
    current: Option<Correlation<'a>>,
    parent: Option<Correlation<'a>>,
}

impl<'a> Ratchet<'a> {
    fn key(self, field: &str) -> Ratchet<'a> {
        let Some(cur) = self.current else {
            return self;
        };
        if self.parent.is_none() && (field == "apiVersion" || field == "kind") {
            return Ratchet::default();
        }
        let child = match (
            cur.new.as_object(),
            cur.old.as_object(),
            cur.node.child(field),
        ) {
            (Some(new), Some(old), Some(node)) => match (new.get(field), old.get(field)) {
                (Some(new), Some(old)) => Some(Correlation { new, old, node }),
                _ => None,
            },
            _ => None,
        };
        Ratchet {
            current: child,
            parent: Some(cur),
        }
    }

    fn index(self, i: usize) -> Ratchet<'a> {
        let Some(cur) = self.current else {
            return self;
        };
        Ratchet {
            current: correlate_item(cur, i),
            parent: Some(cur),
        }
    }

    /// Whether errors here are ratcheted: the node, or its nearest
    /// correlated ancestor, is unchanged.
    fn unchanged(&self) -> bool {
        self.current.or(self.parent).is_some_and(unchanged)
    }
}

/// The correlation of item `i`: by keys in lists of type map, by index in
/// lists without a type, none in sets and atomic lists.
fn correlate_item(cur: Correlation<'_>, i: usize) -> Option<Correlation<'_>> {
    let (news, olds) = (cur.new.as_array()?, cur.old.as_array()?);
    let new = news.get(i)?;
    let node = cur.node.items.as_deref()?;
    let old = match &cur.node.list_type {
        ListType::Map(keys) => by_keys(keys, new, olds)?,
        ListType::Unset => olds.get(i)?,
        ListType::Set | ListType::Atomic => return None,
    };
    Some(Correlation { new, old, node })
}

/// apiextensions' `CachedDeepEqual`: deep equality, items of lists of type
/// map compared by key, fields without a schema never equal.
fn unchanged(c: Correlation<'_>) -> bool {
    match (c.new, c.old) {
        (Value::Array(news), Value::Array(olds)) => {
            if news.len() != olds.len() {
                return false;
            }
            let Some(node) = c.node.items.as_deref() else {
                return news == olds;
            };
            match &c.node.list_type {
                ListType::Map(keys) => news.iter().all(|new| {
                    by_keys(keys, new, olds)
                        .is_some_and(|old| unchanged(Correlation { new, old, node }))
                }),
                ListType::Unset => news
                    .iter()
                    .zip(olds)
                    .all(|(new, old)| unchanged(Correlation { new, old, node })),
                ListType::Set | ListType::Atomic => news == olds,
            }
        }
        (Value::Object(news), Value::Object(olds)) => {
            news.len() == olds.len()
                && news
                    .iter()
                    .all(|(k, new)| match (olds.get(k), c.node.child(k)) {
                        (Some(old), Some(node)) => unchanged(Correlation { new, old, node }),
                        _ => false,
                    })
        }
        (new, old) => new == old,
    }
}
