//! Running the autoscaler as a library, next to a cluster in the same
//! process (tests, the conformance suite, benchmarks): the watch cache, the
//! kwok provider and the flags, wired as the binary wires them, on the
//! caller's clock (virtual time when the runtime's time is paused).

use std::sync::{Arc, Mutex};

use clap::Parser;
use kube::Client;

use crate::cache::ClusterCache;
use crate::cloudprovider::kwok::{Faults, KwokProvider, Settings};
use crate::config::{Flags, normalize_args};
use crate::core::{Autoscaler, node_lister};
use crate::metrics::Metrics;
use crate::server::Endpoints;

/// An autoscaler with the kwok provider and its fault-injection handle.
pub struct InProcess {
    /// The autoscaler (run it with [`Autoscaler::run`] or step it with
    /// [`Autoscaler::run_once`]).
    pub autoscaler: Autoscaler,
    /// The kwok provider's faults.
    pub faults: Arc<Faults>,
    /// What the binary serves on `--address` (`/metrics`, `/health-check`,
    /// `/decisions`), readable without a socket.
    pub endpoints: Endpoints,
}

/// Why the autoscaler could not be built.
#[derive(Debug, thiserror::Error)]
pub enum InProcessError {
    /// The flags do not parse.
    #[error("{0}")]
    Parse(#[from] clap::Error),
    /// A flag's value is refused.
    #[error("{0}")]
    Flag(#[from] crate::config::FlagError),
    /// The kwok provider's configuration is refused.
    #[error("building the kwok provider: {0}")]
    Provider(crate::cloudprovider::CloudError),
}

/// Builds an autoscaler on `client` with `--cloud-provider=kwok` and the
/// extra `args` (CA's syntax), the kwok ConfigMaps being in `kube-system`.
/// Bad flags or provider configuration are errors naming what failed.
pub async fn kwok(
    client: Client,
    clock: simclock::Clock,
    args: &[String],
) -> Result<InProcess, InProcessError> {
    let argv = [
        "cluster-autoscaler".to_string(),
        "--cloud-provider=kwok".to_string(),
    ]
    .into_iter()
    .chain(args.iter().cloned());
    let flags = Flags::try_parse_from(normalize_args(argv))?;
    let validated = flags.validate()?;
    let (cache, _) = ClusterCache::start(client.clone(), clock.clone());
    cache.wait_ready().await;
    let provider = KwokProvider::new(
        client.clone(),
        node_lister(&cache),
        Settings {
            namespace: "kube-system".into(),
            config_map: "kwok-provider-config".into(),
        },
    )
    .await
    .map_err(InProcessError::Provider)?;
    let faults = provider.faults();
    let timeouts = (
        flags.max_inactivity,
        flags.max_failing_time,
        flags.max_startup_time,
    );
    let metrics = Arc::new(Metrics::new(flags.emit_per_nodegroup_metrics));
    let autoscaler = Autoscaler::new(
        client,
        clock.clone(),
        flags,
        validated,
        cache,
        Arc::new(provider),
        metrics,
    );
    let endpoints = Endpoints {
        metrics: autoscaler.metrics.clone(),
        liveness: Arc::new(Mutex::new(Some(autoscaler.liveness.clone()))),
        decisions: Arc::new(Mutex::new(Some(autoscaler.decisions.clone()))),
        clock,
        timeouts,
    };
    Ok(InProcess {
        autoscaler,
        faults,
        endpoints,
    })
}
