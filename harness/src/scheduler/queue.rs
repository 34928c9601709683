//! The scheduling queue, as kube-scheduler's `PriorityQueue`: when each
//! pending pod is tried next, and in which order.
//!
//! - A new pod is tried at the next pass.
//! - A failed attempt puts the pod off by its backoff (1 s doubling to
//!   10 s) and at the back of the queue: its place is renewed, so it waits
//!   behind the pods that arrived meanwhile.
//! - An unschedulable pod is also parked: after its backoff it still
//!   waits, until the cluster changes (a node added or changed, a pod
//!   deleted) or, at the latest, `podMaxInUnschedulablePodsDuration`
//!   (5 min) after its backoff ended.
//! - Pods due at a pass are tried by priority, then by their place.
//!
//! A pass costs what it takes out, not the number of pods pending: the
//! pods are indexed by when they are due (`waiting`), and parked pods whose
//! backoff is over wait apart (`idle`), so at 300,000 pending pods a pass
//! that tries 100 of them touches those 100. A cluster change does not
//! visit the parked pods still in their backoff: it starts a new
//! generation, and a pod parked in an older one is no longer parked (the
//! idle ones it frees are all tried at that pass). Index entries of pods
//! that were removed or rescheduled meanwhile are dropped when they come
//! up.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use tokio::time::Instant;

const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// kube-scheduler's `podMaxInUnschedulablePodsDuration`.
const MAX_UNSCHEDULABLE: Duration = Duration::from_secs(300);

/// A pod's place in the queue, as kube-scheduler's `PrioritySort`: higher
/// priority first, then the earlier entry into the queue. kube-scheduler
/// stamps a pod when it is added and again when a failed attempt puts it
/// back, so a retried pod waits behind the pods that arrived meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Place {
    /// The pod's priority, negated (highest first).
    neg_priority: i32,
    /// When it (last) entered the queue, as a count of entries.
    entered: u64,
}

/// One pod's state in the queue.
#[derive(Debug, Clone)]
pub struct Slot {
    place: Place,
    /// Failed attempts so far.
    attempts: u32,
    /// Not tried before this instant (new: when added; else its backoff).
    due: Instant,
    /// The generation in which it was found unschedulable, if it was.
    parked_in: Option<u64>,
}

/// The pending pods' places and times, by pod key.
#[derive(Debug)]
pub struct Queue {
    slots: HashMap<String, Slot>,
    /// Every pod not yet due, by when it is: (due, key).
    waiting: BTreeSet<(Instant, String)>,
    /// Parked pods whose backoff is over, by when the longest a pod stays
    /// unschedulable frees them: (due + that, key).
    idle: BTreeSet<(Instant, String)>,
    /// Cluster changes taken so far.
    generation: u64,
    /// The cluster changed since the last pass.
    changed: bool,
    /// Entries so far (the places handed out).
    entries: u64,
    /// The queue's waits are divided by this (at least 1).
    time_scale: f64,
}

impl Queue {
    /// An empty queue whose waits (backoff, the longest a pod stays
    /// parked) are divided by `time_scale` (at least 1).
    pub fn new(time_scale: f64) -> Self {
        Self {
            slots: HashMap::new(),
            waiting: BTreeSet::new(),
            idle: BTreeSet::new(),
            generation: 0,
            changed: false,
            entries: 0,
            time_scale: time_scale.max(1.0),
        }
    }

    /// The pods in the queue.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether no pod is in the queue.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Whether `key` is in the queue.
    pub fn contains(&self, key: &str) -> bool {
        self.slots.contains_key(key)
    }

    /// Adds a new pod of `priority`, due at once; a pod already in the
    /// queue keeps its state.
    pub fn add(&mut self, key: &str, priority: i32) {
        if self.slots.contains_key(key) {
            return;
        }
        let place = self.enter(priority);
        let due = Instant::now();
        self.slots.insert(
            key.to_string(),
            Slot {
                place,
                attempts: 0,
                due,
                parked_in: None,
            },
        );
        self.waiting.insert((due, key.to_string()));
    }

    /// Takes a pod out (scheduled, deleted, bound elsewhere); its slot, to
    /// put it back with [`Queue::restore`].
    pub fn remove(&mut self, key: &str) -> Option<Slot> {
        self.slots.remove(key)
    }

    /// Puts back a pod taken out with its slot (a binding that failed),
    /// due when it was.
    pub fn restore(&mut self, key: &str, slot: Slot) {
        self.waiting.insert((slot.due, key.to_string()));
        self.slots.insert(key.to_string(), slot);
    }

    /// The pod's priority changed: its place follows.
    pub fn set_priority(&mut self, key: &str, priority: i32) {
        if let Some(s) = self.slots.get_mut(key) {
            s.place.neg_priority = priority.saturating_neg();
        }
    }

    /// A failed attempt: the pod is due after its backoff, at the back of
    /// the queue, and if `unschedulable`, parked until the cluster changes.
    pub fn failed(&mut self, key: &str, unschedulable: bool) {
        let Some(attempts) = self.slots.get(key).map(|s| s.attempts + 1) else {
            return;
        };
        let due = Instant::now() + self.backoff_after(attempts);
        let (entered, generation) = (self.next_entry(), self.generation);
        if let Some(s) = self.slots.get_mut(key) {
            s.attempts = attempts;
            s.due = due;
            s.place.entered = entered;
            s.parked_in = unschedulable.then_some(generation);
        }
        self.waiting.insert((due, key.to_string()));
    }

    /// The cluster changed: parked pods may fit now. Taken at the next
    /// [`Queue::pop_due`].
    pub fn cluster_changed(&mut self) {
        self.changed = true;
    }

    /// The pods due at `now`, in the order they are tried.
    pub fn pop_due(&mut self, now: Instant) -> Vec<String> {
        let mut due: Vec<(Place, String)> = Vec::new();
        let max_unschedulable = self.scaled(MAX_UNSCHEDULABLE);
        let idle_entry = |s: &Slot, at: Instant| s.due + max_unschedulable == at;
        if std::mem::take(&mut self.changed) {
            self.generation += 1;
            for (at, key) in std::mem::take(&mut self.idle) {
                if let Some(s) = self.slots.get(&key).filter(|s| idle_entry(s, at)) {
                    due.push((s.place, key));
                }
            }
        }
        while let Some((at, key)) = pop_until(&mut self.waiting, now) {
            let Some(s) = self.slots.get(&key).filter(|s| s.due == at) else {
                continue;
            };
            if s.parked_in == Some(self.generation) {
                self.idle.insert((at + max_unschedulable, key));
            } else {
                due.push((s.place, key));
            }
        }
        while let Some((at, key)) = pop_until(&mut self.idle, now) {
            if let Some(s) = self.slots.get(&key).filter(|s| idle_entry(s, at)) {
                due.push((s.place, key));
            }
        }
        due.sort();
        due.dedup_by(|a, b| a.1 == b.1);
        due.into_iter().map(|(_, key)| key).collect()
    }

    /// When the queue next needs a pass, if it does: a pod due, a parked
    /// pod's backoff over (it is set aside then), or a parked pod freed by
    /// a change or the 5-minute limit.
    pub fn next_due(&self) -> Option<Instant> {
        let waiting = self.waiting.first().map(|(at, _)| *at);
        let idle = if self.changed && !self.idle.is_empty() {
            Some(Instant::now())
        } else {
            self.idle.first().map(|(at, _)| *at)
        };
        waiting.into_iter().chain(idle).min()
    }

    fn enter(&mut self, priority: i32) -> Place {
        Place {
            neg_priority: priority.saturating_neg(),
            entered: self.next_entry(),
        }
    }

    fn next_entry(&mut self) -> u64 {
        self.entries += 1;
        self.entries
    }

    /// A wait of `d` at this queue's time scale.
    fn scaled(&self, d: Duration) -> Duration {
        d.div_f64(self.time_scale)
    }

    /// The backoff after `attempts` failed attempts.
    fn backoff_after(&self, attempts: u32) -> Duration {
        let exp = attempts.saturating_sub(1).min(4);
        self.scaled((INITIAL_BACKOFF * 2u32.pow(exp)).min(MAX_BACKOFF))
    }
}

/// The first entry of `set` if it is due at `now`, taken out.
fn pop_until(set: &mut BTreeSet<(Instant, String)>, now: Instant) -> Option<(Instant, String)> {
    if set.first().is_some_and(|(at, _)| *at <= now) {
        set.pop_first()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn new_pods_are_due_at_once_in_order_of_priority_then_arrival() {
        let mut q = Queue::new(1.0);
        q.add("a", 0);
        q.add("b", 10);
        q.add("c", 0);
        assert_eq!(q.pop_due(Instant::now()), ["b", "a", "c"]);
        assert!(q.pop_due(Instant::now()).is_empty(), "taken once");
        assert_eq!(q.len(), 3, "still pending until removed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_pod_backs_off_doubling_to_ten_seconds_behind_newer_pods() {
        let mut q = Queue::new(1.0);
        q.add("old", 0);
        assert_eq!(q.pop_due(Instant::now()), ["old"]);
        q.failed("old", false);
        q.add("new", 0);
        assert_eq!(q.pop_due(Instant::now()), ["new"]);
        let mut waits = Vec::new();
        for _ in 0..6 {
            let due = q.next_due().expect("old is due later");
            waits.push((due - Instant::now()).as_secs());
            tokio::time::advance(due - Instant::now()).await;
            assert_eq!(q.pop_due(Instant::now()), ["old"]);
            q.failed("old", false);
        }
        assert_eq!(waits, [1, 2, 4, 8, 10, 10]);
        // Its place is renewed when it fails: a pod that came during its
        // attempt, though later than the pod first did, goes first.
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(q.pop_due(Instant::now()), ["old"]);
        q.add("newer", 0);
        q.failed("old", false);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(q.pop_due(Instant::now()), ["newer", "old"]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unschedulable_pod_waits_for_a_cluster_change_or_five_minutes() {
        let mut q = Queue::new(1.0);
        q.add("p", 0);
        q.pop_due(Instant::now());
        q.failed("p", true);
        tokio::time::advance(Duration::from_secs(30)).await;
        assert!(q.pop_due(Instant::now()).is_empty(), "parked");
        q.cluster_changed();
        assert_eq!(q.next_due(), Some(Instant::now()));
        assert_eq!(q.pop_due(Instant::now()), ["p"], "a change frees it");
        // Unschedulable again: parked in the new generation.
        q.failed("p", true);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(q.pop_due(Instant::now()).is_empty());
        assert_eq!(
            q.next_due(),
            Some(Instant::now() + MAX_UNSCHEDULABLE),
            "freed 5 min after its backoff"
        );
        tokio::time::advance(MAX_UNSCHEDULABLE).await;
        assert_eq!(q.pop_due(Instant::now()), ["p"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_during_the_backoff_frees_the_pod_when_its_backoff_ends() {
        let mut q = Queue::new(1.0);
        q.add("p", 0);
        q.pop_due(Instant::now());
        q.failed("p", true);
        q.cluster_changed();
        assert!(q.pop_due(Instant::now()).is_empty(), "still in its backoff");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(q.pop_due(Instant::now()), ["p"]);
    }

    #[tokio::test(start_paused = true)]
    async fn removed_pods_are_not_due_and_a_restored_one_keeps_its_state() {
        let mut q = Queue::new(1.0);
        q.add("gone", 0);
        q.add("bound", 0);
        q.remove("gone");
        assert_eq!(q.pop_due(Instant::now()), ["bound"]);
        let slot = q.remove("bound").expect("in the queue");
        q.restore("bound", slot);
        q.failed("bound", false);
        assert!(q.pop_due(Instant::now()).is_empty(), "backing off");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(q.pop_due(Instant::now()), ["bound"]);
        assert!(!q.contains("gone"));
    }

    #[tokio::test(start_paused = true)]
    async fn waits_are_divided_by_the_time_scale() {
        let mut q = Queue::new(60.0);
        q.add("p", 0);
        q.pop_due(Instant::now());
        let failed = Instant::now();
        q.failed("p", true);
        let backoff = q.backoff_after(1);
        assert_eq!(backoff.as_millis(), 16, "1 s / 60");
        assert_eq!(q.next_due(), Some(failed + backoff));
        tokio::time::advance(Duration::from_millis(17)).await;
        assert!(q.pop_due(Instant::now()).is_empty(), "parked");
        let freed = failed + backoff + q.scaled(MAX_UNSCHEDULABLE);
        assert_eq!(q.scaled(MAX_UNSCHEDULABLE), Duration::from_secs(5));
        assert_eq!(q.next_due(), Some(freed));
    }
}
