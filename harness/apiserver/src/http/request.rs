//! A request's context ([`Ctx`]): the options read from its query, headers
//! and body, and the responses written for it.

use std::collections::HashMap;
use std::sync::Arc;

use apimachinery::json::Lookup;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::faults::Fault;
use crate::normalize::FieldValidation;
use crate::protobuf;
use crate::registry::ResourceDef;
use crate::server::{DeleteOptions, ListOptions, PatchType, Server, WriteOptions};
use crate::table;

/// The router's state.
#[derive(Clone)]
pub(super) struct AppState {
    pub(super) server: Arc<Server>,
    pub(super) token: Option<Arc<str>>,
    pub(super) address: Arc<str>,
}

/// Query parameters.
pub(super) type Params = HashMap<String, String>;

pub(super) fn json_response(code: StatusCode, v: &Value) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    bytes_response(code, Bytes::from(body))
}

pub(super) fn bytes_response(code: StatusCode, body: Bytes) -> Response {
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// One resource request: its server, query, headers and body, and what the
/// routing found out about it.
pub(super) struct Ctx {
    pub(super) server: Arc<Server>,
    pub(super) params: Params,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
    pub(super) wants_table: bool,
    pub(super) version: String,
    /// The request is the client under test's: its watches can be cut.
    pub(super) under_test: bool,
    /// A fault for this request's watch.
    pub(super) watch_fault: Option<Fault>,
}

impl Ctx {
    /// A query parameter.
    pub(super) fn param(&self, k: &str) -> Option<&str> {
        self.params.get(k).map(String::as_str)
    }

    /// Whether a query parameter is `true` (or `1`).
    pub(super) fn flag(&self, k: &str) -> bool {
        matches!(self.param(k), Some("true" | "1"))
    }

    /// `dryRun` and `fieldValidation`.
    pub(super) fn write_options(&self) -> ApiResult<WriteOptions> {
        Ok(WriteOptions {
            dry_run: self.param("dryRun") == Some("All"),
            field_validation: FieldValidation::parse(self.param("fieldValidation"))
                .map_err(ApiError::bad_request)?,
        })
    }

    /// The body as JSON (decoded from protobuf when sent so).
    pub(super) fn json_body(&self) -> ApiResult<Value> {
        if self.body.is_empty() {
            return Err(ApiError::bad_request("the request body is empty"));
        }
        let ct = self
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("application/json");
        if ct.starts_with(protobuf::MEDIA_TYPE) {
            return protobuf::decode(&self.body);
        }
        serde_json::from_slice(&self.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding the request body: {e}")))
    }

    /// `DeleteOptions` from the body and the query.
    pub(super) fn delete_options(&self) -> ApiResult<DeleteOptions> {
        let mut o = if self.body.is_empty() {
            DeleteOptions::default()
        } else {
            let v = self.json_body()?;
            DeleteOptions::from_body(&v).map_err(ApiError::bad_request)?
        };
        if let Some(g) = self.param("gracePeriodSeconds") {
            o.grace_period_seconds =
                Some(g.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid gracePeriodSeconds {g:?}"))
                })?);
        }
        if let Some(p) = self.param("propagationPolicy") {
            o.propagation_policy = Some(p.to_string());
        }
        if self.param("dryRun") == Some("All") {
            o.dry_run = true;
        }
        Ok(o)
    }

    /// Selectors and pagination from the query.
    pub(super) fn list_options(&self) -> ApiResult<ListOptions> {
        let limit = match self.param("limit") {
            Some(l) => l
                .parse::<i64>()
                .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?
                .max(0) as usize,
            None => 0,
        };
        Ok(ListOptions {
            label_selector: self.param("labelSelector").map(str::to_string),
            field_selector: self.param("fieldSelector").map(str::to_string),
            limit,
            continue_token: self.param("continue").map(str::to_string),
        })
    }

    /// The patch type of `Content-Type`.
    pub(super) fn patch_type(&self) -> ApiResult<PatchType> {
        let ct = self
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        match ct.as_str() {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Ok(PatchType::Apply {
                    force: self.flag("force"),
                })
            }
            other => Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format ({other:?}) - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json"
            ))),
        }
    }

    /// `fieldManager`, else the first word of the user agent.
    pub(super) fn field_manager(&self) -> String {
        self.param("fieldManager")
            .map(str::to_string)
            .unwrap_or_else(|| {
                self.headers
                    .get(header::USER_AGENT)
                    .and_then(|h| h.to_str().ok())
                    .and_then(|ua| ua.split('/').next())
                    .unwrap_or("unknown")
                    .to_string()
            })
    }

    /// An object in the requested form: itself, or a one-row Table.
    pub(super) fn object_response(
        &self,
        def: &ResourceDef,
        code: StatusCode,
        json: Bytes,
    ) -> ApiResult<Response> {
        if self.wants_table {
            let v: Value =
                serde_json::from_slice(&json).map_err(|e| ApiError::internal(e.to_string()))?;
            let rv = v
                .lookup("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            return Ok(json_response(
                code,
                &table::table(def, &[v], self.server.clock.now(), rv, None),
            ));
        }
        Ok(bytes_response(code, self.with_version(def, json)))
    }

    /// Custom resources read through another served version carry that version.
    pub(super) fn with_version(&self, def: &ResourceDef, json: Bytes) -> Bytes {
        if !def.custom || def.versions.len() < 2 {
            return json;
        }
        let want = crate::registry::api_version(&def.group, &self.version);
        match serde_json::from_slice::<Value>(&json) {
            Ok(mut v) if v.get("apiVersion").and_then(Value::as_str) != Some(&want) => {
                v["apiVersion"] = json!(want);
                serde_json::to_vec(&v).map(Bytes::from).unwrap_or(json)
            }
            _ => json,
        }
    }
}
