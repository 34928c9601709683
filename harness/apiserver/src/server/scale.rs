//! The `scale` subresource.

use apimachinery::json::Lookup;
use serde_json::{Value, json};

use super::options::{Subresource, WriteOptions};
use super::state::Server;
use super::update::set_path;
use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::ResourceDef;

impl Server {
    /// The `autoscaling/v1` Scale of an object.
    pub fn get_scale(&self, def: &ResourceDef, ns: &str, name: &str) -> ApiResult<Value> {
        let spec = def
            .scale
            .clone()
            .ok_or_else(|| ApiError::no_route(&format!("{}/{name}/scale", def.resource)))?;
        let cur = self.get(def, ns, name)?;
        let obj = cur.value();
        let selector = spec
            .label_selector
            .as_deref()
            .and_then(|p| crate::registry::lookup(&obj, p))
            .map(selector_string)
            .unwrap_or_default();
        let mut meta = json!({
            "name": name,
            "uid": cur.uid,
            "resourceVersion": cur.rv.to_string(),
            "creationTimestamp": obj.lookup("/metadata/creationTimestamp").cloned().unwrap_or(Value::Null),
        });
        if !ns.is_empty() {
            meta["namespace"] = json!(ns);
        }
        Ok(json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": meta,
            "spec": {"replicas": crate::registry::lookup(&obj, &spec.spec_replicas).and_then(Value::as_i64).unwrap_or(0)},
            "status": {
                "replicas": crate::registry::lookup(&obj, &spec.status_replicas).and_then(Value::as_i64).unwrap_or(0),
                "selector": selector,
            }
        }))
    }

    /// Writes a Scale (PUT, or the result of a patch) back to its object.
    pub fn update_scale(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        scale: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let spec = def
            .scale
            .clone()
            .ok_or_else(|| ApiError::no_route(&format!("{}/{name}/scale", def.resource)))?;
        // `replicas` is `omitempty` in autoscaling/v1: a Go client writes a
        // Scale of 0 without it, and kube-apiserver reads that as 0.
        let replicas = match scale.lookup("/spec/replicas") {
            None | Some(Value::Null) => 0,
            Some(v) => v.as_i64().ok_or_else(|| {
                ApiError::invalid(
                    "autoscaling",
                    "Scale",
                    name,
                    vec![Cause::invalid(
                        "spec.replicas",
                        &v.to_string(),
                        "must be an integer",
                    )],
                )
            })?,
        };
        if replicas < 0 {
            return Err(ApiError::invalid(
                "autoscaling",
                "Scale",
                name,
                vec![Cause::invalid(
                    "spec.replicas",
                    &replicas.to_string(),
                    "must be greater than or equal to 0",
                )],
            ));
        }
        let precondition = scale
            .lookup("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .and_then(|s| s.parse::<u64>().ok());
        self.guaranteed_update(
            def,
            ns,
            name,
            Subresource::Main,
            opts,
            precondition,
            |mut cur| {
                set_path(&mut cur, &spec.spec_replicas, json!(replicas));
                Ok(cur)
            },
        )?;
        self.get_scale(def, ns, name)
    }
}

/// A label selector (object or string) in its string form, as Scale reports it.
pub fn selector_string(sel: &Value) -> String {
    if let Some(s) = sel.as_str() {
        return s.to_string();
    }
    let mut parts = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            parts.push(format!("{k}={}", v.as_str().unwrap_or("")));
        }
    }
    if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
        for e in exprs {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("");
            let vals: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e.get("operator").and_then(Value::as_str).unwrap_or("") {
                "In" => parts.push(format!("{key} in ({})", vals.join(","))),
                "NotIn" => parts.push(format!("{key} notin ({})", vals.join(","))),
                "Exists" => parts.push(key.to_string()),
                "DoesNotExist" => parts.push(format!("!{key}")),
                _ => {}
            }
        }
    }
    parts.join(",")
}
