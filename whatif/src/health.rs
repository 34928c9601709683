//! The health of a binary side's autoscaler over its run, as its process
//! and endpoints show it: every [`INTERVAL`] of cluster time the
//! [`Sampler`] reads the process's resident memory and threads
//! (`/proc/PID/status`), its loops from `/metrics`
//! (`cluster_autoscaler_function_duration_seconds{function="main"}`: how
//! many ended since the last sample, and their mean time) and its task
//! count: `go_goroutines` on `/metrics` for a Go binary, the async
//! runtime's `alive tasks` on `/debug/pprof/goroutine` (`--profiling`) for
//! ours.
//!
//! Over a day, [`Verdict`] compares hour 2 with the last hour, the same
//! phase of an hourly load: the memory's peak within 10%, the loops' mean
//! time within 25% and the tasks' peak within 10% (plus 5, for counts this
//! small) are flat; more is growth, which a leak shows as.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use harness::metric_value as metric;

/// Cluster time between samples.
pub const INTERVAL: Duration = Duration::from_secs(600);

/// The memory's growth, hour 2 to the last hour, that is still flat.
pub const MEMORY_GROWTH: f64 = 0.10;

/// The loop time's growth that is still flat.
pub const LOOP_GROWTH: f64 = 0.25;

/// The task count's growth that is still flat (and [`TASK_SLACK`] more).
pub const TASK_GROWTH: f64 = 0.10;

/// Tasks more than [`TASK_GROWTH`] allows that are still flat.
pub const TASK_SLACK: f64 = 5.0;

/// The loop metric, and the label of the whole loop.
const LOOP_METRIC: &str = "cluster_autoscaler_function_duration_seconds";
const MAIN: &str = "function=\"main\"";

/// One sample of the process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    /// Cluster seconds since the autoscaler started.
    pub seconds: u64,
    /// Resident memory (`VmRSS`), KiB.
    pub rss_kib: u64,
    /// Threads.
    pub threads: u64,
    /// Goroutines or async tasks, when the binary shows them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<u64>,
    /// Loops that ended since the last sample.
    pub loops: u64,
    /// Their mean time in seconds, when there were some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_seconds: Option<f64>,
}

/// Samples a binary's process until stopped.
#[derive(Debug)]
pub struct Sampler {
    stop: watch::Sender<bool>,
    task: JoinHandle<Vec<Sample>>,
}

impl Sampler {
    /// Samples process `pid`, whose endpoints are on `port`, every
    /// [`INTERVAL`] of cluster time (`scale` times real time) from now.
    pub fn start(pid: u32, port: u16, scale: f64) -> Self {
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let mut samples = Vec::new();
            let mut totals = LoopTotals::default();
            loop {
                let next = started + INTERVAL.mul_f64((samples.len() + 1) as f64).div_f64(scale);
                tokio::select! {
                    _ = tokio::time::sleep_until(next) => {}
                    _ = stopped.changed() => return samples,
                }
                let seconds = (started.elapsed().as_secs_f64() * scale).round() as u64;
                match sample(pid, port, seconds, &mut totals).await {
                    Some(s) => samples.push(s),
                    // The process is gone.
                    None => return samples,
                }
            }
        });
        Self { stop, task }
    }

    /// Stops sampling; the samples taken.
    pub async fn finish(self) -> Vec<Sample> {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}

/// The loop metric's sum and count at the last sample.
#[derive(Debug, Default)]
struct LoopTotals {
    sum: f64,
    count: f64,
}

/// One sample; `None` when the process is gone.
async fn sample(pid: u32, port: u16, seconds: u64, totals: &mut LoopTotals) -> Option<Sample> {
    let (rss_kib, threads) = proc_status(pid)?;
    let metrics = get(port, "/metrics").await.unwrap_or_default();
    let sum = metric(&metrics, &format!("{LOOP_METRIC}_sum"), MAIN);
    let count = metric(&metrics, &format!("{LOOP_METRIC}_count"), MAIN);
    let (loops, loop_seconds) = match (sum, count) {
        (Some(sum), Some(count)) => {
            let loops = (count - totals.count).max(0.0);
            let mean = (loops > 0.0).then(|| (sum - totals.sum) / loops);
            *totals = LoopTotals { sum, count };
            (loops as u64, mean)
        }
        _ => (0, None),
    };
    let tasks = match metric(&metrics, "go_goroutines", "") {
        Some(n) => Some(n as u64),
        None => get(port, "/debug/pprof/goroutine?debug=1")
            .await
            .and_then(|text| alive_tasks(&text)),
    };
    Some(Sample {
        seconds,
        rss_kib,
        threads,
        tasks,
        loops,
        loop_seconds,
    })
}

/// `VmRSS` (KiB) and `Threads` of a live process.
fn proc_status(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    // A zombie has no memory left: it is gone.
    Some((field("VmRSS:")?, field("Threads:")?))
}

/// The body of `GET path` on the local port, when it answers 200 within
/// 10 seconds.
async fn get(port: u16, path: &str) -> Option<String> {
    match tokio::time::timeout(Duration::from_secs(10), harness::http_get(port, path)).await {
        Ok(Ok((200, body))) => Some(body),
        _ => None,
    }
}

/// The task count of a goroutine profile: ours (`alive tasks: N`) or Go's
/// (`goroutine profile: total N`).
fn alive_tasks(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        l.strip_prefix("alive tasks:")
            .or_else(|| l.strip_prefix("goroutine profile: total"))
            .and_then(|n| n.trim().parse().ok())
    })
}

/// Hour 2 against the last hour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// The last hour (1-based: hour 24 of a day).
    pub last_hour: u64,
    /// The memory's peak in hour 2 and in the last hour, MiB.
    pub memory_mib: (f64, f64),
    /// The loops' mean time in hour 2 and in the last hour, ms.
    pub loop_ms: Option<(f64, f64)>,
    /// The tasks' peak in hour 2 and in the last hour.
    pub tasks: Option<(u64, u64)>,
    /// What grew more than flat allows, named; empty when all is flat.
    pub grew: Vec<String>,
}

/// Hour 2 (`[1 h, 2 h)`) against the last full hour of a run of `end`
/// cluster seconds; `None` for a run shorter than three hours.
pub fn verdict(samples: &[Sample], end: u64) -> Option<Verdict> {
    const HOUR: u64 = 3600;
    let last_hour = end / HOUR;
    if last_hour < 3 {
        return None;
    }
    // A sample covers the interval before it.
    let within = |hour: u64| {
        samples
            .iter()
            .filter(move |s| s.seconds > (hour - 1) * HOUR && s.seconds <= hour * HOUR)
    };
    let peak_memory = |hour| {
        within(hour)
            .map(|s| s.rss_kib)
            .max()
            .map(|k| k as f64 / 1024.0)
    };
    let memory_mib = (peak_memory(2)?, peak_memory(last_hour)?);
    let mean_loop = |hour| {
        let (n, total) = within(hour)
            .filter_map(|s| s.loop_seconds.map(|m| (s.loops, m * s.loops as f64)))
            .fold((0, 0.0), |(n, t), (k, x)| (n + k, t + x));
        (n > 0).then(|| total / n as f64 * 1000.0)
    };
    let loop_ms = mean_loop(2).zip(mean_loop(last_hour));
    let peak_tasks = |hour| within(hour).filter_map(|s| s.tasks).max();
    let tasks = peak_tasks(2).zip(peak_tasks(last_hour));
    let mut grew = Vec::new();
    if memory_mib.1 > memory_mib.0 * (1.0 + MEMORY_GROWTH) {
        grew.push(format!(
            "memory: {:.0} MiB at hour {last_hour}, {:.0} MiB at hour 2",
            memory_mib.1, memory_mib.0
        ));
    }
    if let Some((early, late)) = loop_ms
        && late > early * (1.0 + LOOP_GROWTH)
    {
        grew.push(format!(
            "loop time: {late:.1} ms at hour {last_hour}, {early:.1} ms at hour 2"
        ));
    }
    if let Some((early, late)) = tasks
        && late as f64 > early as f64 * (1.0 + TASK_GROWTH) + TASK_SLACK
    {
        grew.push(format!(
            "tasks: {late} at hour {last_hour}, {early} at hour 2"
        ));
    }
    Some(Verdict {
        last_hour,
        memory_mib,
        loop_ms,
        tasks,
        grew,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn day(rss: impl Fn(u64) -> u64, tasks: impl Fn(u64) -> u64) -> Vec<Sample> {
        (1..=24 * 6)
            .map(|i| Sample {
                seconds: i * 600,
                rss_kib: rss(i),
                threads: 8,
                tasks: Some(tasks(i)),
                loops: 60,
                loop_seconds: Some(0.05),
            })
            .collect()
    }

    #[test]
    fn a_flat_day_is_flat_and_a_leak_is_named() {
        let flat = verdict(&day(|i| 100_000 + (i % 6) * 1000, |_| 40), 86_400).unwrap();
        assert_eq!(flat.last_hour, 24);
        assert!(flat.grew.is_empty(), "{:?}", flat.grew);
        assert_eq!(flat.loop_ms, Some((50.0, 50.0)));
        // 1 MiB more every ten minutes: 140 MiB more by the last hour.
        let leak = verdict(&day(|i| 100_000 + i * 1024, |i| 40 + i), 86_400).unwrap();
        assert_eq!(leak.grew.len(), 2, "{:?}", leak.grew);
        assert!(leak.grew[0].starts_with("memory:"), "{:?}", leak.grew);
        assert!(
            leak.grew[1].starts_with("tasks: 184 at hour 24, 52"),
            "{:?}",
            leak.grew
        );
    }

    #[test]
    fn too_short_a_run_has_no_verdict() {
        assert_eq!(verdict(&day(|_| 1, |_| 1), 2 * 3600), None);
    }

    #[test]
    fn metrics_and_task_counts_are_read_from_either_kind_of_binary() {
        let text = "# HELP x\n\
            cluster_autoscaler_function_duration_seconds_sum{function=\"main\"} 12.5\n\
            cluster_autoscaler_function_duration_seconds_sum{function=\"scaleUp\"} 3\n\
            cluster_autoscaler_function_duration_seconds_count{function=\"main\"} 250\n\
            go_goroutines 312\n";
        assert_eq!(
            metric(text, &format!("{LOOP_METRIC}_sum"), MAIN),
            Some(12.5)
        );
        assert_eq!(
            metric(text, &format!("{LOOP_METRIC}_count"), MAIN),
            Some(250.0)
        );
        assert_eq!(metric(text, "go_goroutines", ""), Some(312.0));
        assert_eq!(
            metric(text, "go_gorout", ""),
            None,
            "a prefix is not a name"
        );
        assert_eq!(alive_tasks("workers: 2\nalive tasks: 57\n"), Some(57));
        assert_eq!(
            alive_tasks("goroutine profile: total 301\n1 @ 0x1\n"),
            Some(301)
        );
    }

    #[tokio::test]
    async fn this_process_can_be_sampled() {
        let mut totals = LoopTotals::default();
        // Nothing listens on port 9: memory and threads only.
        let s = sample(std::process::id(), 9, 600, &mut totals)
            .await
            .unwrap();
        assert!(s.rss_kib > 0 && s.threads > 0, "{s:?}");
        assert_eq!((s.loops, s.loop_seconds, s.tasks), (0, None, None));
    }
}
