//! Benchmarks live in `benches/`; run them with `cargo bench -p benches`.
//! What several of them read of the process is here.

/// The process's peak resident memory (`VmHWM`), in MiB; 0 when
/// `/proc/self/status` cannot be read.
pub fn peak_rss_mib() -> f64 {
    status_mib("VmHWM:")
}

/// The process's resident memory now (`VmRSS`), in MiB; 0 when
/// `/proc/self/status` cannot be read.
pub fn rss_mib() -> f64 {
    status_mib("VmRSS:")
}

/// A `/proc/self/status` field given in kB (`VmHWM:`, `VmRSS:`), in MiB.
fn status_mib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Runs this benchmark's executable again with `args` (one measured run
/// in a process of its own, so that its peak memory is its own) and
/// returns the last line it printed, split on whitespace.
///
/// # Panics
///
/// When the run cannot start or fails: the benchmark has no figure.
#[allow(clippy::expect_used)]
pub fn measured_child(args: &[String]) -> Vec<String> {
    let exe = std::env::current_exe().expect("the benchmark's own executable");
    let out = std::process::Command::new(exe)
        .args(args)
        .output()
        .expect("the measured run starts");
    assert!(
        out.status.success(),
        "the measured run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    line.split_whitespace().map(str::to_string).collect()
}
