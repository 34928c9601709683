//! Collections and objects: list, get, create, update, patch, delete,
//! delete a collection, and the subresources (status, scale, binding,
//! eviction, token, finalize).

use std::sync::Arc;

use apimachinery::json::Lookup;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use serde_json::{Value, json};

use super::request::{Ctx, bytes_response, json_response};
use crate::error::{ApiError, ApiResult};
use crate::rbac;
use crate::registry::ResourceDef;
use crate::server::{Deleted, ListPage, PatchType, Subresource};
use crate::table;

impl Ctx {
    /// A request on a collection: list (or watch), create, delete the collection.
    pub(super) fn collection(
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
                        .lookup("/metadata/name")
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

    fn list_body(&self, def: &ResourceDef, page: &ListPage) -> Bytes {
        let mut meta = json!({"resourceVersion": page.rv.to_string()});
        if let Some(c) = &page.continue_token {
            meta["continue"] = json!(c);
        }
        if let Some(n) = page.remaining {
            meta["remainingItemCount"] = json!(n);
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

    /// A request on one object or one of its subresources.
    pub(super) fn object(
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
                let rv_before = current.lookup("/metadata/resourceVersion").cloned();
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
                if current.lookup("/metadata/resourceVersion") == rv_before.as_ref() {
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
}
