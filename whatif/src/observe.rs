//! What happens to the cluster during a side's run, seen through the API
//! as any watcher sees it: when each node came and went, when each pod was
//! pending and when a bound pod was deleted: evicted (the Eviction API
//! marks the pod `DisruptionTarget` before it deletes it: the autoscaler's
//! drains), or deleted otherwise (its controller scaling down, a step of
//! the timeline, gone with its node). Times are seconds since the autoscaler started, on the
//! cluster's virtual clock.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::core::Status;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tokio::sync::oneshot;
use tokio::time::Instant;

use harness::kwok_provider::GROUP_LABEL;
use harness::slim_pod::BarePod;

/// The labels that give a node's instance type, the current one first.
const INSTANCE_TYPE_LABELS: [&str; 2] = [
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
];

/// A node's life during the run.
#[derive(Debug, Clone, Default)]
pub struct NodeLife {
    /// Its group (the `kwok-nodegroup` label), if any.
    pub group: Option<String>,
    /// Its instance type (the `node.kubernetes.io/instance-type` label, or
    /// the beta one), if any.
    pub instance_type: Option<String>,
    /// When it was created; `None` for a node there at the start.
    pub added: Option<f64>,
    /// When it was deleted.
    pub removed: Option<f64>,
}

/// What the watchers saw.
#[derive(Debug, Default)]
pub struct Seen {
    /// Every node, by name.
    pub nodes: BTreeMap<String, NodeLife>,
    /// Node counts per group after each change: `(time, group, count)`.
    pub node_changes: Vec<(f64, Option<String>, usize)>,
    /// The number of pending pods after each change.
    pub pending_changes: Vec<(f64, usize)>,
    /// Pod-seconds spent pending.
    pub pending_seconds: f64,
    /// Bound pods evicted (through the Eviction API).
    pub evictions: usize,
    /// Bound pods deleted otherwise.
    pub deletions: usize,
    /// Pods pending at the start.
    pub pending_at_start: usize,
    /// Pods pending now, by `namespace/name`, with since when.
    pub pending: BTreeMap<String, f64>,
    /// Pods seen, by uid: whether bound.
    bound: HashMap<String, bool>,
    group_counts: BTreeMap<Option<String>, usize>,
}

/// Watches nodes and pods from now on.
pub struct Observer {
    seen: Arc<Mutex<Seen>>,
    start: Instant,
    scale: f64,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Observer {
    /// Watches the nodes and pods, the clock at zero now; returns once
    /// each watch's first list is in (the start). A node the watch shows
    /// after that is one added since, whenever its event comes. Times are
    /// the cluster's: tokio's time multiplied by `scale` (1 on virtual
    /// time; a binary side's time scale in real time).
    pub async fn start(client: Client, scale: f64) -> Result<Observer, kube::Error> {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let start = Instant::now();
        let (nodes, nodes_listed) = watch::<Node>(
            client.clone(),
            seen.clone(),
            (start, scale),
            |seen, n, t| seen.node_applied(n, t),
            Seen::node_deleted,
        );
        let (pods, pods_listed) = watch::<BarePod>(
            client,
            seen.clone(),
            (start, scale),
            |seen, p, t| seen.pod_applied(p, t.unwrap_or(0.0)),
            Seen::pod_deleted,
        );
        let tasks = vec![nodes, pods];
        for listed in [nodes_listed, pods_listed] {
            let first_list = listed.await.unwrap_or_else(|_| {
                Err(kube::Error::Api(Box::new(Status::failure(
                    "the watch ended before its first list",
                    "InternalError",
                ))))
            });
            if let Err(e) = first_list {
                for t in &tasks {
                    t.abort();
                }
                return Err(e);
            }
        }
        if let Ok(mut s) = seen.lock() {
            s.pending_at_start = s.pending.len();
        }
        Ok(Observer {
            seen,
            start,
            scale,
            tasks,
        })
    }

    /// Seconds since the start, in cluster time.
    pub fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64() * self.scale
    }

    /// Stops watching and closes the books at `end` seconds: pods still
    /// pending count until then.
    pub fn finish(self, end: f64) -> Seen {
        for t in &self.tasks {
            t.abort();
        }
        let mut seen = match Arc::try_unwrap(self.seen) {
            Ok(m) => m.into_inner().unwrap_or_else(|e| e.into_inner()),
            Err(shared) => std::mem::take(&mut *shared.lock().unwrap_or_else(|e| e.into_inner())),
        };
        let still: f64 = seen.pending.values().map(|since| end - since).sum();
        seen.pending_seconds += still;
        seen
    }
}

/// Watches every object of kind `K`, handing each change to `applied` or
/// `deleted` with its time: none for the objects of the first list, which
/// is reported done (or failed) through the receiver.
fn watch<K>(
    client: Client,
    seen: Arc<Mutex<Seen>>,
    (start, scale): (Instant, f64),
    applied: fn(&mut Seen, &K, Option<f64>),
    deleted: fn(&mut Seen, &K, f64),
) -> (
    tokio::task::JoinHandle<()>,
    oneshot::Receiver<Result<(), kube::Error>>,
)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static,
{
    let api: Api<K> = Api::all(client);
    let (listed, first_list) = oneshot::channel();
    let task = tokio::spawn(async move {
        let mut listed = Some(listed);
        let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
        while let Some(event) = stream.next().await {
            let t = listed
                .is_none()
                .then(|| start.elapsed().as_secs_f64() * scale);
            let event = match event {
                Ok(event) => event,
                Err(e) => match listed.take() {
                    // The start cannot be read: said to the caller.
                    Some(l) => {
                        let _ = l.send(Err(kube_error(e)));
                        return;
                    }
                    // Later errors are retried by the watcher, which lists
                    // again: what changed meanwhile comes as applies.
                    None => continue,
                },
            };
            let Ok(mut seen) = seen.lock() else { return };
            match event {
                Event::Apply(o) | Event::InitApply(o) => applied(&mut seen, &o, t),
                Event::Delete(o) => deleted(&mut seen, &o, t.unwrap_or(0.0)),
                Event::InitDone => {
                    if let Some(l) = listed.take() {
                        // The receiver gone is a start that gave up.
                        let _ = l.send(Ok(()));
                    }
                }
                Event::Init => {}
            }
        }
    });
    (task, first_list)
}

/// The client error behind a watch error.
fn kube_error(e: watcher::Error) -> kube::Error {
    match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => e,
        watcher::Error::WatchError(status) => kube::Error::Api(status),
        watcher::Error::NoResourceVersion => kube::Error::Api(Box::new(Status::failure(
            "no metadata.resourceVersion in the list",
            "InternalError",
        ))),
    }
}

impl Seen {
    /// A node seen: at the start (`t` none) or added at `t`.
    fn node_applied(&mut self, n: &Node, t: Option<f64>) {
        let name = n.metadata.name.clone().unwrap_or_default();
        if self.nodes.contains_key(&name) {
            return;
        }
        let labels = n.metadata.labels.as_ref();
        let group = labels.and_then(|l| l.get(GROUP_LABEL)).cloned();
        let instance_type = labels
            .and_then(|l| INSTANCE_TYPE_LABELS.iter().find_map(|k| l.get(*k)))
            .cloned();
        self.nodes.insert(
            name,
            NodeLife {
                group: group.clone(),
                instance_type,
                added: t,
                removed: None,
            },
        );
        self.count(group, 1, t.unwrap_or(0.0));
    }

    fn node_deleted(&mut self, n: &Node, t: f64) {
        let name = n.metadata.name.clone().unwrap_or_default();
        let Some(life) = self.nodes.get_mut(&name) else {
            return;
        };
        if life.removed.is_some() {
            return;
        }
        life.removed = Some(t);
        let group = life.group.clone();
        self.count(group, -1, t);
    }

    fn count(&mut self, group: Option<String>, by: isize, t: f64) {
        let n = self.group_counts.entry(group.clone()).or_default();
        *n = n.saturating_add_signed(by);
        let n = *n;
        self.node_changes.push((t, group, n));
    }

    fn pod_applied(&mut self, p: &BarePod, t: f64) {
        let p = &p.0;
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let key = pod_key(p);
        let bound = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
        let finished = matches!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        let pending = !bound && !finished && p.metadata.deletion_timestamp.is_none();
        self.bound.insert(uid, bound && !finished);
        match (pending, self.pending.contains_key(&key)) {
            (true, false) => {
                self.pending.insert(key, t);
                self.pending_changes.push((t, self.pending.len()));
            }
            (false, true) => self.stop_pending(&key, t),
            _ => {}
        }
    }

    fn pod_deleted(&mut self, p: &BarePod, t: f64) {
        let p = &p.0;
        let uid = p.metadata.uid.clone().unwrap_or_default();
        if self.bound.remove(&uid) == Some(true) {
            if evicted(p) {
                self.evictions += 1;
            } else {
                self.deletions += 1;
            }
        }
        let key = pod_key(p);
        if self.pending.contains_key(&key) {
            self.stop_pending(&key, t);
        }
    }

    fn stop_pending(&mut self, key: &str, t: f64) {
        if let Some(since) = self.pending.remove(key) {
            self.pending_seconds += t - since;
            self.pending_changes.push((t, self.pending.len()));
        }
    }
}

/// Whether the Eviction API took `p`: it marks the pod before deleting it.
fn evicted(p: &Pod) -> bool {
    let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|cs| {
        cs.iter().any(|c| {
            c.type_ == "DisruptionTarget"
                && c.status == "True"
                && c.reason.as_deref() == Some("EvictionByEvictionAPI")
        })
    })
}

fn pod_key(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or(""),
        p.metadata.name.as_deref().unwrap_or("")
    )
}
