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
