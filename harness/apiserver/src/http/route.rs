//! From a request to a resource operation: the path resolved to a
//! collection or an object, RBAC's view of the request, the injected
//! faults, then the operation.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::request::{AppState, Ctx, Params, json_response};
use crate::discovery;
use crate::error::{ApiError, ApiResult};
use crate::faults::{Fault, UnderTest};
use crate::limits::MAX_REQUEST_BODY_BYTES;
use crate::rbac::{self, Attributes, User, review};
use crate::registry::ResourceDef;
use crate::server::Server;
use crate::timings::RequestKind;

/// What a resource path addresses.
enum Target {
    Collection {
        def: Arc<ResourceDef>,
        ns: Option<String>,
    },
    Object {
        def: Arc<ResourceDef>,
        ns: String,
        name: String,
        sub: Option<String>,
    },
}

fn resolve(
    server: &Server,
    group: &str,
    version: &str,
    segs: &[&str],
    path: &str,
) -> ApiResult<Target> {
    let reg = &server.registry;
    let lookup = |r: &str| {
        reg.get(group, version, r)
            .ok_or_else(|| ApiError::no_route(path))
    };
    // /namespaces/{ns}/{resource}[/{name}[/{sub}]]
    if segs.len() >= 3
        && segs[0] == "namespaces"
        && let Some(def) = reg.get(group, version, segs[2]).filter(|d| d.namespaced)
    {
        let ns = segs[1].to_string();
        return match segs.len() {
            3 => Ok(Target::Collection { def, ns: Some(ns) }),
            4 => Ok(Target::Object {
                def,
                ns,
                name: segs[3].into(),
                sub: None,
            }),
            5 => Ok(Target::Object {
                def,
                ns,
                name: segs[3].into(),
                sub: Some(segs[4].into()),
            }),
            _ => Err(ApiError::no_route(path)),
        };
    }
    match segs {
        [r] => {
            let def = lookup(r)?;
            Ok(Target::Collection { def, ns: None })
        }
        [r, name] | [r, name, _] => {
            let def = lookup(r)?;
            if def.namespaced {
                return Err(ApiError::no_route(path));
            }
            Ok(Target::Object {
                def,
                ns: String::new(),
                name: name.to_string(),
                sub: segs.get(2).map(|s| s.to_string()),
            })
        }
        _ => Err(ApiError::no_route(path)),
    }
}

/// What a request does, as RBAC sees it: the verb from the method (a
/// collection GET is `list`, or `watch` with `watch=true`), and the name of
/// a collection request from a `metadata.name=` field selector, as
/// kube-apiserver reads it.
fn attributes(target: &Target, method: &Method, params: &Params) -> Attributes {
    let (def, ns, name, sub, collection) = match target {
        Target::Collection { def, ns } => (def, ns.clone().unwrap_or_default(), None, None, true),
        Target::Object { def, ns, name, sub } => {
            (def, ns.clone(), Some(name.clone()), sub.clone(), false)
        }
    };
    let watch = matches!(params.get("watch").map(String::as_str), Some("true" | "1"));
    let verb = match (method.as_str(), collection) {
        ("GET" | "HEAD", true) if watch => "watch",
        ("GET" | "HEAD", true) => "list",
        ("GET" | "HEAD", false) if watch => "watch",
        ("GET" | "HEAD", false) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "deletecollection",
        ("DELETE", false) => "delete",
        _ => "unknown",
    };
    let name = name.unwrap_or_else(|| {
        params
            .get("fieldSelector")
            .and_then(|f| {
                f.split(',')
                    .find_map(|term| term.trim().strip_prefix("metadata.name="))
            })
            .unwrap_or("")
            .to_string()
    });
    Attributes {
        verb,
        group: def.group.clone(),
        resource: def.resource.clone(),
        subresource: sub,
        namespace: ns,
        name: if verb == "create" && collection {
            String::new()
        } else {
            name
        },
    }
}

pub(super) async fn dispatch(State(st): State<AppState>, req: Request) -> Response {
    match handle(st, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn handle(st: AppState, req: Request) -> ApiResult<Response> {
    let path = req.uri().path().trim_end_matches('/').to_string();
    let params: Params = Query::<Params>::try_from_uri(req.uri())
        .map(|q| q.0)
        .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))?;
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let server = st.server.clone();
    // Discovery documents.
    match segs.as_slice() {
        ["api", v] => {
            return discovery::resource_list(&server.registry, "", v)
                .map(|d| json_response(StatusCode::OK, &d))
                .ok_or_else(|| ApiError::no_route(&path));
        }
        ["apis", g] => {
            return discovery::group(&server.registry, g)
                .map(|d| json_response(StatusCode::OK, &d))
                .ok_or_else(|| ApiError::no_route(&path));
        }
        ["apis", g, v] => {
            return discovery::resource_list(&server.registry, g, v)
                .map(|d| json_response(StatusCode::OK, &d))
                .ok_or_else(|| ApiError::no_route(&path));
        }
        ["openapi", "v3", rest @ ..] => {
            return discovery::openapi_v3_group(&server.registry, &rest.join("/"))
                .map(|d| json_response(StatusCode::OK, &d))
                .ok_or_else(|| ApiError::no_route(&path));
        }
        _ => {}
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::no_route(&path)),
    };
    let target = resolve(&server, group, version, rest, &path)?;
    let method = req.method().clone();
    let attrs = attributes(&target, &method, &params);
    let user = req.extensions().get::<User>().cloned();
    if let Some(user) = &user {
        rbac::authorize(&server, user, &attrs)?;
    }
    let client_under_test = req.extensions().get::<UnderTest>().map(|u| u.0.clone());
    let under_test = client_under_test.is_some();
    let mut watch_fault = None;
    if under_test && let Some(fault) = server.faults.check(&attrs) {
        match fault {
            Fault::Latency { millis } => {
                tokio::time::sleep(Duration::from_millis(millis)).await;
            }
            Fault::WatchGone | Fault::WatchStall { .. } => watch_fault = Some(fault),
            Fault::InternalError => {
                return Err(ApiError::internal(
                    "Internal error occurred: injected by the testbed's fault rules",
                ));
            }
            Fault::TooManyRequests {
                retry_after_seconds,
            } => return Err(ApiError::throttled(retry_after_seconds)),
            Fault::Conflict => {
                return Err(ApiError::stale(&attrs.group, &attrs.resource, &attrs.name));
            }
            Fault::Timeout { millis } => {
                tokio::time::sleep(Duration::from_millis(millis)).await;
                return Err(ApiError::timeout());
            }
        }
    }
    // Timed from here: an injected fault or delay is not the server's time.
    let started = std::time::Instant::now();
    let headers = req.headers().clone();
    let body = read_body(req.into_body()).await?;
    let wants_table = headers
        .get(header::ACCEPT)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|a| a.contains("as=Table"));
    let ctx = Ctx {
        server: server.clone(),
        params,
        headers,
        body,
        wants_table,
        version: version.to_string(),
        under_test,
        watch_fault,
    };
    let result = match target {
        Target::Collection { def, ns } if review::is_review(&def) => {
            ctx.review(&def, ns, &method, user)
        }
        Target::Object { def, .. } if review::is_review(&def) => Err(ApiError::no_route(&path)),
        Target::Collection { def, ns } => ctx.collection(&def, ns, &method),
        Target::Object { def, ns, name, sub } => {
            ctx.object(&def, &ns, &name, sub.as_deref(), &method)
        }
    };
    if let Some(kind) = RequestKind::of_verb(attrs.verb) {
        let status = match &result {
            Ok(r) => r.status().as_u16(),
            Err(e) => e.code,
        };
        server.timings.record(kind, started.elapsed(), status);
    }
    if let Some(client) = &client_under_test {
        let done = result.as_ref().is_ok_and(|r| r.status().is_success());
        server
            .writes
            .record(client, &attrs, || server.clock.now(), done);
    }
    result
}

/// Reads a request body; over kube-apiserver's limit it is refused with 413
/// (`limitedReadBody` in k8s.io/apiserver's handlers).
async fn read_body(body: axum::body::Body) -> ApiResult<bytes::Bytes> {
    axum::body::to_bytes(body, MAX_REQUEST_BODY_BYTES)
        .await
        .map_err(|e| {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            if too_large {
                ApiError::request_entity_too_large(MAX_REQUEST_BODY_BYTES)
            } else {
                ApiError::bad_request(format!("reading the request body failed: {e}"))
            }
        })
}
