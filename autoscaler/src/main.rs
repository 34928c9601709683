//! The `cluster-autoscaler` binary.

use std::process::ExitCode;

use autoscaler::config::Flags;

fn main() -> ExitCode {
    let flags = match Flags::from_env() {
        Ok(f) => f,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(2);
        }
    };
    if let Err(e) = flags.validate() {
        eprintln!("cluster-autoscaler: {e}");
        return ExitCode::from(2);
    }
    for w in flags.warnings() {
        eprintln!("cluster-autoscaler: warning: {w}");
    }
    eprintln!("cluster-autoscaler: the autoscaling loop is not implemented yet");
    ExitCode::FAILURE
}
