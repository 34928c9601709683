//! The fault rules' endpoint ([`FAULTS_PATH`]), for the administrator.

use axum::extract::{Query, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::request::{AppState, Params, json_response};
use crate::error::{ApiError, ApiResult};
use crate::faults;
use crate::limits::MAX_REQUEST_BODY_BYTES;
use crate::rbac::User;

/// Where the fault rules are read and set (the administrator only):
/// `GET` the rules and counts, `PUT` a JSON list of [`faults::Rule`]s,
/// `DELETE` them, `POST .../cut-watches[?resource=pods]`.
pub const FAULTS_PATH: &str = "/testbed/faults";

/// Only the administrator (or an in-memory client) may set faults.
fn faults_admin(req: &Request) -> ApiResult<()> {
    match req.extensions().get::<User>() {
        None | Some(User::Admin) => Ok(()),
        Some(user) => Err(ApiError::forbidden(
            "",
            "testbed/faults",
            "",
            format!(
                "User {:?} cannot change the testbed's fault rules",
                user.name()
            ),
        )),
    }
}

pub(super) async fn faults_report(State(st): State<AppState>, req: Request) -> Response {
    match faults_admin(&req) {
        Ok(()) => json_response(StatusCode::OK, &json!(st.server.faults.report())),
        Err(e) => e.into_response(),
    }
}

pub(super) async fn faults_set(State(st): State<AppState>, req: Request) -> Response {
    let set = async {
        faults_admin(&req)?;
        let body = axum::body::to_bytes(req.into_body(), MAX_REQUEST_BODY_BYTES)
            .await
            .map_err(|e| ApiError::bad_request(format!("reading the fault rules failed: {e}")))?;
        let rules: Vec<faults::Rule> = serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("fault rules: {e}")))?;
        st.server
            .faults
            .set(rules)
            .map_err(|e| ApiError::bad_request(format!("fault rules: {e}")))?;
        Ok::<_, ApiError>(json_response(
            StatusCode::OK,
            &json!(st.server.faults.report()),
        ))
    };
    set.await.unwrap_or_else(IntoResponse::into_response)
}

pub(super) async fn faults_clear(State(st): State<AppState>, req: Request) -> Response {
    match faults_admin(&req) {
        Ok(()) => {
            st.server.faults.clear();
            json_response(StatusCode::OK, &json!(st.server.faults.report()))
        }
        Err(e) => e.into_response(),
    }
}

pub(super) async fn faults_cut(
    State(st): State<AppState>,
    Query(params): Query<Params>,
    req: Request,
) -> Response {
    match faults_admin(&req) {
        Ok(()) => {
            st.server
                .faults
                .cut_watches(params.get("resource").map(String::as_str));
            json_response(StatusCode::OK, &json!(st.server.faults.report()))
        }
        Err(e) => e.into_response(),
    }
}
