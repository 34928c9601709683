//! The one clock every component of the testbed and the autoscaler reads.
//!
//! Wall time is `epoch + (tokio::time::Instant::now() - start)`: a fixed wall
//! instant captured when the clock is made, advanced by tokio's notion of
//! elapsed time. Under a normal runtime this is real time; under a runtime
//! with paused time (`tokio::time::pause`, `start_paused = true`) it is
//! virtual time, so "ten minutes pass" costs nothing and every component that
//! shares a clone of the same [`Clock`] sees the same instant.
//!
//! Components sleep with `tokio::time::sleep` and read timestamps with
//! [`Clock::now`]; nothing calls `SystemTime::now` directly.

pub mod busy;

use std::time::{Duration, SystemTime};

use jiff::Timestamp;
use tokio::time::Instant;

/// A wall clock driven by tokio time. Cheap to clone; clones share the epoch.
#[derive(Clone, Debug)]
pub struct Clock {
    epoch: SystemTime,
    start: Instant,
}

impl Clock {
    /// A clock that starts at the current system time.
    pub fn new() -> Self {
        Self::starting_at(SystemTime::now())
    }

    /// A clock that starts at `epoch` (useful for reproducible scenarios).
    pub fn starting_at(epoch: SystemTime) -> Self {
        Self {
            epoch,
            start: Instant::now(),
        }
    }

    /// The current wall time.
    pub fn now(&self) -> SystemTime {
        self.epoch + self.elapsed()
    }

    /// Time elapsed on this clock since it was made.
    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(self.start)
    }

    /// The current wall time as a `jiff::Timestamp` (what k8s-openapi's `Time` wraps).
    pub fn timestamp(&self) -> Timestamp {
        Timestamp::try_from(self.now()).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    /// The current time in Kubernetes' RFC 3339 form with second precision,
    /// as `metav1.Time` is written (`2024-01-02T03:04:05Z`).
    pub fn rfc3339(&self) -> String {
        format_rfc3339(self.now())
    }

    /// The current time with microsecond precision, as `metav1.MicroTime` is written.
    pub fn rfc3339_micros(&self) -> String {
        let ts = self.timestamp();
        let micros = ts.as_microsecond();
        let ts = Timestamp::from_microsecond(micros).unwrap_or(ts);
        format!("{ts:.6}")
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// Formats a wall time as `metav1.Time` does (seconds, UTC, `Z`).
pub fn format_rfc3339(t: SystemTime) -> String {
    let ts = Timestamp::try_from(t).unwrap_or(Timestamp::UNIX_EPOCH);
    let secs = ts.as_second();
    let ts = Timestamp::from_second(secs).unwrap_or(ts);
    format!("{ts:.0}")
}

/// Parses a `metav1.Time` / RFC 3339 string.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    s.parse::<Timestamp>().ok().map(SystemTime::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn paused_time_advances_the_wall_clock() {
        let epoch = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let clock = Clock::starting_at(epoch);
        assert_eq!(clock.now(), epoch);
        tokio::time::advance(Duration::from_secs(600)).await;
        assert_eq!(clock.now(), epoch + Duration::from_secs(600));
        assert_eq!(clock.clone().elapsed(), Duration::from_secs(600));
    }

    #[tokio::test(start_paused = true)]
    async fn formats_like_metav1_time() {
        let epoch = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
        let clock = Clock::starting_at(epoch);
        assert_eq!(clock.rfc3339(), "2023-11-14T22:13:20Z");
        assert_eq!(clock.rfc3339_micros(), "2023-11-14T22:13:20.250000Z");
        assert_eq!(
            parse_rfc3339("2023-11-14T22:13:20Z"),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000))
        );
    }
}
