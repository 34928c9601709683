//! The autoscaler of a scenario: one in-process task, one binary, or
//! replicas with leader election; and how each starts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use autoscaler::server::Endpoints;
use harness::cluster::Cluster;

use super::errors::StartError;
use super::provider::Provider;
use super::served::{Served, free_port, serve_for_binary};
use crate::binary::{self, BinaryInfo};

/// The autoscaler process or task of a scenario.
pub(super) enum Autoscaler {
    InProcess {
        endpoints: Endpoints,
        task: tokio::task::JoinHandle<()>,
    },
    Binary(Box<BinaryProcess>),
    /// Replicas with leader election ([`crate::replicas`]), by the name
    /// the API server's log of writes gives their clients.
    Replicas(Vec<(Arc<str>, Replica)>),
}

impl Autoscaler {
    /// When the binary has exited: its exit status and the tail of its log.
    pub(super) fn exited(&mut self) -> Option<String> {
        match self {
            Autoscaler::Binary(b) => b.exited(),
            Autoscaler::InProcess { .. } => None,
            Autoscaler::Replicas(replicas) => replicas.iter_mut().find_map(|(_, r)| match r {
                Replica::Binary(b) => b.exited(),
                Replica::InProcess(_) => None,
            }),
        }
    }

    /// Stops the task, the binary or every replica, without waiting.
    pub(super) fn stop(&mut self) {
        match self {
            Autoscaler::InProcess { task, .. } => task.abort(),
            Autoscaler::Binary(b) => {
                let _ = b.child.start_kill();
            }
            Autoscaler::Replicas(replicas) => replicas.iter_mut().for_each(|(_, r)| r.kill()),
        }
    }
}

/// One replica of several.
pub(super) enum Replica {
    InProcess(tokio::task::JoinHandle<()>),
    Binary(Box<BinaryProcess>),
}

impl Replica {
    /// The hostname of a binary replica's UTS namespace.
    pub(super) fn hostname(&self) -> Option<&str> {
        match self {
            Replica::InProcess(_) => None,
            Replica::Binary(b) => b.hostname.as_deref(),
        }
    }

    /// Kills the replica: no graceful shutdown.
    pub(super) fn kill(&mut self) {
        match self {
            Replica::InProcess(task) => task.abort(),
            Replica::Binary(b) => {
                let _ = b.child.start_kill();
            }
        }
    }
}

/// An autoscaler binary and what it needs kept alive.
pub(super) struct BinaryProcess {
    pub(super) child: tokio::process::Child,
    pub(super) port: u16,
    pub(super) log: PathBuf,
    /// The embedded API server served for it alone (none for a cluster in
    /// a container): its address names the binary in the log of writes.
    pub(super) served: Option<Served>,
    /// The hostname of its UTS namespace, for a replica.
    pub(super) hostname: Option<String>,
}

impl BinaryProcess {
    /// When the binary has exited: its exit status and the tail of its log.
    fn exited(&mut self) -> Option<String> {
        let status = self.child.try_wait().ok()??;
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Some(format!(
            "the autoscaler binary exited ({status}); last log lines:\n{}",
            tail.join("\n")
        ))
    }
}

/// Starts our autoscaler in-process on `cluster`'s client for the
/// autoscaler under test.
pub(super) async fn start_in_process(
    cluster: &Cluster,
    clock: &simclock::Clock,
    provider: Provider,
    flags: &[String],
) -> Result<Autoscaler, StartError> {
    let built = build_in_process(cluster.client_under_test(), clock, provider, flags).await?;
    let endpoints = built.endpoints;
    let task = tokio::spawn(built.autoscaler.run());
    Ok(Autoscaler::InProcess { endpoints, task })
}

/// Builds our autoscaler on `client` for the scenario's provider, as the
/// binary wires it.
pub(crate) async fn build_in_process(
    client: kube::Client,
    clock: &simclock::Clock,
    provider: Provider,
    flags: &[String],
) -> Result<autoscaler::inprocess::InProcess, StartError> {
    let clock = clock.clone();
    match provider {
        Provider::Kwok => autoscaler::inprocess::kwok(client, clock, flags).await,
        Provider::ClusterApi => autoscaler::inprocess::clusterapi(client, clock, flags).await,
        Provider::Aws => return crate::aws::in_process(client, clock, flags).await,
    }
    .map_err(|source| StartError::InProcess {
        provider: provider.flag(),
        source,
    })
}

/// Starts the autoscaler binary `info` on `cluster` (a replica when
/// `hostname` is given), its output in a log file kept after the scenario.
pub(super) async fn start_binary(
    cluster: &Cluster,
    info: &BinaryInfo,
    provider: Provider,
    flags: &[String],
    extra: &[String],
    time_scale: f64,
    hostname: Option<&str>,
) -> Result<Box<BinaryProcess>, StartError> {
    info.check_provider(provider)?;
    // A cluster in a container comes with its kubeconfig; the embedded one
    // is served over TLS for the binary.
    let (served, kubeconfig, port) = match cluster.kubeconfig() {
        Some(path) => (None, path.to_path_buf(), free_port()?),
        None => {
            let s = serve_for_binary(cluster).await?;
            let (kubeconfig, port) = (s.kubeconfig.clone(), s.port);
            (Some(s), kubeconfig, port)
        }
    };
    let (log, log_file) = new_log()?;
    let mut command = binary::command(info, provider, &kubeconfig, port, flags, extra, time_scale)?;
    // A replica gets a hostname of its own, as a pod has.
    if let Some(name) = hostname {
        command = binary::with_hostname(&command, name);
    }
    if provider == Provider::Aws {
        let environment = crate::aws::emulator_environment()
            .await
            .map_err(StartError::AwsEmulator)?;
        command.envs(environment);
    }
    let stdout = log_file
        .try_clone()
        .map_err(|source| log_error(&log, source))?;
    let child = command
        .stdout(stdout)
        .stderr(log_file)
        .spawn()
        .map_err(|source| StartError::Spawn {
            path: info.path.clone(),
            source,
        })?;
    Ok(Box::new(BinaryProcess {
        child,
        port,
        log,
        served,
        hostname: hostname.map(String::from),
    }))
}

/// A new log file for a binary, numbered within this process's log
/// directory. Kept after the scenario, for failures: the runner prints the
/// path.
fn new_log() -> Result<(PathBuf, std::fs::File), StartError> {
    static LOGS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = LOGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let logs = std::env::temp_dir().join(format!("conformance-logs-{}", std::process::id()));
    std::fs::create_dir_all(&logs).map_err(|source| log_error(&logs, source))?;
    let log = logs.join(format!("autoscaler-{n}.log"));
    let file = std::fs::File::create(&log).map_err(|source| log_error(&log, source))?;
    Ok((log, file))
}

fn log_error(path: &Path, source: std::io::Error) -> StartError {
    StartError::Log {
        path: path.to_path_buf(),
        source,
    }
}
