//! The HTTP face of the server: an axum router that maps Kubernetes REST
//! paths and verbs onto [`Server`] operations, streams watches, answers
//! Tables for `kubectl get`, and checks the bearer token when one is set.
//!
//! The router and its authentication layer are here; `route` resolves a
//! resource path, authorizes it and applies the injected faults; `request`
//! reads a request's options and writes its responses; `rest` serves
//! collections and objects (list, get, create, update, patch, delete,
//! scale); `watch` streams watches; `review` answers the access reviews;
//! `admin` serves the fault rules.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::discovery;
use crate::error::ApiError;
use crate::faults::UnderTest;
use crate::rbac;
use crate::server::Server;

mod admin;
mod request;
mod rest;
mod review;
mod route;
mod watch;

pub use admin::FAULTS_PATH;
use admin::{faults_clear, faults_cut, faults_report, faults_set};
use request::{AppState, json_response};
use route::dispatch;

/// Builds the router. `token`: when set, every request must carry
/// `Authorization: Bearer <token>` (401 otherwise). `address` is what `/api`
/// reports as the server address.
pub fn router(server: Arc<Server>, token: Option<String>, address: String) -> Router {
    let state = AppState {
        server,
        token: token.map(Into::into),
        address: address.into(),
    };
    Router::new()
        .route(
            "/version",
            get(|| async { json_response(StatusCode::OK, &discovery::version()) }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/api", get(api_versions))
        .route("/apis", get(api_groups))
        .route(
            "/openapi/v2",
            get(|| async { ApiError::no_route("/openapi/v2") }),
        )
        .route("/openapi/v3", get(openapi_root))
        .route(
            FAULTS_PATH,
            get(faults_report).put(faults_set).delete(faults_clear),
        )
        .route(&format!("{FAULTS_PATH}/cut-watches"), post(faults_cut))
        .fallback(dispatch)
        .layer(middleware::from_fn_with_state(state.clone(), auth))
        .with_state(state)
}

async fn auth(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    if let Some(admin) = &st.token {
        let token = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim);
        let user = match token.map(|t| rbac::authenticate(&st.server, admin, t)) {
            Some(Ok(user)) => user,
            Some(Err(e)) => return e.into_response(),
            None => return ApiError::unauthorized().into_response(),
        };
        // `kubectl --as`: the request runs as whom it impersonates.
        let uri = req.uri().to_string();
        let user = match rbac::impersonate(&st.server, user, req.headers(), &uri) {
            Ok(user) => user,
            Err(e) => return e.into_response(),
        };
        req.extensions_mut().insert(user);
        // Every client over TLS is under test, named by its endpoint.
        req.extensions_mut().insert(UnderTest(st.address.clone()));
        st.server.count_tls_request();
    }
    next.run(req).await
}

async fn api_versions(State(st): State<AppState>) -> Response {
    json_response(StatusCode::OK, &discovery::core_versions(&st.address))
}

async fn api_groups(State(st): State<AppState>) -> Response {
    json_response(StatusCode::OK, &discovery::groups(&st.server.registry))
}

async fn openapi_root(State(st): State<AppState>) -> Response {
    json_response(
        StatusCode::OK,
        &discovery::openapi_v3_root(&st.server.registry),
    )
}
