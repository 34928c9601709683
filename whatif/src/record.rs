//! `testbed record`: a live cluster's changes, written as a recording
//! ([`crate::recording`] reads it back). Read only: list and watch, never
//! a write. Each kind is watched across namespaces; its first list is the
//! starting state (written once every kind has listed, at 0 s), then every
//! change with its time. A cut watch is resumed from its resourceVersion;
//! after a `410 Gone` the kind is listed again and only the differences
//! from what was recorded are written. Secrets are never read, and of
//! ConfigMaps only the priority expander's; pod specs (and workloads' pod
//! templates) keep what scheduling reads, not their containers' commands,
//! arguments, environment or probes; `managedFields` and the last-applied
//! annotation are dropped. A kind the cluster will not list (the
//! recorder's token may not) is left out and reported, but nodes and
//! pods: without them there is nothing to replay.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};

use crate::kinds::Kind;
use crate::recording::FORMAT;

/// The kinds recorded: the workloads, what they run on and what limits
/// their evictions.
pub const KINDS: [Kind; 11] = [
    Kind::Namespace,
    Kind::PriorityClass,
    Kind::Node,
    Kind::ConfigMap,
    Kind::PodDisruptionBudget,
    Kind::Deployment,
    Kind::ReplicaSet,
    Kind::StatefulSet,
    Kind::DaemonSet,
    Kind::Job,
    Kind::Pod,
];

/// Container fields scheduling does not read, left out of the recording.
const NOT_FOR_SCHEDULING: [&str; 10] = [
    "command",
    "args",
    "env",
    "envFrom",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "workingDir",
    "volumeMounts",
];

/// Why the recording stopped early.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The output could not be written.
    #[error("writing {file}: {source}")]
    Write {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// The cluster could not be reached.
    #[error(transparent)]
    Live(#[from] crate::live::LiveError),
    /// A kind could not be watched.
    #[error("watching {kind}s: {source}")]
    Watch {
        /// The kind.
        kind: Kind,
        /// The API's answer.
        source: watcher::Error,
    },
}

/// What a recording wrote.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Written {
    /// Objects of the starting state.
    pub initial: usize,
    /// Changes after it.
    pub changes: usize,
    /// Relists after a watch could not resume.
    pub relists: usize,
    /// Kinds the cluster would not list, and its answer: not recorded.
    pub unreadable: BTreeMap<String, String>,
}

/// `(kind, namespace, name)`.
type Key = (Kind, String, String);

/// Records the cluster `client` reaches into `out` for `length` (until
/// `stop` resolves when none), then writes the end line.
pub async fn record(
    client: Client,
    out: &mut (impl Write + Send),
    file: &str,
    length: Option<Duration>,
    stop: impl std::future::Future<Output = ()>,
) -> Result<Written, RecordError> {
    let write_err = |source| RecordError::Write {
        file: file.to_string(),
        source,
    };
    let started = Instant::now();
    let start = jiff::Timestamp::try_from(SystemTime::now())
        .map(|t| t.to_string())
        .unwrap_or_default();
    writeln!(out, "{}", json!({"format": FORMAT, "start": start})).map_err(write_err)?;
    let mut events = watches(&client);
    let mut known: BTreeMap<Key, (String, Value)> = BTreeMap::new();
    // Each kind's listing in progress: what it has listed so far.
    let mut listing: BTreeMap<Kind, BTreeMap<Key, (String, Value)>> = BTreeMap::new();
    // Kinds listed once; changes wait until every kind has.
    let mut listed: Vec<Kind> = Vec::new();
    let mut waiting: Vec<(f64, &'static str, Value)> = Vec::new();
    let mut written = Written::default();
    let deadline = async {
        match length {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    tokio::pin!(stop);
    loop {
        let (kind, event) = tokio::select! {
            _ = &mut deadline => break,
            _ = &mut stop => break,
            next = events.next() => match next {
                Some(e) => e,
                None => break,
            },
        };
        let at = started.elapsed().as_secs_f64();
        let event = match event {
            Ok(e) => e,
            // Without nodes and pods there is nothing to replay.
            Err(source) if !listed.contains(&kind) && matches!(kind, Kind::Node | Kind::Pod) => {
                return Err(RecordError::Watch { kind, source });
            }
            // Another kind the cluster will not list is left out, and said so.
            Err(source) if !listed.contains(&kind) => {
                listed.push(kind);
                written
                    .unreadable
                    .insert(kind.name().to_string(), source.to_string());
                listing.remove(&kind);
                continue;
            }
            // A later error: the watch is retried.
            Err(_) => continue,
        };
        if written.unreadable.contains_key(kind.name()) {
            continue;
        }
        let mut changes: Vec<(&'static str, Value)> = Vec::new();
        match event {
            Event::Init => {
                listing.insert(kind, BTreeMap::new());
            }
            Event::InitApply(o) => {
                let (key, rv, v) = entry(kind, &o);
                listing.entry(kind).or_default().insert(key, (rv, v));
            }
            Event::InitDone => {
                let fresh = listing.remove(&kind).unwrap_or_default();
                if listed.contains(&kind) {
                    written.relists += 1;
                    // Only the differences from what was recorded.
                    let gone: Vec<Key> = known
                        .keys()
                        .filter(|k| k.0 == kind && !fresh.contains_key(*k))
                        .cloned()
                        .collect();
                    for k in gone {
                        if let Some((_, v)) = known.remove(&k) {
                            changes.push(("deleted", v));
                        }
                    }
                    for (k, (rv, v)) in fresh {
                        changes.extend(applied(&mut known, k, rv, v));
                    }
                } else {
                    listed.push(kind);
                    for (k, (rv, v)) in fresh {
                        writeln!(out, "{}", json!({"at": 0, "type": "initial", "object": v}))
                            .map_err(write_err)?;
                        written.initial += 1;
                        known.insert(k, (rv, v));
                    }
                }
            }
            Event::Apply(o) => {
                let (k, rv, v) = entry(kind, &o);
                changes.extend(applied(&mut known, k, rv, v));
            }
            Event::Delete(o) => {
                let (k, _, v) = entry(kind, &o);
                known.remove(&k);
                changes.push(("deleted", v));
            }
        }
        for (event, v) in changes {
            waiting.push((at, event, v));
        }
        if listed.len() == KINDS.len() {
            for (at, event, v) in waiting.drain(..) {
                let at = (at * 1000.0).round() / 1000.0;
                writeln!(out, "{}", json!({"at": at, "type": event, "object": v}))
                    .map_err(write_err)?;
                written.changes += 1;
            }
            out.flush().map_err(write_err)?;
        }
    }
    let at = (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
    for (t, event, v) in waiting.drain(..) {
        writeln!(
            out,
            "{}",
            json!({"at": t.min(at), "type": event, "object": v})
        )
        .map_err(write_err)?;
        written.changes += 1;
    }
    writeln!(out, "{}", json!({"at": at, "type": "end"})).map_err(write_err)?;
    out.flush().map_err(write_err)?;
    Ok(written)
}

/// One watch per recorded kind across namespaces, merged; of ConfigMaps
/// only the priority expander's.
fn watches(
    client: &Client,
) -> impl futures::Stream<Item = (Kind, Result<Event<DynamicObject>, watcher::Error>)> + Unpin {
    let streams = KINDS.iter().map(|&kind| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.resource(None));
        let config = if kind == Kind::ConfigMap {
            watcher::Config::default().fields(&format!(
                "metadata.name={}",
                crate::plan::PRIORITY_EXPANDER_CONFIG_MAP.1
            ))
        } else {
            watcher::Config::default()
        };
        watcher::watcher(api, config)
            .default_backoff()
            .map(move |e| (kind, e))
            .boxed()
    });
    futures::stream::select_all(streams)
}

/// Records that `k` is now at `rv`: the change to write (`added`, or
/// `modified` when its resourceVersion moved), none when it did not.
fn applied(
    known: &mut BTreeMap<Key, (String, Value)>,
    k: Key,
    rv: String,
    v: Value,
) -> Option<(&'static str, Value)> {
    let change = match known.get(&k) {
        Some((old, _)) if *old == rv => None,
        Some(_) => Some(("modified", v.clone())),
        None => Some(("added", v.clone())),
    };
    known.insert(k, (rv, v));
    change
}

/// An object's key, resourceVersion and recorded form.
fn entry(kind: Kind, o: &DynamicObject) -> (Key, String, Value) {
    let key = (
        kind,
        o.metadata.namespace.clone().unwrap_or_default(),
        o.metadata.name.clone().unwrap_or_default(),
    );
    let rv = o.metadata.resource_version.clone().unwrap_or_default();
    let mut v = serde_json::to_value(o).unwrap_or(Value::Null);
    let resource = kind.resource(None);
    v["apiVersion"] = json!(resource.api_version);
    v["kind"] = json!(resource.kind);
    (key, rv, trimmed(v))
}

/// What the recording keeps of an object.
fn trimmed(mut v: Value) -> Value {
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        if let Some(Value::Object(a)) = meta.get_mut("annotations") {
            a.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    }
    for spec in [
        "/spec",
        "/spec/template/spec",
        "/spec/jobTemplate/spec/template/spec",
    ] {
        let Some(spec) = v.pointer_mut(spec) else {
            continue;
        };
        for list in ["containers", "initContainers"] {
            if let Some(Value::Array(cs)) = spec.get_mut(list) {
                for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                    for f in NOT_FOR_SCHEDULING {
                        c.remove(f);
                    }
                }
            }
        }
    }
    v
}
