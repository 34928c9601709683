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
use autoscaler::cloudprovider::CloudProvider;
use autoscaler::cloudprovider::aws::{self, AwsProvider};
use autoscaler::cloudprovider::builder::ProviderName;
use autoscaler::cloudprovider::clusterapi::{self, ClusterApiProvider};
use autoscaler::cloudprovider::kwok::{KwokProvider, Settings};
use autoscaler::config::{ExpanderName, Flags, Validated};
use autoscaler::core::{Autoscaler, node_lister};
use autoscaler::debuggingsnapshot::DebuggingSnapshotter;
use autoscaler::leaderelection::LeaderElection;
use autoscaler::metrics::Metrics;
use autoscaler::server::Endpoints;

/// mimalloc instead of glibc's malloc: at 10,000 nodes (`testbed bench
/// --nodes 10000`) the binary used 22% less CPU with it (106.8 s against
/// 137.2 s) for 3% more peak memory, as the testbed found at 30,000 pods.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

async fn client(flags: &Flags) -> Result<kube::Client, String> {
    let mut config = if flags.kubeconfig.is_empty() {
        kube::Config::infer().await.map_err(|e| {
            format!("no --kubeconfig and no usable default or in-cluster config: {e}")
        })?
    } else {
        let kc = kube::config::Kubeconfig::read_from(&flags.kubeconfig)
            .map_err(|e| format!("--kubeconfig={}: {e}", flags.kubeconfig))?;
        kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(|e| format!("--kubeconfig={}: {e}", flags.kubeconfig))?
    };
    if !flags.kubernetes.is_empty() {
        config.cluster_url = flags
            .kubernetes
            .parse()
            .map_err(|e| format!("--kubernetes={}: {e}", flags.kubernetes))?;
    }
    // client-go retries only what the server asks to be retried (a
    // Retry-After header); kube's default layer retries every 429 with a
    // backoff of up to 1000 s, which would hold a refused eviction (a PDB
    // 429) for minutes instead of letting the drain retry it on its own pace.
    config.default_retry = false;
    kube::Client::try_from(config)
        .map(autoscaler::client::honoring_retry_after)
        .map_err(|e| format!("building the API client: {e}"))
}

/// The Cluster API management cluster's client (upstream's rules): the
/// kubeconfig `--cloud-config`; without it the workload cluster's client,
/// or the in-cluster config with `--clusterapi-cloud-config-authoritative`.
async fn management_client(flags: &Flags, workload: &kube::Client) -> Result<kube::Client, String> {
    let config = if !flags.cloud_config.is_empty() {
        let kc = kube::config::Kubeconfig::read_from(&flags.cloud_config).map_err(|e| {
            format!(
                "cannot build management cluster config: --cloud-config={}: {e}",
                flags.cloud_config
            )
        })?;
        kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(|e| {
                format!(
                    "cannot build management cluster config: --cloud-config={}: {e}",
                    flags.cloud_config
                )
            })?
    } else if flags.clusterapi_cloud_config_authoritative {
        kube::Config::incluster().map_err(|e| {
            format!("cannot build management cluster config: in-cluster (--clusterapi-cloud-config-authoritative without --cloud-config): {e}")
        })?
    } else {
        return Ok(workload.clone());
    };
    kube::Client::try_from(config)
        .map(autoscaler::client::honoring_retry_after)
        .map_err(|e| format!("cannot build management cluster config: {e}"))
}

/// Checks that the provider and the expanders can work together, before
/// anything starts.
fn check_provider(flags: &Flags, validated: &Validated) -> Result<ProviderName, String> {
    let provider = ProviderName::parse(&flags.cloud_provider).map_err(|e| e.to_string())?;
    for e in &validated.expanders {
        match e {
            ExpanderName::Price => {
                return Err(format!(
                    "--expander=price: the {provider} cloud provider has no pricing model"
                ));
            }
            ExpanderName::Grpc => {
                return Err(
                    "--expander=grpc: the grpc expander is not supported by this autoscaler".into(),
                );
            }
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

async fn run(flags: Flags, validated: Validated, provider: ProviderName) -> Result<(), String> {
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
            flags.max_startup_time,
        ),
        snapshotter: snapshotter.clone(),
        profiling: flags.profiling,
    };
    let _server = endpoints
        .serve(validated.address)
        .await
        .map_err(|e| format!("--address={}: cannot listen: {e}", flags.address))?;
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
            .map_err(|e| format!("listing nodes before leader election: {e}"))?;
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
    let provider: Arc<dyn CloudProvider> = match provider {
        ProviderName::Kwok => {
            let settings = Settings::from_env().map_err(|e| e.to_string())?;
            Arc::new(
                KwokProvider::new(client.clone(), node_lister(&cache), settings)
                    .await
                    .map_err(|e| format!("building the kwok cloud provider: {e}"))?,
            )
        }
        ProviderName::ClusterApi => {
            let settings = clusterapi::Settings::new(&flags.node_group_auto_discovery)
                .map_err(|e| e.to_string())?;
            let management = management_client(&flags, &client).await?;
            Arc::new(
                ClusterApiProvider::new(management, clock.clone(), settings)
                    .await
                    .map_err(|e| format!("building the clusterapi cloud provider: {e}"))?,
            )
        }
        ProviderName::Aws => {
            let settings =
                aws::Settings::new(&validated.node_groups, &flags.node_group_auto_discovery)
                    .map_err(|e| e.to_string())?;
            Arc::new(
                AwsProvider::new(client.clone(), clock.clone(), settings)
                    .await
                    .map_err(|e| format!("building the aws cloud provider: {e}"))?,
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
        let record = autoscaler
            .run_one_loop()
            .await
            .map_err(|e| format!("the loop failed ({}): {e}", e.kind()))?;
        let text = serde_json::to_string_pretty(&record)
            .map_err(|e| format!("printing the decision record: {e}"))?;
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
        Ok(why) => Err(why),
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
