//! `--node-removal-latency-tracking-enabled` (upstream's
//! `core/scaledown/latencytracker`): how long an unneeded node waited past
//! its removal threshold (`--scale-down-unneeded-time`, or
//! `--scale-down-unready-time` for an unready node, per group) until its
//! deletion started (`deleted="true"`) or it became needed again
//! (`deleted="false"`), in the histogram
//! `cluster_autoscaler_node_removal_latency_seconds`. A node is tracked
//! from the first loop that finds it unneeded; one that leaves the list
//! before its threshold gives no sample.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use crate::metrics::Metrics;

/// The unneeded nodes being tracked: since when, and their threshold.
#[derive(Debug, Default)]
pub struct LatencyTracker {
    tracked: HashMap<String, (SystemTime, Duration)>,
}

impl LatencyTracker {
    /// This loop's unneeded nodes with their thresholds: new ones start
    /// being tracked, the thresholds are updated, and those no longer
    /// unneeded are recorded as needed again.
    pub fn update(
        &mut self,
        unneeded: &HashMap<String, Duration>,
        now: SystemTime,
        metrics: &Metrics,
    ) {
        for (name, threshold) in unneeded {
            let entry = self
                .tracked
                .entry(name.clone())
                .or_insert((now, *threshold));
            entry.1 = *threshold;
        }
        let gone: Vec<String> = self
            .tracked
            .keys()
            .filter(|n| !unneeded.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            self.record(&name, false, now, metrics);
        }
    }

    /// The deletion of these nodes started.
    pub fn deleted<'a>(
        &mut self,
        names: impl IntoIterator<Item = &'a String>,
        now: SystemTime,
        metrics: &Metrics,
    ) {
        for name in names {
            self.record(name, true, now, metrics);
        }
    }

    fn record(&mut self, name: &str, deleted: bool, now: SystemTime, metrics: &Metrics) {
        let Some((since, threshold)) = self.tracked.remove(name) else {
            return;
        };
        let unneeded_for = now.duration_since(since).unwrap_or_default();
        let Some(latency) = unneeded_for.checked_sub(threshold).filter(|l| !l.is_zero()) else {
            tracing::trace!(
                "Node {name:?} was unneeded for {} (threshold {}). Latency is <= 0, skipping metric. isRemoved: {deleted}",
                simclock::format_go_duration(unneeded_for),
                simclock::format_go_duration(threshold)
            );
            return;
        };
        if deleted {
            tracing::debug!(
                "Observing deletion for node {name}, unneeded for {} (removal threshold was {}).",
                simclock::format_go_duration(unneeded_for),
                simclock::format_go_duration(threshold)
            );
        } else {
            tracing::debug!(
                "Node {name:?} is unremovable, became needed again (unneeded for {}). Latency: {}",
                simclock::format_go_duration(unneeded_for),
                simclock::format_go_duration(latency)
            );
        }
        metrics
            .node_removal_latency
            .get_or_create(&vec![("deleted".to_string(), deleted.to_string())])
            .observe(latency.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn latency_past_the_threshold_is_observed_once() {
        let metrics = Metrics::new(false);
        let mut t = LatencyTracker::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let minute = Duration::from_secs(60);
        let unneeded: HashMap<String, Duration> =
            [("a".to_string(), minute), ("b".to_string(), minute)].into();
        t.update(&unneeded, t0, &metrics);
        // "b" becomes needed again before its threshold: no sample.
        let only_a: HashMap<String, Duration> = [("a".to_string(), minute)].into();
        t.update(&only_a, t0 + Duration::from_secs(30), &metrics);
        t.deleted([&"a".to_string()], t0 + Duration::from_secs(75), &metrics);
        let text = metrics.encode();
        assert!(
            text.contains(
                "cluster_autoscaler_node_removal_latency_seconds_count{deleted=\"true\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains(
            "cluster_autoscaler_node_removal_latency_seconds_sum{deleted=\"true\"} 15.0"
        ));
        assert!(!text.contains("deleted=\"false\""));
    }
}
