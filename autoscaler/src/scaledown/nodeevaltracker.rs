//! How long a scale-down candidate has gone without evaluation
//! (`--max-node-skip-eval-time-tracker-enabled`, upstream's
//! `core/scaledown/nodeevaltracker`). The planner stops simulating
//! candidates once its `--scale-down-simulation-timeout` is spent or it
//! found enough unneeded nodes ([`super::unneeded`]); the candidates left
//! are skipped. This tracker remembers since when each skipped node was
//! last evaluated (the previous update, for a node skipped afresh) and
//! gives the longest such time, which the planner publishes as
//! `cluster_autoscaler_max_node_skip_eval_duration_seconds`: 0 when no
//! node is skipped, growing by a loop interval for each loop the same node
//! stays skipped.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// The tracker (upstream's `MaxNodeSkipEvalTime`).
#[derive(Debug, Clone)]
pub struct MaxNodeSkipEvalTime {
    /// The time of the previous update.
    last_eval: SystemTime,
    /// Skipped nodes with the time they were last evaluated.
    skipped_since: HashMap<String, SystemTime>,
}

impl MaxNodeSkipEvalTime {
    /// A tracker that counts from `now` (the planner's creation).
    pub fn new(now: SystemTime) -> Self {
        Self {
            last_eval: now,
            skipped_since: HashMap::new(),
        }
    }

    /// Records the nodes skipped by the update at `now`, and returns the
    /// longest time one of them has gone without evaluation.
    pub fn update(&mut self, skipped: &[String], now: SystemTime) -> Duration {
        let last_eval = self.last_eval;
        self.skipped_since = skipped
            .iter()
            .map(|n| {
                let since = self.skipped_since.get(n).copied().unwrap_or(last_eval);
                (n.clone(), since)
            })
            .collect();
        self.last_eval = now;
        let oldest = self
            .skipped_since
            .values()
            .copied()
            .fold(now, SystemTime::min);
        now.duration_since(oldest).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_skipped_loop_after_loop_counts_from_its_last_evaluation() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let at = |s: u64| t0 + Duration::from_secs(s);
        let names = |ns: &[&str]| ns.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let mut t = MaxNodeSkipEvalTime::new(t0);
        assert_eq!(t.update(&[], at(10)), Duration::ZERO);
        // Skipped at 20: last evaluated at the previous update, 10.
        assert_eq!(t.update(&names(&["a"]), at(20)), Duration::from_secs(10));
        assert_eq!(
            t.update(&names(&["a", "b"]), at(30)),
            Duration::from_secs(20)
        );
        // a evaluated again: b counts from 20.
        assert_eq!(t.update(&names(&["b"]), at(40)), Duration::from_secs(20));
        assert_eq!(t.update(&[], at(50)), Duration::ZERO);
    }
}
