//! The HTTP face of the server: an axum router that maps Kubernetes REST
//! paths and verbs onto [`Server`] operations, streams watches, answers
//! Tables for `kubectl get`, and checks the bearer token when one is set.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::discovery;
use crate::error::{ApiError, ApiResult};
use crate::faults::{self, Fault, UnderTest};
use crate::normalize::FieldValidation;
use crate::protobuf;
use crate::rbac::{self, Attributes, User};
use crate::registry::ResourceDef;
use crate::server::{
    DeleteOptions, Deleted, Filter, ListOptions, PatchType, Server, Subresource, WriteOptions,
};
use crate::store::{ChangeType, StoreError, WatchFrom, WatchItem, WatcherId};
use crate::table;

/// Largest request body accepted.
const MAX_BODY: usize = 64 * 1024 * 1024;
/// Watch timeout when the client gives none (upstream: 30 to 60 minutes).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);
/// Interval between bookmarks on watches that asked for them.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);

#[derive(Clone)]
struct AppState {
    server: Arc<Server>,
    token: Option<Arc<str>>,
    address: Arc<str>,
}

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
        req.extensions_mut().insert(user);
        // Every client over TLS is under test, named by its endpoint.
        req.extensions_mut().insert(UnderTest(st.address.clone()));
        st.server.count_tls_request();
    }
    next.run(req).await
}

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

async fn faults_report(State(st): State<AppState>, req: Request) -> Response {
    match faults_admin(&req) {
        Ok(()) => json_response(StatusCode::OK, &json!(st.server.faults.report())),
        Err(e) => e.into_response(),
    }
}

async fn faults_set(State(st): State<AppState>, req: Request) -> Response {
    let set = async {
        faults_admin(&req)?;
        let body = axum::body::to_bytes(req.into_body(), MAX_BODY)
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

async fn faults_clear(State(st): State<AppState>, req: Request) -> Response {
    match faults_admin(&req) {
        Ok(()) => {
            st.server.faults.clear();
            json_response(StatusCode::OK, &json!(st.server.faults.report()))
        }
        Err(e) => e.into_response(),
    }
}

async fn faults_cut(
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

fn json_response(code: StatusCode, v: &Value) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    bytes_response(code, Bytes::from(body))
}

fn bytes_response(code: StatusCode, body: Bytes) -> Response {
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
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

type Params = HashMap<String, String>;

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

async fn dispatch(State(st): State<AppState>, req: Request) -> Response {
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
    if let Some(user) = req.extensions().get::<User>() {
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
            Fault::WatchGone | Fault::WatchStall => watch_fault = Some(fault),
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
    let headers = req.headers().clone();
    let body = axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|e| ApiError::bad_request(format!("reading the request body failed: {e}")))?;
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
        Target::Collection { def, ns } => ctx.collection(&def, ns, &method),
        Target::Object { def, ns, name, sub } => {
            ctx.object(&def, &ns, &name, sub.as_deref(), &method)
        }
    };
    if let Some(client) = &client_under_test {
        let done = result.as_ref().is_ok_and(|r| r.status().is_success());
        server
            .writes
            .record(client, &attrs, || server.clock.now(), done);
    }
    result
}

struct Ctx {
    server: Arc<Server>,
    params: Params,
    headers: HeaderMap,
    body: Bytes,
    wants_table: bool,
    version: String,
    /// The request is the client under test's: its watches can be cut.
    under_test: bool,
    /// A fault for this request's watch.
    watch_fault: Option<Fault>,
}

impl Ctx {
    fn param(&self, k: &str) -> Option<&str> {
        self.params.get(k).map(String::as_str)
    }

    fn flag(&self, k: &str) -> bool {
        matches!(self.param(k), Some("true" | "1"))
    }

    fn write_options(&self) -> ApiResult<WriteOptions> {
        Ok(WriteOptions {
            dry_run: self.param("dryRun") == Some("All"),
            field_validation: FieldValidation::parse(self.param("fieldValidation"))
                .map_err(ApiError::bad_request)?,
        })
    }

    fn json_body(&self) -> ApiResult<Value> {
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

    fn delete_options(&self) -> ApiResult<DeleteOptions> {
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

    fn list_options(&self) -> ApiResult<ListOptions> {
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

    fn patch_type(&self) -> ApiResult<PatchType> {
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

    fn field_manager(&self) -> String {
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
    fn object_response(
        &self,
        def: &ResourceDef,
        code: StatusCode,
        json: Bytes,
    ) -> ApiResult<Response> {
        if self.wants_table {
            let v: Value =
                serde_json::from_slice(&json).map_err(|e| ApiError::internal(e.to_string()))?;
            let rv = v
                .pointer("/metadata/resourceVersion")
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
    fn with_version(&self, def: &ResourceDef, json: Bytes) -> Bytes {
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

    fn collection(
        self,
        def: &Arc<ResourceDef>,
        ns: Option<String>,
        method: &Method,
    ) -> ApiResult<Response> {
        let server = self.server.clone();
        match *method {
            Method::GET if self.flag("watch") => self.watch(def.clone(), ns),
            Method::GET => {
                let opts = self.list_options()?;
                if !def.namespaced && ns.is_some() {
                    return Err(ApiError::no_route(&def.resource));
                }
                let page = server.list(def, ns.as_deref(), &opts)?;
                if self.wants_table {
                    let objs: Vec<Value> = page.items.iter().map(|o| o.value()).collect();
                    let t = table::table(
                        def,
                        &objs,
                        server.clock.now(),
                        page.rv,
                        page.continue_token.as_deref(),
                    );
                    return Ok(json_response(StatusCode::OK, &t));
                }
                Ok(bytes_response(StatusCode::OK, self.list_body(def, &page)))
            }
            Method::POST => {
                if def.namespaced && ns.is_none() {
                    return Err(ApiError::method_not_allowed(&format!(
                        "POST on all-namespaces {}",
                        def.resource
                    )));
                }
                if def.create_only && def.resource == "bindings" {
                    let b = self.json_body()?;
                    let name = b
                        .pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let status = server.bind(ns.as_deref().unwrap_or(""), &name, &b)?;
                    return Ok(json_response(StatusCode::CREATED, &status));
                }
                let body = self.json_body()?;
                let created = server.create(def, ns.as_deref(), body, &self.write_options()?)?;
                self.object_response(def, StatusCode::CREATED, created)
            }
            Method::DELETE => {
                let list = self.list_options()?;
                let opts = self.delete_options()?;
                let items = server.delete_collection(def, ns.as_deref(), &list, &opts)?;
                let mut out = BytesMut::new();
                out.extend_from_slice(
                    format!(
                        "{{\"kind\":\"{}List\",\"apiVersion\":\"{}\",\"metadata\":{{}},\"items\":[",
                        def.kind,
                        def.api_version()
                    )
                    .as_bytes(),
                );
                for (i, it) in items.iter().enumerate() {
                    if i > 0 {
                        out.extend_from_slice(b",");
                    }
                    out.extend_from_slice(it);
                }
                out.extend_from_slice(b"]}");
                Ok(bytes_response(StatusCode::OK, out.freeze()))
            }
            _ => Err(ApiError::method_not_allowed(&format!(
                "{method} on {}",
                def.resource
            ))),
        }
    }

    fn list_body(&self, def: &ResourceDef, page: &crate::server::ListPage) -> Bytes {
        let mut meta = json!({"resourceVersion": page.rv.to_string()});
        if let Some(c) = &page.continue_token {
            meta["continue"] = json!(c);
        }
        let api_version = if def.custom {
            crate::registry::api_version(&def.group, &self.version)
        } else {
            def.api_version()
        };
        let size: usize = page.items.iter().map(|o| o.json.len() + 1).sum();
        let mut out = BytesMut::with_capacity(size + 256);
        out.extend_from_slice(
            format!("{{\"kind\":\"{}List\",\"apiVersion\":\"{api_version}\",\"metadata\":{meta},\"items\":[", def.kind).as_bytes(),
        );
        for (i, o) in page.items.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b",");
            }
            out.extend_from_slice(&self.with_version(def, o.json.clone()));
        }
        out.extend_from_slice(b"]}");
        out.freeze()
    }

    fn object(
        self,
        def: &Arc<ResourceDef>,
        ns: &str,
        name: &str,
        sub: Option<&str>,
        method: &Method,
    ) -> ApiResult<Response> {
        let server = self.server.clone();
        let is_pods = def.group.is_empty() && def.resource == "pods";
        let subresource = match sub {
            None => Subresource::Main,
            Some("status") if def.status => Subresource::Status,
            Some("finalize") if def.group.is_empty() && def.resource == "namespaces" => {
                Subresource::Finalize
            }
            Some("scale") if def.scale.is_some() => return self.scale(def, ns, name, method),
            Some("binding") if is_pods => {
                if *method != Method::POST {
                    return Err(ApiError::method_not_allowed("pods/binding"));
                }
                let st = server.bind(ns, name, &self.json_body()?)?;
                return Ok(json_response(StatusCode::CREATED, &st));
            }
            Some("token") if def.group.is_empty() && def.resource == "serviceaccounts" => {
                if *method != Method::POST {
                    return Err(ApiError::method_not_allowed("serviceaccounts/token"));
                }
                let tr = rbac::request_token(&server, ns, name, &self.json_body()?)?;
                return Ok(json_response(StatusCode::CREATED, &tr));
            }
            Some("eviction") if is_pods => {
                if *method != Method::POST {
                    return Err(ApiError::method_not_allowed("pods/eviction"));
                }
                let st = server.evict(ns, name, &self.json_body()?)?;
                return Ok(json_response(StatusCode::CREATED, &st));
            }
            Some(other) => {
                return Err(ApiError::no_route(&format!(
                    "{}/{name}/{other}",
                    def.resource
                )));
            }
        };
        match (method, subresource) {
            (&Method::GET, _) => {
                let o = server.get(def, ns, name)?;
                self.object_response(def, StatusCode::OK, o.json.clone())
            }
            (&Method::PUT, _) => {
                let body = self.json_body()?;
                let out =
                    server.update(def, ns, name, body, subresource, &self.write_options()?)?;
                self.object_response(def, StatusCode::OK, out)
            }
            (&Method::PATCH, Subresource::Main | Subresource::Status) => {
                let ty = self.patch_type()?;
                let out = server.patch(
                    def,
                    ns,
                    name,
                    ty,
                    &self.body,
                    subresource,
                    &self.write_options()?,
                    &self.field_manager(),
                )?;
                self.object_response(def, StatusCode::OK, out)
            }
            (&Method::DELETE, Subresource::Main) => {
                match server.delete(def, ns, name, &self.delete_options()?)? {
                    Deleted::Gone(b) => self.object_response(def, StatusCode::OK, b),
                    Deleted::Pending(b) => self.object_response(def, StatusCode::OK, b),
                }
            }
            _ => Err(ApiError::method_not_allowed(&format!(
                "{method} on {}",
                def.resource
            ))),
        }
    }

    fn scale(
        self,
        def: &Arc<ResourceDef>,
        ns: &str,
        name: &str,
        method: &Method,
    ) -> ApiResult<Response> {
        let server = &self.server;
        let opts = self.write_options()?;
        let scale = match *method {
            Method::GET => server.get_scale(def, ns, name)?,
            Method::PUT => server.update_scale(def, ns, name, &self.json_body()?, &opts)?,
            Method::PATCH => {
                let mut current = server.get_scale(def, ns, name)?;
                let rv_before = current.pointer("/metadata/resourceVersion").cloned();
                let res = match self.patch_type()? {
                    PatchType::Json => crate::patch::json_patch(&mut current, &self.body),
                    PatchType::Merge | PatchType::Apply { .. } => {
                        crate::patch::merge_patch(&mut current, &self.body)
                    }
                    PatchType::Strategic => {
                        crate::patch::strategic_merge_patch(&mut current, &self.body)
                    }
                };
                res.map_err(|e| ApiError::bad_request(e.0))?;
                if current.pointer("/metadata/resourceVersion") == rv_before.as_ref() {
                    // No precondition in the patch: write whatever is current.
                    if let Some(m) = current.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove("resourceVersion");
                    }
                }
                server.update_scale(def, ns, name, &current, &opts)?
            }
            _ => {
                return Err(ApiError::method_not_allowed(&format!(
                    "{method} on {}/scale",
                    def.resource
                )));
            }
        };
        Ok(json_response(StatusCode::OK, &scale))
    }

    fn watch(self, def: Arc<ResourceDef>, ns: Option<String>) -> ApiResult<Response> {
        let filter = Filter::parse(
            &def,
            self.param("labelSelector"),
            self.param("fieldSelector"),
        )?;
        let send_initial = self.flag("sendInitialEvents");
        let from =
            match self.param("resourceVersion") {
                _ if send_initial => WatchFrom::Now,
                None | Some("") | Some("0") => WatchFrom::Now,
                Some(rv) => WatchFrom::Version(rv.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))
                })?),
            };
        let timeout = match self.param("timeoutSeconds") {
            Some(t) => Duration::from_secs(
                t.parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {t:?}")))?,
            ),
            None => DEFAULT_WATCH_TIMEOUT,
        };
        let bookmarks = self.flag("allowWatchBookmarks");
        let server = self.server.clone();
        match self.watch_fault {
            Some(Fault::WatchGone) => return Ok(watch_gone(&server)),
            Some(Fault::WatchStall) => return Ok(stalled_watch(timeout)),
            _ => {}
        }
        let (id, rx, initial) = server
            .store
            .watch(Some(def.gr()), ns.clone(), from)
            .map_err(|e| match e {
                StoreError::Gone { requested, oldest } => {
                    ApiError::gone(format!("too old resource version: {requested} ({oldest})"))
                }
                other => ApiError::internal(other.to_string()),
            })?;
        let start_rv = match from {
            WatchFrom::Version(rv) => rv,
            WatchFrom::Now => server.store.current_rv(),
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let state = WatchState {
            guard: WatchGuard {
                server: server.clone(),
                id,
            },
            def,
            filter,
            table: self.wants_table,
            version: self.version.clone(),
            initial: initial.into_iter(),
            end_marker: send_initial && bookmarks,
            rx,
            deadline,
            bookmarks,
            next_bookmark: tokio::time::Instant::now() + BOOKMARK_INTERVAL,
            last_rv: start_rv,
            cuts: self.under_test.then(|| server.faults.cuts()),
        };
        let stream = futures::stream::unfold(state, |mut st| async move {
            let chunk = st.next_chunk().await?;
            Some((Ok::<Bytes, std::convert::Infallible>(chunk), st))
        });
        let body = Body::from_stream(stream.boxed());
        Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response())
    }
}

/// A watch answered at once with kube-apiserver's `ERROR` event for a
/// resourceVersion it no longer keeps (the client must list again).
fn watch_gone(server: &Server) -> Response {
    let rv = server.store.current_rv();
    let status = ApiError::gone(format!("too old resource version: 1 ({rv})")).status();
    let mut line =
        serde_json::to_vec(&json!({"type": "ERROR", "object": status})).unwrap_or_default();
    line.push(b'\n');
    bytes_response(StatusCode::OK, Bytes::from(line))
}

/// A watch that sends nothing, not even bookmarks, until its timeout.
fn stalled_watch(timeout: Duration) -> Response {
    let stream = futures::stream::once(async move {
        tokio::time::sleep(timeout).await;
        Ok::<Bytes, std::convert::Infallible>(Bytes::new())
    });
    let body = Body::from_stream(stream.boxed());
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// Waits until the fault rules cut the watches on `resource`; never for a
/// watch that cannot be cut.
async fn cut(
    cuts: &mut Option<tokio::sync::watch::Receiver<(u64, Option<String>)>>,
    resource: &str,
) {
    let Some(rx) = cuts.as_mut() else {
        return std::future::pending().await;
    };
    loop {
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
        if rx
            .borrow_and_update()
            .1
            .as_deref()
            .is_none_or(|r| r == resource)
        {
            return;
        }
    }
}

/// Unregisters the watcher when the response body is dropped.
struct WatchGuard {
    server: Arc<Server>,
    id: WatcherId,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.server.store.unwatch(self.id);
    }
}

struct WatchState {
    guard: WatchGuard,
    def: Arc<ResourceDef>,
    filter: Filter,
    table: bool,
    version: String,
    initial: std::vec::IntoIter<Arc<crate::store::Stored>>,
    end_marker: bool,
    rx: tokio::sync::mpsc::UnboundedReceiver<WatchItem>,
    deadline: tokio::time::Instant,
    bookmarks: bool,
    next_bookmark: tokio::time::Instant,
    last_rv: u64,
    /// Cuts from the fault rules, for the client under test's watches.
    cuts: Option<tokio::sync::watch::Receiver<(u64, Option<String>)>>,
}

impl WatchState {
    fn encode(&self, out: &mut BytesMut, ty: &str, obj: &Bytes) {
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(ty.as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        if self.table {
            let v: Value = serde_json::from_slice(obj).unwrap_or(Value::Null);
            let rv = v
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let t = table::table(&self.def, &[v], self.guard.server.clock.now(), rv, None);
            out.extend_from_slice(&serde_json::to_vec(&t).unwrap_or_default());
        } else if self.def.custom && self.def.versions.len() > 1 {
            let mut v: Value = serde_json::from_slice(obj).unwrap_or(Value::Null);
            v["apiVersion"] = json!(crate::registry::api_version(&self.def.group, &self.version));
            out.extend_from_slice(&serde_json::to_vec(&v).unwrap_or_default());
        } else {
            out.extend_from_slice(obj);
        }
        out.extend_from_slice(b"}\n");
    }

    fn bookmark(&self, out: &mut BytesMut, rv: u64, initial_end: bool) {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let ev = json!({"type": "BOOKMARK", "object": {"kind": self.def.kind, "apiVersion": self.def.api_version(), "metadata": meta}});
        out.extend_from_slice(&serde_json::to_vec(&ev).unwrap_or_default());
        out.extend_from_slice(b"\n");
    }

    /// Appends the event for one change, if the filter lets it through.
    fn change(&mut self, out: &mut BytesMut, item: WatchItem) {
        match item {
            WatchItem::Bookmark(rv) => {
                if self.bookmarks {
                    self.bookmark(out, rv.max(self.last_rv), false);
                }
            }
            WatchItem::Change(c) => {
                self.last_rv = c.rv;
                let now = self.filter.matches(&c.obj);
                let before = c.prev.as_ref().is_some_and(|p| self.filter.matches(p));
                let ty = match c.kind {
                    ChangeType::Added if now => "ADDED",
                    ChangeType::Modified if now && before => "MODIFIED",
                    ChangeType::Modified if now => "ADDED",
                    ChangeType::Modified if before => "DELETED",
                    ChangeType::Deleted if before => "DELETED",
                    _ => return,
                };
                self.encode(out, ty, &c.obj.json);
            }
        }
    }

    async fn next_chunk(&mut self) -> Option<Bytes> {
        let mut out = BytesMut::new();
        // Initial state first, in chunks.
        while out.len() < 256 * 1024 {
            let Some(o) = self.initial.next() else { break };
            if self.filter.matches(&o) {
                self.encode(&mut out, "ADDED", &o.json);
            }
        }
        if !out.is_empty() {
            return Some(out.freeze());
        }
        if self.end_marker {
            self.end_marker = false;
            self.bookmark(&mut out, self.last_rv, true);
            return Some(out.freeze());
        }
        loop {
            tokio::select! {
                item = self.rx.recv() => {
                    let item = item?;
                    self.change(&mut out, item);
                    while out.len() < 256 * 1024 {
                        match self.rx.try_recv() {
                            Ok(item) => self.change(&mut out, item),
                            Err(_) => break,
                        }
                    }
                    if !out.is_empty() {
                        return Some(out.freeze());
                    }
                }
                _ = tokio::time::sleep_until(self.deadline) => return None,
                () = cut(&mut self.cuts, &self.def.resource) => {
                    self.guard.server.faults.count(faults::WATCH_CUT, 1);
                    return None;
                }
                _ = tokio::time::sleep_until(self.next_bookmark), if self.bookmarks => {
                    self.next_bookmark = tokio::time::Instant::now() + BOOKMARK_INTERVAL;
                    self.guard.server.store.bookmark(self.guard.id);
                }
            }
        }
    }
}
