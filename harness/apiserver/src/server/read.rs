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
        let (mut list_rv, mut after, mut rest_before) = (None, None, None);
        if let Some(token) = opts.continue_token.as_deref().filter(|t| !t.is_empty()) {
            let cont = decode_continue(token)?;
            list_rv = Some(cont.rv);
            after = Some(cont.after);
            rest_before = cont.rest;
        }
        let equal: Vec<(usize, &str)> = filter
            .fields
            .reqs
            .iter()
            .filter(|r| !r.negate)
            .map(|r| (r.field, r.value.as_str()))
            .collect();
        let page = if equal.is_empty() {
            self.store.list_page(
                &def.gr(),
                ns,
                after.as_ref(),
                opts.limit,
                |o| filter.matches(o),
                filter.is_everything() && rest_before.is_none(),
            )
        } else {
            self.store
                .list_page_where(&def.gr(), ns, after.as_ref(), opts.limit, &equal, |o| {
                    filter.matches(o)
                })
        };
        let rv = page.rv;
        // A later page's count is the previous page's less what this one
        // holds (counting again would read the rest of the resource for
        // every page): exact unless objects came or went in between, and
        // kube-apiserver's is an estimate for clients too.
        let remaining = match rest_before {
            Some(n) if page.more => Some(n.saturating_sub(page.items.len()).max(1)),
            Some(_) => None,
            None => page.rest,
        };
        let continue_token = match (page.more, page.items.last()) {
            (true, Some(last)) => Some(encode_continue(&Continue {
                rv: list_rv.unwrap_or(rv),
                after: (last.namespace.clone(), last.name.clone()),
                rest: remaining,
            })),
            _ => None,
        };
        let items = page.items;
        Ok(ListPage {
            rv: list_rv.unwrap_or(rv),
            items,
            continue_token,
            remaining,
        })
    }
}

/// Where a cut list resumes, carried by its continue token.
struct Continue {
    /// The resourceVersion of the list's first page.
    rv: u64,
    /// The last key returned.
    after: ObjKey,
    /// How many objects followed, when the list counts them.
    rest: Option<usize>,
}

fn encode_continue(c: &Continue) -> String {
    let mut raw = json!({"rv": c.rv, "ns": c.after.0, "name": c.after.1});
    if let Some(n) = c.rest {
        raw["rest"] = json!(n);
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw.to_string())
}

fn decode_continue(token: &str) -> ApiResult<Continue> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token:?}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let ns = v.get("ns").and_then(Value::as_str).ok_or_else(bad)?;
    let name = v.get("name").and_then(Value::as_str).ok_or_else(bad)?;
    let rest = v
        .get("rest")
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok());
    Ok(Continue {
        rv,
        after: (ns.to_string(), name.to_string()),
        rest,
    })
}
