//! Reads: get one object, list with selectors and pagination.

use std::sync::Arc;

use base64::Engine;
use serde_json::{Value, json};

use super::options::{Filter, ListOptions, ListPage};
use super::state::Server;
use crate::error::{ApiError, ApiResult};
use crate::registry::ResourceDef;
use crate::store::{ObjKey, Stored};

impl Server {
    /// Reads one object.
    pub fn get(&self, def: &ResourceDef, ns: &str, name: &str) -> ApiResult<Arc<Stored>> {
        self.store
            .get(&def.gr(), ns, name)
            .ok_or_else(|| ApiError::not_found(&def.group, &def.resource, name))
    }

    /// Lists with selectors and pagination. The resourceVersion of a
    /// paginated list is that of its first page, so a watch started from it
    /// misses nothing.
    pub fn list(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> ApiResult<ListPage> {
        let filter = Filter::parse(
            def,
            opts.label_selector.as_deref(),
            opts.field_selector.as_deref(),
        )?;
        let (mut list_rv, mut after) = (None, None);
        if let Some(token) = opts.continue_token.as_deref().filter(|t| !t.is_empty()) {
            let (rv, key) = decode_continue(token)?;
            list_rv = Some(rv);
            after = Some(key);
        }
        let page = self.store.list_page(
            &def.gr(),
            ns,
            after.as_ref(),
            opts.limit,
            |o| filter.matches(o),
            filter.is_everything(),
        );
        let rv = page.rv;
        let continue_token = match (page.more, page.items.last()) {
            (true, Some(last)) => Some(encode_continue(
                list_rv.unwrap_or(rv),
                &(last.namespace.clone(), last.name.clone()),
            )),
            _ => None,
        };
        let remaining = page.rest;
        let items = page.items;
        Ok(ListPage {
            rv: list_rv.unwrap_or(rv),
            items,
            continue_token,
            remaining,
        })
    }
}

fn encode_continue(rv: u64, key: &ObjKey) -> String {
    let raw = json!({"rv": rv, "ns": key.0, "name": key.1}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str) -> ApiResult<(u64, ObjKey)> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token:?}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let ns = v.get("ns").and_then(Value::as_str).ok_or_else(bad)?;
    let name = v.get("name").and_then(Value::as_str).ok_or_else(bad)?;
    Ok((rv, (ns.to_string(), name.to_string())))
}
