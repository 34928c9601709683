//! Running the autoscaler as a library, next to a cluster in the same
//! process (tests, the conformance suite, benchmarks): the watch cache, a
//! cloud provider (kwok, Cluster API with the cluster as its own
//! management cluster, or AWS) and the flags, wired as the binary wires them, on
//! the caller's clock (virtual time when the runtime's time is paused).

use std::sync::{Arc, Mutex};

use clap::Parser;
use kube::Client;

use crate::cache::{ClusterCache, Extra};
use crate::cloudprovider::CloudProvider;
#[cfg(feature = "aws")]
use crate::cloudprovider::aws::{self, AwsProvider};
use crate::cloudprovider::clusterapi::{self, ClusterApiProvider};
use crate::cloudprovider::kwok::{Faults, KwokProvider, Settings};
use crate::config::{Flags, normalize_args};
use crate::core::{Autoscaler, node_lister};
use crate::metrics::Metrics;
use crate::server::Endpoints;

/// An autoscaler with its provider (and the kwok provider's fault-injection
/// handle, which no other provider reads).
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
    /// The provider's configuration is refused.
    #[error("building the {provider} provider: {error}")]
    Provider {
        /// `kwok`, `clusterapi` or `aws`.
        provider: &'static str,
        /// Why.
        error: crate::cloudprovider::CloudError,
    },
}

/// Builds an autoscaler on `client` with `--cloud-provider=kwok` and the
/// extra `args` (CA's syntax), the kwok ConfigMaps being in `kube-system`.
/// Bad flags or provider configuration are errors naming what failed.
pub async fn kwok(
    client: Client,
    clock: simclock::Clock,
    args: &[String],
) -> Result<InProcess, InProcessError> {
    let (flags, validated) = parse("kwok", args)?;
    let client = crate::client::honoring_retry_after(client);
    let (cache, _) = ClusterCache::start_with(
        client.clone(),
        clock.clone(),
        Extra {
            provisioning_requests: flags.enable_provisioning_requests,
        },
    );
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
    .map_err(|error| InProcessError::Provider {
        provider: "kwok",
        error,
    })?;
    let faults = provider.faults();
    Ok(assemble(
        client,
        clock,
        flags,
        validated,
        cache,
        Arc::new(provider),
        faults,
    ))
}

/// Builds an autoscaler on `client` with `--cloud-provider=clusterapi`, the
/// cluster being its own management cluster, `CAPI_GROUP` and
/// `CAPI_VERSION` as in the environment, and the extra `args`
/// (`--node-group-auto-discovery=clusterapi:...` among them).
pub async fn clusterapi(
    client: Client,
    clock: simclock::Clock,
    args: &[String],
) -> Result<InProcess, InProcessError> {
    let (flags, validated) = parse("clusterapi", args)?;
    let client = crate::client::honoring_retry_after(client);
    let settings =
        clusterapi::Settings::new(&flags.node_group_auto_discovery).map_err(|error| {
            InProcessError::Provider {
                provider: "clusterapi",
                error,
            }
        })?;
    let (cache, _) = ClusterCache::start_with(
        client.clone(),
        clock.clone(),
        Extra {
            provisioning_requests: flags.enable_provisioning_requests,
        },
    );
    cache.wait_ready().await;
    let provider = ClusterApiProvider::new(client.clone(), clock.clone(), settings)
        .await
        .map_err(|error| InProcessError::Provider {
            provider: "clusterapi",
            error,
        })?;
    Ok(assemble(
        client,
        clock,
        flags,
        validated,
        cache,
        Arc::new(provider),
        Arc::new(Faults::default()),
    ))
}

/// Builds an autoscaler on `client` with `--cloud-provider=aws`, reaching
/// AWS (or an emulator) as `connection` says, and the extra `args`
/// (`--nodes` or `--node-group-auto-discovery=asg:tag=...` among them).
/// With the `aws` feature.
#[cfg(feature = "aws")]
pub async fn aws(
    client: Client,
    clock: simclock::Clock,
    connection: aws::Connection,
    args: &[String],
) -> Result<InProcess, InProcessError> {
    let (flags, validated) = parse("aws", args)?;
    let client = crate::client::honoring_retry_after(client);
    let provider_error = |error| InProcessError::Provider {
        provider: "aws",
        error,
    };
    let mut settings = aws::Settings::new(&validated.node_groups, &flags.node_group_auto_discovery)
        .map_err(provider_error)?;
    settings.connection = connection;
    let (cache, _) = ClusterCache::start_with(
        client.clone(),
        clock.clone(),
        Extra {
            provisioning_requests: flags.enable_provisioning_requests,
        },
    );
    cache.wait_ready().await;
    let provider = AwsProvider::new(client.clone(), clock.clone(), settings)
        .await
        .map_err(provider_error)?;
    Ok(assemble(
        client,
        clock,
        flags,
        validated,
        cache,
        Arc::new(provider),
        Arc::new(Faults::default()),
    ))
}

/// Checks `args` as the autoscaler with `--cloud-provider=provider`
/// would read them, before anything starts: an unknown flag or a refused
/// value is the error the autoscaler would give.
pub fn check_flags(provider: &str, args: &[String]) -> Result<(), InProcessError> {
    parse(provider, args).map(|_| ())
}

fn parse(
    provider: &str,
    args: &[String],
) -> Result<(Flags, crate::config::Validated), InProcessError> {
    let argv = [
        "cluster-autoscaler".to_string(),
        format!("--cloud-provider={provider}"),
    ]
    .into_iter()
    .chain(args.iter().cloned());
    let flags = Flags::try_parse_from(normalize_args(argv))?;
    let validated = flags.validate()?;
    Ok((flags, validated))
}

fn assemble(
    client: Client,
    clock: simclock::Clock,
    flags: Flags,
    validated: crate::config::Validated,
    cache: Arc<ClusterCache>,
    provider: Arc<dyn CloudProvider>,
    faults: Arc<Faults>,
) -> InProcess {
    let timeouts = (
        flags.max_inactivity,
        flags.max_failing_time,
        flags.effective_max_startup_time(),
    );
    let metrics = Arc::new(Metrics::new(flags.emit_per_nodegroup_metrics));
    let autoscaler = Autoscaler::new(
        client,
        clock.clone(),
        flags,
        validated,
        cache,
        provider,
        metrics,
    );
    let endpoints = Endpoints {
        metrics: autoscaler.metrics.clone(),
        liveness: Arc::new(Mutex::new(Some(autoscaler.liveness.clone()))),
        decisions: Arc::new(Mutex::new(Some(autoscaler.decisions.clone()))),
        clock,
        timeouts,
        snapshotter: autoscaler.snapshotter.clone(),
        profiling: false,
    };
    InProcess {
        autoscaler,
        faults,
        endpoints,
    }
}
