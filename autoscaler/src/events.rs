//! Events (docs/reference/ca-rules.md §7): CA's reasons and messages on pods, nodes and the
//! status ConfigMap, deduplicated for five minutes per object and reason
//! unless `--record-duplicated-events`. Every reason CA writes is an
//! [`EventReason`]; its text is rendered only here.
//!
//! Load on the API server is bounded twice: at most [`MAX_QUEUED_EVENTS`]
//! wait to be written (client-go's queue; more are dropped), and the
//! events a scale-up writes on pending pods (`TriggeredScaleUp`,
//! `NotTriggerScaleUp`) draw on a [`PodEventBudget`]: a queue's worth at
//! once, refilled over the five minutes of deduplication, so a backlog of
//! tens of thousands of pods costs a bounded number of writes however many
//! loops act on it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Event;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::mpsc;

ca_names! {
    /// An event's type.
    pub enum EventType {
        /// Routine.
        Normal,
        /// Something went wrong or was refused.
        Warning,
    }
}

ca_names! {
    /// The reason of every event the autoscaler writes.
    pub enum EventReason {
        /// A node group's size is being or was set (scale-up, min size).
        ScaledUpGroup,
        /// Increasing a node group failed.
        FailedToScaleUpGroup,
        /// A pod caused a scale-up.
        TriggeredScaleUp,
        /// A pod could not be helped by any node group.
        NotTriggerScaleUp,
        /// `--max-nodes-total` stopped a scale-up.
        MaxNodesTotalReached,
        /// Nodes of a scale-up did not register in time.
        ScaleUpTimedOut,
        /// Instances of a scale-up reported creation errors.
        ScaleUpFailed,
        /// Lowering the target of a timed-out scale-up failed (CA 1.36).
        FailedToRevertScaleUp,
        /// The cluster has too many unready nodes to autoscale.
        ClusterUnhealthy,
        /// A node is being removed (drained) or was marked for removal.
        ScaleDown,
        /// An empty node is being removed.
        ScaleDownEmpty,
        /// Removing a node failed.
        ScaleDownFailed,
        /// A taint left by an earlier run was removed (or failed to be).
        ClusterAutoscalerCleanup,
        /// An instance that never registered was removed.
        DeleteUnregistered,
        /// Removing an instance that never registered failed.
        DeleteUnregisteredFailed,
        /// The priority expander's ConfigMap is unusable.
        PriorityConfigMapInvalid,
        /// A node group is in no priority expander entry.
        PriorityConfigMapNotMatchedGroup,
        /// No option matched any priority expander entry.
        PriorityConfigMapNoGroupMatched,
        /// A node group's size or capacity annotation does not parse
        /// (ours: upstream only logs).
        InvalidNodeGroupAnnotation,
        /// A node group at zero says nothing of its nodes' capacity (ours).
        ScaleFromZeroUnavailable,
        /// An ASG's node template tag does not parse (ours: upstream
        /// skips it silently).
        InvalidNodeGroupTag,
        /// A pending pod consumes a ProvisioningRequest, so it triggers no
        /// scale-up. Upstream writes this event with an empty reason
        /// ([`EventReason::text`]).
        ConsumesProvisioningRequest,
        /// A loop's check of which pending pods fit on existing nodes ran
        /// out of `--pending-pods-batching-timeout` (CA 1.37).
        GracefulDegradationStarted,
        /// A loop reached every pending pod again (CA 1.37).
        GracefulDegradationStopped,
    }
}

/// The object an event is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    /// `v1`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace (empty for cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
}

impl ObjectRef {
    /// A pod.
    pub fn pod(p: &k8s_openapi::api::core::v1::Pod) -> Self {
        Self {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: p.metadata.namespace.clone().unwrap_or_default(),
            name: p.metadata.name.clone().unwrap_or_default(),
            uid: p.metadata.uid.clone().unwrap_or_default(),
        }
    }

    /// A node.
    pub fn node(name: &str, uid: &str) -> Self {
        Self {
            api_version: "v1".into(),
            kind: "Node".into(),
            namespace: String::new(),
            name: name.to_string(),
            uid: uid.to_string(),
        }
    }

    /// A ConfigMap.
    pub fn config_map(namespace: &str, name: &str) -> Self {
        Self {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: String::new(),
        }
    }
}

/// The deduplication key (docs/reference/ca-rules.md §7.2): reason and object, or, for the
/// status ConfigMap, the message.
fn dedup_key(
    object: &ObjectRef,
    status_cm: &ObjectRef,
    reason: EventReason,
    message: &str,
) -> String {
    if object == status_cm {
        format!("{}/{}/{message}", object.kind, object.name)
    } else {
        format!(
            "{reason}/{}/{}/{}/{}",
            object.kind, object.namespace, object.name, object.uid
        )
    }
}

/// The keys of recent events, for one event per key per five minutes.
/// Keys older than the window are forgotten whenever the map has doubled
/// since the last pruning, so a scale-up for tens of thousands of pods
/// costs linear time.
#[derive(Debug, Default)]
struct Seen {
    keys: HashMap<String, SystemTime>,
    prune_at: usize,
}

const DEDUP_WINDOW: Duration = Duration::from_secs(300);

impl Seen {
    /// Whether an event with this key was written in the last five minutes.
    fn recent(&self, key: &str, now: SystemTime) -> bool {
        self.keys.get(key).is_some_and(|t| *t + DEDUP_WINDOW > now)
    }
}

/// Remembers that an event with this key was written at `now`.
fn remember(seen: &mut Seen, key: String, now: SystemTime) {
    seen.keys.insert(key, now);
    if seen.keys.len() > seen.prune_at.max(8192) {
        seen.keys.retain(|_, t| *t + DEDUP_WINDOW > now);
        seen.prune_at = 2 * seen.keys.len();
    }
}

/// Whether an event with this key may be written now (and remembers it).
#[cfg(test)]
fn allow(seen: &mut Seen, key: String, now: SystemTime) -> bool {
    if seen.recent(&key, now) {
        return false;
    }
    remember(seen, key, now);
    true
}

/// How many events may wait to be written; more are dropped, as
/// client-go's event broadcaster does (`maxQueuedEvents`, drop if full). A
/// scale-up for 30,000 pods thus writes what the API server takes, not one
/// request per pod at once.
pub const MAX_QUEUED_EVENTS: usize = 1000;

/// The pod events a scale-up writes: a token bucket of
/// [`MAX_QUEUED_EVENTS`] that refills at that many per
/// [`POD_EVENT_REFILL`]. Upstream bounds these only by its queue, which a
/// scale-up for a large backlog overflows, so it writes at least a queue's
/// worth for such a backlog; we act in more, smaller loops, and the bucket
/// keeps our total near one queue's worth (below upstream's), while a
/// scale-up of up to 1,000 pods still writes an event on every pod.
#[derive(Debug)]
struct PodEventBudget {
    tokens: f64,
    at: Option<SystemTime>,
}

/// The time in which an empty [`PodEventBudget`] refills: the
/// deduplication window, so a pod event per pod at most once a window for
/// a backlog of up to a queue's worth (3.3 events a second).
const POD_EVENT_REFILL: Duration = DEDUP_WINDOW;

impl PodEventBudget {
    fn new() -> Self {
        Self {
            tokens: MAX_QUEUED_EVENTS as f64,
            at: None,
        }
    }

    /// Takes one event's token at `now`, if there is one.
    fn take(&mut self, now: SystemTime) -> bool {
        let full = MAX_QUEUED_EVENTS as f64;
        if let Some(at) = self.at {
            let elapsed = now.duration_since(at).unwrap_or_default();
            self.tokens = (self.tokens
                + full * elapsed.as_secs_f64() / POD_EVENT_REFILL.as_secs_f64())
            .min(full);
        }
        self.at = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl EventReason {
    /// The `reason` field written: the name, or nothing where upstream
    /// writes nothing.
    pub fn text(self) -> &'static str {
        match self {
            Self::ConsumesProvisioningRequest => "",
            other => other.as_str(),
        }
    }

    /// An event a scale-up writes on a pending pod.
    fn on_pending_pod(self) -> bool {
        matches!(self, Self::TriggeredScaleUp | Self::NotTriggerScaleUp)
    }
}

/// What the recorder remembers between events.
#[derive(Debug)]
struct Memory {
    seen: Seen,
    pod_budget: PodEventBudget,
}

/// An event accepted by the recorder, waiting to be written.
struct Pending {
    object: ObjectRef,
    type_: EventType,
    reason: EventReason,
    message: String,
    at: SystemTime,
}

/// Records events (source component `cluster-autoscaler`), one per
/// (object, reason) per five minutes unless `--record-duplicated-events`;
/// for the status ConfigMap the message is the key instead of the reason.
/// Events are written by one task, in order, from a queue of at most
/// [`MAX_QUEUED_EVENTS`].
#[derive(Clone)]
pub struct EventRecorder {
    clock: simclock::Clock,
    record_duplicates: bool,
    status_cm: ObjectRef,
    write_status: bool,
    memory: Arc<Mutex<Memory>>,
    queue: mpsc::Sender<Pending>,
    dropped: Arc<AtomicU64>,
}

impl EventRecorder {
    /// A recorder; its writer task runs on the current tokio runtime.
    pub fn new(
        client: Client,
        clock: simclock::Clock,
        record_duplicates: bool,
        status_cm: ObjectRef,
        write_status: bool,
    ) -> Self {
        let (queue, inbox) = mpsc::channel(MAX_QUEUED_EVENTS);
        tokio::spawn(write_events(client, inbox));
        Self {
            clock,
            record_duplicates,
            status_cm,
            write_status,
            memory: Arc::new(Mutex::new(Memory {
                seen: Seen::default(),
                pod_budget: PodEventBudget::new(),
            })),
            queue,
            dropped: Arc::new(AtomicU64::new(0)),
        }
    }

    /// An event on the status ConfigMap (only with `--write-status-configmap`).
    pub fn status(&self, type_: EventType, reason: EventReason, message: String) {
        if self.write_status {
            self.record(&self.status_cm, type_, reason, message);
        }
    }

    /// Events dropped so far because the queue was full or the pod event
    /// budget spent.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Records an event without waiting for the API: it is queued, or
    /// dropped when [`MAX_QUEUED_EVENTS`] are already waiting.
    pub fn record(
        &self,
        object: &ObjectRef,
        type_: EventType,
        reason: EventReason,
        message: String,
    ) {
        let now = self.clock.now();
        tracing::debug!(
            "event {reason} on {} {}/{}: {message}",
            object.kind,
            object.namespace,
            object.name
        );
        // As client-go: an event dropped (queue full, budget spent) is not
        // remembered as written, so a later one on the object may go.
        let mut memory = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        let key =
            (!self.record_duplicates).then(|| dedup_key(object, &self.status_cm, reason, &message));
        if key.as_ref().is_some_and(|k| memory.seen.recent(k, now)) {
            return;
        }
        if reason.on_pending_pod() && !memory.pod_budget.take(now) {
            self.count_drop();
            return;
        }
        let pending = Pending {
            object: object.clone(),
            type_,
            reason,
            message,
            at: now,
        };
        if self.queue.try_send(pending).is_err() {
            self.count_drop();
            return;
        }
        if let Some(key) = key {
            remember(&mut memory.seen, key, now);
        }
    }

    fn count_drop(&self) {
        let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            tracing::debug!("{n} events dropped so far (queue full or pod event budget spent)");
        }
    }
}

/// The writer task: one event at a time, in the order recorded.
async fn write_events(client: Client, mut inbox: mpsc::Receiver<Pending>) {
    while let Some(p) = inbox.recv().await {
        let object = &p.object;
        let ns = if object.namespace.is_empty() {
            "default".to_string()
        } else {
            object.namespace.clone()
        };
        let ts = simclock::format_rfc3339(p.at);
        let event = json!({
            "metadata": {"generateName": format!("{}.", object.name), "namespace": ns},
            "involvedObject": {"apiVersion": object.api_version, "kind": object.kind, "name": object.name,
                "namespace": if object.namespace.is_empty() { Value::Null } else { json!(object.namespace) },
                "uid": if object.uid.is_empty() { Value::Null } else { json!(object.uid) }},
            "type": p.type_.as_str(), "reason": p.reason.text(), "message": p.message,
            "source": {"component": "cluster-autoscaler"},
            "reportingComponent": "cluster-autoscaler",
            "firstTimestamp": ts, "lastTimestamp": ts, "count": 1,
        });
        let api: Api<Event> = Api::namespaced(client.clone(), &ns);
        let result = match serde_json::from_value::<Event>(event) {
            Ok(e) => api.create(&PostParams::default(), &e).await.map(|_| ()),
            Err(e) => Err(kube::Error::SerdeError(e)),
        };
        if let Err(e) = result {
            tracing::debug!("recording event {} on {}: {e}", p.reason, object.name);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn events_are_deduplicated_for_five_minutes() {
        let cm = ObjectRef::config_map("kube-system", "cluster-autoscaler-status");
        let pod = ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: "default".into(),
            name: "p".into(),
            uid: "u".into(),
        };
        let mut seen = Seen::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let k = |o: &ObjectRef, r: EventReason, m: &str| dedup_key(o, &cm, r, m);
        assert!(allow(
            &mut seen,
            k(&pod, EventReason::NotTriggerScaleUp, "a"),
            t0
        ));
        assert!(
            !allow(
                &mut seen,
                k(&pod, EventReason::NotTriggerScaleUp, "b"),
                t0 + Duration::from_secs(299)
            ),
            "same object and reason"
        );
        assert!(
            allow(&mut seen, k(&pod, EventReason::TriggeredScaleUp, "a"), t0),
            "another reason"
        );
        assert!(
            allow(
                &mut seen,
                k(&pod, EventReason::NotTriggerScaleUp, "a"),
                t0 + Duration::from_secs(300)
            ),
            "after five minutes"
        );
        // On the status ConfigMap, messages are the key.
        assert!(allow(
            &mut seen,
            k(&cm, EventReason::ScaledUpGroup, "setting 1"),
            t0
        ));
        assert!(allow(
            &mut seen,
            k(&cm, EventReason::ScaledUpGroup, "set 1"),
            t0
        ));
        assert!(!allow(
            &mut seen,
            k(&cm, EventReason::ScaledUpGroup, "setting 1"),
            t0 + Duration::from_secs(1)
        ));
    }

    #[test]
    fn pod_events_draw_on_a_budget_of_a_queue_refilled_over_five_minutes() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut budget = PodEventBudget::new();
        let taken = (0..5_000).filter(|_| budget.take(t0)).count();
        assert_eq!(taken, MAX_QUEUED_EVENTS, "a burst takes the whole bucket");
        assert!(!budget.take(t0), "not yet");
        // Three seconds refill 10 (1,000 in 300 s).
        let later = t0 + Duration::from_secs(3);
        let taken = (0..5_000).filter(|_| budget.take(later)).count();
        assert_eq!(taken, 10);
        // Never more than a full bucket, however long it rested.
        let much_later = later + Duration::from_secs(3_600);
        let taken = (0..5_000).filter(|_| budget.take(much_later)).count();
        assert_eq!(taken, MAX_QUEUED_EVENTS);
        assert!(EventReason::TriggeredScaleUp.on_pending_pod());
        assert!(!EventReason::ScaledUpGroup.on_pending_pod());
    }

    #[test]
    fn old_keys_are_forgotten_once_the_memory_doubles() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut seen = Seen::default();
        for i in 0..40_000 {
            assert!(allow(&mut seen, format!("a{i}"), t0));
        }
        // Nothing expired yet: pruning ran a few times (8k, 16k, 32k), not
        // on every insert, and kept everything.
        assert_eq!(seen.keys.len(), 40_000);
        assert!(seen.prune_at > 40_000, "{}", seen.prune_at);
        let later = t0 + DEDUP_WINDOW + Duration::from_secs(1);
        for i in 0..40_000 {
            assert!(allow(&mut seen, format!("b{i}"), later));
        }
        assert!(
            seen.keys.values().all(|t| *t == later),
            "the expired keys are gone"
        );
        assert_eq!(seen.keys.len(), 40_000);
    }
}
