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
//! [`Clock::now`]; nothing calls `SystemTime::now` directly. Calls to a
//! process outside (a cloud API, an emulator) go through
//! [`outside::outside`], which holds virtual time still while they wait.

pub mod busy;
pub mod outside;

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

    /// This clock as another machine's would read it, `skew` seconds
    /// ahead (positive) or behind (negative): the same passing of time, a
    /// wall time off by `skew`. Timers are unaffected (they run on tokio
    /// time); timestamps another machine wrote look older or newer by as
    /// much.
    pub fn skewed(&self, skew: std::time::Duration, ahead: bool) -> Self {
        let epoch = if ahead {
            self.epoch.checked_add(skew)
        } else {
            self.epoch.checked_sub(skew)
        };
        Self {
            epoch: epoch.unwrap_or(self.epoch),
            start: self.start,
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
        to_timestamp(self.now())
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

/// A wall time as a `jiff::Timestamp` (what k8s-openapi's `Time` and
/// `MicroTime` wrap); the epoch for a time out of jiff's range.
pub fn to_timestamp(t: SystemTime) -> Timestamp {
    Timestamp::try_from(t).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Formats a wall time as `metav1.Time` does (seconds, UTC, `Z`).
pub fn format_rfc3339(t: SystemTime) -> String {
    let ts = to_timestamp(t);
    let secs = ts.as_second();
    let ts = Timestamp::from_second(secs).unwrap_or(ts);
    format!("{ts:.0}")
}

/// Parses a `metav1.Time` / RFC 3339 string.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    s.parse::<Timestamp>().ok().map(SystemTime::from)
}

/// Parses a Go duration (`1h2m3s`, `90s`, `1.5m`, `300ms`, a bare `0`),
/// the syntax of every duration flag and annotation of kwok and CA.
/// Negative durations and days are not Go syntax and are refused.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.trim().strip_prefix('+').unwrap_or(s.trim());
    if s.is_empty() || s.starts_with('-') {
        return None;
    }
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        if num_end == 0 {
            return None;
        }
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let secs = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * secs;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).ok()
}

/// Formats a duration as Go's `time.Duration.String` does: `10m0s`,
/// `3h0m0s`, `5s`, `1.5s`, `500ms`, `0s`.
pub fn format_go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    let trim = |whole: u128, frac: u128, width: usize| {
        let frac = format!("{frac:0width$}");
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() {
            whole.to_string()
        } else {
            format!("{whole}.{frac}")
        }
    };
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", trim(nanos / 1_000, nanos % 1_000, 3));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", trim(nanos / 1_000_000, nanos % 1_000_000, 6));
    }
    let secs = nanos / 1_000_000_000;
    let seconds = format!("{}s", trim(secs % 60, nanos % 1_000_000_000, 9));
    match (secs / 3600, secs / 60 % 60) {
        (0, 0) => seconds,
        (0, m) => format!("{m}m{seconds}"),
        (h, m) => format!("{h}h{m}m{seconds}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_round_trip() {
        for (text, secs) in [
            ("10m0s", 600.0),
            ("3h0m0s", 10800.0),
            ("5s", 5.0),
            ("0s", 0.0),
            ("1.5s", 1.5),
            ("500ms", 0.5),
            ("87600h0m0s", 315_360_000.0),
        ] {
            let d = parse_go_duration(text).unwrap();
            assert_eq!(d, Duration::from_secs_f64(secs), "{text}");
            assert_eq!(format_go_duration(d), text);
        }
        assert_eq!(parse_go_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        for bad in ["", "10", "1d", "-5s", "m", "5 s", "abc"] {
            assert_eq!(parse_go_duration(bad), None, "{bad:?}");
        }
    }

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
    async fn a_skewed_clock_reads_off_by_its_skew_as_time_passes() {
        let epoch = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let clock = Clock::starting_at(epoch);
        let hour = Duration::from_secs(3600);
        let (ahead, behind) = (clock.skewed(hour, true), clock.skewed(hour, false));
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(ahead.now(), clock.now() + hour);
        assert_eq!(behind.now() + hour, clock.now());
        assert_eq!(ahead.elapsed(), clock.elapsed());
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
