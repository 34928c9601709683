//! Pruning, as apiextensions' decoder does it for custom resources
//! (pkg/apiserver/schema/pruning and defaulting/prunenulls.go): fields the
//! schema does not specify are dropped (their paths reported as strict field
//! validation names them), then `null`s of non-nullable fields without a
//! default.

use serde_json::{Map, Value};

use super::node::Schema;

/// TypeMeta and ObjectMeta: kept as they are at the root and in embedded
/// resources.
const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

struct Pruner {
    /// The path of the value being pruned (`spec.items[0]`).
    path: String,
    /// The pruned fields' paths.
    pruned: Vec<String>,
}

impl Pruner {
    fn record(&mut self, key: &str) {
        let path = if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        };
        self.pruned.push(path);
    }

    fn with_key<T>(&mut self, key: &str, f: impl FnOnce(&mut Self) -> T) -> T {
        let len = self.path.len();
        if !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(key);
        let out = f(self);
        self.path.truncate(len);
        out
    }

    fn with_index<T>(&mut self, i: usize, f: impl FnOnce(&mut Self) -> T) -> T {
        let len = self.path.len();
        self.path.push_str(&format!("[{i}]"));
        let out = f(self);
        self.path.truncate(len);
        out
    }

    /// Prunes `x` against `s`; `embedded` when `x` is a resource (the root
    /// or an `x-kubernetes-embedded-resource`).
    fn prune(&mut self, x: &mut Value, s: Option<&Schema>, embedded: bool) {
        if let Some(s) = s.filter(|s| s.preserves_unknown_fields()) {
            self.skip(x, s, embedded);
            return;
        }
        match x {
            Value::Object(map) => match s {
                None => {
                    for k in map.keys() {
                        let k = k.clone();
                        self.record(&k);
                    }
                    map.clear();
                }
                Some(s) => self.prune_object(map, s, embedded),
            },
            Value::Array(items) => {
                let item_schema = s.and_then(|s| s.items.as_deref());
                let embedded_items = item_schema.is_some_and(|i| i.embedded_resource);
                for (i, item) in items.iter_mut().enumerate() {
                    self.with_index(i, |p| p.prune(item, item_schema, embedded_items));
                }
            }
            _ => {}
        }
    }

    fn prune_object(&mut self, map: &mut Map<String, Value>, s: &Schema, embedded: bool) {
        let keys: Vec<String> = map.keys().cloned().collect();
        for k in keys {
            if embedded && META_FIELDS.contains(&k.as_str()) {
                continue;
            }
            let field = match (s.properties.get(&k), &s.additional_properties) {
                (Some(prop), _) => Some(Some(prop)),
                (None, Some(a)) => Some(a.schema()),
                (None, None) => None,
            };
            match field {
                Some(sub) => {
                    if let Some(v) = map.get_mut(&k) {
                        let sub_embedded = sub.is_some_and(|x| x.embedded_resource);
                        self.with_key(&k, |p| p.prune(v, sub, sub_embedded));
                    }
                }
                None => {
                    if !META_FIELDS.contains(&k.as_str()) || !self.path.is_empty() {
                        self.record(&k);
                    }
                    map.remove(&k);
                }
            }
        }
    }

    /// Under `x-kubernetes-preserve-unknown-fields`: unknown fields stay,
    /// specified ones are pruned by their schema.
    fn skip(&mut self, x: &mut Value, s: &Schema, embedded: bool) {
        match x {
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    if embedded && META_FIELDS.contains(&k.as_str()) {
                        continue;
                    }
                    let sub = match (s.properties.get(k), &s.additional_properties) {
                        (Some(prop), _) => Some(prop),
                        (None, Some(a)) => a.schema(),
                        (None, None) => continue,
                    };
                    let sub_embedded = sub.is_some_and(|x| x.embedded_resource);
                    self.with_key(k, |p| p.prune(v, sub, sub_embedded));
                }
            }
            Value::Array(items) => {
                let Some(item_schema) = s.items.as_deref() else {
                    return;
                };
                for (i, item) in items.iter_mut().enumerate() {
                    self.with_index(i, |p| {
                        p.skip(item, item_schema, item_schema.embedded_resource)
                    });
                }
            }
            _ => {}
        }
    }
}

/// Prunes `obj` against `s`, as a resource when `resource` (the root: its
/// apiVersion, kind and metadata are kept). Returns the pruned paths,
/// sorted (`spec.foo`, `spec.items[0].bar`).
pub(crate) fn prune(obj: &mut Value, s: &Schema, resource: bool) -> Vec<String> {
    let mut p = Pruner {
        path: String::new(),
        pruned: Vec::new(),
    };
    p.prune(obj, Some(s), resource || s.embedded_resource);
    p.pruned.sort();
    p.pruned
}

/// Drops `null`s of fields that are not nullable and have no default
/// (defaulting/prunenulls.go); nulls with a default are defaulted later.
pub(crate) fn prune_nulls(x: &mut Value, s: Option<&Schema>) {
    match x {
        Value::Object(map) => {
            map.retain(|k, v| {
                let field = s.and_then(|s| s.field(k));
                let drop = v.is_null() && field.is_some_and(|f| !f.nullable && f.default.is_none());
                if !drop {
                    prune_nulls(v, field);
                }
                !drop
            });
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for item in items {
                prune_nulls(item, item_schema);
            }
        }
        _ => {}
    }
}
