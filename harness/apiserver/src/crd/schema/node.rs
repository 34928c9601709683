//! One node of a CRD version's `openAPIV3Schema`, as apiextensions'
//! `JSONSchemaProps` holds it: the structural part (type, properties, items,
//! additionalProperties, extensions) and the value validations kube-openapi
//! checks, with `pattern`s compiled once.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::Value;

/// `additionalProperties`: a boolean or a schema.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Additional {
    /// `additionalProperties: true` or `false`.
    Allows(bool),
    /// `additionalProperties: {...}`.
    Schema(Box<Schema>),
}

impl Additional {
    /// The schema of the additional properties, if one is given.
    pub(crate) fn schema(&self) -> Option<&Schema> {
        match self {
            Additional::Schema(s) => Some(s),
            Additional::Allows(_) => None,
        }
    }
}

/// A `pattern`, compiled once when the schema is parsed (Go RE2 syntax,
/// translated to the `regex` crate's).
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    /// The pattern as the CRD gives it (messages quote it).
    pub source: String,
    /// The compiled pattern, or why it does not compile.
    pub compiled: Result<Regex, String>,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

/// The fields CRDs may not use (apiextensions refuses them).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Unsupported {
    /// `id`.
    pub id: String,
    /// `$schema`.
    pub schema: String,
    /// `$ref`.
    pub reference: Option<String>,
    /// A non-empty `patternProperties`.
    pub pattern_properties: bool,
    /// `dependencies`.
    pub dependencies: bool,
    /// `additionalItems`.
    pub additional_items: bool,
    /// A non-empty `definitions`.
    pub definitions: bool,
    /// `items` given as an array of schemas.
    pub items_array: bool,
}

/// One schema node (`JSONSchemaProps`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Schema {
    /// `type` ("" when unset).
    pub ty: String,
    /// The types kube-openapi checks: `[type]`, or `[integer, string]` for
    /// `x-kubernetes-int-or-string`, or none.
    pub types: Vec<String>,
    /// `format` as given.
    pub format: String,
    /// The format kube-apiserver validates: formats CRDs do not support
    /// are dropped (apiextensions' StripUnsupportedFormatsPostProcessor).
    pub checked_format: String,
    /// `title`.
    pub title: String,
    /// `description`.
    pub description: String,
    /// `nullable`.
    pub nullable: bool,
    /// `default` (a JSON `null` default is no default, as upstream decodes it).
    pub default: Option<Value>,
    /// `example`.
    pub example: Option<Value>,
    /// `externalDocs`.
    pub external_docs: Option<Value>,
    /// `maximum`.
    pub maximum: Option<f64>,
    /// `exclusiveMaximum`.
    pub exclusive_maximum: bool,
    /// `minimum`.
    pub minimum: Option<f64>,
    /// `exclusiveMinimum`.
    pub exclusive_minimum: bool,
    /// `maxLength`.
    pub max_length: Option<i64>,
    /// `minLength`.
    pub min_length: Option<i64>,
    /// `pattern`.
    pub pattern: Option<Pattern>,
    /// `maxItems`.
    pub max_items: Option<i64>,
    /// `minItems`.
    pub min_items: Option<i64>,
    /// `uniqueItems`.
    pub unique_items: bool,
    /// `multipleOf`.
    pub multiple_of: Option<f64>,
    /// `enum` (JSON `null` entries kept as `Value::Null`).
    pub enumeration: Vec<Value>,
    /// `maxProperties`.
    pub max_properties: Option<i64>,
    /// `minProperties`.
    pub min_properties: Option<i64>,
    /// `required`.
    pub required: Vec<String>,
    /// `allOf`.
    pub all_of: Vec<Schema>,
    /// `anyOf`.
    pub any_of: Vec<Schema>,
    /// `oneOf`.
    pub one_of: Vec<Schema>,
    /// `not`.
    pub not: Option<Box<Schema>>,
    /// `properties`.
    pub properties: BTreeMap<String, Schema>,
    /// `items` (when a single schema).
    pub items: Option<Box<Schema>>,
    /// `additionalProperties`.
    pub additional_properties: Option<Additional>,
    /// `x-kubernetes-preserve-unknown-fields` (`Some(false)` is refused).
    pub preserve_unknown_fields: Option<bool>,
    /// `x-kubernetes-embedded-resource`.
    pub embedded_resource: bool,
    /// `x-kubernetes-int-or-string`.
    pub int_or_string: bool,
    /// `x-kubernetes-list-type`.
    pub list_type: Option<String>,
    /// `x-kubernetes-list-map-keys`.
    pub list_map_keys: Vec<String>,
    /// `x-kubernetes-map-type`.
    pub map_type: Option<String>,
    /// `x-kubernetes-validations`, as given (the CEL rules are `cel`'s).
    pub validations: Vec<Value>,
    /// Fields CRDs may not use.
    pub unsupported: Unsupported,
}

impl Schema {
    /// `x-kubernetes-preserve-unknown-fields: true`.
    pub(crate) fn preserves_unknown_fields(&self) -> bool {
        self.preserve_unknown_fields == Some(true)
    }

    /// The schema of field `key` of an object: its property, else the
    /// `additionalProperties` schema.
    pub(crate) fn field(&self, key: &str) -> Option<&Schema> {
        self.properties.get(key).or_else(|| {
            self.additional_properties
                .as_ref()
                .and_then(Additional::schema)
        })
    }

    /// Whether `pred` holds for this node or any node below it (items,
    /// properties, additionalProperties; not junctors).
    pub(crate) fn any(&self, pred: &dyn Fn(&Schema) -> bool) -> bool {
        pred(self)
            || self.items.as_deref().is_some_and(|i| i.any(pred))
            || self.properties.values().any(|p| p.any(pred))
            || self
                .additional_properties
                .as_ref()
                .and_then(Additional::schema)
                .is_some_and(|a| a.any(pred))
    }

    /// True when nothing but `type: <ty>` is set (the halves of the
    /// int-or-string `anyOf` pattern).
    pub(crate) fn is_bare_type(&self, ty: &str) -> bool {
        let bare = Schema {
            ty: ty.to_string(),
            types: vec![ty.to_string()],
            ..Schema::default()
        };
        *self == bare
    }
}

/// kube-apiserver's JSON numbers: integers decode as int64, everything else
/// (fractions, exponents, integers past int64) as float64.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    /// An int64.
    Int(i64),
    /// A float64.
    Float(f64),
}

impl Num {
    /// The number a JSON number decodes to.
    pub(crate) fn of(n: &serde_json::Number) -> Num {
        match n.as_i64() {
            Some(i) => Num::Int(i),
            None => Num::Float(n.as_f64().unwrap_or(f64::NAN)),
        }
    }

    /// As a float64 (Go's `float64(x)`).
    pub(crate) fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}
