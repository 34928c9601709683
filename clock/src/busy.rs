//! Busy time per component, for benchmarks: how long each part of the
//! system (API server, scheduler, controllers, kwok...) actually ran, i.e.
//! was being polled. Nested work is charged to the inner part only: an
//! in-memory API call made by the scheduler runs inside the scheduler's
//! poll, but its time goes to `apiserver`.
//!
//! Wrap a component's future with [`timed`]; tasks it spawns through
//! [`spawn`] are charged to the same component. Off unless [`enable`] was
//! called: then a wrapped future costs one atomic load per poll.
//! Measured with the real monotonic clock (`std::time::Instant`), so it
//! means the same under virtual time.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

static ENABLED: AtomicBool = AtomicBool::new(false);
static SLOTS: Mutex<Vec<Slot>> = Mutex::new(Vec::new());

/// One component's counter (labels are few and live for the process).
#[derive(Clone, Copy)]
struct Slot {
    label: &'static str,
    nanos: &'static AtomicU64,
}

thread_local! {
    /// The component whose future is being polled on this thread.
    static CURRENT: Cell<Option<Slot>> = const { Cell::new(None) };
    /// Time spent in nested timed polls during the current poll.
    static NESTED: Cell<u64> = const { Cell::new(0) };
}

/// Turns accounting on for the whole process.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether accounting is on.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

fn slot(label: &'static str) -> Slot {
    let mut slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = slots.iter().find(|s| s.label == label) {
        return *s;
    }
    let s = Slot {
        label,
        nanos: Box::leak(Box::new(AtomicU64::new(0))),
    };
    slots.push(s);
    s
}

/// Busy time per component so far, in the order components first appeared.
pub fn totals() -> Vec<(&'static str, Duration)> {
    SLOTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|s| {
            (
                s.label,
                Duration::from_nanos(s.nanos.load(Ordering::Relaxed)),
            )
        })
        .collect()
}

/// Runs `f` charged to `slot`, minus nested timed work.
fn measure<R>(slot: Slot, f: impl FnOnce() -> R) -> R {
    let outer_nested = NESTED.replace(0);
    let previous = CURRENT.replace(Some(slot));
    let start = Instant::now();
    let result = f();
    let total = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let nested = NESTED.get();
    slot.nanos
        .fetch_add(total.saturating_sub(nested), Ordering::Relaxed);
    NESTED.set(outer_nested.saturating_add(total));
    CURRENT.set(previous);
    result
}

/// Runs a synchronous piece of work charged to `label` (when enabled).
pub fn charge<R>(label: &'static str, f: impl FnOnce() -> R) -> R {
    if enabled() {
        measure(slot(label), f)
    } else {
        f()
    }
}

/// A future whose polls are charged to a component.
pub struct Timed<F> {
    inner: Pin<Box<F>>,
    slot: Option<Slot>,
}

impl<F: Future> Future for Timed<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        match this.slot {
            Some(slot) => measure(slot, || this.inner.as_mut().poll(cx)),
            None => this.inner.as_mut().poll(cx),
        }
    }
}

/// `f`, charged to `label` when accounting is on.
pub fn timed<F: Future>(label: &'static str, f: F) -> Timed<F> {
    Timed {
        inner: Box::pin(f),
        slot: enabled().then(|| slot(label)),
    }
}

/// Spawns `f` charged to the component that is running now (if any).
pub fn spawn<F>(f: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match CURRENT.get().filter(|_| enabled()) {
        Some(slot) => tokio::spawn(Timed {
            inner: Box::pin(f),
            slot: Some(slot),
        }),
        None => tokio::spawn(f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(d: Duration) {
        let start = Instant::now();
        while start.elapsed() < d {}
    }

    #[tokio::test]
    async fn nested_work_is_charged_to_the_inner_component() {
        enable();
        timed("test-outer", async {
            spin(Duration::from_millis(20));
            timed("test-inner", async { spin(Duration::from_millis(30)) }).await;
            spawn(async { spin(Duration::from_millis(10)) })
                .await
                .unwrap();
        })
        .await;
        let t: std::collections::BTreeMap<_, _> = totals().into_iter().collect();
        let (outer, inner) = (t["test-outer"], t["test-inner"]);
        assert!(inner >= Duration::from_millis(30), "{inner:?}");
        assert!(inner < Duration::from_millis(200), "{inner:?}");
        // 20 ms own work + 10 ms in the spawned task, not the inner 30 ms.
        assert!(outer >= Duration::from_millis(30), "{outer:?}");
        assert!(
            outer < inner + Duration::from_millis(20),
            "{outer:?} vs {inner:?}"
        );
    }
}
