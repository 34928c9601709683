//! CRD validation rules (`x-kubernetes-validations`) as kube-apiserver's
//! apiextensions-apiserver runs them (pkg/apiserver/schema/cel), on the
//! cel-rust interpreter with the Kubernetes CEL libraries (the `kubecel`
//! crate).
//!
//! [`Rules::compile`] reads every rule of a CRD version's
//! `openAPIV3Schema` once, refusing bad ones with the causes kube-apiserver
//! gives when the CRD is written (static checks of the rule's fields, syntax
//! and type errors, `oldSelf` where old values can't correlate).
//! [`Rules::validate`] then runs them on each write: `self` is the value at
//! the rule's node typed from the schema, `oldSelf` the old value where it
//! correlates (same property or map key, same keys in lists of type map);
//! transition rules run only on updates where it does, or always with
//! `optionalOldSelf`. A failed rule is a cause at the node's path (plus the
//! rule's `fieldPath`) with its `message`, `messageExpression` or
//! `failed rule: <rule>`, by its `reason`; on updates, failures of
//! non-transition rules on values the update did not change are ratcheted
//! (dropped), as with the CRDValidationRatcheting feature (GA in 1.33).
//!
//! ```text
//!  mod.rs       Rules: compile, validate
//!  build.rs     schema → Node tree, rules compiled per node
//!  model.rs     Node: CEL typing of a schema node, field name escaping
//!  compiled.rs  a compiled rule (program, message, reason, field path)
//!  rule.rs      one rule: static checks, compilation, compile-error causes
//!  check.rs     the light type check (undefined fields, undeclared names...)
//!  field_path.rs  a rule's fieldPath
//!  value.rs     JSON → CEL values, by node
//!  eval.rs      the walk over an object: evaluation, correlation, ratcheting
//! ```

mod build;
mod check;
mod compiled;
mod eval;
mod field_path;
mod model;
mod rule;
#[cfg(test)]
mod tests;
mod value;

use serde_json::Value;

use crate::error::Cause;
use model::Node;

/// The compiled `x-kubernetes-validations` of one CRD version's schema:
/// compile once (share it behind an `Arc`), evaluate on every write.
#[derive(Debug)]
pub struct Rules {
    root: Node,
}

impl Rules {
    /// Compiles every rule (and `messageExpression`) in `schema`, the
    /// version's `openAPIV3Schema`, whose own path in the CRD is `path`
    /// (`spec.versions[0].schema.openAPIV3Schema`). Bad rules are refused
    /// with kube-apiserver's causes, at e.g.
    /// `<path>.properties[spec].x-kubernetes-validations[0].rule`.
    pub fn compile(schema: &Value, path: &str) -> Result<Self, Vec<Cause>> {
        let mut causes = Vec::new();
        let root = build::build(schema, path, &mut causes);
        if causes.is_empty() {
            Ok(Rules { root })
        } else {
            Err(causes)
        }
    }

    /// Whether there is no rule at all (nothing to evaluate).
    pub fn is_empty(&self) -> bool {
        !self.root.has_rules
    }

    /// Evaluates the rules on `new`, the whole object; `old` is the stored
    /// object on updates. Returns the causes of the rules that failed or
    /// could not be evaluated (none when all pass).
    pub fn validate(&self, new: &Value, old: Option<&Value>) -> Vec<Cause> {
        eval::validate(&self.root, new, old, true)
    }

    /// As [`Rules::validate`], without ratcheting: kube-apiserver's status
    /// updates (`/status`) report every failed rule, changed or not.
    pub fn validate_status(&self, new: &Value, old: Option<&Value>) -> Vec<Cause> {
        eval::validate(&self.root, new, old, false)
    }
}

/// The cause kube-apiserver adds instead of evaluating rules when schema
/// validation already found a blocking error (a wrong type, a missing
/// required field, an unsupported enum value, a value too long or a list too
/// long): `None` when `schema_causes` has none, and the rules should run.
pub fn blocked(schema_causes: &[Cause]) -> Option<Cause> {
    const BLOCKING: [&str; 5] = [
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    ];
    schema_causes
        .iter()
        .any(|c| BLOCKING.contains(&c.reason))
        .then(|| {
            Cause::invalid(
                "<nil>",
                "null",
                "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            )
        })
}
