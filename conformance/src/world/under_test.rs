//! The autoscaler under test, chosen once per run ([`configure`]):
//! in-process on the cluster's virtual clock, or a CA-compatible binary in
//! real time scaled by [`UnderTest::Binary::time_scale`], or by the
//! example's own scale ([`set_example_time_scale`], chosen by the runner
//! from the example's size: `crate::runner::pace`).

use std::sync::{Mutex, OnceLock};

use crate::binary::BinaryInfo;

/// How the autoscaler under test runs.
#[derive(Debug, Clone, Default)]
pub enum UnderTest {
    /// Our autoscaler as a library, on the cluster's virtual clock.
    #[default]
    InProcess,
    /// A CA-compatible executable against the embedded API server over TLS.
    Binary {
        /// The executable, its version and flags.
        info: Box<BinaryInfo>,
        /// Extra arguments, passed after the harness's own.
        args: Vec<String>,
        /// Scenario time per real time: 60 makes a scenario minute one real
        /// second. Durations in steps and the timing flags are divided by it.
        time_scale: f64,
    },
}

static UNDER_TEST: OnceLock<UnderTest> = OnceLock::new();

/// Sets the autoscaler under test for this process's scenarios (once;
/// later calls are ignored and return false).
pub fn configure(under_test: UnderTest) -> bool {
    UNDER_TEST.set(under_test).is_ok()
}

/// The autoscaler under test configured for this run (in-process without
/// [`configure`]).
pub fn under_test() -> UnderTest {
    UNDER_TEST.get().cloned().unwrap_or_default()
}

/// The time scale of the example running now, when the runner chose one
/// other than the run's.
static EXAMPLE_TIME_SCALE: Mutex<Option<f64>> = Mutex::new(None);

/// Sets the time scale of the examples that start from now on (`None`:
/// the run's). Scenarios run one at a time, so one value serves.
pub fn set_example_time_scale(scale: Option<f64>) {
    if let Ok(mut s) = EXAMPLE_TIME_SCALE.lock() {
        *s = scale;
    }
}

/// Scenario time per real time of the example running now (1
/// in-process): its own scale if the runner set one, else the run's.
pub fn time_scale() -> f64 {
    match under_test() {
        UnderTest::InProcess => 1.0,
        UnderTest::Binary { time_scale, .. } => EXAMPLE_TIME_SCALE
            .lock()
            .ok()
            .and_then(|s| *s)
            .unwrap_or(time_scale),
    }
}
