//! The ProvisioningRequest processors (upstream's `processors/provreq`),
//! with `--enable-provisioning-requests`. [`ProvReqProcessing`] is shared by
//! three pod-list processors, added after upstream's default four in
//! upstream's order, and by the loop:
//!
//! - [`PodsFilter`]: pending pods that consume a request trigger no scale-up
//!   (the request's capacity is theirs); each gets CA's event, at most 50 a
//!   loop.
//! - [`PodsInjector`]: the pods of the next request to serve join the
//!   pending pods, the request marked `Accepted` (or `Failed` when its pods
//!   cannot be made). A request that got `Provisioned=False` is retried after
//!   a backoff: `--provisioning-request-initial-backoff-time`, doubled at each
//!   retry up to `--provisioning-request-max-backoff-time`, remembered for
//!   `--provisioning-request-max-backoff-cache-size` requests.
//! - [`BookCapacity`]: the pods of every booked request are placed in the
//!   loop's snapshot, where they hold their room against other requests and
//!   scale-down; a request whose pods are all scheduled gets
//!   `BookingExpired` (`CapacityBookingConsumed`, CA 1.37) instead: its
//!   pods hold the room, so booking it too would count it twice.
//!
//! The processors decide; their condition writes wait in an outbox that the
//! loop sends ([`ProvReqProcessing::flush`]) before scale-up. At the loop's
//! start, [`ProvReqProcessing::refresh`] expires bookings and old requests.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use predicates::PodInfo;

use super::pods::{PodListContext, PodListProcessor};
use crate::config::Flags;
use crate::events::{EventReason, EventRecorder, EventType, ObjectRef};
use crate::provisioningrequest::client::ProvReqClient;
use crate::provisioningrequest::conditions::{self, ConditionType, Verdict};
use crate::provisioningrequest::pods::pods_for;
use crate::provisioningrequest::types::{
    ProvisioningClass, ProvisioningRequest, WithTemplates, consumed_request,
};

/// How long CA holds room for a provisioned request.
pub const RESERVATION_TIME: Duration = Duration::from_secs(10 * 60);
/// How long a request may wait to be provisioned before it fails.
pub const EXPIRATION_TIME: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long an ended request is kept before CA deletes it.
pub const TERMINAL_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// At most this many requests expire or fail per loop.
const MAX_UPDATED: usize = 20;
/// At most this many consuming pods get an event per loop.
const MAX_EVENTS: usize = 50;

/// The ProvisioningRequest flags.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--provisioning-request-initial-backoff-time`.
    pub initial_backoff: Duration,
    /// `--provisioning-request-max-backoff-time`.
    pub max_backoff: Duration,
    /// `--provisioning-request-max-backoff-cache-size`.
    pub backoff_cache_size: usize,
    /// `--check-capacity-batch-processing`.
    pub batch: bool,
    /// `--check-capacity-provisioning-request-max-batch-size`.
    pub max_batch: usize,
    /// `--check-capacity-provisioning-request-batch-timebox`.
    pub batch_timebox: Duration,
    /// `--check-capacity-processor-instance`.
    pub processor_instance: String,
}

impl Settings {
    /// From the flags.
    pub fn from_flags(f: &Flags) -> Self {
        Self {
            initial_backoff: f.provisioning_request_initial_backoff_time,
            max_backoff: f.provisioning_request_max_backoff_time,
            backoff_cache_size: f.provisioning_request_max_backoff_cache_size,
            batch: f.check_capacity_batch_processing,
            max_batch: f.check_capacity_provisioning_request_max_batch_size,
            batch_timebox: f.check_capacity_provisioning_request_batch_timebox,
            processor_instance: f.check_capacity_processor_instance.clone(),
        }
    }
}

/// The next retry delay per request uid, the least recently set forgotten
/// first beyond the cache size (upstream's LRU).
#[derive(Debug, Default)]
struct RetryBackoff {
    delays: HashMap<String, Duration>,
    order: VecDeque<String>,
    size: usize,
}

impl RetryBackoff {
    fn get(&self, uid: &str) -> Option<Duration> {
        self.delays.get(uid).copied()
    }

    fn remove(&mut self, uid: &str) {
        if self.delays.remove(uid).is_some() {
            self.order.retain(|u| u != uid);
        }
    }

    fn set(&mut self, uid: &str, delay: Duration) {
        self.remove(uid);
        self.delays.insert(uid.to_string(), delay);
        self.order.push_back(uid.to_string());
        while self.order.len() > self.size.max(1) {
            if let Some(old) = self.order.pop_front() {
                self.delays.remove(&old);
            }
        }
    }
}

/// What the processors keep between loops.
#[derive(Debug, Default)]
struct Shared {
    backoff: RetryBackoff,
    /// Whether a request was accepted or failed since the loop last asked
    /// (a loop follows at once).
    processed: bool,
    /// Condition writes decided, not yet sent.
    outbox: Vec<ProvisioningRequest>,
    /// The requests of a class not served here, already logged.
    not_served: HashSet<String>,
}

/// What the ProvisioningRequest processors share.
pub struct ProvReqProcessing {
    /// The client.
    pub client: ProvReqClient,
    /// The flags.
    pub settings: Settings,
    clock: simclock::Clock,
    shared: Mutex<Shared>,
}

impl ProvReqProcessing {
    /// The processing for these flags.
    pub fn new(client: ProvReqClient, settings: Settings, clock: simclock::Clock) -> Arc<Self> {
        let shared = Shared {
            backoff: RetryBackoff {
                size: settings.backoff_cache_size,
                ..RetryBackoff::default()
            },
            ..Shared::default()
        };
        Arc::new(Self {
            client,
            settings,
            clock,
            shared: Mutex::new(shared),
        })
    }

    /// The pod-list processors, in upstream's order.
    pub fn pod_list_processors(
        self: &Arc<Self>,
        events: EventRecorder,
    ) -> Vec<Box<dyn PodListProcessor>> {
        vec![
            Box::new(PodsFilter { events }),
            Box::new(PodsInjector(self.clone())),
            Box::new(BookCapacity(self.clone())),
        ]
    }

    fn shared(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The class `pr` is served as here, if any.
    pub fn class_of(&self, pr: &ProvisioningRequest) -> Option<ProvisioningClass> {
        ProvisioningClass::of(pr, &self.settings.processor_instance)
    }

    /// The autoscaler's clock's now.
    pub fn clock_now(&self) -> SystemTime {
        self.clock.now()
    }

    /// Records that a request was processed.
    pub fn mark_processed(&self) {
        self.shared().processed = true;
    }

    /// Whether a request was processed since the last call (upstream's
    /// loop trigger starts the next loop at once then). A flag, not a
    /// time: in virtual time a loop can start at the very instant the last
    /// one processed a request, and a time would count that twice.
    pub fn take_processed(&self) -> bool {
        std::mem::take(&mut self.shared().processed)
    }

    /// Says once per request that its class is not served here: it is left
    /// to its own controller (a typo in the class name shows here).
    fn log_not_served(&self, pr: &ProvisioningRequest) {
        let uid = pr.metadata.uid.clone().unwrap_or_else(|| pr.key());
        if self.shared().not_served.insert(uid) {
            tracing::info!(
                "ProvisioningRequest {} has class {:?}, which this autoscaler does not serve{}: left to its own controller",
                pr.key(),
                pr.spec.provisioning_class_name,
                if self.settings.processor_instance.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (--check-capacity-processor-instance={})",
                        self.settings.processor_instance
                    )
                }
            );
        }
    }

    /// Queues `verdict` on `pr` for the next [`Self::flush`].
    fn decide(&self, mut pr: ProvisioningRequest, verdict: &Verdict) {
        verdict.apply(&mut pr, self.clock.now());
        let mut shared = self.shared();
        let key = pr.key();
        shared.outbox.retain(|p| p.key() != key);
        shared.outbox.push(pr);
    }

    /// Sends the queued condition writes.
    pub async fn flush(&self) {
        let outbox = std::mem::take(&mut self.shared().outbox);
        for pr in outbox {
            if let Err(e) = self.client.update_status(&pr).await {
                tracing::error!(
                    "failed to update the conditions of ProvReq {}, err: {e}",
                    pr.key()
                );
            }
        }
    }

    /// Whether `pr` is due for provisioning (upstream's
    /// `IsAvailableForProvisioning`): never answered, or `Provisioned=False`
    /// for longer than its backoff, which then doubles.
    fn available(&self, pr: &ProvisioningRequest, now: SystemTime) -> bool {
        let uid = pr.metadata.uid.clone().unwrap_or_else(|| pr.key());
        let mut shared = self.shared();
        if conditions::is_true(pr, ConditionType::Failed)
            || conditions::is_true(pr, ConditionType::Provisioned)
        {
            shared.backoff.remove(&uid);
            return false;
        }
        let Some(provisioned) = conditions::find(pr, ConditionType::Provisioned) else {
            return true;
        };
        if provisioned.status != "False" {
            return false;
        }
        let delay = shared
            .backoff
            .get(&uid)
            .unwrap_or(self.settings.initial_backoff);
        if conditions::transition_time(provisioned) + delay < now {
            let next = (delay * 2).min(self.settings.max_backoff);
            shared.backoff.set(&uid, next);
            return true;
        }
        false
    }

    /// The requests of `class` due for provisioning, up to `max`, with
    /// their pods; a request whose pods cannot be made fails instead.
    pub fn due_requests(
        &self,
        class: Option<ProvisioningClass>,
        max: usize,
    ) -> Vec<(WithTemplates, Vec<PodInfo>)> {
        let now = self.clock.now();
        let mut out = Vec::new();
        for req in self.client.list() {
            if out.len() >= max {
                break;
            }
            let Some(c) = self.class_of(&req.pr) else {
                self.log_not_served(&req.pr);
                continue;
            };
            if class.is_some_and(|want| want != c) || !self.available(&req.pr, now) {
                continue;
            }
            match pods_for(&req) {
                Ok(pods) => out.push((req, pods)),
                Err(e) => {
                    tracing::error!(
                        "Failed to get pods for ProvisioningRequest {}",
                        req.pr.name()
                    );
                    self.decide(req.pr, &Verdict::FailedToCreatePods(e.to_string()));
                    self.mark_processed();
                }
            }
        }
        out
    }

    /// The requests of `class` the pods belong to (by their owner), each once,
    /// in the pods' order (upstream's `ProvisioningRequestsForPods`).
    pub fn requests_for_pods(
        &self,
        pods: &[PodInfo],
        class: ProvisioningClass,
    ) -> Vec<ProvisioningRequest> {
        let mut out: Vec<ProvisioningRequest> = Vec::new();
        for info in pods {
            let Some(owner) = info
                .pod
                .metadata
                .owner_references
                .as_ref()
                .and_then(|o| o.first())
            else {
                tracing::error!("pod {} has no OwnerReference", info.key);
                continue;
            };
            if out
                .iter()
                .any(|pr| pr.name() == owner.name && pr.namespace() == info.namespace())
            {
                continue;
            }
            match self.client.get(info.namespace(), &owner.name) {
                Some(req) if self.class_of(&req.pr) == Some(class) => out.push(req.pr),
                Some(_) => {}
                None => tracing::error!(
                    "failed to retrieve ProvisioningRequest from unschedulable pod, err: provisioningrequest.autoscaling.x-k8s.io \"{}\" not found",
                    owner.name
                ),
            }
        }
        out
    }

    /// Expires bookings older than 10 minutes and requests not provisioned
    /// in 7 days, at most 20 a loop, then deletes requests ended 7 days ago
    /// (upstream's `provReqProcessor.Refresh`, run at each loop's start).
    pub async fn refresh(&self) {
        let now = self.clock.now();
        let all = self.client.list();
        let mut expired = Vec::new();
        let mut failed = Vec::new();
        for req in &all {
            let pr = &req.pr;
            if expired.len() >= MAX_UPDATED {
                break;
            }
            if self.class_of(pr).is_none()
                || conditions::is_true(pr, ConditionType::BookingExpired)
                || conditions::is_true(pr, ConditionType::Failed)
            {
                continue;
            }
            let provisioned = conditions::find(pr, ConditionType::Provisioned);
            if let Some(c) = provisioned.filter(|c| c.status == "True") {
                if conditions::transition_time(c) + RESERVATION_TIME < now {
                    expired.push(pr);
                }
                continue;
            }
            let created = pr
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| SystemTime::from(t.0));
            if failed.len() < MAX_UPDATED - expired.len()
                && created.is_some_and(|c| c + EXPIRATION_TIME < now)
            {
                failed.push(pr);
            }
        }
        for pr in expired {
            self.decide(pr.clone(), &Verdict::BookingExpired);
        }
        for pr in failed {
            self.decide(pr.clone(), &Verdict::Expired);
        }
        self.flush().await;
        self.delete_old(&all, now).await;
    }

    /// Deletes requests `Provisioned` or `Failed` for 7 days.
    async fn delete_old(&self, all: &[WithTemplates], now: SystemTime) {
        for req in all {
            let ended = [ConditionType::Provisioned, ConditionType::Failed]
                .into_iter()
                .filter_map(|t| conditions::find(&req.pr, t))
                .any(|c| conditions::transition_time(c) + TERMINAL_TTL < now);
            if !ended {
                continue;
            }
            tracing::debug!("Delete old ProvisioningRequest {}", req.pr.key());
            if let Err(e) = self.client.delete(&req.pr).await {
                tracing::warn!(
                    "Couldn't delete old {} Provisioning Request, err: {e}",
                    req.pr.key()
                );
            }
        }
    }
}

/// Drops the pending pods that consume a ProvisioningRequest (upstream's
/// `ProvisioningRequestPodsFilter`).
pub struct PodsFilter {
    events: EventRecorder,
}

impl PodListProcessor for PodsFilter {
    fn name(&self) -> &'static str {
        "ProvisioningRequestPodsFilter"
    }

    fn process(&self, _ctx: &mut PodListContext<'_>, mut pods: Vec<PodInfo>) -> Vec<PodInfo> {
        let mut events = 0;
        pods.retain(|info| {
            let Some(pr) = consumed_request(&info.pod) else {
                return true;
            };
            let ns = info.namespace();
            tracing::info!(
                "Ignoring unschedulable pod {} as it consumes ProvisioningRequest: {ns}/{pr}",
                info.key
            );
            if events < MAX_EVENTS {
                events += 1;
                self.events.record(
                    &ObjectRef::pod(&info.pod),
                    EventType::Normal,
                    EventReason::ConsumesProvisioningRequest,
                    format!(
                        "Unschedulable pod didn't trigger scale-up, because it's consuming ProvisioningRequest {ns}/{pr}"
                    ),
                );
            }
            false
        });
        pods
    }
}

/// Adds the pods of the next ProvisioningRequest to serve (upstream's
/// `ProvisioningRequestPodsInjector`).
pub struct PodsInjector(Arc<ProvReqProcessing>);

impl PodListProcessor for PodsInjector {
    fn name(&self) -> &'static str {
        "ProvisioningRequestPodsInjector"
    }

    fn process(&self, _ctx: &mut PodListContext<'_>, mut pods: Vec<PodInfo>) -> Vec<PodInfo> {
        let p = &self.0;
        if let Some((req, mut injected)) = p.due_requests(None, 1).pop() {
            // With batch processing, check-capacity requests are accepted
            // by their class, a batch at a time.
            let batched =
                p.settings.batch && p.class_of(&req.pr) == Some(ProvisioningClass::CheckCapacity);
            if !batched {
                p.decide(req.pr, &Verdict::Accepted);
            }
            p.mark_processed();
            pods.append(&mut injected);
        }
        pods
    }
}

/// Places the pods of every booked request in the snapshot (upstream's
/// `provReqProcessor.Process`, `bookCapacity`).
pub struct BookCapacity(Arc<ProvReqProcessing>);

impl PodListProcessor for BookCapacity {
    fn name(&self) -> &'static str {
        "ProvisioningRequestProcessor"
    }

    fn process(&self, ctx: &mut PodListContext<'_>, pods: Vec<PodInfo>) -> Vec<PodInfo> {
        let p = &self.0;
        // Counted once, when a request is booked.
        let mut scheduled = None;
        let mut booked = Vec::new();
        for req in p.client.list() {
            if !conditions::should_capacity_be_booked(&req.pr, &p.settings.processor_instance) {
                continue;
            }
            let placed = scheduled
                .get_or_insert_with(|| scheduled_per_request(ctx.snapshot))
                .get(&req.pr.key())
                .copied()
                .unwrap_or(0);
            if placed >= req.pr.pod_count() {
                p.decide(req.pr, &Verdict::BookingConsumed);
                continue;
            }
            match pods_for(&req) {
                Ok(mut pods) => booked.append(&mut pods),
                Err(e) => p.decide(req.pr, &Verdict::FailedToBookCapacity(e.to_string())),
            }
        }
        place_all_that_fit(ctx.snapshot, booked);
        ctx.snapshot.commit();
        pods
    }
}

/// How many pods of the snapshot's nodes consume each request, by the
/// request's `namespace/name`.
fn scheduled_per_request(snapshot: &crate::simulator::Snapshot) -> HashMap<String, i64> {
    let mut scheduled = HashMap::new();
    for info in snapshot.nodes() {
        for pod in info.pods.iter() {
            if let Some(name) = consumed_request(&pod.pod) {
                let namespace = pod.pod.metadata.namespace.as_deref().unwrap_or("default");
                *scheduled.entry(format!("{namespace}/{name}")).or_insert(0) += 1;
            }
        }
    }
    scheduled
}

/// Places each pod where it fits (upstream's `TrySchedulePods` without
/// breaking on a failure); the pods that fit nowhere.
pub fn place_all_that_fit(
    snapshot: &mut crate::simulator::Snapshot,
    pods: Vec<PodInfo>,
) -> Vec<PodInfo> {
    let mut left = Vec::new();
    let mut hint = 0;
    for pod in pods {
        match snapshot.find_fit(&pod, hint, |_| true) {
            Some(i) => {
                snapshot.add_pod(i, pod);
                hint = i;
            }
            None => left.push(pod),
        }
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_backoff_forgets_the_least_recently_set_beyond_its_size() {
        let mut b = RetryBackoff {
            size: 2,
            ..RetryBackoff::default()
        };
        let m = Duration::from_secs(60);
        b.set("a", m);
        b.set("b", 2 * m);
        b.set("a", 4 * m);
        b.set("c", m);
        assert_eq!(b.get("a"), Some(4 * m), "set again, so kept");
        assert_eq!(b.get("b"), None, "the least recently set, forgotten");
        assert_eq!(b.get("c"), Some(m));
        b.remove("a");
        assert_eq!(b.get("a"), None);
        assert_eq!(b.order.len(), 1);
    }
}
