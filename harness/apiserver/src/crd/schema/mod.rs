//! Structural schemas, as kube-apiserver's apiextensions-apiserver handles a
//! CRD version's `schema.openAPIV3Schema`.
//!
//! [`Structural::parse`] checks the schema as a CRD create or update does
//! (`ValidateStructural`, the OpenAPI checks of apiextensions' CRD
//! validation, `ValidateDefaults`) and compiles it once. On a write of a
//! custom resource kube-apiserver then decodes, [prunes](Structural::prune)
//! (unknown fields, then non-nullable `null`s), [defaults](Structural::apply_defaults),
//! checks metadata, [validates](Structural::validate) (kube-openapi's
//! validator, embedded resources, list-type uniqueness), then runs the CEL
//! rules (`crd::cel`).
//!
//! ```text
//!  mod.rs        Structural: the public operations
//!  node.rs       the parsed schema (JSONSchemaProps)      decode.rs  JSON -> node
//!  structural.rs ValidateStructural                       crdcheck.rs the CRD's other schema checks, defaults
//!  openapi.rs    kube-openapi's validator, ratcheting     formats.rs  string formats
//!  prune.rs      pruning, null pruning                    defaults.rs defaulting
//!  lists.rs      list-type set/map uniqueness             embedded.rs embedded resources
//!  causes.rs     field.Error texts                        gofmt.rs    Go's renderings
//! ```

mod causes;
mod crdcheck;
mod decode;
mod defaults;
mod embedded;
mod formats;
mod gofmt;
mod lists;
mod node;
mod openapi;
mod prune;
mod structural;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use serde_json::Value;

use crate::error::Cause;
use causes::Bad;
pub(crate) use gofmt::go_quote;
use node::Schema;

/// A CRD version's structural schema: parsed and checked once per CRD
/// version, cheap to clone and share.
#[derive(Debug, Clone)]
pub struct Structural {
    root: Arc<Schema>,
    /// Some node has an `x-kubernetes-list-type` (set and map lists are checked).
    lists: bool,
    /// Some node is an `x-kubernetes-embedded-resource`.
    embedded: bool,
}

impl Structural {
    /// Parses and checks `schema` as kube-apiserver does when a CRD is
    /// created or updated. Refusals are causes whose `field` starts with
    /// `path` (`spec.versions[0].schema.openAPIV3Schema`).
    pub fn parse(schema: &Value, path: &str) -> Result<Self, Vec<Cause>> {
        let mut errs = Vec::new();
        let root = decode::decode(schema, path, &mut errs);
        if !errs.is_empty() {
            return Err(errs);
        }
        if root.nullable {
            let field = format!("{path}.nullable");
            errs.push(causes::forbidden(
                &field,
                "nullable cannot be true at the root",
            ));
        }
        // What stops NewStructural is only reported when nothing else is.
        let unsupported = crdcheck::unsupported(&root);
        if unsupported.is_none() {
            let structural = structural::validate(path, &root);
            if structural.is_empty() {
                crdcheck::defaults(&root, path, true, false, &mut errs);
            } else {
                errs.extend(structural);
            }
        }
        errs.extend(crdcheck::openapi_schema(&root, path));
        if let (true, Some(e)) = (errs.is_empty(), unsupported) {
            errs.push(causes::invalid(path, &Bad::str(""), &e));
        }
        if errs.is_empty() {
            Ok(Self {
                lists: root.any(&|s| s.list_type.is_some()),
                embedded: root.any(&|s| s.embedded_resource),
                root: Arc::new(root),
            })
        } else {
            Err(errs)
        }
    }

    /// Removes the fields the schema does not specify, as kube-apiserver's
    /// decoder does: the root's apiVersion, kind and metadata (and an
    /// embedded resource's) are kept as they are; under
    /// `x-kubernetes-preserve-unknown-fields` unknown fields stay. Then drops
    /// `null`s of fields that are neither nullable nor defaulted. Returns
    /// the pruned fields' paths, sorted, as strict field validation names
    /// them (`spec.foo`, `spec.items[0].bar`: `unknown field "spec.foo"`).
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let pruned = prune::prune(obj, &self.root, true);
        prune::prune_nulls(obj, Some(&self.root));
        pruned
    }

    /// Applies the schema's `default`s (structural defaulting): missing
    /// properties of present objects, non-nullable `null`s, items and map
    /// values; a default is defaulted in turn.
    pub fn apply_defaults(&self, obj: &mut Value) {
        defaults::apply(obj, &self.root);
    }

    /// Validates a created object as kube-apiserver does: kube-openapi's
    /// schema validation (causes at `spec.replicas`, composite `anyOf` /
    /// `oneOf` errors at `<nil>`), then embedded resources, then
    /// `x-kubernetes-list-type` uniqueness. (Metadata and CEL rules are
    /// checked elsewhere.)
    pub fn validate(&self, obj: &Value) -> Vec<Cause> {
        let outcome = openapi::validate(&self.root, obj, None, "");
        let mut causes = openapi::to_causes(&outcome.findings, None);
        causes.extend(self.embedded_causes(obj));
        causes.extend(self.list_causes(obj));
        causes
    }

    /// Validates an update as kube-apiserver does (CRDValidationRatcheting):
    /// errors in fields the update left unchanged are dropped, and list
    /// uniqueness is only checked when `old` satisfied it.
    pub fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let outcome = openapi::ratchet(&self.root, new, Some(old), "");
        let mut causes = openapi::to_causes(&outcome.findings, None);
        causes.extend(self.embedded_causes(new));
        if self.list_causes(old).is_empty() {
            causes.extend(self.list_causes(new));
        }
        causes
    }

    /// Validates an update through the `status` subresource: only `status`
    /// against its schema (causes at `status.…`), ratcheted, then list
    /// uniqueness of the whole object when `old` satisfied it.
    pub fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        if let (Some(status), Some(schema)) =
            (new.get("status"), self.root.properties.get("status"))
        {
            let outcome = openapi::ratchet(schema, status, old.get("status"), "");
            causes = openapi::to_causes(&outcome.findings, Some("status"));
        }
        let new_lists = self.list_causes(new);
        if !new_lists.is_empty() && self.list_causes(old).is_empty() {
            causes.extend(new_lists);
        }
        causes
    }

    fn embedded_causes(&self, obj: &Value) -> Vec<Cause> {
        if !self.embedded {
            return Vec::new();
        }
        embedded::validate("", obj, &self.root)
    }

    fn list_causes(&self, obj: &Value) -> Vec<Cause> {
        if !self.lists {
            return Vec::new();
        }
        obj.as_object()
            .map(|map| lists::validate("", &self.root, map))
            .unwrap_or_default()
    }
}
