//! Runs every feature in `features/` against the in-process autoscaler on
//! the embedded cluster, in virtual time, one scenario at a time. Undefined
//! steps fail. Prints a `test result:` line with the scenario counts and
//! exits non-zero when a scenario failed.

use std::sync::atomic::{AtomicUsize, Ordering};

use conformance::CaWorld;
use cucumber::{World, event::ScenarioFinished};

static PASSED: AtomicUsize = AtomicUsize::new(0);
static FAILED: AtomicUsize = AtomicUsize::new(0);

fn main() {
    let features = concat!(env!("CARGO_MANIFEST_DIR"), "/../features");
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("conformance: building the runtime: {e}");
            std::process::exit(2);
        }
    };
    let failed_run = runtime.block_on(async {
        let writer = CaWorld::cucumber()
            .max_concurrent_scenarios(1)
            .fail_on_skipped()
            .after(|_, _, _, finished, _| {
                match finished {
                    // Skipped steps (undefined) fail the run too.
                    ScenarioFinished::StepPassed => PASSED.fetch_add(1, Ordering::Relaxed),
                    _ => FAILED.fetch_add(1, Ordering::Relaxed),
                };
                Box::pin(async {})
            })
            .run(features)
            .await;
        cucumber::writer::Stats::execution_has_failed(&writer)
    });
    let (passed, failed) = (
        PASSED.load(Ordering::Relaxed),
        FAILED.load(Ordering::Relaxed),
    );
    let verdict = if failed_run || failed > 0 {
        "FAILED"
    } else {
        "ok"
    };
    println!(
        "test result: {verdict}. {passed} passed; {failed} failed; 0 ignored (conformance scenarios)"
    );
    if failed_run || failed > 0 {
        std::process::exit(1);
    }
}
