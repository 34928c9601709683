//! Graceful degradation (`--enable-graceful-degradation`, CA 1.37): when
//! there are more pending pods than the check of which fit on existing
//! nodes gets through in `--pending-pods-batching-timeout`, the pods it did
//! not reach wait for a later loop, and the autoscaler runs degraded:
//! scale-down only every fourth loop, and scale-up skipped in that loop.
//! The status ConfigMap gets `GracefulDegradationStarted` when the first
//! such loop comes and `GracefulDegradationStopped` at the first loop that
//! reaches every pod again. `skipped_pods_count{requestor}` says how many
//! pods a loop did not reach, with or without the flag.

use crate::events::{EventReason, EventType};
use crate::metrics::Metrics;
use crate::processors::pods::REQUESTOR;

/// While degraded, scale-down runs every this many loops (and scale-up is
/// skipped in those loops).
const CYCLE: u32 = 4;

/// The mode began or ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeChange {
    /// The first loop that did not reach every pod.
    Started,
    /// The first loop after that reached them all.
    Stopped,
}

impl ModeChange {
    /// Upstream's event on the status ConfigMap.
    pub fn event(self) -> (EventType, EventReason, &'static str) {
        match self {
            Self::Started => (
                EventType::Warning,
                EventReason::GracefulDegradationStarted,
                "Autoscaler is unable to handle the large amount of unschedulable pods. Consider \
                 reducing the rate of adding new pods, so autoscaler could auto recover.",
            ),
            Self::Stopped => (
                EventType::Normal,
                EventReason::GracefulDegradationStopped,
                "Autoscaler exited from GracefulDegradationMode and works normally.",
            ),
        }
    }
}

/// The mode's state across loops (upstream's
/// `GracefulDegradationLoopCount`).
#[derive(Debug, Default)]
pub struct GracefulDegradation {
    enabled: bool,
    /// Consecutive loops that did not reach every pending pod; 0 when not
    /// degraded.
    loops: u32,
}

impl GracefulDegradation {
    /// The mode as `--enable-graceful-degradation` sets it.
    pub fn new(enabled: bool) -> Self {
        Self { enabled, loops: 0 }
    }

    /// Records how many pending pods this loop's check did not reach; the
    /// mode's change, if any, for the status ConfigMap's events.
    pub fn record(&mut self, skipped: usize, metrics: &Metrics) -> Option<ModeChange> {
        Metrics::set(
            &metrics.skipped_pods_count,
            &[("requestor", REQUESTOR)],
            skipped as f64,
        );
        if !self.enabled {
            return None;
        }
        let was = self.loops;
        if skipped > 0 {
            self.loops += 1;
            return (was == 0).then_some(ModeChange::Started);
        }
        self.loops = 0;
        (was > 0).then_some(ModeChange::Stopped)
    }

    /// Whether this loop skips scale-up: the degraded loops that scale down.
    pub fn skips_scale_up(&self) -> bool {
        self.enabled && self.loops > 0 && self.loops.is_multiple_of(CYCLE)
    }

    /// Whether this loop skips scale-down: the other degraded loops.
    pub fn skips_scale_down(&self) -> bool {
        self.enabled && self.loops > 0 && !self.loops.is_multiple_of(CYCLE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degraded_loops_scale_down_every_fourth_loop_and_skip_scale_up_then() {
        let metrics = Metrics::new(false);
        let mut mode = GracefulDegradation::new(true);
        let mut seen = Vec::new();
        for skipped in [0, 5, 5, 5, 5, 5, 0, 0] {
            let change = mode.record(skipped, &metrics);
            seen.push((change, mode.skips_scale_up(), mode.skips_scale_down()));
        }
        let started = Some(ModeChange::Started);
        let stopped = Some(ModeChange::Stopped);
        assert_eq!(
            seen,
            [
                (None, false, false),
                (started, false, true),
                (None, false, true),
                (None, false, true),
                (None, true, false),
                (None, false, true),
                (stopped, false, false),
                (None, false, false),
            ]
        );
    }

    #[test]
    fn without_the_flag_nothing_is_skipped_but_the_count_is_kept() {
        let metrics = Metrics::new(false);
        let mut mode = GracefulDegradation::new(false);
        for _ in 0..4 {
            assert_eq!(mode.record(7, &metrics), None);
            assert!(!mode.skips_scale_up() && !mode.skips_scale_down());
        }
        let text = metrics.encode();
        assert!(
            text.contains(
                r#"cluster_autoscaler_skipped_pods_count{requestor="filter-out-pod-list-processor"} 7"#
            ),
            "{text}"
        );
    }
}
