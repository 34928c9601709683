//! Custom resources as kube-apiserver's apiextensions-apiserver serves them:
//! each CRD version's structural OpenAPI v3 schema validates, prunes and
//! defaults every write ([`schema`]), and its `x-kubernetes-validations`
//! CEL rules, transition rules with `oldSelf` included, judge it ([`cel`]).
//!
//! [`CrdValidation::compile`] reads a CRD's versions once, when the CRD is
//! written (a bad schema or rule refuses the CRD with kube-apiserver's
//! causes). On each write of a custom resource the server then runs, as
//! kube-apiserver does: [`VersionValidation::decode`] (prune unknown
//! fields, then default), the metadata checks of its own, then
//! [`VersionValidation::validate`] (the schema, then the CEL rules unless
//! the schema found a blocking error).

pub mod cel;
pub mod schema;
#[cfg(test)]
mod testing;

use std::collections::BTreeMap;
use std::sync::Arc;

use apimachinery::json::Lookup;
use serde_json::Value;

use crate::error::Cause;
use cel::Rules;
use schema::Structural;

/// One CRD version's schema and rules.
#[derive(Debug, Clone)]
pub struct VersionValidation {
    schema: Structural,
    rules: Option<Arc<Rules>>,
}

/// What a write of a custom resource is, for validation.
#[derive(Debug, Clone, Copy)]
pub enum Write<'a> {
    /// A create.
    Create,
    /// An update (or patch, or apply) of the main resource.
    Update {
        /// The stored object.
        old: &'a Value,
    },
    /// An update through the `status` subresource.
    Status {
        /// The stored object.
        old: &'a Value,
    },
}

impl VersionValidation {
    /// Prunes the fields the schema does not know, then applies its
    /// defaults, as kube-apiserver's decoder does. Returns the pruned
    /// fields (`spec.foo`), which strict field validation refuses.
    pub fn decode(&self, obj: &mut Value) -> Vec<String> {
        let pruned = self.schema.prune(obj);
        self.schema.apply_defaults(obj);
        pruned
    }

    /// Validates a decoded object against the schema, then its CEL rules
    /// (only when the schema found no blocking error: then a cause says the
    /// rules were not checked).
    pub fn validate(&self, obj: &Value, write: Write<'_>) -> Vec<Cause> {
        let mut causes = match write {
            Write::Create => self.schema.validate(obj),
            Write::Update { old } => self.schema.validate_update(obj, old),
            Write::Status { old } => self.schema.validate_status_update(obj, old),
        };
        let Some(rules) = &self.rules else {
            return causes;
        };
        if let Some(blocked) = cel::blocked(&causes) {
            causes.push(blocked);
            return causes;
        }
        causes.extend(match write {
            Write::Create => rules.validate(obj, None),
            Write::Update { old } => rules.validate(obj, Some(old)),
            Write::Status { old } => rules.validate_status(obj, Some(old)),
        });
        causes
    }
}

/// The validation of every version of a CRD that has a schema.
#[derive(Debug, Clone, Default)]
pub struct CrdValidation {
    versions: BTreeMap<String, VersionValidation>,
}

impl CrdValidation {
    /// Compiles every version's `schema.openAPIV3Schema` and its rules. A
    /// refusal's causes are at `spec.versions[i].schema.openAPIV3Schema...`,
    /// as kube-apiserver reports them on the CRD.
    pub fn compile(crd: &Value) -> Result<Self, Vec<Cause>> {
        let mut versions = BTreeMap::new();
        let mut causes = Vec::new();
        let listed = crd
            .lookup("/spec/versions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (i, version) in listed.iter().enumerate() {
            let Some(name) = version.get("name").and_then(Value::as_str) else {
                continue;
            };
            let Some(schema) = version.lookup("/schema/openAPIV3Schema") else {
                causes.push(Cause {
                    reason: "FieldValueRequired",
                    message: "Required value: schemas are required".into(),
                    field: format!("spec.versions[{i}].schema.openAPIV3Schema"),
                });
                continue;
            };
            let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
            let structural = Structural::parse(schema, &path);
            let rules = Rules::compile(schema, &path);
            match (structural, rules) {
                (Ok(schema), Ok(rules)) => {
                    let rules = (!rules.is_empty()).then(|| Arc::new(rules));
                    versions.insert(name.to_string(), VersionValidation { schema, rules });
                }
                (structural, rules) => {
                    causes.extend(structural.err().unwrap_or_default());
                    causes.extend(rules.err().unwrap_or_default());
                }
            }
        }
        if causes.is_empty() {
            Ok(Self { versions })
        } else {
            Err(causes)
        }
    }

    /// The validation of the version `obj` is written in (its `apiVersion`),
    /// else of `storage`.
    pub fn for_object(&self, obj: &Value, storage: &str) -> Option<&VersionValidation> {
        let version = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .map(|a| a.rsplit('/').next().unwrap_or(a));
        version
            .and_then(|v| self.versions.get(v))
            .or_else(|| self.versions.get(storage))
    }
}
