//! How long the server takes to answer, by kind of request, and the 5xx it
//! answers of its own accord (injected faults are not counted): the
//! testbed's promises under load (`testbed bench`: write p99 ≤ 50 ms, no
//! 5xx from the testbed itself).
//!
//! Each kind keeps a histogram of log-spaced buckets (a quarter larger each,
//! from 10 µs to over 100 s), so memory stays the same however long the
//! server runs; a percentile is the upper edge of its bucket, at most 25%
//! above the true value. Watches are left out: their answer is a stream that
//! lasts until its timeout.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Buckets: the first ends at 10 µs, each next is 25% larger; the last
/// holds everything above.
const BUCKETS: usize = 75;
const FIRST_EDGE_MICROS: f64 = 10.0;
const GROWTH: f64 = 1.25;

/// What a request did, as its latency is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// `create`, `update`, `patch`, `delete`, `deletecollection`.
    Write,
    /// `list`.
    List,
    /// `get`.
    Get,
}

impl RequestKind {
    /// The kind of an authorization verb; `None` for watches and others.
    pub fn of_verb(verb: &str) -> Option<Self> {
        match verb {
            "create" | "update" | "patch" | "delete" | "deletecollection" => Some(Self::Write),
            "list" => Some(Self::List),
            "get" => Some(Self::Get),
            _ => None,
        }
    }

    fn index(self) -> usize {
        match self {
            Self::Write => 0,
            Self::List => 1,
            Self::Get => 2,
        }
    }
}

/// A latency histogram.
#[derive(Debug, Clone)]
struct Histogram {
    counts: [u64; BUCKETS],
    total: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            counts: [0; BUCKETS],
            total: 0,
        }
    }
}

fn upper_edge_micros(bucket: usize) -> f64 {
    FIRST_EDGE_MICROS * GROWTH.powi(i32::try_from(bucket).unwrap_or(i32::MAX))
}

impl Histogram {
    fn record(&mut self, took: Duration) {
        let micros = took.as_secs_f64() * 1e6;
        let bucket = if micros <= FIRST_EDGE_MICROS {
            0
        } else {
            let b = ((micros / FIRST_EDGE_MICROS).ln() / GROWTH.ln()).ceil();
            (b as usize).min(BUCKETS - 1)
        };
        self.counts[bucket] += 1;
        self.total += 1;
    }

    /// The upper edge of the bucket holding the `q` quantile.
    fn quantile(&self, q: f64) -> Option<Duration> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (bucket, n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(Duration::from_secs_f64(upper_edge_micros(bucket) / 1e6));
            }
        }
        None
    }
}

/// The latencies of one kind of request so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KindSummary {
    /// Requests answered.
    pub count: u64,
    /// Median answer time (its bucket's upper edge).
    pub p50: Duration,
    /// 99th percentile answer time (its bucket's upper edge).
    pub p99: Duration,
}

/// The server's answer times and its own 5xx answers.
#[derive(Debug, Default)]
pub struct Timings {
    by_kind: Mutex<[Histogram; 3]>,
    server_errors: AtomicU64,
}

impl Timings {
    /// Records one answered request.
    pub fn record(&self, kind: RequestKind, took: Duration, status: u16) {
        if let Ok(mut h) = self.by_kind.lock() {
            h[kind.index()].record(took);
        }
        if status >= 500 {
            self.server_errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Forgets everything recorded so far (a benchmark measures from here).
    pub fn reset(&self) {
        if let Ok(mut h) = self.by_kind.lock() {
            *h = Default::default();
        }
        self.server_errors.store(0, Ordering::Relaxed);
    }

    /// Count, p50 and p99 of `kind` so far; `None` before any request.
    pub fn summary(&self, kind: RequestKind) -> Option<KindSummary> {
        let h = self.by_kind.lock().ok()?[kind.index()].clone();
        Some(KindSummary {
            count: h.total,
            p50: h.quantile(0.5)?,
            p99: h.quantile(0.99)?,
        })
    }

    /// 5xx answers the server gave of its own accord.
    pub fn server_errors(&self) -> u64 {
        self.server_errors.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_bucket_edges_within_a_quarter_above_the_truth() {
        let t = Timings::default();
        for ms in 1..=100u64 {
            t.record(RequestKind::Write, Duration::from_millis(ms), 201);
        }
        let s = t.summary(RequestKind::Write).unwrap();
        assert_eq!(s.count, 100);
        let p50 = s.p50.as_secs_f64() * 1e3;
        let p99 = s.p99.as_secs_f64() * 1e3;
        assert!((50.0..=62.5).contains(&p50), "p50 {p50} ms");
        assert!((99.0..=123.75).contains(&p99), "p99 {p99} ms");
        assert!(t.summary(RequestKind::List).is_none());
    }

    #[test]
    fn server_errors_count_5xx_only_and_reset_clears() {
        let t = Timings::default();
        t.record(RequestKind::Get, Duration::from_micros(5), 404);
        t.record(RequestKind::Get, Duration::from_micros(5), 500);
        t.record(RequestKind::Write, Duration::from_secs(1000), 503);
        assert_eq!(t.server_errors(), 2);
        assert_eq!(t.summary(RequestKind::Get).unwrap().count, 2);
        t.reset();
        assert_eq!(t.server_errors(), 0);
        assert!(t.summary(RequestKind::Get).is_none());
    }

    #[test]
    fn only_reads_and_writes_have_a_kind() {
        assert_eq!(RequestKind::of_verb("patch"), Some(RequestKind::Write));
        assert_eq!(RequestKind::of_verb("list"), Some(RequestKind::List));
        assert_eq!(RequestKind::of_verb("watch"), None);
    }
}
