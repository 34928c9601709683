//! The what-if's binary sides (`testbed whatif --binary NAME=PATH`): a CA
//! binary started against the side's cluster as binary mode starts one
//! (its `--help` read for the flags it knows, its timing flags divided by
//! the time scale, the kwok cloud provider in local mode), its output in
//! the side's log.

use whatif::binary::{Launch, Launched, Launcher};

use crate::binary::{BinaryInfo, command};
use crate::world::provider::Provider;

/// The log level of a binary side: scale-up and scale-down decisions and
/// the reasons nodes are kept, without every pod's predicates.
const VERBOSITY: &str = "--v=2";

/// The flag that sets the content type of the binary's API requests.
const CONTENT_TYPE: &str = "kube-api-content-type";

/// The flag that serves the debugging endpoints (the task count).
const PROFILING: &str = "profiling";

/// Starts CA binaries for the what-if.
#[derive(Debug, Default)]
pub struct BinaryLauncher;

impl Launcher for BinaryLauncher {
    fn launch(&self, launch: &Launch) -> Result<Launched, String> {
        let info = BinaryInfo::probe(launch.binary, Provider::Kwok).map_err(|e| e.to_string())?;
        let unknown: Vec<&str> = launch
            .flags
            .iter()
            .filter_map(|f| f.strip_prefix("--"))
            .map(|f| f.split_once('=').map_or(f, |(name, _)| name))
            .filter(|name| !info.knows(name))
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "{} does not know --{}",
                launch.binary.display(),
                unknown.join(", --")
            ));
        }
        // The connection is the what-if's: JSON, which every kind the
        // cluster serves speaks (a release before 1.36 writes its
        // ProvisioningRequests' conditions in the process-wide content type,
        // and no CRD speaks protobuf).
        let mut extra = vec![VERBOSITY.to_string()];
        if info.knows(CONTENT_TYPE) {
            extra.push(format!("--{CONTENT_TYPE}=application/json"));
        }
        // The task count the what-if samples.
        if info.knows(PROFILING) {
            extra.push(format!("--{PROFILING}=true"));
        }
        let mut cmd = command(
            &info,
            Provider::Kwok,
            launch.kubeconfig,
            launch.port,
            launch.flags,
            &extra,
            launch.time_scale,
        )
        .map_err(|e| format!("{}: {e}", launch.binary.display()))?;
        let log = std::fs::File::create(launch.log)
            .map_err(|e| format!("creating {}: {e}", launch.log.display()))?;
        let stdout = log
            .try_clone()
            .map_err(|e| format!("{}: {e}", launch.log.display()))?;
        let child = cmd
            .stdout(stdout)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", launch.binary.display()))?;
        let pid = child
            .id()
            .ok_or_else(|| format!("{}: exited as it started", launch.binary.display()))?;
        Ok(Launched {
            pid,
            guard: Box::new(child),
        })
    }
}
