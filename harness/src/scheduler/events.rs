//! The scheduler's events (`Scheduled`, `FailedScheduling`), as
//! kube-scheduler's event broadcaster records them: off the scheduling
//! path, by a writer of their own.
//!
//! An event is stamped when the scheduler records it (when it binds or
//! marks the pod), queued, and written by one task, `CONCURRENCY` at a
//! time, in the order recorded. A burst of marks (30,000 pods at once at
//! 1,000 nodes) is then not slowed by as many event writes competing with
//! the status writes: the events follow, each with its own time. The queue
//! keeps only what an event needs (a few hundred bytes each).

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::PostParams;
use kube::core::Request;
use kube::{Client, Resource};
use tokio::sync::mpsc;

/// Event writes in flight at once.
const CONCURRENCY: usize = 4;

/// An event on a pod, stamped when recorded.
struct PodEvent {
    namespace: String,
    name: String,
    uid: Option<String>,
    type_: &'static str,
    reason: &'static str,
    message: String,
    /// The recording time.
    at: Time,
}

/// Records the scheduler's events: cheap to call, written in the
/// background by the task [`Recorder::new`] starts.
#[derive(Clone)]
pub(super) struct Recorder {
    queue: mpsc::UnboundedSender<PodEvent>,
}

impl Recorder {
    /// A recorder whose writer task (started now, on the current runtime,
    /// its time charged to the scheduler) creates the events through
    /// `client` until every recorder is gone.
    pub(super) fn new(client: Client) -> Self {
        let (queue, events) = mpsc::unbounded_channel();
        tokio::spawn(simclock::busy::timed(
            "scheduler",
            write_all(client, events),
        ));
        Self { queue }
    }

    /// Queues a core/v1 Event from `default-scheduler` on `pod`, stamped
    /// `at`.
    pub(super) fn record(
        &self,
        pod: &Pod,
        type_: &'static str,
        reason: &'static str,
        message: String,
        at: Time,
    ) {
        let event = PodEvent {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone(),
            type_,
            reason,
            message,
            at,
        };
        if self.queue.send(event).is_err() {
            tracing::debug!("scheduler: the event writer is gone; event {reason} not recorded");
        }
    }
}

/// Writes the queued events until the queue closes.
async fn write_all(client: Client, events: mpsc::UnboundedReceiver<PodEvent>) {
    futures::stream::unfold(events, |mut events| async move {
        events.recv().await.map(|e| (e, events))
    })
    .for_each_concurrent(CONCURRENCY, |e| write(&client, e))
    .await;
}

async fn write(client: &Client, e: PodEvent) {
    let event = Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}.", e.name)),
            namespace: Some(e.namespace.clone()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(e.name.clone()),
            namespace: Some(e.namespace.clone()),
            uid: e.uid,
            ..ObjectReference::default()
        },
        type_: Some(e.type_.into()),
        reason: Some(e.reason.into()),
        message: Some(e.message),
        source: Some(EventSource {
            component: Some("default-scheduler".into()),
            host: None,
        }),
        reporting_component: Some("default-scheduler".into()),
        first_timestamp: Some(e.at.clone()),
        last_timestamp: Some(e.at),
        count: Some(1),
        ..Event::default()
    };
    let req = serde_json::to_vec(&event)
        .map_err(kube::Error::SerdeError)
        .and_then(|body| {
            Request::new(Event::url_path(&(), Some(&e.namespace)))
                .create(&PostParams::default(), body)
                .map_err(kube::Error::BuildRequest)
        });
    if let Err(err) = super::writes::send(client, req).await {
        tracing::debug!(
            "recording event {} on pod {}/{}: {err}",
            e.reason,
            e.namespace,
            e.name
        );
    }
}
