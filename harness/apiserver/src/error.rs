//! API errors as Kubernetes `metav1.Status` objects with the right HTTP code
//! and reason, as client-go and kube-rs expect them.

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::{Value, json};

/// One field-level cause of an `Invalid` error (`metav1.StatusCause`).
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueNotSupported`, ...
    pub reason: &'static str,
    /// Human-readable message for this cause.
    pub message: String,
    /// The field path (`spec.containers[0].image`).
    pub field: String,
}

impl Cause {
    /// A required field is missing.
    pub fn required(field: impl Into<String>) -> Self {
        Self {
            reason: "FieldValueRequired",
            message: "Required value".into(),
            field: field.into(),
        }
    }
    /// A field has an invalid value.
    pub fn invalid(field: impl Into<String>, value: &str, detail: impl Into<String>) -> Self {
        Self {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {value:?}: {}", detail.into()),
            field: field.into(),
        }
    }
    /// A required field is missing, and why (`Required value: <detail>`).
    pub fn required_because(field: impl Into<String>, detail: &str) -> Self {
        Self {
            reason: "FieldValueRequired",
            message: format!("Required value: {detail}"),
            field: field.into(),
        }
    }
    /// A field has an invalid value shown as JSON (numbers and objects
    /// bare, as kube-apiserver prints non-string values).
    pub fn invalid_json(field: &str, value: &Value, detail: &str) -> Self {
        Self {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {value}: {detail}"),
            field: field.into(),
        }
    }
    /// A value is not one of the supported ones.
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        Self {
            reason: "FieldValueNotSupported",
            message: format!(
                "Unsupported value: {value:?}: supported values: {}",
                list.join(", ")
            ),
            field: field.into(),
        }
    }
    /// A list entry repeats one before it.
    pub fn duplicate(field: &str, value: &str) -> Self {
        Self {
            reason: "FieldValueDuplicate",
            message: format!("Duplicate value: {value:?}"),
            field: field.into(),
        }
    }
    /// A list is longer than allowed.
    pub fn too_many(field: &str, count: usize, max: usize) -> Self {
        let items = if max == 1 { "item" } else { "items" };
        Self {
            reason: "FieldValueTooMany",
            message: format!("Too many: {count}: must have at most {max} {items}"),
            field: field.into(),
        }
    }
    /// A string is longer than allowed.
    pub fn too_long(field: &str, max: usize) -> Self {
        let bytes = if max == 1 { "byte" } else { "bytes" };
        Self {
            reason: "FieldValueTooLong",
            message: format!("Too long: may not be more than {max} {bytes}"),
            field: field.into(),
        }
    }
    /// A field may not be changed.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            reason: "FieldValueForbidden",
            message: format!("Forbidden: {}", detail.into()),
            field: field.into(),
        }
    }
}

/// An error the API server returns to a client.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `metav1.StatusReason`.
    pub reason: &'static str,
    /// Message, in the API server's wording.
    pub message: String,
    /// `details`: name, group, kind, causes, retryAfterSeconds.
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        let mut d = json!({ "name": name, "kind": kind });
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        self.details = Some(d);
        self
    }

    /// 404: `pods "x" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} {name:?} not found", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }
    /// 404 for a URL that names no resource.
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource (path {path})"),
        )
    }
    /// 409: create of an existing object.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} {name:?} already exists", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }
    /// 409: optimistic-concurrency failure.
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {name:?}: {why}",
                qualified(group, resource)
            ),
        )
        .with_details(group, resource, name)
    }
    /// The standard resourceVersion conflict.
    pub fn stale(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }
    /// 422 with field causes: `Deployment.apps "x" is invalid: ...`
    /// (the kind qualified by its group, as `schema.GroupKind` prints).
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let summary: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let summary = if summary.len() == 1 {
            summary.join("")
        } else {
            format!("[{}]", summary.join(", "))
        };
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{} {name:?} is invalid: {summary}", qualified(group, kind)),
        )
        .with_details(group, kind, name);
        if let Some(d) = e.details.as_mut() {
            d["causes"] = causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect();
        }
        e
    }
    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }
    /// 401.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }
    /// 403.
    pub fn forbidden(group: &str, resource: &str, name: &str, why: impl Into<String>) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!(
                "{} {name:?} is forbidden: {}",
                qualified(group, resource),
                why.into()
            ),
        )
        .with_details(group, resource, name)
    }
    /// 403 with the whole message given (an authorization denial).
    pub fn denied(group: &str, resource: &str, name: &str, message: String) -> Self {
        Self::new(403, "Forbidden", message).with_details(group, resource, name)
    }
    /// 405.
    pub fn method_not_allowed(what: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({what})"),
        )
    }
    /// 406.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }
    /// 410: a watch or list from a resourceVersion that is no longer kept.
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }
    /// 415.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }
    /// 429 with causes.
    pub fn too_many_requests(message: impl Into<String>, causes: Vec<(String, String)>) -> Self {
        let mut e = Self::new(429, "TooManyRequests", message);
        e.details = Some(json!({
            "causes": causes.iter().map(|(t, m)| json!({"reason": t, "message": m})).collect::<Vec<_>>()
        }));
        e
    }
    /// 429 with `details.retryAfterSeconds` (the response also carries a
    /// `Retry-After` header; see [`ApiError::retry_after`]).
    pub fn throttled(retry_after_seconds: u64) -> Self {
        let mut e = Self::new(
            429,
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later",
        );
        e.details = Some(json!({ "retryAfterSeconds": retry_after_seconds }));
        e
    }
    /// 504: a request that did not complete in time.
    pub fn timeout() -> Self {
        Self::new(
            504,
            "Timeout",
            "Timeout: request did not complete within requested timeout - context deadline exceeded",
        )
    }
    /// The seconds a client is asked to wait before retrying, if any.
    pub fn retry_after(&self) -> Option<u64> {
        self.details
            .as_ref()
            .and_then(|d| d.get("retryAfterSeconds"))
            .and_then(Value::as_u64)
    }
    /// 500.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }
    /// 413: a request body over kube-apiserver's limit for writes.
    pub fn request_entity_too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }
    /// 500 with no reason: etcd refused an object over its request limit.
    /// kube-apiserver passes etcd's error through as it is (kubernetes/kubernetes#112152).
    pub fn etcd_request_too_large() -> Self {
        Self::new(500, "", "etcdserver: request is too large")
    }

    /// The `metav1.Status` object for this error.
    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        });
        if !self.reason.is_empty() {
            s["reason"] = json!(self.reason);
        }
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.status()).unwrap_or_default();
        let mut response = (
            code,
            [(http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
        if let Some(seconds) = self.retry_after() {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, http::HeaderValue::from(seconds));
        }
        response
    }
}

/// Result type of the API server's handlers.
pub type ApiResult<T> = Result<T, ApiError>;
