//! The checks apiextensions runs on a CRD version's schema beyond
//! structurality (pkg/apis/apiextensions/validation/validation.go:
//! ValidateCustomResourceDefinitionOpenAPISchema and specStandardValidatorV3,
//! for a CRD created through apiextensions.k8s.io/v1), the unsupported
//! fields that stop `NewStructural`, and `ValidateDefaults`
//! (pkg/apiserver/schema/defaulting/validation.go).

use serde_json::Value;

use super::causes::{self, Bad, child, index, key};
use super::node::{Additional, Schema};
use super::{embedded, openapi, prune};
use crate::error::Cause;

const TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];
const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Where defaults are allowed.
#[derive(Clone, Default)]
struct Context {
    /// Why `default` is forbidden here, if it is.
    no_defaults: Option<String>,
    /// Inside a resource's TypeMeta or ObjectMeta.
    inside_meta: bool,
}

/// ValidateCustomResourceDefinitionOpenAPISchema for the schema at `path`.
pub(crate) fn openapi_schema(s: &Schema, path: &str) -> Vec<Cause> {
    let mut errs = Vec::new();
    node(s, path, &Context::default(), true, &mut errs);
    errs
}

fn node(s: &Schema, path: &str, ctx: &Context, root: bool, errs: &mut Vec<Cause>) {
    standard(s, path, ctx, errs);
    if s.unique_items {
        errs.push(causes::forbidden(
            &child(path, "uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(a) = &s.additional_properties {
        let with_schema = matches!(a, Additional::Schema(_) | Additional::Allows(false));
        if !s.properties.is_empty() && with_schema {
            errs.push(causes::forbidden(
                &child(path, "additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if let Some(a) = a.schema() {
            let mut sub = ctx.clone();
            if ctx.inside_meta {
                sub.no_defaults =
                    Some("inside additionalProperties applying to object metadata".into());
            }
            node(a, &child(path, "additionalProperties"), &sub, false, errs);
        }
    }
    for (k, prop) in &s.properties {
        let mut sub = ctx.clone();
        if (root || s.embedded_resource) && META_FIELDS.contains(&k.as_str()) {
            sub.inside_meta = true;
            if root {
                sub.no_defaults = Some(format!("in top-level {k}"));
            }
        }
        node(prop, &key(&child(path, "properties"), k), &sub, false, errs);
    }
    if let Some(not) = &s.not {
        node(not, &child(path, "not"), ctx, false, errs);
    }
    for (name, list) in [
        ("allOf", &s.all_of),
        ("oneOf", &s.one_of),
        ("anyOf", &s.any_of),
    ] {
        for (i, sub) in list.iter().enumerate() {
            node(sub, &index(&child(path, name), i), ctx, false, errs);
        }
    }
    if let Some(items) = &s.items {
        node(items, &child(path, "items"), ctx, false, errs);
    }
    if s.preserve_unknown_fields == Some(false) {
        let f = child(path, "x-kubernetes-preserve-unknown-fields");
        errs.push(causes::invalid(
            &f,
            &Bad::Bool(false),
            "must be true or undefined",
        ));
    }
    extensions(s, path, errs);
}

/// specStandardValidatorV3.validate.
fn standard(s: &Schema, path: &str, ctx: &Context, errs: &mut Vec<Cause>) {
    let forbid = |errs: &mut Vec<Cause>, name: &str, detail: &str| {
        errs.push(causes::forbidden(&child(path, name), detail));
    };
    if !s.ty.is_empty() && !TYPES.contains(&s.ty.as_str()) {
        let supported: Vec<String> = TYPES.iter().map(|t| t.to_string()).collect();
        errs.push(causes::not_supported(
            &child(path, "type"),
            &Bad::str(s.ty.as_str()),
            &supported,
        ));
    }
    if s.default.is_some()
        && let Some(reason) = &ctx.no_defaults
    {
        forbid(errs, "default", &format!("must not be set {reason}"));
    }
    let u = &s.unsupported;
    if !u.id.is_empty() {
        forbid(errs, "id", "id is not supported");
    }
    if u.additional_items {
        forbid(errs, "additionalItems", "additionalItems is not supported");
    }
    if u.pattern_properties {
        forbid(
            errs,
            "patternProperties",
            "patternProperties is not supported",
        );
    }
    if u.definitions {
        forbid(errs, "definitions", "definitions is not supported");
    }
    if u.dependencies {
        forbid(errs, "dependencies", "dependencies is not supported");
    }
    if u.reference.is_some() {
        forbid(errs, "$ref", "$ref is not supported");
    }
    if s.ty == "null" {
        forbid(
            errs,
            "type",
            "type cannot be set to null, use nullable as an alternative",
        );
    }
    if u.items_array {
        forbid(
            errs,
            "items",
            "items must be a schema object and not an array",
        );
    }
    if ctx.inside_meta && s.embedded_resource {
        forbid(
            errs,
            "x-kubernetes-embedded-resource",
            "must not be used inside of resource meta",
        );
    }
}

/// The x-kubernetes-map-type, list-type and list-map-keys rules.
fn extensions(s: &Schema, path: &str, errs: &mut Vec<Cause>) {
    let ty = child(path, "type");
    let wrong_type = |errs: &mut Vec<Cause>, detail: &str| {
        errs.push(if s.ty.is_empty() {
            causes::required(&ty, detail)
        } else {
            causes::invalid(&ty, &Bad::str(s.ty.as_str()), detail)
        });
    };
    if let Some(map_type) = &s.map_type {
        if s.ty != "object" {
            wrong_type(errs, "must be object if x-kubernetes-map-type is specified");
        }
        if map_type != "atomic" && map_type != "granular" {
            let supported = ["atomic".to_string(), "granular".to_string()];
            let f = child(path, "x-kubernetes-map-type");
            errs.push(causes::not_supported(
                &f,
                &Bad::str(map_type.as_str()),
                &supported,
            ));
        }
    }
    let list_type = s.list_type.as_deref();
    if list_type.is_some() && s.ty != "array" {
        wrong_type(errs, "must be array if x-kubernetes-list-type is specified");
    } else if list_type == Some("set")
        && let Some(items) = &s.items
    {
        set_items(items, path, errs);
    }
    if let Some(lt) = list_type.filter(|lt| !["atomic", "set", "map"].contains(lt)) {
        let supported = ["atomic", "set", "map"].map(String::from);
        let f = child(path, "x-kubernetes-list-type");
        errs.push(causes::not_supported(&f, &Bad::str(lt), &supported));
    }
    if !s.list_map_keys.is_empty() {
        let f = child(path, "x-kubernetes-list-type");
        let detail = "must be map if x-kubernetes-list-map-keys is non-empty";
        match list_type {
            None => errs.push(causes::required(&f, detail)),
            Some("map") => {}
            Some(lt) => errs.push(causes::invalid(&f, &Bad::str(lt), detail)),
        }
    }
    if list_type == Some("map") {
        map_list(s, path, errs);
    }
    if matches!(list_type, Some("map" | "set"))
        && let Some(items) = &s.items
    {
        map_set_items(s, items, path, errs);
    }
}

/// Items of a set must be atomic.
fn set_items(items: &Schema, path: &str, errs: &mut Vec<Cause>) {
    let detail = "must be atomic as item of a list with x-kubernetes-list-type=set";
    let items_path = child(path, "items");
    match items.ty.as_str() {
        "array" if items.list_type.as_deref().is_some_and(|t| t != "atomic") => {
            let bad = Bad::Json(items.list_type.clone().map_or(Value::Null, Value::String));
            errs.push(causes::invalid(
                &child(&items_path, "x-kubernetes-list-type"),
                &bad,
                detail,
            ));
        }
        "object" if items.map_type.as_deref() != Some("atomic") => {
            let bad = Bad::Json(items.list_type.clone().map_or(Value::Null, Value::String));
            errs.push(causes::invalid(
                &child(&items_path, "x-kubernetes-map-type"),
                &bad,
                detail,
            ));
        }
        _ => {}
    }
}

fn map_list(s: &Schema, path: &str, errs: &mut Vec<Cause>) {
    let keys_path = child(path, "x-kubernetes-list-map-keys");
    let keys_value = Bad::Json(Value::from(s.list_map_keys.clone()));
    if s.list_map_keys.is_empty() {
        errs.push(causes::required(
            &keys_path,
            "must not be empty if x-kubernetes-list-type is map",
        ));
    }
    let items_path = child(path, "items");
    let Some(items) = &s.items else {
        if s.unsupported.items_array {
            errs.push(causes::invalid(
                &items_path,
                &Bad::Json(Value::Null),
                "must only have a single schema if x-kubernetes-list-type is map",
            ));
        } else {
            errs.push(causes::required(
                &items_path,
                "must have a schema if x-kubernetes-list-type is map",
            ));
        }
        return;
    };
    if items.ty != "object" {
        let detail = "must be object if parent array's x-kubernetes-list-type is map";
        errs.push(causes::invalid(
            &child(&items_path, "type"),
            &Bad::str(items.ty.as_str()),
            detail,
        ));
        return;
    }
    let mut seen = std::collections::HashSet::new();
    for k in &s.list_map_keys {
        match items.properties.get(k) {
            Some(p) if p.ty == "array" || p.ty == "object" => {
                let f = child(&key(&child(&items_path, "properties"), k), "type");
                let detail =
                    "must be a scalar type if parent array's x-kubernetes-list-type is map";
                errs.push(causes::invalid(&f, &Bad::str(items.ty.as_str()), detail));
            }
            Some(_) => {}
            None => errs.push(causes::invalid(
                &keys_path,
                &keys_value,
                "entries must all be names of item properties",
            )),
        }
        if !seen.insert(k) {
            errs.push(causes::invalid(
                &keys_path,
                &keys_value,
                "must not contain duplicate entries",
            ));
        }
    }
}

/// validateMapListKeysMapSet: set and map items are not nullable; map keys
/// are required or defaulted, and not nullable.
fn map_set_items(s: &Schema, items: &Schema, path: &str, errs: &mut Vec<Cause>) {
    let items_path = child(path, "items");
    let list_type = s.list_type.as_deref().unwrap_or_default();
    if items.nullable {
        let detail = format!("cannot be nullable when x-kubernetes-list-type is {list_type}");
        errs.push(causes::forbidden(&child(&items_path, "nullable"), &detail));
    }
    if list_type != "map" {
        return;
    }
    for k in &s.list_map_keys {
        let Some(p) = items.properties.get(k) else {
            continue;
        };
        let prop_path = key(&child(&items_path, "properties"), k);
        if !items.required.contains(k) && p.default.is_none() {
            errs.push(causes::required(
                &child(&prop_path, "default"),
                "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            ));
        }
        if p.nullable {
            errs.push(causes::forbidden(
                &child(&prop_path, "nullable"),
                "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            ));
        }
    }
}

/// The first field that stops `NewStructural` (`OpenAPIV3Schema 'id' is
/// not supported`), searching the schema as upstream converts it.
pub(crate) fn unsupported(s: &Schema) -> Option<String> {
    let u = &s.unsupported;
    let own = [
        (!u.id.is_empty(), "OpenAPIV3Schema 'id' is not supported"),
        (
            !u.schema.is_empty(),
            "OpenAPIV3Schema 'schema' is not supported",
        ),
        (
            u.reference.as_deref().is_some_and(|r| !r.is_empty()),
            "OpenAPIV3Schema '$ref' is not supported",
        ),
        (
            u.pattern_properties,
            "OpenAPIV3Schema 'patternProperties' is not supported",
        ),
        (
            u.dependencies,
            "OpenAPIV3Schema 'dependencies' is not supported",
        ),
        (
            u.additional_items,
            "OpenAPIV3Schema 'additionalItems' is not supported",
        ),
        (
            u.definitions,
            "OpenAPIV3Schema 'definitions' is not supported",
        ),
        (
            u.items_array,
            "OpenAPIV3Schema 'items' must be a schema, but is an array",
        ),
        (
            s.preserve_unknown_fields == Some(false),
            "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined",
        ),
    ];
    if let Some((_, e)) = own.iter().find(|(bad, _)| *bad) {
        return Some(e.to_string());
    }
    let children = s
        .not
        .as_deref()
        .into_iter()
        .chain(&s.all_of)
        .chain(&s.any_of)
        .chain(&s.one_of)
        .chain(s.items.as_deref())
        .chain(s.properties.values())
        .chain(
            s.additional_properties
                .as_ref()
                .and_then(Additional::schema),
        );
    children.into_iter().find_map(unsupported)
}

/// ValidateDefaults: every default outside metadata is pruned (no unknown
/// fields) and valid against its schema.
pub(crate) fn defaults(
    s: &Schema,
    path: &str,
    root: bool,
    inside_meta: bool,
    errs: &mut Vec<Cause>,
) {
    let resource = root || s.embedded_resource;
    let inside_meta = inside_meta && !s.embedded_resource;
    if let Some(default) = s.default.as_ref().filter(|_| !inside_meta) {
        let default_path = child(path, "default");
        let mut pruned = default.clone();
        prune::prune(&mut pruned, s, resource);
        if pruned != *default {
            errs.push(causes::invalid(
                &default_path,
                &Bad::of(default),
                "must not have unknown fields",
            ));
        }
        let meta = if s.embedded_resource {
            embedded::validate(&default_path, default, s)
        } else {
            Vec::new()
        };
        if !meta.is_empty() {
            errs.extend(meta);
        } else {
            let outcome = openapi::validate(s, default, None, "");
            errs.extend(openapi::to_causes(&outcome.findings, Some(&default_path)));
        }
    }
    if let Some(items) = &s.items {
        defaults(items, &child(path, "items"), false, inside_meta, errs);
    }
    for (k, prop) in &s.properties {
        let meta = inside_meta || (resource && META_FIELDS.contains(&k.as_str()));
        defaults(prop, &key(&child(path, "properties"), k), false, meta, errs);
    }
}
