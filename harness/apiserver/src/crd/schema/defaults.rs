//! Structural defaulting (apiextensions' pkg/apiserver/schema/defaulting):
//! a missing property of a present object, or a `null` one that is not
//! nullable, takes the property's `default`; `null` items and map values
//! take their schema's; defaults are deep-copied and then defaulted too.

use serde_json::Value;

use super::node::{Additional, Schema};

fn non_nullable_null(x: &Value, s: Option<&Schema>) -> bool {
    x.is_null() && s.is_some_and(|s| !s.nullable)
}

/// Applies the defaults of `s` to `x`.
pub(crate) fn apply(x: &mut Value, s: &Schema) {
    match x {
        Value::Object(map) => {
            for (k, prop) in &s.properties {
                let Some(default) = &prop.default else {
                    continue;
                };
                let missing = map.get(k).is_none_or(|v| non_nullable_null(v, Some(prop)));
                if missing {
                    map.insert(k.clone(), default.clone());
                }
            }
            let additional = s.additional_properties.as_ref().map(Additional::schema);
            for (k, v) in map.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    apply(v, prop);
                } else if let Some(a) = additional {
                    if non_nullable_null(v, a)
                        && let Some(default) = a.and_then(|a| a.default.as_ref())
                    {
                        *v = default.clone();
                    }
                    if let Some(a) = a {
                        apply(v, a);
                    }
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = s.items.as_deref() else {
                return;
            };
            for item in items {
                if non_nullable_null(item, Some(item_schema))
                    && let Some(default) = &item_schema.default
                {
                    *item = default.clone();
                }
                apply(item, item_schema);
            }
        }
        _ => {}
    }
}
