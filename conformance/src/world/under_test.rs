//! The autoscaler under test, chosen once per run ([`configure`]):
//! in-process on the cluster's virtual clock, or a CA-compatible binary in
//! real time scaled by [`UnderTest::Binary::time_scale`].

use std::sync::OnceLock;

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

/// Scenario time per real time of this run (1 in-process).
pub fn time_scale() -> f64 {
    match under_test() {
        UnderTest::InProcess => 1.0,
        UnderTest::Binary { time_scale, .. } => time_scale,
    }
}
