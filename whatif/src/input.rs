//! Reading a cluster's state from files: `kubectl get ... -o json|yaml`
//! (a `List`, a typed list such as `PodList`, or single objects),
//! multi-document YAML (as `kwokctl snapshot export` writes it), and
//! upstream Cluster Autoscaler's `/snapshotz` answer (`NodeList` of
//! `Node` + `Pods`, `TemplateNodes`, `UnscheduledPodsCanBeScheduled`).
//!
//! Every object of a kind the what-if knows ([`Kind`]) is kept with the
//! file it came from; objects of other kinds are counted by kind, never
//! dropped in silence. A file that does not parse, or an object without
//! what the what-if needs, is refused with the file, the object and the
//! field.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use apimachinery::json::Lookup;
use serde_json::Value;

use crate::kinds::Kind;

/// The prefix upstream gives the nodes a loop only imagines (upcoming
/// nodes made from a template); `/snapshotz` lists them with the real ones.
const UPCOMING_PREFIX: &str = "template-node-for-";

/// Why an input was refused.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file could not be read.
    #[error("{file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// Nothing in the file.
    #[error("{file}: empty: no Kubernetes object, List or /snapshotz answer in it")]
    Empty {
        /// The file.
        file: String,
    },
    /// Not JSON (a file cut short ends here too).
    #[error("{file}: line {line}, column {column}: not valid JSON: {message}")]
    Json {
        /// The file.
        file: String,
        /// Where.
        line: usize,
        /// Where.
        column: usize,
        /// What the parser said.
        message: String,
    },
    /// Not YAML.
    #[error("{file}: not valid YAML: {message}")]
    Yaml {
        /// The file.
        file: String,
        /// What the parser said.
        message: String,
    },
    /// An object lacks a field the what-if needs, or has a bad one.
    #[error("{file}: {object}: field {field}: {problem}")]
    Field {
        /// The file.
        file: String,
        /// The object (`Pod default/web-1`, or `document 2 items[3]` when
        /// it has no name).
        object: String,
        /// The field (`metadata.name`, `spec.nodeName`...).
        field: String,
        /// What is wrong.
        problem: String,
    },
    /// A `/snapshotz` answer that holds the autoscaler's error instead of a
    /// snapshot.
    #[error("{file}: the /snapshotz answer is an error from the autoscaler: {message}")]
    SnapshotError {
        /// The file.
        file: String,
        /// The `Error` field.
        message: String,
    },
}

/// An object of a kind the what-if knows, and where it came from.
#[derive(Debug, Clone)]
pub struct Object {
    /// Its kind.
    pub kind: Kind,
    /// The object as read.
    pub value: Value,
    /// The file it came from.
    pub file: Arc<str>,
}

impl Object {
    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.value
            .lookup("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// `metadata.namespace` (empty for cluster-scoped kinds).
    pub fn namespace(&self) -> &str {
        self.value
            .lookup("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// `metadata.uid`, when the input kept it.
    pub fn uid(&self) -> Option<&str> {
        self.value
            .lookup("/metadata/uid")
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
    }

    /// `Kind namespace/name` (or `Kind name`), for messages.
    pub fn describe(&self) -> String {
        describe(self.kind.name(), self.namespace(), self.name())
    }
}

fn describe(kind: &str, namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {namespace}/{name}")
    }
}

/// The form a file was read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Kubernetes objects or Lists (JSON or YAML).
    Objects,
    /// An autoscaler's `/snapshotz` answer.
    Snapshotz,
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Format::Objects => "objects",
            Format::Snapshotz => "snapshotz",
        })
    }
}

/// Everything read from the input files.
#[derive(Debug, Default)]
pub struct Input {
    /// The objects of known kinds, in the order read (later duplicates of
    /// the same kind, namespace and name left out).
    pub objects: Vec<Object>,
    /// `/snapshotz`'s template nodes, by the autoscaler's node group id.
    pub templates: BTreeMap<String, Value>,
    /// Objects of kinds the what-if does not use, counted by
    /// `Kind (group)`.
    pub unused: BTreeMap<String, usize>,
    /// Objects read twice (the same kind, namespace and name).
    pub duplicates: usize,
    /// Upcoming nodes of a `/snapshotz` (the loop's own imagination), and
    /// their pods, left out.
    pub upcoming: usize,
    /// Each file and its form.
    pub files: Vec<(String, Format)>,
    /// Owners made from their pods ([`crate::owners`]), by kind.
    pub derived: BTreeMap<String, usize>,
    /// Kinds a live cluster would not list, and why.
    pub unreadable: BTreeMap<String, String>,
    /// When the state was taken: a `/snapshotz`'s `StartTimestamp`, else
    /// the newest `creationTimestamp` read.
    pub taken: Option<SystemTime>,
    seen: BTreeSet<(Kind, String, String)>,
}

impl Input {
    /// Reads every file in turn.
    pub fn read(paths: &[impl AsRef<Path>]) -> Result<Input, InputError> {
        let mut input = Input::default();
        for p in paths {
            input.read_file(p.as_ref())?;
        }
        input.date();
        Ok(input)
    }

    /// When the state was taken, if nothing said: the newest
    /// `creationTimestamp` read.
    pub fn date(&mut self) {
        if self.taken.is_none() {
            self.taken = self
                .objects
                .iter()
                .filter_map(|o| o.value.lookup("/metadata/creationTimestamp"))
                .filter_map(Value::as_str)
                .filter_map(simclock::parse_rfc3339)
                .max();
        }
    }

    /// The objects of `kind`.
    pub fn of(&self, kind: Kind) -> impl Iterator<Item = &Object> {
        self.objects.iter().filter(move |o| o.kind == kind)
    }

    /// Reads one file (JSON or YAML, detected from its first character).
    pub fn read_file(&mut self, path: &Path) -> Result<(), InputError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| InputError::Read {
            file: file.clone(),
            source,
        })?;
        self.read_text(&file, &text)
    }

    /// Reads `text`, which came from `file`.
    pub fn read_text(&mut self, file: &str, text: &str) -> Result<(), InputError> {
        let trimmed = text.trim_start();
        if trimmed.is_empty() {
            return Err(InputError::Empty { file: file.into() });
        }
        let docs: Vec<Value> = if trimmed.starts_with('{') || trimmed.starts_with('[') {
            serde_json::Deserializer::from_str(text)
                .into_iter::<Value>()
                .collect::<Result<_, _>>()
                .map_err(|e| InputError::Json {
                    file: file.into(),
                    line: e.line(),
                    column: e.column(),
                    message: e.to_string(),
                })?
        } else {
            serde_saphyr::from_multiple(text).map_err(|e| InputError::Yaml {
                file: file.into(),
                message: e.to_string(),
            })?
        };
        self.read_documents(file, docs)
    }

    /// Reads documents already parsed, which came from `file` (a live
    /// cluster's List, say).
    pub fn read_documents(&mut self, file: &str, docs: Vec<Value>) -> Result<(), InputError> {
        let file: Arc<str> = file.into();
        let before = self.objects.len() + self.unused.values().sum::<usize>();
        let mut snapshotz = false;
        for (i, doc) in docs.into_iter().enumerate() {
            let at = format!("document {}", i + 1);
            snapshotz |= self.take_document(&file, &at, doc)?;
        }
        if self.objects.len() + self.unused.values().sum::<usize>() == before && !snapshotz {
            return Err(InputError::Empty {
                file: file.to_string(),
            });
        }
        let format = if snapshotz {
            Format::Snapshotz
        } else {
            Format::Objects
        };
        self.files.push((file.to_string(), format));
        Ok(())
    }

    /// One document: an object, a List, an array of objects or a
    /// `/snapshotz` answer (then true).
    fn take_document(&mut self, file: &Arc<str>, at: &str, doc: Value) -> Result<bool, InputError> {
        match doc {
            Value::Null => Ok(false),
            Value::Array(items) => {
                for (i, item) in items.into_iter().enumerate() {
                    self.take_object(file, &format!("{at} [{i}]"), item, None)?;
                }
                Ok(false)
            }
            Value::Object(ref map)
                if map.contains_key("NodeList") || map.contains_key("TemplateNodes") =>
            {
                self.take_snapshotz(file, doc)?;
                Ok(true)
            }
            Value::Object(_) => {
                let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
                match doc.get("items") {
                    Some(Value::Array(_)) if kind.ends_with("List") => {
                        let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
                        let defaults = item_kind.map(|k| {
                            let api_version = doc
                                .get("apiVersion")
                                .and_then(Value::as_str)
                                .unwrap_or("v1");
                            (api_version.to_string(), k.to_string())
                        });
                        if let Value::Array(items) = doc["items"].clone() {
                            for (i, item) in items.into_iter().enumerate() {
                                self.take_object(
                                    file,
                                    &format!("{at} items[{i}]"),
                                    item,
                                    defaults.as_ref(),
                                )?;
                            }
                        }
                        Ok(false)
                    }
                    _ => {
                        self.take_object(file, at, doc, None)?;
                        Ok(false)
                    }
                }
            }
            _ => Err(InputError::Field {
                file: file.to_string(),
                object: at.into(),
                field: "(document)".into(),
                problem:
                    "not an object: expected a Kubernetes object, a List or a /snapshotz answer"
                        .into(),
            }),
        }
    }

    /// One object; `defaults` gives the apiVersion and kind of a typed
    /// list's items, which the API leaves out.
    fn take_object(
        &mut self,
        file: &Arc<str>,
        at: &str,
        mut value: Value,
        defaults: Option<&(String, String)>,
    ) -> Result<(), InputError> {
        let field_error = |object: &str, field: &str, problem: &str| InputError::Field {
            file: file.to_string(),
            object: object.into(),
            field: field.into(),
            problem: problem.into(),
        };
        if !value.is_object() {
            return Err(field_error(at, "(object)", "not an object"));
        }
        if let Some((api_version, kind)) = defaults {
            if value.get("apiVersion").is_none() {
                value["apiVersion"] = Value::from(api_version.as_str());
            }
            if value.get("kind").is_none() {
                value["kind"] = Value::from(kind.as_str());
            }
        }
        let Some(kind_name) = value
            .get("kind")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return Err(field_error(
                at,
                "kind",
                "missing: not a Kubernetes object, a List or a /snapshotz answer",
            ));
        };
        let api_version = value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("v1")
            .to_string();
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let Some(kind) = Kind::of(group, &kind_name) else {
            let label = if group.is_empty() {
                kind_name
            } else {
                format!("{kind_name} ({group})")
            };
            *self.unused.entry(label).or_default() += 1;
            return Ok(());
        };
        let name = match value.lookup("/metadata/name") {
            Some(Value::String(n)) if !n.is_empty() => n.clone(),
            Some(_) => {
                return Err(field_error(
                    &format!("{kind_name} at {at}"),
                    "metadata.name",
                    "not a non-empty string",
                ));
            }
            None => {
                return Err(field_error(
                    &format!("{kind_name} at {at}"),
                    "metadata.name",
                    "missing",
                ));
            }
        };
        if kind.namespaced() && value.lookup("/metadata/namespace").is_none() {
            value["metadata"]["namespace"] = Value::from("default");
        }
        let object = Object {
            kind,
            value,
            file: file.clone(),
        };
        check(&object).map_err(|(field, problem)| InputError::Field {
            file: file.to_string(),
            object: object.describe(),
            field: field.into(),
            problem,
        })?;
        let key = (kind, object.namespace().to_string(), name);
        if self.seen.insert(key) {
            self.objects.push(object);
        } else {
            self.duplicates += 1;
        }
        Ok(())
    }

    /// A `/snapshotz` answer.
    fn take_snapshotz(&mut self, file: &Arc<str>, doc: Value) -> Result<(), InputError> {
        if let Some(message) = doc.get("Error").and_then(Value::as_str) {
            return Err(InputError::SnapshotError {
                file: file.to_string(),
                message: message.into(),
            });
        }
        let node_defaults = ("v1".to_string(), "Node".to_string());
        let pod_defaults = ("v1".to_string(), "Pod".to_string());
        let entries = doc
            .get("NodeList")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (i, entry) in entries.into_iter().enumerate() {
            let at = format!("NodeList[{i}]");
            let node = entry.get("Node").cloned().unwrap_or(Value::Null);
            let name = node
                .lookup("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            if name.starts_with(UPCOMING_PREFIX) {
                self.upcoming += 1;
                continue;
            }
            self.take_object(file, &format!("{at}.Node"), node, Some(&node_defaults))?;
            let pods = entry
                .get("Pods")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (j, pod) in pods.into_iter().enumerate() {
                self.take_object(file, &format!("{at}.Pods[{j}]"), pod, Some(&pod_defaults))?;
            }
        }
        let pending = doc
            .get("UnscheduledPodsCanBeScheduled")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (j, pod) in pending.into_iter().enumerate() {
            self.take_object(
                file,
                &format!("UnscheduledPodsCanBeScheduled[{j}]"),
                pod,
                Some(&pod_defaults),
            )?;
        }
        if let Some(Value::Object(templates)) = doc.get("TemplateNodes") {
            for (id, t) in templates {
                if let Some(node) = t.get("Node").filter(|n| n.is_object()) {
                    self.templates.insert(id.clone(), node.clone());
                }
            }
        }
        if let Some(t) = doc
            .get("StartTimestamp")
            .and_then(Value::as_str)
            .and_then(simclock::parse_rfc3339)
            .filter(|t| *t > SystemTime::UNIX_EPOCH)
        {
            self.taken = Some(t);
        }
        Ok(())
    }
}

/// The fields the what-if reads of an object: `(field, problem)` for the
/// first that is wrong.
fn check(object: &Object) -> Result<(), (&'static str, String)> {
    let v = &object.value;
    let typed = |e: serde_json::Error| ("(object)", format!("not a valid {}: {e}", object.kind));
    match object.kind {
        Kind::Pod => {
            match v.lookup("/spec/containers") {
                Some(Value::Array(c)) if !c.is_empty() => {}
                _ => return Err(("spec.containers", "missing or empty".into())),
            }
            if let Some(n) = v.lookup("/spec/nodeName")
                && !n.is_string()
            {
                return Err(("spec.nodeName", "not a string".into()));
            }
            serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(v.clone()).map_err(typed)?;
        }
        Kind::Node => {
            for field in ["/status/allocatable", "/status/capacity"] {
                if let Some(map) = v.lookup(field)
                    && !map.is_object()
                {
                    return Err((
                        if field.ends_with("allocatable") {
                            "status.allocatable"
                        } else {
                            "status.capacity"
                        },
                        "not a map of quantities".into(),
                    ));
                }
            }
            serde_json::from_value::<k8s_openapi::api::core::v1::Node>(v.clone()).map_err(typed)?;
        }
        _ => {}
    }
    Ok(())
}
