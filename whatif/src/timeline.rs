//! A scripted timeline: changes made to the cluster at given times during
//! a side's run, the same on every side (without one, workloads stay as
//! the input had them). A YAML (or JSON) list of steps, each `at` a time
//! since the autoscaler started and one action:
//!
//! ```yaml
//! - at: 30m
//!   scale: Deployment shop/web      # Deployment, ReplicaSet or StatefulSet
//!   replicas: 12
//! - at: 2h
//!   cordon: node-7                  # and uncordon
//! - at: 3h
//!   delete: Pod shop/web-5d9c-x2x   # any kind the what-if loads
//! - at: 4h
//!   create:                         # any object of a kind the what-if loads
//!     apiVersion: v1
//!     kind: Pod
//!     metadata: {name: batch-1, namespace: shop}
//!     spec: {containers: [{name: main, image: busybox}]}
//! ```

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use apimachinery::json::Lookup;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::kinds::Kind;

/// Why a timeline was refused.
#[derive(Debug, thiserror::Error)]
pub enum TimelineError {
    /// The file could not be read.
    #[error("reading the timeline {file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a list of steps.
    #[error("the timeline {file} is not a YAML list of steps: {reason}")]
    Syntax {
        /// The file.
        file: String,
        /// The parser's message.
        reason: String,
    },
    /// A step is wrong.
    #[error("the timeline {file}, step {step}: {reason}")]
    Step {
        /// The file.
        file: String,
        /// The step's number, from 1.
        step: usize,
        /// What is wrong, naming the field.
        reason: String,
    },
}

/// A change the timeline makes (the report shows it as [`Shown`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Seconds since the autoscaler started.
    pub at: u64,
    /// What it does (`scale Deployment shop/web to 12`).
    pub action: String,
    change: Change,
    /// Replayed from a recording: the simulation may no longer have (or
    /// may already have) the object, which skips the step.
    pub recorded: bool,
}

/// A step as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Shown {
    /// Seconds since the autoscaler started.
    pub at: u64,
    /// What it does (`scale Deployment shop/web to 12`).
    pub action: String,
}

impl Step {
    /// The step as the report shows it.
    pub fn shown(&self) -> Shown {
        Shown {
            at: self.at,
            action: self.action.clone(),
        }
    }
}

/// What a step changes.
#[derive(Debug, Clone, PartialEq)]
enum Change {
    Scale { object: ObjectRef, replicas: i64 },
    Cordon { node: String, unschedulable: bool },
    Delete(ObjectRef),
    Create { kind: Kind, object: Value },
}

/// `Kind namespace/name`, or `Kind name` for a kind without namespaces.
#[derive(Debug, Clone, PartialEq)]
struct ObjectRef {
    kind: Kind,
    namespace: Option<String>,
    name: String,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// A step as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    at: String,
    scale: Option<String>,
    replicas: Option<i64>,
    cordon: Option<String>,
    uncordon: Option<String>,
    delete: Option<String>,
    create: Option<Value>,
}

/// The steps, in time order (steps at the same time in file order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// The steps.
    pub steps: Vec<Step>,
}

/// Why a step could not be made.
#[derive(Debug, thiserror::Error)]
#[error("timeline step at {at} s ({action}): {source}")]
pub struct StepFailed {
    /// When.
    pub at: u64,
    /// What it was to do.
    pub action: String,
    /// The API's answer.
    pub source: kube::Error,
}

impl Timeline {
    /// Whether a step creates a DRA object or something that asks for
    /// ResourceClaims ([`crate::plan::uses_claims`]).
    pub fn uses_claims(&self) -> bool {
        self.steps.iter().any(|s| match &s.change {
            Change::Create { kind, object } => crate::plan::uses_claims(*kind, object),
            _ => false,
        })
    }

    /// Reads the timeline in `path`.
    pub fn read(path: &Path) -> Result<Timeline, TimelineError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TimelineError::Read {
            file: file.clone(),
            source,
        })?;
        Timeline::parse(&file, &text)
    }

    /// Parses a timeline read from `file`.
    pub fn parse(file: &str, text: &str) -> Result<Timeline, TimelineError> {
        let written: Vec<Written> =
            serde_saphyr::from_str(text).map_err(|e| TimelineError::Syntax {
                file: file.into(),
                reason: e.to_string(),
            })?;
        let mut steps = written
            .into_iter()
            .enumerate()
            .map(|(i, w)| {
                step(w).map_err(|reason| TimelineError::Step {
                    file: file.into(),
                    step: i + 1,
                    reason,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        steps.sort_by_key(|s| s.at);
        Ok(Timeline { steps })
    }

    /// A step at `at` seconds from its written form without `at`
    /// (`{"scale": "Deployment shop/web", "replicas": 3}`).
    pub(crate) fn step_of(at: u64, mut written: Value) -> Result<Step, String> {
        if let Some(o) = written.as_object_mut() {
            o.insert("at".into(), Value::String(format!("{at}s")));
        }
        let written: Written = serde_json::from_value(written).map_err(|e| e.to_string())?;
        let mut step = step(written)?;
        step.recorded = true;
        Ok(step)
    }

    /// This timeline with `steps` added, in time order (steps at the
    /// same time: this timeline's first).
    pub fn with(&self, steps: Vec<Step>) -> Timeline {
        let mut all = self.steps.clone();
        all.extend(steps);
        all.sort_by_key(|s| s.at);
        Timeline { steps: all }
    }

    /// Refuses steps at or after the run's end.
    pub fn check(&self, duration: Duration) -> Result<(), String> {
        match self.steps.iter().find(|s| s.at >= duration.as_secs()) {
            Some(s) => Err(format!(
                "the timeline's step at {} s ({}) is not before the run's end ({} s): give a longer --for or an earlier step",
                s.at,
                s.action,
                duration.as_secs()
            )),
            None => Ok(()),
        }
    }
}

fn step(w: Written) -> Result<Step, String> {
    let at = simclock::parse_go_duration(&w.at)
        .ok_or_else(|| format!("at: {:?} is not a duration such as 90m or 2h", w.at))?
        .as_secs();
    let given: Vec<&str> = [
        ("scale", w.scale.is_some()),
        ("cordon", w.cordon.is_some()),
        ("uncordon", w.uncordon.is_some()),
        ("delete", w.delete.is_some()),
        ("create", w.create.is_some()),
    ]
    .into_iter()
    .filter_map(|(k, set)| set.then_some(k))
    .collect();
    if given.len() != 1 {
        return Err(format!(
            "give exactly one of scale, cordon, uncordon, delete, create (found {})",
            if given.is_empty() {
                "none".to_string()
            } else {
                given.join(", ")
            }
        ));
    }
    if w.replicas.is_some() && w.scale.is_none() {
        return Err("replicas: only a scale step takes replicas".into());
    }
    let change = if let Some(text) = w.scale {
        let object = object_ref("scale", &text)?;
        if !matches!(
            object.kind,
            Kind::Deployment | Kind::ReplicaSet | Kind::StatefulSet
        ) {
            return Err(format!(
                "scale: {} cannot be scaled (a Deployment, ReplicaSet or StatefulSet can)",
                object.kind
            ));
        }
        let replicas = w
            .replicas
            .ok_or("replicas: a scale step needs the number of replicas")?;
        if replicas < 0 {
            return Err(format!("replicas: {replicas} is negative"));
        }
        Change::Scale { object, replicas }
    } else if let Some(node) = w.cordon {
        Change::Cordon {
            node,
            unschedulable: true,
        }
    } else if let Some(node) = w.uncordon {
        Change::Cordon {
            node,
            unschedulable: false,
        }
    } else if let Some(text) = w.delete {
        Change::Delete(object_ref("delete", &text)?)
    } else if let Some(object) = w.create {
        created(object)?
    } else {
        return Err("no action".into());
    };
    Ok(Step {
        at,
        action: describe(&change),
        change,
        recorded: false,
    })
}

/// `Kind namespace/name` or `Kind name`.
fn object_ref(field: &str, text: &str) -> Result<ObjectRef, String> {
    let bad = || format!("{field}: {text:?} is not `Kind namespace/name` (or `Kind name`)");
    let (kind, rest) = text.trim().split_once(' ').ok_or_else(bad)?;
    let kind = Kind::ALL
        .into_iter()
        .find(|k| k.name().eq_ignore_ascii_case(kind))
        .ok_or_else(|| format!("{field}: the what-if loads no kind {kind:?}"))?;
    let rest = rest.trim();
    let (namespace, name) = match rest.split_once('/') {
        Some((ns, name)) if kind.namespaced() => (Some(ns.to_string()), name.to_string()),
        None if !kind.namespaced() => (None, rest.to_string()),
        None => (Some("default".into()), rest.to_string()),
        Some(_) => return Err(format!("{field}: a {kind} has no namespace")),
    };
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(bad());
    }
    Ok(ObjectRef {
        kind,
        namespace,
        name,
    })
}

fn created(object: Value) -> Result<Change, String> {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or("create.apiVersion: missing")?;
    let kind_name = object
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("create.kind: missing")?;
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let kind = Kind::of(group, kind_name)
        .ok_or_else(|| format!("create.kind: the what-if loads no {api_version} {kind_name}"))?;
    if object
        .lookup("/metadata/name")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err("create.metadata.name: missing".into());
    }
    Ok(Change::Create { kind, object })
}

fn describe(change: &Change) -> String {
    match change {
        Change::Scale { object, replicas } => format!("scale {object} to {replicas}"),
        Change::Cordon {
            node,
            unschedulable: true,
        } => format!("cordon Node {node}"),
        Change::Cordon { node, .. } => format!("uncordon Node {node}"),
        Change::Delete(object) => format!("delete {object}"),
        Change::Create { kind, object } => {
            let name = object
                .lookup("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            match object.lookup("/metadata/namespace").and_then(Value::as_str) {
                Some(ns) if kind.namespaced() => format!("create {kind} {ns}/{name}"),
                _ if kind.namespaced() => format!("create {kind} default/{name}"),
                _ => format!("create {kind} {name}"),
            }
        }
    }
}

impl StepFailed {
    /// Whether the cluster had no such object (404) or had it already
    /// (409): a replayed change to a cluster that went another way.
    pub fn diverged(&self) -> bool {
        matches!(&self.source, kube::Error::Api(s) if s.code == 404 || s.code == 409)
    }
}

impl Step {
    /// Makes the change through `client`; `uids` maps the input's uids to
    /// the loaded objects' (a created object's ownerReferences follow it).
    pub async fn apply(
        &self,
        client: &Client,
        uids: &HashMap<String, String>,
    ) -> Result<(), StepFailed> {
        let failed = |source| StepFailed {
            at: self.at,
            action: self.action.clone(),
            source,
        };
        match &self.change {
            Change::Scale { object, replicas } => {
                let patch = json!({"spec": {"replicas": replicas}});
                api(client, object.kind, object.namespace.as_deref(), None)
                    .patch(&object.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(failed)?;
            }
            Change::Cordon {
                node,
                unschedulable,
            } => {
                let patch = json!({"spec": {"unschedulable": unschedulable}});
                api(client, Kind::Node, None, None)
                    .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(failed)?;
            }
            Change::Delete(object) => {
                api(client, object.kind, object.namespace.as_deref(), None)
                    .delete(&object.name, &DeleteParams::default())
                    .await
                    .map_err(failed)?;
            }
            Change::Create { kind, object } => {
                let mut value = object.clone();
                crate::load::point_at_new_owners(&mut value, uids);
                let namespace = value
                    .lookup("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("default")
                    .to_string();
                let api_version = value.get("apiVersion").and_then(Value::as_str);
                let api = api(client, *kind, Some(&namespace), api_version);
                let dynamic: DynamicObject = serde_json::from_value(value)
                    .map_err(|e| failed(kube::Error::SerdeError(e)))?;
                api.create(&PostParams::default(), &dynamic)
                    .await
                    .map_err(failed)?;
            }
        }
        Ok(())
    }
}

fn api(
    client: &Client,
    kind: Kind,
    namespace: Option<&str>,
    api_version: Option<&str>,
) -> Api<DynamicObject> {
    let resource = kind.resource(api_version);
    match namespace {
        Some(ns) if kind.namespaced() => Api::namespaced_with(client.clone(), ns, &resource),
        _ => Api::all_with(client.clone(), &resource),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Result<Step, String> {
        Timeline::parse("t.yaml", text)
            .map(|t| t.steps[0].clone())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn steps_are_read_and_sorted_by_time() {
        let t = Timeline::parse(
            "t.yaml",
            "- {at: 2h, cordon: n1}\n- {at: 30m, scale: deployment shop/web, replicas: 3}\n\
             - {at: 3h, delete: Node n2}\n- {at: 4h, uncordon: n1}\n",
        )
        .unwrap();
        let shown: Vec<(u64, &str)> = t.steps.iter().map(|s| (s.at, s.action.as_str())).collect();
        assert_eq!(
            shown,
            [
                (1800, "scale Deployment shop/web to 3"),
                (7200, "cordon Node n1"),
                (10800, "delete Node n2"),
                (14400, "uncordon Node n1"),
            ]
        );
    }

    #[test]
    fn a_namespaced_object_without_namespace_is_in_default() {
        let s = one("- {at: 1m, delete: Pod web-1}").unwrap();
        assert_eq!(s.action, "delete Pod default/web-1");
    }

    #[test]
    fn each_mistake_is_named_with_its_step_and_field() {
        for (text, expected) in [
            (
                "- {at: soon, cordon: n1}",
                "step 1: at: \"soon\" is not a duration",
            ),
            (
                "- {at: 1m}",
                "give exactly one of scale, cordon, uncordon, delete, create (found none)",
            ),
            (
                "- {at: 1m, cordon: a, uncordon: b}",
                "(found cordon, uncordon)",
            ),
            (
                "- {at: 1m, scale: Deployment shop/web}",
                "replicas: a scale step needs",
            ),
            (
                "- {at: 1m, scale: DaemonSet kube-system/ds, replicas: 2}",
                "DaemonSet cannot be scaled",
            ),
            (
                "- {at: 1m, scale: Deployment shop/web, replicas: -1}",
                "replicas: -1 is negative",
            ),
            (
                "- {at: 1m, cordon: a, replicas: 2}",
                "only a scale step takes replicas",
            ),
            (
                "- {at: 1m, delete: Widget shop/w}",
                "loads no kind \"Widget\"",
            ),
            ("- {at: 1m, delete: Node ns/n1}", "a Node has no namespace"),
            ("- {at: 1m, delete: web}", "is not `Kind namespace/name`"),
            (
                "- {at: 1m, create: {apiVersion: v1, kind: Secret, metadata: {name: s}}}",
                "loads no v1 Secret",
            ),
            (
                "- {at: 1m, create: {apiVersion: v1, kind: Pod}}",
                "create.metadata.name: missing",
            ),
            (
                "- {at: 1m, cordon: n1, when: now}",
                "not a YAML list of steps",
            ),
            ("cordon: n1", "not a YAML list of steps"),
        ] {
            let e = one(text).unwrap_err();
            assert!(e.contains("t.yaml"), "{text}: {e}");
            assert!(e.contains(expected), "{text}: {e}");
        }
    }

    #[test]
    fn a_step_at_or_after_the_end_is_refused() {
        let t = Timeline::parse("t.yaml", "- {at: 2h, cordon: n1}").unwrap();
        assert!(t.check(Duration::from_secs(7201)).is_ok());
        let e = t.check(Duration::from_secs(7200)).unwrap_err();
        assert!(e.contains("cordon Node n1"), "{e}");
    }
}
