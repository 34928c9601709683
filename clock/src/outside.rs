//! Calls to services outside the clock's world: a cloud API, or the cloud
//! emulator a test starts as another process.
//!
//! Under paused (virtual) time tokio moves the clock forward whenever every
//! task waits, and a task waiting on a socket counts as waiting: minutes of
//! virtual time could pass while one request crosses to another process,
//! firing every timer in between. [`outside`] runs the call on a real-time
//! runtime of its own, from a blocking task; tokio does not advance paused
//! time while a blocking task runs, so virtual time stands still for the
//! call's length, as it does for work inside the process. Under real time
//! it costs a hop to another thread.

use std::future::Future;
use std::io;
use std::sync::OnceLock;

use tokio::runtime::{Builder, Runtime};

/// Runs `call` on the real-time runtime kept for outside services and
/// returns its output. Virtual time does not advance meanwhile. Fails only
/// when that runtime cannot be started (no thread could be spawned) or the
/// call panicked.
pub async fn outside<F>(call: F) -> io::Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    // The runtime is made (and, when two callers race, the spare one
    // dropped) on the blocking thread, where that is allowed.
    tokio::task::spawn_blocking(move || runtime().map(|rt| rt.block_on(call)))
        .await
        .map_err(|e| io::Error::other(format!("a call to an outside service failed: {e}")))?
}

fn runtime() -> io::Result<&'static Runtime> {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("outside-io")
        .enable_all()
        .build()?;
    Ok(RUNTIME.get_or_init(|| rt))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn virtual_time_stands_still_during_an_outside_call() {
        let start = tokio::time::Instant::now();
        // A timer that auto-advance would fire while the call waits.
        let timer = tokio::spawn(tokio::time::sleep(Duration::from_secs(600)));
        let slept = outside(async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            7
        })
        .await
        .unwrap();
        assert_eq!(slept, 7);
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "virtual time moved {:?} during the call",
            start.elapsed()
        );
        assert!(!timer.is_finished());
    }
}
