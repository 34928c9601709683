//! Per-group exponential backoff after failed scale-ups (upstream's
//! `utils/backoff`): the window starts at `--initial-node-group-backoff-duration`,
//! doubles up to `--max-node-group-backoff-duration`, and is forgotten after
//! `--node-group-backoff-reset-timeout`.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// A backoff record.
#[derive(Debug, Clone)]
pub struct BackoffRecord {
    /// Current window length.
    pub duration: Duration,
    /// Backed off until.
    pub until: SystemTime,
    /// Last failure.
    pub last_failure: SystemTime,
    /// `errorCode`.
    pub code: String,
    /// `errorMessage`.
    pub message: String,
}

/// Exponential backoff per node group (`utils/backoff`).
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    reset: Duration,
    records: BTreeMap<String, BackoffRecord>,
}

impl Backoff {
    /// `--initial-node-group-backoff-duration`, `--max-node-group-backoff-duration`,
    /// `--node-group-backoff-reset-timeout`.
    pub fn new(initial: Duration, max: Duration, reset: Duration) -> Self {
        Self {
            initial,
            max,
            reset,
            records: BTreeMap::new(),
        }
    }

    /// Records a failure: the first backs off for the initial duration; a
    /// failure while backed off restarts the same window; one after the
    /// window doubles it (up to max); records older than the reset timeout
    /// start over.
    pub fn backoff(
        &mut self,
        group: &str,
        code: &str,
        message: &str,
        now: SystemTime,
    ) -> SystemTime {
        let duration = match self.records.get(group) {
            Some(r) if r.last_failure + self.reset > now => {
                if now < r.until {
                    r.duration
                } else {
                    (r.duration * 2).min(self.max)
                }
            }
            _ => self.initial,
        };
        let until = now + duration;
        self.records.insert(
            group.to_string(),
            BackoffRecord {
                duration,
                until,
                last_failure: now,
                code: code.to_string(),
                message: truncate(message, 500),
            },
        );
        until
    }

    /// The record if the group is backed off now.
    pub fn backed_off(&self, group: &str, now: SystemTime) -> Option<&BackoffRecord> {
        self.records.get(group).filter(|r| now < r.until)
    }

    /// Forgets records whose last failure is older than the reset timeout.
    pub fn remove_stale(&mut self, now: SystemTime) {
        let reset = self.reset;
        self.records.retain(|_, r| r.last_failure + reset > now);
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let keep: String = s
        .chars()
        .take(max.saturating_sub("<truncated>".len()))
        .collect();
    format!("{keep}<truncated>")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
    }

    const MIN: u64 = 60;

    #[test]
    fn backoff_starts_at_five_minutes_doubles_to_thirty_and_resets_after_three_hours() {
        let mut b = Backoff::new(
            Duration::from_secs(5 * MIN),
            Duration::from_secs(30 * MIN),
            Duration::from_secs(180 * MIN),
        );
        assert_eq!(b.backoff("g", "timeout", "m", t(0)), t(5 * MIN));
        assert!(b.backed_off("g", t(4 * MIN)).is_some());
        assert!(
            b.backed_off("g", t(5 * MIN)).is_none(),
            "over at the end of the window"
        );
        // A failure inside the window keeps the same duration.
        assert_eq!(b.backoff("g", "timeout", "m", t(MIN)), t(6 * MIN));
        // After the window: doubled, 10, 20, then capped at 30.
        assert_eq!(b.backoff("g", "x", "m", t(7 * MIN)), t(17 * MIN));
        assert_eq!(b.backoff("g", "x", "m", t(18 * MIN)), t(38 * MIN));
        assert_eq!(
            b.backoff("g", "x", "m", t(40 * MIN)),
            t(70 * MIN),
            "capped at 30m"
        );
        assert_eq!(b.backoff("g", "x", "m", t(80 * MIN)), t(110 * MIN));
        // Three hours after the last failure it starts over.
        assert_eq!(
            b.backoff("g", "x", "m", t(80 * MIN + 181 * MIN)),
            t(80 * MIN + 186 * MIN)
        );
        b.remove_stale(t(1000 * MIN));
        assert!(b.records.is_empty());
    }

    #[test]
    fn backoff_messages_are_truncated_at_500() {
        let mut b = Backoff::new(
            Duration::from_secs(1),
            Duration::from_secs(2),
            Duration::from_secs(3),
        );
        b.backoff("g", "c", &"x".repeat(600), t(0));
        let m = &b.backed_off("g", t(0)).unwrap().message;
        assert_eq!(m.chars().count(), 500);
        assert!(m.ends_with("<truncated>"));
    }
}
