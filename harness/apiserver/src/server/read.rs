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
        let (rv, all) = self.store.list(&def.gr(), ns, after.as_ref());
        let mut items = Vec::new();
        let (mut continue_token, mut remaining) = (None, None);
        for (i, o) in all.iter().enumerate() {
            if !filter.matches(o) {
                continue;
            }
            if opts.limit > 0 && items.len() == opts.limit {
                let last: &Arc<Stored> = &items[items.len() - 1];
                continue_token = Some(encode_continue(
                    list_rv.unwrap_or(rv),
                    &(last.namespace.clone(), last.name.clone()),
                ));
                remaining = filter.is_everything().then(|| all.len() - i);
                break;
            }
            items.push(o.clone());
        }
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
