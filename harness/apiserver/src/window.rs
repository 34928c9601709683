//! The watch window: the recent changes of one resource that a watch may
//! resume from, as kube-apiserver's watch cache keeps them.
//!
//! kube-apiserver keeps a cache per resource whose capacity it resizes so
//! that it holds the last `eventFreshDuration` (75 s) of events, between 100
//! and 100 × 1024 events. A watch from a resourceVersion older than the
//! cache's oldest event (or, before the cache dropped anything, than the
//! version the cache started at) is answered `410 Gone`
//! (`too old resource version: R (O)`), which client-go's reflectors and
//! kube-rs' watchers answer with a new list.
//!
//! [`WindowPolicy::KUBE_APISERVER`] keeps every change of the last 75 s of
//! the server's clock, and always the last 100, never more than 102,400: at
//! least what kube-apiserver keeps. [`WindowPolicy::changes`] keeps a fixed
//! number, for tests and scenarios that make the window tiny.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// What a window keeps: a change with its resourceVersion.
pub trait Versioned {
    /// The change's resourceVersion.
    fn rv(&self) -> u64;
}

/// How many changes a resource's window keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowPolicy {
    /// Always kept, however old.
    pub min: usize,
    /// Never more.
    pub max: usize,
    /// Changes younger than this are kept (up to `max`).
    pub fresh: Duration,
}

impl Default for WindowPolicy {
    fn default() -> Self {
        Self::KUBE_APISERVER
    }
}

impl WindowPolicy {
    /// kube-apiserver's watch cache sizing: the last 75 s of changes
    /// (`eventFreshDuration`), at least 100 (`--default-watch-cache-size`),
    /// at most 100 × 1024 (the cache's upper bound).
    pub const KUBE_APISERVER: Self = Self {
        min: 100,
        max: 100 * 1024,
        fresh: Duration::from_secs(75),
    };

    /// Exactly the last `n` changes of each resource.
    pub fn changes(n: usize) -> Self {
        let n = n.max(1);
        Self {
            min: n,
            max: n,
            fresh: Duration::ZERO,
        }
    }
}

/// One resource's window of changes `C`.
#[derive(Debug)]
pub struct Window<C> {
    changes: VecDeque<(Arc<C>, Instant)>,
    /// The resourceVersion the window started at: the server's start, or the
    /// CRD's registration for a custom resource.
    start_rv: u64,
    /// Whether a change has been dropped since the start.
    dropped: bool,
}

impl<C> Default for Window<C> {
    fn default() -> Self {
        Self {
            changes: VecDeque::new(),
            start_rv: 0,
            dropped: false,
        }
    }
}

impl<C: Versioned> Window<C> {
    /// An empty window starting at `start_rv`.
    pub fn starting_at(start_rv: u64) -> Self {
        Self {
            start_rv,
            ..Self::default()
        }
    }

    /// Appends a change and drops what the policy no longer keeps.
    pub fn push(&mut self, change: Arc<C>, now: Instant, policy: WindowPolicy) {
        self.changes.push_back((change, now));
        while self.changes.len() > policy.min {
            let Some((_, at)) = self.changes.front() else {
                break;
            };
            let stale = now.saturating_duration_since(*at) > policy.fresh;
            if !(stale || self.changes.len() > policy.max) {
                break;
            }
            self.changes.pop_front();
            self.dropped = true;
        }
    }

    /// The oldest resourceVersion a watch may start from; older ones are
    /// gone (kube-apiserver's `resourceVersion < oldest - 1`).
    pub fn oldest_resumable(&self) -> u64 {
        match self.changes.front() {
            Some((c, _)) if self.dropped => c.rv().saturating_sub(1),
            _ => self.start_rv,
        }
    }

    /// The changes after `rv`, oldest first.
    pub fn since(&self, rv: u64) -> impl Iterator<Item = &Arc<C>> {
        let start = self.changes.partition_point(|(c, _)| c.rv() <= rv);
        self.changes.range(start..).map(|(c, _)| c)
    }
}
