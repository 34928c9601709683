//! Runs of the suite in child processes of a test target, so that
//! independent selections use both of the machine's cores. Each child is
//! the test executable started again with other arguments; its output is
//! kept and printed whole after the parent's report, with its own `test
//! result:` line, and a child that failed or could not run fails the test.

use std::process::{Command, Output};
use std::thread::JoinHandle;

/// A child run that has been started and not yet reported.
pub struct ChildRun {
    what: String,
    waiter: JoinHandle<std::io::Result<Output>>,
}

impl ChildRun {
    /// Starts the current executable again with `args`; `what` names the
    /// run in the report and in errors.
    pub fn start(what: impl Into<String>, args: Vec<String>) -> ChildRun {
        let waiter = std::thread::spawn(move || {
            let exe = std::env::current_exe()?;
            Command::new(exe).args(args).output()
        });
        ChildRun {
            what: what.into(),
            waiter,
        }
    }

    /// Waits for the child and prints its report under a heading. Returns
    /// the exit code it adds to the test's: 0 when it passed, 1 when a
    /// scenario failed, 2 when it could not run. `test` names the test
    /// target in error lines.
    pub fn finish(self, test: &str) -> i32 {
        let what = self.what;
        println!("\n{what}:");
        match self.waiter.join() {
            Ok(Ok(out)) => {
                print!("{}", String::from_utf8_lossy(&out.stdout));
                eprint!("{}", String::from_utf8_lossy(&out.stderr));
                if out.status.success() {
                    0
                } else {
                    eprintln!("{test}: {what} failed ({})", out.status);
                    1
                }
            }
            Ok(Err(e)) => {
                eprintln!("{test}: {what} could not run: {e}");
                2
            }
            Err(_) => {
                eprintln!("{test}: {what}: the thread waiting for it panicked");
                2
            }
        }
    }
}
