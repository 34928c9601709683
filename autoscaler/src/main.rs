//! The `cluster-autoscaler` binary: CA's flags, against the cluster of
//! `--kubeconfig` (or in-cluster config), with `--cloud-provider=kwok`.
//!
//! Start-up order, as upstream: flags are validated (a bad value exits
//! before anything starts), the metrics server comes up on `--address`,
//! leader election runs when enabled, then the loop. SIGTERM or SIGINT
//! deletes the status ConfigMap and cleans the provider up.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use autoscaler::cache::{ClusterCache, Extra};
#[cfg(feature = "aws")]
use autoscaler::cloudprovider::aws::{self, AwsProvider};
use autoscaler::cloudprovider::builder::{ProviderName, UnsupportedProvider};
use autoscaler::cloudprovider::clusterapi::{self, ClusterApiProvider};
use autoscaler::cloudprovider::kwok::{KwokProvider, Settings};
use autoscaler::cloudprovider::{CloudError, CloudProvider};
use autoscaler::config::{ExpanderName, Flags, Validated};
use autoscaler::core::{Autoscaler, LoopError, node_lister};
use autoscaler::debuggingsnapshot::DebuggingSnapshotter;
use autoscaler::leaderelection::LeaderElection;
use autoscaler::metrics::Metrics;
use autoscaler::server::Endpoints;

/// mimalloc instead of glibc's malloc: at 10,000 nodes (`testbed bench
/// --nodes 10000`) the binary used 22% less CPU with it (106.8 s against
/// 137.2 s) for 3% more peak memory, as the testbed found at 30,000 pods.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Why the autoscaler did not start, or why it ended.
#[derive(Debug, thiserror::Error)]
enum StartError {
    /// `--cloud-provider` names no provider this autoscaler runs.
    #[error("{0}")]
    Provider(UnsupportedProvider),
    /// `--expander=price`: no provider has a pricing model.
    #[error("--expander=price: the {0} cloud provider has no pricing model")]
    NoPricingModel(ProviderName),
    /// A provider this build left out (its cargo feature was off).
    #[error(
        "--cloud-provider={0}: this cluster-autoscaler was built without the {0} provider \
         (cargo build -p autoscaler --features {0})"
    )]
    NotBuilt(ProviderName),
    /// `--expander=grpc`.
    #[error("--expander=grpc: the grpc expander is not supported by this autoscaler")]
    GrpcExpander,
    /// No `--kubeconfig`, and no default or in-cluster config either.
    #[error("no --kubeconfig and no usable default or in-cluster config: {0}")]
    InferConfig(#[source] kube::config::InferConfigError),
    /// The `--kubeconfig` file cannot be used.
    #[error("--kubeconfig={path}: {source}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// `--kubernetes` is not a URL.
    #[error("--kubernetes={url}: {source}")]
    ApiServerUrl {
        /// The value.
        url: String,
        /// Why.
        source: http::uri::InvalidUri,
    },
    /// The API client cannot be built from its configuration.
    #[error("building the API client: {0}")]
    Client(#[source] kube::Error),
    /// The `--cloud-config` file cannot be used.
    #[error("cannot build management cluster config: --cloud-config={path}: {source}")]
    ManagementKubeconfig {
        /// The file.
        path: String,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// No in-cluster config for the management cluster.
    #[error(
        "cannot build management cluster config: in-cluster (--clusterapi-cloud-config-authoritative without --cloud-config): {0}"
    )]
    ManagementInCluster(#[source] kube::config::InClusterError),
    /// The management cluster's client cannot be built.
    #[error("cannot build management cluster config: {0}")]
    ManagementClient(#[source] kube::Error),
    /// Nothing can listen on `--address`.
    #[error("--address={address}: cannot listen: {source}")]
    Listen {
        /// The flag's value.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// The API server cannot be reached before leader election.
    #[error("listing nodes before leader election: {0}")]
    ListNodes(#[source] kube::Error),
    /// The provider's settings are refused.
    #[error("{0}")]
    ProviderSettings(#[source] CloudError),
    /// The provider cannot be built.
    #[error("building the {provider} cloud provider: {source}")]
    BuildProvider {
        /// The provider.
        provider: ProviderName,
        /// Why.
        source: CloudError,
    },
    /// `--once`: the loop failed.
    #[error("the loop failed ({kind}): {0}", kind = .0.kind())]
    Loop(#[source] LoopError),
    /// `--once`: the decision record cannot be printed.
    #[error("printing the decision record: {0}")]
    Print(#[source] serde_json::Error),
    /// The leader lease was lost.
    #[error("{0}")]
    LeadershipLost(String),
}

fn init_logging(flags: &Flags) {
    let level = match flags.verbosity {
        0 | 1 => "info",
        2..=4 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!(
            "autoscaler={level},cluster_autoscaler={level},warn"
        ))
    });
    // Colours only on a terminal: `kubectl logs` and log files get plain text.
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    if flags.logging_format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn client(flags: &Flags) -> Result<kube::Client, StartError> {
    let mut config = if flags.kubeconfig.is_empty() {
        kube::Config::infer()
            .await
            .map_err(StartError::InferConfig)?
    } else {
        let bad = |source| StartError::Kubeconfig {
            path: flags.kubeconfig.clone(),
            source,
        };
        let kc = kube::config::Kubeconfig::read_from(&flags.kubeconfig).map_err(bad)?;
        kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(bad)?
    };
    if !flags.kubernetes.is_empty() {
        let url = &flags.kubernetes;
        config.cluster_url = url.parse().map_err(|source| StartError::ApiServerUrl {
            url: url.clone(),
            source,
        })?;
    }
    // client-go retries only what the server asks to be retried (a
    // Retry-After header); kube's default layer retries every 429 with a
    // backoff of up to 1000 s, which would hold a refused eviction (a PDB
    // 429) for minutes instead of letting the drain retry it on its own pace.
    config.default_retry = false;
    kube::Client::try_from(config)
        .map(autoscaler::client::honoring_retry_after)
        .map_err(StartError::Client)
}

/// The Cluster API management cluster's client (upstream's rules): the
/// kubeconfig `--cloud-config`; without it the workload cluster's client,
/// or the in-cluster config with `--clusterapi-cloud-config-authoritative`.
async fn management_client(
    flags: &Flags,
    workload: &kube::Client,
) -> Result<kube::Client, StartError> {
    let config = if !flags.cloud_config.is_empty() {
        let bad = |source| StartError::ManagementKubeconfig {
            path: flags.cloud_config.clone(),
            source,
        };
        let kc = kube::config::Kubeconfig::read_from(&flags.cloud_config).map_err(bad)?;
        kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(bad)?
    } else if flags.clusterapi_cloud_config_authoritative {
        kube::Config::incluster().map_err(StartError::ManagementInCluster)?
    } else {
        return Ok(workload.clone());
    };
    kube::Client::try_from(config)
        .map(autoscaler::client::honoring_retry_after)
        .map_err(StartError::ManagementClient)
}

/// Checks that the provider and the expanders can work together, before
/// anything starts.
fn check_provider(flags: &Flags, validated: &Validated) -> Result<ProviderName, StartError> {
    let provider = ProviderName::parse(&flags.cloud_provider).map_err(StartError::Provider)?;
    if provider == ProviderName::Aws && !cfg!(feature = "aws") {
        return Err(StartError::NotBuilt(provider));
    }
    for e in &validated.expanders {
        match e {
            ExpanderName::Price => return Err(StartError::NoPricingModel(provider)),
            ExpanderName::Grpc => return Err(StartError::GrpcExpander),
            _ => {}
        }
    }
    Ok(provider)
}

async fn stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

async fn run(flags: Flags, validated: Validated, provider: ProviderName) -> Result<(), StartError> {
    tracing::info!(
        "Cluster Autoscaler {} (behaviour; cluster-autoscaler {})",
        autoscaler::CA_VERSION,
        env!("CARGO_PKG_VERSION")
    );
    let clock = simclock::Clock::new();
    let client = client(&flags).await?;
    let metrics = Arc::new(Metrics::new(flags.emit_per_nodegroup_metrics));
    let liveness = Arc::new(Mutex::new(None));
    let decisions = Arc::new(Mutex::new(None));
    let snapshotter = flags
        .debugging_snapshot_enabled
        .then(|| Arc::new(DebuggingSnapshotter::default()));
    let endpoints = Endpoints {
        metrics: metrics.clone(),
        liveness: liveness.clone(),
        decisions: decisions.clone(),
        clock: clock.clone(),
        timeouts: (
            flags.max_inactivity,
            flags.max_failing_time,
            flags.effective_max_startup_time(),
        ),
        snapshotter: snapshotter.clone(),
        profiling: flags.profiling,
    };
    let _server =
        endpoints
            .serve(validated.address)
            .await
            .map_err(|source| StartError::Listen {
                address: flags.address.clone(),
                source,
            })?;
    tracing::info!(
        "metrics, health check and decisions on http://{}",
        validated.address
    );
    let election = LeaderElection {
        namespace: flags.namespace.clone(),
        name: if flags.lease_resource_name.is_empty() {
            flags.leader_elect_resource_name.clone()
        } else {
            flags.lease_resource_name.clone()
        },
        identity: apimachinery::rand::holder_identity("cluster-autoscaler"),
        lease_duration: flags.leader_elect_lease_duration,
        renew_deadline: flags.leader_elect_renew_deadline,
        retry_period: flags.leader_elect_retry_period,
    };
    if flags.leader_elect {
        kube::Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
            .list(&kube::api::ListParams::default().limit(1))
            .await
            .map_err(StartError::ListNodes)?;
        tokio::select! {
            _ = election.acquire(&client, &clock) => {}
            _ = stop_signal() => return Ok(()),
        }
    }
    let (cache, _cache_task) = ClusterCache::start_with(
        client.clone(),
        clock.clone(),
        Extra {
            provisioning_requests: flags.enable_provisioning_requests,
        },
    );
    cache.wait_ready().await;
    let unbuilt = |source| StartError::BuildProvider { provider, source };
    let provider: Arc<dyn CloudProvider> = match provider {
        ProviderName::Kwok => {
            let settings = Settings::from_env().map_err(StartError::ProviderSettings)?;
            Arc::new(
                KwokProvider::new(client.clone(), node_lister(&cache), settings)
                    .await
                    .map_err(unbuilt)?,
            )
        }
        ProviderName::ClusterApi => {
            let settings = clusterapi::Settings::new(&flags.node_group_auto_discovery)
                .map_err(StartError::ProviderSettings)?;
            let management = management_client(&flags, &client).await?;
            Arc::new(
                ClusterApiProvider::new(management, clock.clone(), settings)
                    .await
                    .map_err(unbuilt)?,
            )
        }
        #[cfg(not(feature = "aws"))]
        ProviderName::Aws => return Err(StartError::NotBuilt(provider)),
        #[cfg(feature = "aws")]
        ProviderName::Aws => {
            let settings =
                aws::Settings::new(&validated.node_groups, &flags.node_group_auto_discovery)
                    .map_err(StartError::ProviderSettings)?;
            Arc::new(
                AwsProvider::new(client.clone(), clock.clone(), settings)
                    .await
                    .map_err(unbuilt)?,
            )
        }
    };
    let mut autoscaler = Autoscaler::new(
        client.clone(),
        clock.clone(),
        flags.clone(),
        validated,
        cache,
        provider,
        metrics,
    );
    if flags.once {
        let record = autoscaler.run_one_loop().await.map_err(StartError::Loop)?;
        let text = serde_json::to_string_pretty(&record).map_err(StartError::Print)?;
        println!("{text}");
        return Ok(());
    }
    if let Ok(mut l) = liveness.lock() {
        *l = Some(autoscaler.liveness.clone());
    }
    if let Ok(mut d) = decisions.lock() {
        *d = Some(autoscaler.decisions.clone());
    }
    if snapshotter.is_some() {
        // The endpoint's snapshotter is the loop's.
        autoscaler.snapshotter = snapshotter;
    }
    let lost = async {
        if flags.leader_elect {
            election.hold(&client, &clock).await
        } else {
            std::future::pending::<String>().await
        }
    };
    let (tx, rx) = tokio::sync::oneshot::channel::<String>();
    let stop = async move {
        tokio::select! {
            _ = stop_signal() => {}
            why = lost => {
                let _ = tx.send(why);
            }
        }
    };
    autoscaler.run_until(stop).await;
    match rx.await {
        Ok(why) => Err(StartError::LeadershipLost(why)),
        Err(_) => Ok(()),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let flags = match Flags::from_env() {
        Ok(f) => f,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let validated = match flags.validate() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("cluster-autoscaler: {e}");
            return ExitCode::from(2);
        }
    };
    let provider = match check_provider(&flags, &validated) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("cluster-autoscaler: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(&flags);
    for w in flags.warnings() {
        tracing::warn!("{w}");
    }
    match run(flags, validated, provider).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("cluster-autoscaler: {e}");
            ExitCode::FAILURE
        }
    }
}
