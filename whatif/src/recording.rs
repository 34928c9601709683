//! A recording of a cluster's changes, replayed: the what-if's input as
//! the state at the recording's start, and its workload changes as
//! timeline steps at their times ([`crate::timeline`]).
//!
//! The format, `testbed.recording/v1`, is JSON Lines: a header, then one
//! line per object of the starting state and per change, in time order
//! (`at`: seconds since the start), and an end line when the recording
//! ended as asked (a cut connection leaves none: what came before stands):
//!
//! ```text
//! {"format":"testbed.recording/v1","start":"2026-11-30T08:00:00Z"}
//! {"at":0,"type":"initial","object":{"apiVersion":"apps/v1","kind":"Deployment",...}}
//! {"at":610.5,"type":"modified","object":{...}}
//! {"at":900,"type":"added","object":{...}}
//! {"at":1200,"type":"deleted","object":{...}}
//! {"at":3600,"type":"end"}
//! ```
//!
//! What is replayed: a Deployment's, StatefulSet's or lone ReplicaSet's
//! `spec.replicas` changing (an HPA's decisions too) becomes a scale step;
//! a node's `spec.unschedulable` a cordon or uncordon; workloads, lone pods,
//! Jobs, DaemonSets and PDBs added or deleted are created or deleted. What
//! controllers do (pods of workloads, ReplicaSets of Deployments) the
//! simulated cluster's controllers do again. Nodes added and removed are
//! the recorded autoscaler's doing: left out, counted ([`Recorded`]) and
//! reported beside the simulated autoscaler's.

use std::collections::BTreeMap;
use std::path::Path;

use apimachinery::json::Lookup;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::kinds::Kind;
use crate::timeline::Step;

/// The format this testbed reads and writes.
pub const FORMAT: &str = "testbed.recording/v1";

/// The kinds whose creations and deletions are replayed.
const CREATED: [Kind; 7] = [
    Kind::Deployment,
    Kind::StatefulSet,
    Kind::ReplicaSet,
    Kind::DaemonSet,
    Kind::Job,
    Kind::Pod,
    Kind::PodDisruptionBudget,
];

/// Why a recording was refused.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The file could not be read.
    #[error("reading the recording {file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// A line that is wrong.
    #[error("{file}:{line}: {why}")]
    Line {
        /// The file.
        file: String,
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        why: String,
    },
}

/// One line after the header.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    at: f64,
    #[serde(rename = "type")]
    event: Event,
    #[serde(default)]
    object: Option<Value>,
}

/// What a line says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Event {
    Initial,
    Added,
    Modified,
    Deleted,
    End,
}

/// What the recording held besides what is replayed: the recorded
/// autoscaler's node changes, and the changes not replayed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recorded {
    /// The recording.
    pub file: String,
    /// Its length in seconds (its end line, else its last change).
    pub seconds: f64,
    /// Whether it has its end line (none: the connection was cut).
    pub complete: bool,
    /// Nodes added during the recording (left out: the simulation's
    /// autoscaler adds its own).
    pub nodes_added: usize,
    /// Nodes removed during the recording (left out likewise).
    pub nodes_removed: usize,
    /// Changes made into timeline steps.
    pub replayed: usize,
    /// Changes the simulated cluster's controllers make again (pods of
    /// workloads, ReplicaSets of Deployments, status updates), by kind.
    pub by_controllers: BTreeMap<String, usize>,
}

/// A recording read: the starting state (a List), the steps and what was
/// left out.
#[derive(Debug)]
pub struct Replay {
    /// The objects at the start, as one List.
    pub start: Value,
    /// The changes to replay.
    pub steps: Vec<Step>,
    /// The rest.
    pub recorded: Recorded,
    /// When it started (its header's `start`).
    pub taken: Option<std::time::SystemTime>,
}

/// Reads the recording at `path`.
pub fn read(path: &Path) -> Result<Replay, RecordingError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| RecordingError::Read {
        file: file.clone(),
        source,
    })?;
    parse(&file, &text)
}

/// Parses a recording read from `file`.
pub fn parse(file: &str, text: &str) -> Result<Replay, RecordingError> {
    let bad = |line: usize, why: String| RecordingError::Line {
        file: file.to_string(),
        line,
        why,
    };
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let (_, header) = lines
        .next()
        .ok_or_else(|| bad(1, "empty: a recording starts with its format line".into()))?;
    let header: Value = serde_json::from_str(header)
        .map_err(|e| bad(1, format!("not a JSON line ({e}): not a recording")))?;
    match header.get("format").and_then(Value::as_str) {
        Some(FORMAT) => {}
        Some(f) if f.starts_with("testbed.recording/") => {
            return Err(bad(
                1,
                format!("format {f}: this testbed reads {FORMAT} (a newer testbed wrote it?)"),
            ));
        }
        _ => {
            return Err(bad(
                1,
                format!("no \"format\": {FORMAT:?}: not a testbed recording"),
            ));
        }
    }
    let mut start = Vec::new();
    let mut steps = Vec::new();
    let mut recorded = Recorded {
        file: file.to_string(),
        ..Recorded::default()
    };
    let mut last = 0.0_f64;
    let mut state: BTreeMap<(String, String, String), Value> = BTreeMap::new();
    let mut changed = false;
    for (n, text) in lines {
        if text.trim().is_empty() {
            continue;
        }
        if recorded.complete {
            return Err(bad(n, "a line after the end line".into()));
        }
        let line: Line = serde_json::from_str(text).map_err(|e| {
            if e.is_eof() {
                bad(n, format!("cut mid-line ({e})"))
            } else {
                bad(n, format!("not a recording line: {e}"))
            }
        })?;
        if !line.at.is_finite() || line.at < 0.0 {
            return Err(bad(
                n,
                format!("at {}: not a time since the start", line.at),
            ));
        }
        if line.at < last {
            return Err(bad(
                n,
                format!(
                    "at {} s is before the line before it ({last} s): out of order",
                    line.at
                ),
            ));
        }
        last = line.at;
        recorded.seconds = line.at;
        let object = match (line.event, line.object) {
            (Event::End, _) => {
                recorded.complete = true;
                continue;
            }
            (_, Some(o)) => o,
            (_, None) => return Err(bad(n, "no object".into())),
        };
        let key = key_of(&object).map_err(|why| bad(n, why))?;
        match line.event {
            Event::Initial if changed => {
                return Err(bad(n, "an initial object after the changes began".into()));
            }
            Event::Initial => {
                state.insert(key, object.clone());
                start.push(object);
            }
            event => {
                changed = true;
                let before = match event {
                    Event::Deleted => state.remove(&key),
                    _ => state.insert(key, object.clone()),
                };
                for step in change(event, before.as_ref(), &object, &mut recorded) {
                    let step = crate::timeline::Timeline::step_of(line.at as u64, step)
                        .map_err(|why| bad(n, why))?;
                    recorded.replayed += 1;
                    steps.push(step);
                }
            }
        }
    }
    Ok(Replay {
        start: serde_json::json!({"apiVersion": "v1", "kind": "List", "items": start}),
        steps,
        recorded,
        taken: header
            .get("start")
            .and_then(Value::as_str)
            .and_then(simclock::parse_rfc3339),
    })
}

/// `(kind, namespace, name)` of an object.
fn key_of(object: &Value) -> Result<(String, String, String), String> {
    let text = |p: &str| object.lookup(p).and_then(Value::as_str).map(str::to_string);
    let kind = text("/kind").ok_or("the object has no kind")?;
    let name = text("/metadata/name").ok_or("the object has no metadata.name")?;
    Ok((kind, text("/metadata/namespace").unwrap_or_default(), name))
}

/// The timeline steps (as written) a change makes; what is not replayed
/// is counted in `recorded`.
fn change(
    event: Event,
    before: Option<&Value>,
    after: &Value,
    recorded: &mut Recorded,
) -> Vec<Value> {
    let kind_name = after.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = after
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("v1");
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let owners: Vec<&str> = after
        .lookup("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("kind").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    // The simulated cluster runs no CronJob controller: its Jobs are replayed.
    let cron_job = kind_name == "Job" && owners == ["CronJob"];
    let owned = !owners.is_empty() && !cron_job;
    let by_controllers = |recorded: &mut Recorded| {
        *recorded
            .by_controllers
            .entry(kind_name.to_string())
            .or_default() += 1;
        Vec::new()
    };
    let reference = || {
        let name = after
            .lookup("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        match after.lookup("/metadata/namespace").and_then(Value::as_str) {
            Some(ns) => format!("{kind_name} {ns}/{name}"),
            None => format!("{kind_name} {name}"),
        }
    };
    let Some(kind) = Kind::of(group, kind_name) else {
        return by_controllers(recorded);
    };
    match (kind, event) {
        (Kind::Node, Event::Added) => {
            recorded.nodes_added += 1;
            Vec::new()
        }
        (Kind::Node, Event::Deleted) => {
            recorded.nodes_removed += 1;
            Vec::new()
        }
        (Kind::Node, _) => {
            let cordoned = |v: Option<&Value>| {
                v.and_then(|v| v.lookup("/spec/unschedulable"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            };
            let name = after.lookup("/metadata/name").cloned().unwrap_or_default();
            match (cordoned(before), cordoned(Some(after))) {
                (false, true) => vec![serde_json::json!({"cordon": name})],
                (true, false) => vec![serde_json::json!({"uncordon": name})],
                _ => by_controllers(recorded),
            }
        }
        // The simulated controllers make these again.
        (Kind::Pod | Kind::ReplicaSet | Kind::Job, _) if owned => by_controllers(recorded),
        (Kind::Deployment | Kind::StatefulSet | Kind::ReplicaSet, Event::Modified) => {
            let replicas = |v: Option<&Value>| {
                v.and_then(|v| v.lookup("/spec/replicas"))
                    .and_then(Value::as_i64)
            };
            match replicas(Some(after)) {
                Some(r) if replicas(before) != Some(r) => {
                    vec![serde_json::json!({"scale": reference(), "replicas": r})]
                }
                _ => by_controllers(recorded),
            }
        }
        (k, Event::Added) if CREATED.contains(&k) => {
            vec![serde_json::json!({"create": as_created(after)})]
        }
        (k, Event::Deleted) if CREATED.contains(&k) => {
            vec![serde_json::json!({"delete": reference()})]
        }
        _ => by_controllers(recorded),
    }
}

/// An object as a client creates it: without what the API server and the
/// scheduler set (a lone pod is placed again by the simulated scheduler).
fn as_created(object: &Value) -> Value {
    let mut v = object.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        // A Job of a CronJob (which the what-if does not load) stands alone.
        meta.remove("ownerReferences");
    }
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for f in crate::plan::SET_BY_THE_SERVER {
            meta.remove(f);
        }
    }
    let pod = v.get("kind").and_then(Value::as_str) == Some("Pod");
    if let (true, Some(spec)) = (pod, v.get_mut("spec").and_then(Value::as_object_mut)) {
        spec.remove("nodeName");
    }
    v
}
