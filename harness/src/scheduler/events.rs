//! The scheduler's events (`Scheduled`, `FailedScheduling`), as
//! kube-scheduler's event broadcaster records them: off the scheduling
//! path, by a writer of their own, and folded into series.
//!
//! An event is stamped when the scheduler records it (when it binds or
//! marks the pod), queued, and written by one task, `CONCURRENCY` at a
//! time, in the order recorded. A burst of marks (30,000 pods at once at
//! 1,000 nodes) is then not slowed by as many event writes competing with
//! the status writes: the events follow, each with its own time. The queue
//! keeps only what an event needs (a few hundred bytes each).
//!
//! kube-scheduler records through client-go's `events.k8s.io` broadcaster
//! (`k8s.io/client-go/tools/events`), which folds repeats ([`Series`]):
//! events on the same object with the same type and reason (and the same
//! action and reporter, one for all of ours) are isomorphic whatever their
//! message. The first is created, named `<pod>.<nanoseconds in hex>`; the
//! second turns it into a series (`count` 2, a patch); later ones are only
//! counted. A series is written again every 30 minutes, and for the last
//! time once nothing was added to it for 6 minutes, when it is forgotten
//! (a single event is forgotten after 6 minutes). So a pod tried again
//! many times while nodes come has one `FailedScheduling` event with the
//! first message and a count, as in a real cluster; its condition carries
//! the latest message. These periods are the cluster's own, not divided
//! by a time scale.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, EventSeries, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::Request;
use kube::{Client, Resource};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Event writes in flight at once.
const CONCURRENCY: usize = 4;
/// client-go's `finishTime`: a series with nothing added for this long is
/// written a last time and forgotten, a single event forgotten.
const FINISH: Duration = Duration::from_secs(6 * 60);
/// client-go's `refreshTime`: every series is written again this often.
const REFRESH: Duration = Duration::from_secs(30 * 60);

/// An event on a pod, stamped when recorded.
#[derive(Debug, Clone, PartialEq)]
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
    /// The writer's queue (`None`: events are not recorded).
    queue: Option<mpsc::UnboundedSender<PodEvent>>,
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
        Self { queue: Some(queue) }
    }

    /// A recorder that records nothing.
    pub(super) fn off() -> Self {
        Self { queue: None }
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
        let Some(queue) = &self.queue else {
            return;
        };
        let event = PodEvent {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone(),
            type_,
            reason,
            message,
            at,
        };
        if queue.send(event).is_err() {
            tracing::debug!("scheduler: the event writer is gone; event {reason} not recorded");
        }
    }
}

/// Writes the queued events until the queue closes, folding repeats into
/// series and finishing series every [`FINISH`].
async fn write_all(client: Client, events: mpsc::UnboundedReceiver<PodEvent>) {
    enum Input {
        Event(PodEvent),
        Tick,
    }
    let events = futures::stream::unfold(events, |mut events| async move {
        events.recv().await.map(|e| (Input::Event(e), events))
    });
    let start = Instant::now() + FINISH;
    let ticks = futures::stream::unfold(tokio::time::interval_at(start, FINISH), |mut t| async {
        t.tick().await;
        Some((Input::Tick, t))
    });
    // The ticks never end: the writer ends with the queue, at the `None`
    // that follows its last event.
    let events = events
        .map(Some)
        .chain(futures::stream::once(async { None }));
    let mut series = Series::default();
    futures::stream::select(events, ticks.map(Some))
        .take_while(|i| std::future::ready(i.is_some()))
        .flat_map(|i| {
            let writes = match i {
                Some(Input::Event(e)) => series.record(e, Instant::now()).into_iter().collect(),
                Some(Input::Tick) => series.tick(Instant::now()),
                None => Vec::new(),
            };
            futures::stream::iter(writes)
        })
        .for_each_concurrent(CONCURRENCY, |w| write(&client, w))
        .await;
}

/// client-go's key for isomorphic events: the object, type and reason.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    namespace: String,
    name: String,
    uid: Option<String>,
    type_: &'static str,
    reason: &'static str,
}

impl Key {
    fn of(e: &PodEvent) -> Self {
        Self {
            namespace: e.namespace.clone(),
            name: e.name.clone(),
            uid: e.uid.clone(),
            type_: e.type_,
            reason: e.reason,
        }
    }
}

/// An event written, and how often it happened since.
struct Cached {
    /// The event as first recorded, named.
    first: Named,
    count: i32,
    /// The time of the last occurrence.
    last: Time,
    /// When the last occurrence was recorded.
    observed: Instant,
    /// When the series was last written.
    written: Instant,
}

/// An event with the name it is created under.
#[derive(Debug, Clone, PartialEq)]
struct Named {
    name: String,
    event: PodEvent,
}

/// What the writer sends.
#[derive(Debug, PartialEq)]
enum Write {
    /// A new event.
    Create(Named),
    /// An event's series: patched, or created with it if the event is gone.
    Series {
        first: Named,
        count: i32,
        last: Time,
    },
}

/// The events written lately, by [`Key`] (client-go's `eventCache`).
#[derive(Default)]
struct Series {
    cache: HashMap<Key, Cached>,
}

impl Series {
    /// What to write for `e`, recorded at `now`: the event the first time,
    /// its series the second, nothing after.
    fn record(&mut self, e: PodEvent, now: Instant) -> Option<Write> {
        let key = Key::of(&e);
        if let Some(c) = self.cache.get_mut(&key) {
            c.count += 1;
            c.last = e.at;
            c.observed = now;
            if c.count > 2 {
                return None;
            }
            c.written = now;
            return Some(Write::Series {
                first: c.first.clone(),
                count: c.count,
                last: c.last.clone(),
            });
        }
        let first = Named {
            name: format!("{}.{:x}", e.name, e.at.0.as_nanosecond()),
            event: e,
        };
        self.cache.insert(
            key,
            Cached {
                first: first.clone(),
                count: 1,
                last: first.event.at.clone(),
                observed: now,
                written: now,
            },
        );
        Some(Write::Create(first))
    }

    /// The series to write at `now`: each one finished (nothing added for
    /// [`FINISH`]; forgotten then, as are single events that old) or due
    /// for its [`REFRESH`].
    fn tick(&mut self, now: Instant) -> Vec<Write> {
        let mut out = Vec::new();
        self.cache.retain(|_, c| {
            let finished = now.duration_since(c.observed) >= FINISH;
            if c.count > 1 && (finished || now.duration_since(c.written) >= REFRESH) {
                c.written = now;
                out.push(Write::Series {
                    first: c.first.clone(),
                    count: c.count,
                    last: c.last.clone(),
                });
            }
            !finished
        });
        out
    }
}

/// The core/v1 Event for `n`, with its series when `series` is given.
fn event_of(n: &Named, series: Option<(i32, &Time)>) -> Event {
    let e = &n.event;
    Event {
        metadata: ObjectMeta {
            name: Some(n.name.clone()),
            namespace: Some(e.namespace.clone()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(e.name.clone()),
            namespace: Some(e.namespace.clone()),
            uid: e.uid.clone(),
            ..ObjectReference::default()
        },
        type_: Some(e.type_.into()),
        reason: Some(e.reason.into()),
        message: Some(e.message.clone()),
        source: Some(EventSource {
            component: Some("default-scheduler".into()),
            host: None,
        }),
        reporting_component: Some("default-scheduler".into()),
        first_timestamp: Some(e.at.clone()),
        last_timestamp: Some(series.map_or_else(|| e.at.clone(), |(_, t)| t.clone())),
        count: Some(series.map_or(1, |(c, _)| c)),
        series: series.map(|(count, t)| EventSeries {
            count: Some(count),
            last_observed_time: Some(MicroTime(t.0)),
        }),
        ..Event::default()
    }
}

async fn write(client: &Client, w: Write) {
    let (named, result) = match w {
        Write::Create(n) => {
            let result = create(client, &event_of(&n, None)).await;
            (n, result)
        }
        Write::Series { first, count, last } => {
            let event = event_of(&first, Some((count, &last)));
            let patch = Patch::Strategic(json!({
                "count": event.count, "lastTimestamp": event.last_timestamp, "series": event.series,
            }));
            let req = Request::new(Event::url_path(&(), Some(&first.event.namespace)))
                .patch(&first.name, &PatchParams::default(), &patch)
                .map_err(kube::Error::BuildRequest);
            // As client-go: a series whose event is gone is created anew.
            let result = match super::writes::send(client, req).await {
                Err(kube::Error::Api(s)) if s.code == 404 => create(client, &event).await,
                other => other,
            };
            (first, result)
        }
    };
    if let Err(err) = result {
        let e = &named.event;
        tracing::debug!(
            "recording event {} on pod {}/{}: {err}",
            e.reason,
            e.namespace,
            e.name
        );
    }
}

async fn create(client: &Client, event: &Event) -> Result<(), kube::Error> {
    let namespace = event.metadata.namespace.as_deref().unwrap_or_default();
    let req = serde_json::to_vec(event)
        .map_err(kube::Error::SerdeError)
        .and_then(|body| {
            Request::new(Event::url_path(&(), Some(namespace)))
                .create(&PostParams::default(), body)
                .map_err(kube::Error::BuildRequest)
        });
    super::writes::send(client, req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(pod: &str, message: &str, second: i64) -> PodEvent {
        PodEvent {
            namespace: "default".into(),
            name: pod.into(),
            uid: Some(format!("uid-{pod}")),
            type_: "Warning",
            reason: "FailedScheduling",
            message: message.into(),
            at: Time(k8s_openapi::jiff::Timestamp::from_second(second).unwrap()),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn repeats_fold_into_one_series_whatever_their_message() {
        let mut s = Series::default();
        let t0 = Instant::now();
        let first = failed("p", "0/1 nodes are available", 100);
        let Some(Write::Create(created)) = s.record(first.clone(), t0) else {
            panic!("the first event is created");
        };
        assert_eq!(created.name, format!("p.{:x}", 100_000_000_000i128));
        // The second, with another message: the series, with the first
        // message kept and the second's time.
        let second = failed("p", "0/2 nodes are available", 101);
        assert_eq!(
            s.record(second.clone(), t0 + Duration::from_secs(1)),
            Some(Write::Series {
                first: created.clone(),
                count: 2,
                last: second.at.clone()
            })
        );
        // The third is only counted; another pod and another reason are
        // events of their own.
        assert_eq!(
            s.record(failed("p", "0/3", 102), t0 + Duration::from_secs(2)),
            None
        );
        assert!(matches!(
            s.record(failed("q", "0/3", 102), t0),
            Some(Write::Create(_))
        ));
        let mut scheduled = failed("p", "Successfully assigned", 103);
        scheduled.type_ = "Normal";
        scheduled.reason = "Scheduled";
        assert!(matches!(s.record(scheduled, t0), Some(Write::Create(_))));
        // Six minutes after its last occurrence the series is written with
        // its count (3) and forgotten; the single events too, unwritten.
        let later = t0 + Duration::from_secs(2) + FINISH;
        assert_eq!(
            s.tick(later),
            vec![Write::Series {
                first: created,
                count: 3,
                last: failed("p", "", 102).at
            }]
        );
        assert!(s.cache.is_empty());
        // The next failure starts a new event.
        assert!(matches!(s.record(first, later), Some(Write::Create(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_series_still_growing_is_written_every_30_minutes() {
        let mut s = Series::default();
        let t0 = Instant::now();
        s.record(failed("p", "a", 0), t0);
        s.record(failed("p", "b", 1), t0);
        let mut written = Vec::new();
        // An occurrence every 5 minutes for 40 minutes, a tick every 6.
        for minute in 1..=40u64 {
            let now = t0 + Duration::from_secs(minute * 60);
            if minute % 5 == 0 {
                s.record(failed("p", "c", i64::try_from(minute * 60).unwrap()), now);
            }
            if minute % 6 == 0 {
                written.extend(s.tick(now).into_iter().map(|_| minute));
            }
        }
        assert_eq!(
            written,
            vec![30],
            "refreshed once, at the first tick 30 min after"
        );
    }
}
