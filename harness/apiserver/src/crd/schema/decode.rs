//! Decodes an `openAPIV3Schema` JSON value into [`Schema`] nodes, as
//! kube-apiserver decodes `JSONSchemaProps`: unknown keys are dropped,
//! `null`s are unset fields, and a field of the wrong JSON type is an error
//! (a 400 decoding error upstream; a cause here).

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::{Map, Value};

use super::causes::{Bad, child, index, invalid, key};
use super::formats;
use super::gofmt::{go_regex, regex_error};
use super::node::{Additional, Pattern, Schema, Unsupported};
use crate::error::Cause;

/// Decodes the schema at `path`, adding a cause for each field of the
/// wrong JSON type.
pub(crate) fn decode(v: &Value, path: &str, errs: &mut Vec<Cause>) -> Schema {
    let Some(map) = v.as_object() else {
        errs.push(wrong(path, v, "an object"));
        return Schema::default();
    };
    let mut s = Schema::default();
    let mut d = Decoder { map, path, errs };
    s.ty = d.string("type");
    s.format = d.string("format");
    s.title = d.string("title");
    s.description = d.string("description");
    s.nullable = d.boolean("nullable");
    s.default = d.any("default");
    s.example = d.any("example");
    s.external_docs = d.object("externalDocs").map(|m| Value::Object(m.clone()));
    s.maximum = d.float("maximum");
    s.exclusive_maximum = d.boolean("exclusiveMaximum");
    s.minimum = d.float("minimum");
    s.exclusive_minimum = d.boolean("exclusiveMinimum");
    s.max_length = d.int("maxLength");
    s.min_length = d.int("minLength");
    s.pattern = d.pattern();
    s.max_items = d.int("maxItems");
    s.min_items = d.int("minItems");
    s.unique_items = d.boolean("uniqueItems");
    s.multiple_of = d.float("multipleOf");
    s.enumeration = d.array("enum").cloned().unwrap_or_default();
    s.max_properties = d.int("maxProperties");
    s.min_properties = d.int("minProperties");
    s.required = d.strings("required");
    s.all_of = d.schemas("allOf");
    s.any_of = d.schemas("anyOf");
    s.one_of = d.schemas("oneOf");
    s.not = d.schema("not").map(Box::new);
    s.properties = d.properties();
    s.additional_properties = d.additional_properties();
    s.preserve_unknown_fields = d.optional_boolean("x-kubernetes-preserve-unknown-fields");
    s.embedded_resource = d.boolean("x-kubernetes-embedded-resource");
    s.int_or_string = d.boolean("x-kubernetes-int-or-string");
    s.list_type = d.optional_string("x-kubernetes-list-type");
    s.list_map_keys = d.strings("x-kubernetes-list-map-keys");
    s.map_type = d.optional_string("x-kubernetes-map-type");
    s.validations = d
        .array("x-kubernetes-validations")
        .cloned()
        .unwrap_or_default();
    let (items, items_array) = d.items();
    s.items = items.map(Box::new);
    s.unsupported = Unsupported {
        id: d.string("id"),
        schema: d.string("$schema"),
        reference: d.optional_string("$ref"),
        pattern_properties: d.object("patternProperties").is_some_and(|m| !m.is_empty()),
        dependencies: d.object("dependencies").is_some(),
        additional_items: d.present("additionalItems"),
        definitions: d.object("definitions").is_some_and(|m| !m.is_empty()),
        items_array,
    };
    s.types = if s.int_or_string {
        vec!["integer".into(), "string".into()]
    } else if s.ty.is_empty() {
        Vec::new()
    } else {
        vec![s.ty.clone()]
    };
    s.checked_format = checked_format(&s);
    s
}

/// The format kube-apiserver validates: apiextensions drops the formats
/// it does not support for the node's type.
fn checked_format(s: &Schema) -> String {
    if s.format.is_empty() {
        return String::new();
    }
    let single = if s.types.len() == 1 {
        s.types[0].as_str()
    } else {
        ""
    };
    let keep = match single {
        "" | "string" => formats::is_supported(&s.format),
        "integer" => s.format == "int32" || s.format == "int64",
        "number" => s.format == "float" || s.format == "double",
        _ => false,
    };
    if keep {
        s.format.clone()
    } else {
        String::new()
    }
}

fn wrong(path: &str, v: &Value, expected: &str) -> Cause {
    invalid(path, &Bad::of(v), &format!("must be {expected}"))
}

struct Decoder<'a> {
    map: &'a Map<String, Value>,
    path: &'a str,
    errs: &'a mut Vec<Cause>,
}

impl<'a> Decoder<'a> {
    /// The value of `name`, `None` when absent or `null`.
    fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    fn present(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    fn typed<T>(
        &mut self,
        name: &str,
        expected: &str,
        f: impl Fn(&'a Value) -> Option<T>,
    ) -> Option<T> {
        let v = self.get(name)?;
        let out = f(v);
        if out.is_none() {
            self.errs.push(wrong(&child(self.path, name), v, expected));
        }
        out
    }

    fn string(&mut self, name: &str) -> String {
        self.optional_string(name).unwrap_or_default()
    }

    fn optional_string(&mut self, name: &str) -> Option<String> {
        self.typed(name, "a string", |v| v.as_str().map(str::to_string))
    }

    fn boolean(&mut self, name: &str) -> bool {
        self.optional_boolean(name).unwrap_or(false)
    }

    fn optional_boolean(&mut self, name: &str) -> Option<bool> {
        self.typed(name, "a boolean", Value::as_bool)
    }

    fn float(&mut self, name: &str) -> Option<f64> {
        self.typed(name, "a number", Value::as_f64)
    }

    fn int(&mut self, name: &str) -> Option<i64> {
        self.typed(name, "an integer", Value::as_i64)
    }

    fn any(&mut self, name: &str) -> Option<Value> {
        self.get(name).cloned()
    }

    fn object(&mut self, name: &str) -> Option<&'a Map<String, Value>> {
        self.typed(name, "an object", Value::as_object)
    }

    fn array(&mut self, name: &str) -> Option<&'a Vec<Value>> {
        self.typed(name, "an array", Value::as_array)
    }

    fn strings(&mut self, name: &str) -> Vec<String> {
        let Some(items) = self.array(name) else {
            return Vec::new();
        };
        let path = child(self.path, name);
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item.as_str() {
                Some(s) => out.push(s.to_string()),
                None => self.errs.push(wrong(&index(&path, i), item, "a string")),
            }
        }
        out
    }

    fn schema(&mut self, name: &str) -> Option<Schema> {
        let v = self.get(name)?;
        Some(decode(v, &child(self.path, name), self.errs))
    }

    fn schemas(&mut self, name: &str) -> Vec<Schema> {
        let Some(items) = self.array(name) else {
            return Vec::new();
        };
        let path = child(self.path, name);
        let errs = &mut *self.errs;
        items
            .iter()
            .enumerate()
            .map(|(i, v)| decode(v, &index(&path, i), errs))
            .collect()
    }

    fn properties(&mut self) -> BTreeMap<String, Schema> {
        let Some(props) = self.object("properties") else {
            return BTreeMap::new();
        };
        let path = child(self.path, "properties");
        let errs = &mut *self.errs;
        props
            .iter()
            .map(|(k, v)| (k.clone(), decode(v, &key(&path, k), errs)))
            .collect()
    }

    fn additional_properties(&mut self) -> Option<Additional> {
        let v = self.get("additionalProperties")?;
        let path = child(self.path, "additionalProperties");
        match v {
            Value::Bool(b) => Some(Additional::Allows(*b)),
            _ => Some(Additional::Schema(Box::new(decode(v, &path, self.errs)))),
        }
    }

    /// `items`: one schema, or (refused later) an array of schemas.
    fn items(&mut self) -> (Option<Schema>, bool) {
        match self.get("items") {
            None => (None, false),
            Some(Value::Array(_)) => (None, true),
            Some(v) => (
                Some(decode(v, &child(self.path, "items"), self.errs)),
                false,
            ),
        }
    }

    fn pattern(&mut self) -> Option<Pattern> {
        let source = self.optional_string("pattern").filter(|p| !p.is_empty())?;
        let compiled = Regex::new(&go_regex(&source)).map_err(|e| regex_error(&source, &e));
        Some(Pattern { source, compiled })
    }
}
