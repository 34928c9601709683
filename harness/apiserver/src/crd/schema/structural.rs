//! apiextensions' `ValidateStructural` (pkg/apiserver/schema/validation.go
//! and complete.go): every node typed, value validations (`allOf`, `anyOf`,
//! `oneOf`, `not`) free of structure, metadata restricted, the two
//! int-or-string `anyOf` patterns allowed, patterns compiling.

use super::causes::{self, Bad, child, index, key};
use super::node::{Additional, Schema};
use crate::error::Cause;

#[derive(Clone, Copy, PartialEq)]
enum Level {
    Root,
    Item,
    Field,
}

/// The structural schema errors of `s` (rooted at `path`), sorted as
/// upstream sorts them (by their rendered text).
pub(crate) fn validate(path: &str, s: &Schema) -> Vec<Cause> {
    let mut errs = Vec::new();
    invariants(s, Level::Root, path, &mut errs);
    completeness(s, s, path, path, &mut errs);
    errs.sort_by(|a, b| {
        let text = |c: &Cause| format!("{}: {}", c.field, c.message);
        text(a).cmp(&text(b))
    });
    errs
}

/// `anyOf: [{type: integer}, {type: string}]`, as int-or-string allows.
fn is_int_or_string_any_of(any_of: &[Schema]) -> bool {
    any_of.len() == 2 && any_of[0].is_bare_type("integer") && any_of[1].is_bare_type("string")
}

fn invariants(s: &Schema, level: Level, path: &str, errs: &mut Vec<Cause>) {
    if s.ty == "array" && s.items.is_none() {
        errs.push(causes::required(&child(path, "items"), "must be specified"));
    }
    if let Some(items) = &s.items {
        invariants(items, Level::Item, &child(path, "items"), errs);
    }
    for (k, prop) in &s.properties {
        invariants(
            prop,
            Level::Field,
            &key(&child(path, "properties"), k),
            errs,
        );
    }
    let additional = child(path, "additionalProperties");
    if let Some(a) = &s.additional_properties {
        if level == Level::Root {
            errs.push(causes::forbidden(
                &additional,
                "must not be used at the root",
            ));
        }
        if let Some(a) = a.schema() {
            invariants(a, Level::Field, &additional, errs);
        }
    }
    if s.int_or_string && s.preserves_unknown_fields() {
        let f = child(path, "x-kubernetes-preserve-unknown-fields");
        errs.push(causes::invalid(
            &f,
            &Bad::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if s.int_or_string && s.embedded_resource {
        let f = child(path, "x-kubernetes-embedded-resource");
        errs.push(causes::invalid(
            &f,
            &Bad::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let skip_any_of = is_int_or_string_any_of(&s.any_of);
    let skip_first_all_of = s
        .all_of
        .first()
        .is_some_and(|a| is_int_or_string_any_of(&a.any_of));
    value_validation(s, skip_any_of, skip_first_all_of, path, errs);
    type_invariants(s, level, path, errs);
    if s.embedded_resource && s.additional_properties.is_some() {
        errs.push(causes::forbidden(
            &additional,
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    let check_metadata = level == Level::Root || s.embedded_resource;
    for name in ["kind", "apiVersion"] {
        if let Some(p) = s
            .properties
            .get(name)
            .filter(|p| check_metadata && p.ty != "string")
        {
            let f = child(&key(&child(path, "properties"), name), "type");
            errs.push(causes::invalid(
                &f,
                &Bad::str(p.ty.as_str()),
                "must be string",
            ));
        }
    }
    if let Some(metadata) = s.properties.get("metadata") {
        let f = key(&child(path, "properties"), "metadata");
        metadata_invariants(metadata, check_metadata, level, &f, errs);
    }
    if s.embedded_resource && !s.preserves_unknown_fields() && s.properties.is_empty() {
        errs.push(causes::required(
            &child(path, "properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

fn type_invariants(s: &Schema, level: Level, path: &str, errs: &mut Vec<Cause>) {
    let ty = child(path, "type");
    if s.embedded_resource && s.ty != "object" {
        let detail = "must be object if x-kubernetes-embedded-resource is true";
        errs.push(if s.ty.is_empty() {
            causes::required(&ty, detail)
        } else {
            causes::invalid(&ty, &Bad::str(s.ty.as_str()), detail)
        });
    } else if s.ty.is_empty() && !s.int_or_string && !s.preserves_unknown_fields() {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(causes::required(&ty, detail));
    }
    if level == Level::Root && !s.ty.is_empty() && s.ty != "object" {
        errs.push(causes::invalid(
            &ty,
            &Bad::str(s.ty.as_str()),
            "must be object at the root",
        ));
    }
}

/// Metadata may only be an object; at the root only its `name` and
/// `generateName` may be restricted.
fn metadata_invariants(s: &Schema, check: bool, level: Level, path: &str, errs: &mut Vec<Cause>) {
    if check && s.ty != "object" {
        errs.push(causes::invalid(
            &child(path, "type"),
            &Bad::str(s.ty.as_str()),
            "must be object",
        ));
    }
    if level != Level::Root {
        return;
    }
    let mut rest = s.clone();
    let names = ["name", "generateName"];
    if rest.properties.keys().all(|k| names.contains(&k.as_str())) {
        rest.properties.clear();
    }
    rest.ty.clear();
    rest.types.clear();
    rest.default = None;
    if rest != Schema::default() {
        errs.push(causes::forbidden(
            path,
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
}

/// The value validations of a node: its `anyOf`/`allOf`/`oneOf`/`not`
/// must be free of structure; its pattern must compile.
fn value_validation(
    s: &Schema,
    skip_any_of: bool,
    skip_first_all_of: bool,
    path: &str,
    errs: &mut Vec<Cause>,
) {
    if !skip_any_of {
        for (i, v) in s.any_of.iter().enumerate() {
            nested(v, false, false, &index(&child(path, "anyOf"), i), errs);
        }
    }
    for (i, v) in s.all_of.iter().enumerate() {
        nested(
            v,
            skip_first_all_of && i == 0,
            false,
            &index(&child(path, "allOf"), i),
            errs,
        );
    }
    for (i, v) in s.one_of.iter().enumerate() {
        nested(v, false, false, &index(&child(path, "oneOf"), i), errs);
    }
    if let Some(not) = &s.not {
        nested(not, false, false, &child(path, "not"), errs);
    }
    if let Some(p) = &s.pattern
        && let Err(e) = &p.compiled
    {
        let detail = format!("must be a valid regular expression, but isn't: {e}");
        errs.push(causes::invalid(
            &child(path, "pattern"),
            &Bad::str(p.source.as_str()),
            &detail,
        ));
    }
}

/// A schema under a junctor: value validations only.
fn nested(v: &Schema, skip_any_of: bool, skip_all_of: bool, path: &str, errs: &mut Vec<Cause>) {
    value_validation(v, skip_any_of, skip_all_of, path, errs);
    if let Some(items) = &v.items {
        nested(items, false, false, &child(path, "items"), errs);
    }
    for (k, prop) in &v.properties {
        nested(
            prop,
            false,
            false,
            &key(&child(path, "properties"), k),
            errs,
        );
    }
    let forbid = |errs: &mut Vec<Cause>, name: &str, detail: &str| {
        errs.push(causes::forbidden(&child(path, name), detail));
    };
    if !v.ty.is_empty() {
        forbid(errs, "type", "must be empty to be structural");
    }
    // `additionalProperties: false` is no additionalProperties here.
    if matches!(
        v.additional_properties,
        Some(Additional::Schema(_)) | Some(Additional::Allows(true))
    ) {
        forbid(
            errs,
            "additionalProperties",
            "must be undefined to be structural",
        );
    }
    if v.default.is_some() {
        forbid(errs, "default", "must be undefined to be structural");
    }
    if !v.title.is_empty() {
        forbid(errs, "title", "must be empty to be structural");
    }
    if !v.description.is_empty() {
        forbid(errs, "description", "must be empty to be structural");
    }
    if v.nullable {
        forbid(errs, "nullable", "must be false to be structural");
    }
    if v.preserves_unknown_fields() {
        forbid(
            errs,
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        );
    }
    if v.embedded_resource {
        forbid(
            errs,
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        );
    }
    if v.int_or_string {
        forbid(
            errs,
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        );
    }
    if !v.list_map_keys.is_empty() {
        forbid(
            errs,
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        );
    }
    if v.list_type.is_some() {
        forbid(
            errs,
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        );
    }
    if v.map_type.is_some() {
        forbid(
            errs,
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        );
    }
    if !v.validations.is_empty() {
        forbid(
            errs,
            "x-kubernetes-validations",
            "must be empty to be structural",
        );
    }
    if v.properties.contains_key("metadata") {
        let f = key(&child(path, "properties"), "metadata");
        errs.push(causes::forbidden(
            &f,
            "must not be specified in a nested context",
        ));
    }
}

/// complete.go: what a junctor of the root specifies (items, properties)
/// must be specified structurally too.
fn completeness(v: &Schema, s: &Schema, s_path: &str, v_path: &str, errs: &mut Vec<Cause>) {
    if let Some(not) = &v.not {
        nested_completeness(not, Some(s), s_path, &child(v_path, "not"), errs);
    }
    let junctors = [
        ("allOf", &v.all_of),
        ("anyOf", &v.any_of),
        ("oneOf", &v.one_of),
    ];
    for (name, list) in junctors {
        for (i, sub) in list.iter().enumerate() {
            nested_completeness(sub, Some(s), s_path, &index(&child(v_path, name), i), errs);
        }
    }
}

fn nested_completeness(
    v: &Schema,
    s: Option<&Schema>,
    s_path: &str,
    v_path: &str,
    errs: &mut Vec<Cause>,
) {
    let Some(s) = s else {
        errs.push(causes::required(
            s_path,
            &format!("because it is defined in {v_path}"),
        ));
        return;
    };
    completeness(v, s, s_path, v_path, errs);
    if let Some(items) = &v.items {
        let (sp, vp) = (child(s_path, "items"), child(v_path, "items"));
        nested_completeness(items, s.items.as_deref(), &sp, &vp, errs);
    }
    for (k, prop) in &v.properties {
        let sp = key(&child(s_path, "properties"), k);
        let vp = key(&child(v_path, "properties"), k);
        match s.properties.get(k) {
            Some(sp_schema) => nested_completeness(prop, Some(sp_schema), &sp, &vp, errs),
            None => errs.push(causes::required(
                &sp,
                &format!("because it is defined in {vp}"),
            )),
        }
    }
}
