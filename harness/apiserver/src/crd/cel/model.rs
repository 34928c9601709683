//! The schema as CEL sees it: one [`Node`] per schema node, with the CEL
//! type of its values (apiserver's `SchemaDeclType`), the names its object
//! fields have in CEL (escaped as apiserver's `cel.Escape` does), its list
//! type (for correlating old values) and its compiled rules.

use std::collections::BTreeMap;

use serde_json::Value;

use super::compiled::Rule;

/// How values of a node are typed in CEL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// An object with properties: a CEL object whose fields are the
    /// exposed properties.
    Object,
    /// An object with `additionalProperties`: `map(string, T)`.
    Map,
    /// An array: `list(T)`.
    List,
    /// `integer`: `int`.
    Int,
    /// `number`: `double`.
    Double,
    /// `string`.
    String,
    /// `string` with `format: byte`: `bytes`.
    Bytes,
    /// `boolean`: `bool`.
    Bool,
    /// `x-kubernetes-int-or-string`: `dyn` (an `int` or a `string`).
    IntOrString,
    /// Not exposed to CEL (no type, or items/additionalProperties not exposed).
    Hidden,
}

/// `x-kubernetes-list-type` of an array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ListType {
    /// No list type: items correlate by index for ratcheting only.
    Unset,
    /// `atomic`.
    Atomic,
    /// `set`.
    Set,
    /// `map` with its `x-kubernetes-list-map-keys`.
    Map(Vec<String>),
}

/// One schema node.
#[derive(Debug)]
pub(super) struct Node {
    /// The CEL typing of its values.
    pub kind: Kind,
    /// The schema's `type` ("" if unset), as messages render the value.
    pub type_name: String,
    /// `properties`, by JSON name.
    pub properties: BTreeMap<String, Node>,
    /// The exposed properties as CEL fields: (CEL name, JSON name).
    pub fields: Vec<(String, String)>,
    /// `additionalProperties` when it is a schema.
    pub additional: Option<Box<Node>>,
    /// `items`.
    pub items: Option<Box<Node>>,
    /// `x-kubernetes-list-type`.
    pub list_type: ListType,
    /// The compiled `x-kubernetes-validations` of this node.
    pub rules: Vec<Rule>,
    /// Whether this node or one below it has rules.
    pub has_rules: bool,
}

impl Node {
    /// The node of a property or of `additionalProperties` for key `key`.
    pub fn child(&self, key: &str) -> Option<&Node> {
        self.properties.get(key).or(self.additional.as_deref())
    }

    /// The JSON name of the CEL field `name`, if this is an object with it.
    pub fn field(&self, name: &str) -> Option<&Node> {
        if self.kind != Kind::Object {
            return None;
        }
        self.fields
            .iter()
            .find(|(cel, _)| cel == name)
            .and_then(|(_, json)| self.properties.get(json))
    }

    /// A node without schema information below it (synthetic metadata).
    fn scalar(kind: Kind, type_name: &str) -> Node {
        Node {
            kind,
            type_name: type_name.into(),
            properties: BTreeMap::new(),
            fields: Vec::new(),
            additional: None,
            items: None,
            list_type: ListType::Unset,
            rules: Vec::new(),
            has_rules: false,
        }
    }
}

/// The schema-level facts of a node, read from its JSON.
pub(super) struct Facts {
    /// `type`.
    pub type_name: String,
    /// `x-kubernetes-int-or-string`.
    pub int_or_string: bool,
    /// `format`.
    pub format: String,
    /// `x-kubernetes-list-type` and keys.
    pub list_type: ListType,
}

impl Facts {
    /// Reads the facts of `schema`.
    pub fn of(schema: &Value) -> Facts {
        let text = |key: &str| {
            schema
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let list_type = match text("x-kubernetes-list-type").as_str() {
            "atomic" => ListType::Atomic,
            "set" => ListType::Set,
            "map" => ListType::Map(
                schema
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|keys| {
                        keys.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            _ => ListType::Unset,
        };
        Facts {
            type_name: text("type"),
            int_or_string: schema
                .get("x-kubernetes-int-or-string")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            format: text("format"),
            list_type,
        }
    }
}

/// Assembles a node from its facts and already built children, computing
/// its CEL kind and fields as apiserver's `SchemaDeclType` does.
pub(super) fn assemble(
    facts: Facts,
    mut properties: BTreeMap<String, Node>,
    additional: Option<Node>,
    items: Option<Node>,
    resource_root: bool,
) -> Node {
    if resource_root && facts.type_name == "object" {
        with_type_and_object_meta(&mut properties);
    }
    let exposed = |n: &Option<Node>| n.as_ref().is_some_and(|n| n.kind != Kind::Hidden);
    let kind = if facts.int_or_string {
        Kind::IntOrString
    } else {
        match facts.type_name.as_str() {
            "array" if exposed(&items) => Kind::List,
            "object" if additional.is_some() => {
                if exposed(&additional) {
                    Kind::Map
                } else {
                    Kind::Hidden
                }
            }
            "object" => Kind::Object,
            "string" if facts.format == "byte" => Kind::Bytes,
            "string" => Kind::String,
            "boolean" => Kind::Bool,
            "number" => Kind::Double,
            "integer" => Kind::Int,
            _ => Kind::Hidden,
        }
    };
    let fields = properties
        .iter()
        .filter(|(_, node)| node.kind != Kind::Hidden)
        .filter_map(|(json, _)| escape(json).map(|cel| (cel, json.clone())))
        .collect();
    let has_rules = properties.values().any(|n| n.has_rules)
        || additional.as_ref().is_some_and(|n| n.has_rules)
        || items.as_ref().is_some_and(|n| n.has_rules);
    Node {
        kind,
        type_name: facts.type_name,
        properties,
        fields,
        additional: additional.map(Box::new),
        items: items.map(Box::new),
        list_type: facts.list_type,
        rules: Vec::new(),
        has_rules,
    }
}

/// At the root of a resource, `apiVersion`, `kind`, `metadata.name` and
/// `metadata.generateName` are always visible to rules, and nothing else of
/// `metadata` is (apiserver's `WithTypeAndObjectMeta`).
fn with_type_and_object_meta(properties: &mut BTreeMap<String, Node>) {
    for name in ["kind", "apiVersion"] {
        let is_string = properties.get(name).is_some_and(|n| n.kind == Kind::String);
        if !is_string {
            properties.insert(name.into(), Node::scalar(Kind::String, "string"));
        }
    }
    let mut metadata = Node::scalar(Kind::Object, "object");
    for name in ["name", "generateName"] {
        metadata
            .properties
            .insert(name.into(), Node::scalar(Kind::String, "string"));
        metadata.fields.push((name.into(), name.into()));
    }
    properties.insert("metadata".into(), metadata);
}

/// CEL's reserved words: a property of that name is `__word__` in CEL.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The CEL name of property `name` (apiserver's `cel.Escape`): `__` becomes
/// `__underscores__`, `.` `__dot__`, `-` `__dash__`, `/` `__slash__`, a
/// reserved word `__word__`; `None` when the name can't be a CEL identifier.
pub(super) fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("__") {
            out.push_str("__underscores__");
            rest = &rest[2..];
            continue;
        }
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}
