//! The options of requests (writes, deletes, lists) and their results.

use std::sync::Arc;

use apimachinery::json::Lookup;
use bytes::Bytes;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::normalize::FieldValidation;
use crate::registry::ResourceDef;
use crate::store::Stored;
use apimachinery::fields::FieldSelector;
use apimachinery::labels::LabelSelector;

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// The object itself (status changes ignored when a status subresource exists).
    Main,
    /// `/status`: only `.status` changes.
    Status,
    /// `/finalize` of a namespace: only `.spec.finalizers` changes.
    Finalize,
}

/// Options of a write request.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
}

/// The patch types of `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply {
        /// `force=true`.
        force: bool,
    },
}

/// `DeleteOptions`, from the body or the query.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `propagationPolicy`: `Orphan`, `Background` or `Foreground`.
    pub propagation_policy: Option<String>,
    /// `preconditions.uid`.
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub precondition_rv: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

impl DeleteOptions {
    /// Reads a `DeleteOptions` JSON body (absent fields stay unset).
    pub fn from_body(v: &Value) -> Result<Self, String> {
        let mut o = DeleteOptions::default();
        if let Some(g) = v.get("gracePeriodSeconds").filter(|g| !g.is_null()) {
            o.grace_period_seconds =
                Some(g.as_i64().ok_or("gracePeriodSeconds must be an integer")?);
        }
        if let Some(p) = v.get("propagationPolicy").and_then(Value::as_str) {
            o.propagation_policy = Some(p.to_string());
        } else if let Some(orphan) = v.get("orphanDependents").and_then(Value::as_bool) {
            o.propagation_policy = Some(if orphan { "Orphan" } else { "Background" }.into());
        }
        o.precondition_uid = v
            .lookup("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string);
        o.precondition_rv = v
            .lookup("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some(d) = v.get("dryRun").and_then(Value::as_array) {
            o.dry_run = d.iter().any(|x| x == "All");
        }
        Ok(o)
    }
}

/// List parameters.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `limit` (0 = all).
    pub limit: usize,
    /// `continue`.
    pub continue_token: Option<String>,
}

/// A parsed label + field selector pair for one resource.
#[derive(Debug, Clone)]
pub struct Filter {
    /// Label part.
    pub labels: LabelSelector,
    /// Field part.
    pub fields: FieldSelector,
}

impl Filter {
    /// Parses both selectors against a resource.
    pub fn parse(def: &ResourceDef, label: Option<&str>, field: Option<&str>) -> ApiResult<Self> {
        let labels = match label {
            Some(s) => LabelSelector::parse(s).map_err(ApiError::bad_request)?,
            None => LabelSelector::everything(),
        };
        let fields = match field {
            Some(s) => {
                FieldSelector::parse(s, &def.field_names()).map_err(ApiError::bad_request)?
            }
            None => FieldSelector::default(),
        };
        Ok(Self { labels, fields })
    }

    /// Whether it selects every object (no label or field requirement).
    pub fn is_everything(&self) -> bool {
        self.labels == LabelSelector::everything() && self.fields.reqs.is_empty()
    }

    /// Whether a stored object matches.
    pub fn matches(&self, o: &Stored) -> bool {
        self.labels.matches(&o.labels) && self.fields.matches(&o.fields)
    }
}

/// One page of a list.
#[derive(Debug)]
pub struct ListPage {
    /// resourceVersion of the list.
    pub rv: u64,
    /// Matching objects.
    pub items: Vec<Arc<Stored>>,
    /// Token for the next page.
    pub continue_token: Option<String>,
    /// `metadata.remainingItemCount`: how many objects the following pages
    /// hold, given (as kube-apiserver does) only for a cut list without
    /// selectors.
    pub remaining: Option<usize>,
}

/// The result of a delete.
#[derive(Debug)]
pub enum Deleted {
    /// The object is gone; this was its last state.
    Gone(Bytes),
    /// Deletion is in progress (grace period or finalizers); the object now.
    Pending(Bytes),
}
