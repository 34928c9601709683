//! `--node-removal-latency-tracking-enabled` (upstream's
//! `core/scaledown/latencytracker`): how long an unneeded node waited past
//! its removal threshold (`--scale-down-unneeded-time`, or
//! `--scale-down-unready-time` for an unready node, per group) until its
//! deletion started (`deleted="true"`) or it became needed again
//! (`deleted="false"`), in the histogram
//! `cluster_autoscaler_node_removal_latency_seconds`, labelled since CA
//! 1.37 with `delay_reason`: the last reason that kept the node while it
//! was tracked, other than waiting for its unneeded or unready time
//! (`none` when nothing did). A node is tracked from the first loop that
//! finds it unneeded; one that leaves the list before its threshold gives
//! no sample.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use super::unremovable::UnremovableReason;
use crate::metrics::Metrics;

/// An unneeded node being tracked.
#[derive(Debug)]
struct Tracked {
    since: SystemTime,
    threshold: Duration,
    /// The last reason that delayed its removal.
    delay: Option<UnremovableReason>,
}

/// The unneeded nodes being tracked.
#[derive(Debug, Default)]
pub struct LatencyTracker {
    tracked: HashMap<String, Tracked>,
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
            let entry = self.tracked.entry(name.clone()).or_insert(Tracked {
                since: now,
                threshold: *threshold,
                delay: None,
            });
            entry.threshold = *threshold;
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

    /// Why these nodes were kept this loop: a reason that delays a removal
    /// ([`UnremovableReason::is_blocker`]) becomes a tracked node's delay
    /// reason (upstream's `updateLatestDelayReasons`).
    pub fn kept<'a>(&mut self, reasons: impl IntoIterator<Item = (&'a String, UnremovableReason)>) {
        for (name, reason) in reasons {
            if let Some(t) = self.tracked.get_mut(name)
                && reason.is_blocker()
            {
                t.delay = Some(reason);
            }
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
        let Some(Tracked {
            since,
            threshold,
            delay,
        }) = self.tracked.remove(name)
        else {
            return;
        };
        let delay = delay.map_or("none", UnremovableReason::as_str);
        let unneeded_for = now.duration_since(since).unwrap_or_default();
        let Some(latency) = unneeded_for.checked_sub(threshold).filter(|l| !l.is_zero()) else {
            tracing::trace!(
                "Node {name:?} was unneeded for {} (threshold {}). Latency is <= 0, skipping metric. isRemoved: {deleted}, delayReason: {delay}",
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
                "Node {name:?} became needed again (unneeded for {}). Blocker: {delay:?}. Latency: {}",
                simclock::format_go_duration(unneeded_for),
                simclock::format_go_duration(latency)
            );
        }
        metrics
            .node_removal_latency
            .get_or_create(&vec![
                ("deleted".to_string(), deleted.to_string()),
                ("delay_reason".to_string(), delay.to_string()),
            ])
            .observe(latency.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn latency_past_the_threshold_is_observed_once_with_its_delay_reason() {
        let metrics = Metrics::new(false);
        let mut t = LatencyTracker::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let minute = Duration::from_secs(60);
        let names = ["a", "b", "c"].map(String::from);
        let unneeded: HashMap<String, Duration> =
            names.iter().map(|n| (n.clone(), minute)).collect();
        t.update(&unneeded, t0, &metrics);
        // "b" becomes needed again before its threshold: no sample. "c"
        // waits on its group's min size, then on its unneeded time.
        t.kept([
            (&names[2], UnremovableReason::NodeGroupMinSizeReached),
            (&names[0], UnremovableReason::NotUnneededLongEnough),
        ]);
        t.kept([(&names[2], UnremovableReason::NotUnneededLongEnough)]);
        let a_c: HashMap<String, Duration> = [names[0].clone(), names[2].clone()]
            .into_iter()
            .map(|n| (n, minute))
            .collect();
        t.update(&a_c, t0 + Duration::from_secs(30), &metrics);
        t.deleted(&names, t0 + Duration::from_secs(75), &metrics);
        let text = metrics.encode();
        let series = |labels: &str, what: &str| {
            format!("cluster_autoscaler_node_removal_latency_seconds_{what}{{{labels}}}")
        };
        let none = "deleted=\"true\",delay_reason=\"none\"";
        let min_size = "deleted=\"true\",delay_reason=\"NodeGroupMinSizeReached\"";
        assert!(text.contains(&(series(none, "count") + " 1")), "{text}");
        assert!(text.contains(&(series(none, "sum") + " 15.0")), "{text}");
        assert!(text.contains(&(series(min_size, "count") + " 1")), "{text}");
        assert!(!text.contains("deleted=\"false\""));
    }
}
