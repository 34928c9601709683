//! A pass's writes: bindings (with their claims' PreBind writes) and
//! `PodScheduled=False` conditions, `CONCURRENCY` at a time, each write a
//! task of its own (kube-scheduler binds and updates pods from goroutines
//! of their own). The in-memory API server does a request's work in the
//! task that awaits it, so writes awaited inside the scheduler's task
//! would put the API server's work for every pass on one thread; as tasks
//! they run on any of the runtime's threads. The pass still waits for its
//! writes before the next one starts.

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::Request;
use kube::{Client, Resource};
use serde_json::json;
use simclock::Clock;

use super::{Bind, Mark, dra, events};

/// How many bindings, and how many status patches, are in flight at once.
const CONCURRENCY: usize = 32;

/// What the writes need, owned (cheap to clone).
#[derive(Clone)]
pub(super) struct Writer {
    client: Client,
    clock: Clock,
    events: events::Recorder,
}

impl Writer {
    /// A writer through `client`, stamping events with `clock`.
    pub(super) fn new(client: Client, clock: Clock) -> Self {
        Self {
            events: events::Recorder::new(client.clone()),
            client,
            clock,
        }
    }

    /// The same writer, recording no events.
    pub(super) fn without_events(mut self) -> Self {
        self.events = events::Recorder::off();
        self
    }

    /// Binds a pass's pods and returns the binds that failed.
    pub(super) async fn binds(&self, binds: Vec<Bind>) -> Vec<Bind> {
        self.as_tasks(binds, "binding", |w, b| async move {
            if dra::prebind(&w.client, &b.claims).await && w.bind(&b.key, &b.node).await {
                let message = format!("Successfully assigned {} to {}", b.key, b.node);
                w.event(&b.entry.info.pod, "Normal", "Scheduled", message);
                None
            } else {
                Some(b)
            }
        })
        .filter_map(|failed| async move { failed })
        .collect()
        .await
    }

    /// Writes a pass's `PodScheduled=False` conditions, each with its
    /// `FailedScheduling` event.
    pub(super) async fn marks(&self, marks: Vec<Mark>) {
        self.as_tasks(marks, "status", |w, m| async move { w.mark(m).await })
            .for_each(|()| async {})
            .await;
    }

    /// Runs `write` on each item, each a task of its own charged to the
    /// scheduler, `CONCURRENCY` at a time, and yields the results; a task
    /// that failed (panicked) is logged as a failed `what` task.
    fn as_tasks<T, R, F>(
        &self,
        items: Vec<T>,
        what: &'static str,
        write: impl Fn(Writer, T) -> F,
    ) -> impl Stream<Item = R>
    where
        F: Future<Output = R> + Send + 'static,
        R: Send + 'static,
    {
        futures::stream::iter(items)
            .map(move |item| simclock::busy::spawn(write(self.clone(), item)))
            .buffer_unordered(CONCURRENCY)
            .filter_map(move |done| async move {
                done.map_err(|e| tracing::warn!("scheduler: a {what} task failed: {e}"))
                    .ok()
            })
    }

    /// Records a core/v1 Event from `default-scheduler` on a pod, stamped
    /// now and written in the background ([`events`]): events never hold
    /// up scheduling.
    fn event(&self, pod: &Pod, type_: &'static str, reason: &'static str, message: String) {
        self.events
            .record(pod, type_, reason, message, Time(self.clock.timestamp()));
    }

    async fn bind(&self, key: &str, node: &str) -> bool {
        let (ns, name) = key.split_once('/').unwrap_or(("default", key));
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": ns},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}
        });
        let req = serde_json::to_vec(&binding)
            .map_err(kube::Error::SerdeError)
            .and_then(|body| {
                pods(ns)
                    .create_subresource("binding", name, &PostParams::default(), body)
                    .map_err(kube::Error::BuildRequest)
            });
        match send(&self.client, req).await {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!("binding pod {ns}/{name} to node {node} failed: {e}");
                false
            }
        }
    }

    async fn mark(&self, m: Mark) {
        let (ns, name) = m.key.split_once('/').unwrap_or(("default", &m.key));
        self.event(&m.pod, "Warning", "FailedScheduling", m.message.clone());
        // As kube-scheduler: a new message keeps the time the condition
        // last changed status.
        let since = m
            .pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
            .filter(|c| c.status == "False")
            .and_then(|c| c.last_transition_time.as_ref())
            .map_or_else(|| self.clock.rfc3339(), |t| t.0.to_string());
        let mut status = json!({"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": m.reason.as_str(),
            "message": m.message, "lastProbeTime": null,
            "lastTransitionTime": since,
        }]});
        if let Some(n) = &m.nominated {
            status["nominatedNodeName"] = json!(n);
        }
        let patch = Patch::Strategic(json!({"status": status}));
        let req = pods(ns)
            .patch_subresource("status", name, &PatchParams::default(), &patch)
            .map_err(kube::Error::BuildRequest);
        if let Err(e) = send(&self.client, req).await {
            tracing::debug!("marking pod {} unschedulable failed: {e}", m.key);
        }
    }
}

/// Requests on the pods of namespace `ns`.
fn pods(ns: &str) -> Request {
    Request::new(Pod::url_path(&(), Some(ns)))
}

/// Sends a write and checks its status, without decoding what it returns:
/// the scheduler reads nothing of it, and a pod or event decoded for
/// every write was a good part of a burst's cost.
pub(super) async fn send(
    client: &Client,
    req: Result<http::Request<Vec<u8>>, kube::Error>,
) -> Result<(), kube::Error> {
    client.request_text(req?).await.map(drop)
}
