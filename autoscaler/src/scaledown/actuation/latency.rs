//! The delay after tainting measured rather than fixed
//! (`--dynamic-node-delete-delay-after-taint-enabled`, upstream's
//! `actuation/update_latency_tracker.go`). `--node-delete-delay-after-taint`
//! gives the pods' controllers and the scheduler time to see the
//! `ToBeDeletedByClusterAutoscaler` taint before the drain; with this flag
//! the actuator instead measures, for each batch it taints, how long the
//! taint takes to show in its own watch cache (from just before the
//! update, polled every 50 ms, for 30 s at most), and waits twice the
//! largest such time measured in the last hour (one round trip is already
//! spent measuring; upstream waits three in all). A batch whose taints do
//! not all show within 30 s keeps the flag's value, with upstream's error
//! line.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::cache::ClusterCache;
use crate::taints;

/// How long a measurement counts.
const PAST_LATENCY_EXPIRE: Duration = Duration::from_secs(3600);
/// How often the cache is polled for the taints.
const POLL: Duration = Duration::from_millis(50);
/// How long to wait for every taint to show.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The latencies measured in the last hour (upstream's
/// `UpdateLatencyTracker` and its `pastLatencies`).
#[derive(Debug, Default)]
pub struct TaintLatency {
    past: Mutex<Vec<(SystemTime, Duration)>>,
}

impl TaintLatency {
    /// Waits for the cache to show every node of `started` (name, when its
    /// taint was sent) tainted, records the batch's largest latency, and
    /// returns the delay to wait: twice the largest latency of the last
    /// hour. `None` when the taints did not all show within 30 s.
    pub async fn measure(
        &self,
        cache: &ClusterCache,
        clock: &simclock::Clock,
        started: Vec<(String, SystemTime)>,
    ) -> Option<Duration> {
        let deadline = clock.now() + TIMEOUT;
        let mut pending = started;
        let mut largest = Duration::ZERO;
        while !pending.is_empty() {
            if clock.now() >= deadline {
                tracing::error!(
                    "Timeout before tainting all nodes, latency measurement will be stale"
                );
                return None;
            }
            tokio::time::sleep(POLL).await;
            let now = clock.now();
            let state = cache.read();
            pending.retain(|(name, sent)| {
                let shown = state
                    .nodes
                    .get(name)
                    .is_some_and(|n| taints::has_to_be_deleted(n));
                if shown {
                    largest = largest.max(now.duration_since(*sent).unwrap_or_default());
                }
                !shown
            });
        }
        Some(self.record(largest, clock.now()))
    }

    /// Records a batch's latency at `now` and returns twice the largest of
    /// the last hour.
    fn record(&self, latency: Duration, now: SystemTime) -> Duration {
        let mut past = self.past.lock().unwrap_or_else(|e| e.into_inner());
        past.push((now, latency));
        past.retain(|(at, _)| *at + PAST_LATENCY_EXPIRE > now);
        2 * past.iter().map(|(_, l)| *l).max().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_is_twice_the_largest_latency_of_the_last_hour() {
        let t = TaintLatency::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let ms = Duration::from_millis;
        assert_eq!(t.record(ms(100), t0), ms(200));
        assert_eq!(t.record(ms(50), t0 + ms(1000)), ms(200));
        // An hour later the 100 ms measurement has expired.
        let later = t0 + Duration::from_secs(3600);
        assert_eq!(t.record(ms(60), later), ms(120));
    }
}
