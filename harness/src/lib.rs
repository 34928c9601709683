//! Test clusters for the autoscaler and the conformance suite.
//!
//! - [`cluster`]: the `Cluster` API tests hold. [`cluster::ClusterBuilder::start`]
//!   brings up the embedded cluster in one call: the API server (crate
//!   `apiserver`), the [`scheduler`], the workload [`controllers`]
//!   (Deployments, ReplicaSets, Jobs, DaemonSets...) and kwok's fake nodes
//!   (crate `kwok`), each a task with its own in-memory client, all on one
//!   [`simclock::Clock`] so that virtual time works; and observers that
//!   wait on that clock. With [`cluster::ClusterBuilder::capi`] it also
//!   serves Cluster API (CRDs and [`controllers::CapiController`]), whose
//!   Machines become kwok Nodes with `kwok://<machine>` provider IDs.
//! - [`crds`]: upstream Cluster Autoscaler's CRDs (CapacityBuffers,
//!   CapacityQuotas, ProvisioningRequests).
//! - [`kwok_provider`]: the ConfigMaps the kwok cloud provider reads (its
//!   configuration and the node group templates).
//! - [`aws`]: an AWS API emulator (moto) for tests, and the bridge that
//!   makes its Auto Scaling groups' instances kwok Nodes with
//!   `aws:///<zone>/<id>` provider IDs ([`cluster::ClusterBuilder::aws`]).
//! - [`backend`]: where a cluster runs, behind one trait: embedded, our
//!   testbed image, kwok's cluster image or a kind node, the last three in
//!   containers ([`container`]: Docker or podman through the Docker API).
//! - [`slim_pod`]: pods decoded with the fields the controllers and
//!   counting watchers read (most of a pod's decoding cost is skipped).
//! - [`indexed_job`]: work split over the pods of a Kubernetes Indexed Job
//!   (a what-if sweep's cases, the suite's shards), and finding their
//!   results.
//! - [`EmbeddedApiServer`]: the API server alone, served over TLS with a
//!   kubeconfig, for external binaries and kubectl.
//!
//! The scheduler places pods with the same predicates the autoscaler
//! simulates (crate `predicates`), and selectors come from the shared
//! `apimachinery` crate.

#[cfg(feature = "aws")]
pub mod aws;
pub mod backend;
pub mod cluster;
pub mod container;
pub mod controllers;
pub mod crds;
pub mod indexed_job;
pub mod kwok_provider;
pub mod scheduler;
pub mod slim_pod;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub use apiserver::{ApiServer, TlsEndpoint};
pub use simclock::Clock;

/// Why starting the testbed failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server could not start.
    #[error("starting the embedded API server failed: {0}")]
    ApiServer(#[from] apiserver::ApiError),
    /// Serving over TLS failed.
    #[error(transparent)]
    Serve(#[from] apiserver::ServeError),
}

/// The embedded API server served over TLS, with its kubeconfig on disk.
pub struct EmbeddedApiServer {
    /// The server (in-memory clients come from [`ApiServer::client`]).
    pub api: ApiServer,
    /// The TLS endpoint.
    pub endpoint: TlsEndpoint,
    /// Where the kubeconfig was written.
    pub kubeconfig: PathBuf,
}

impl EmbeddedApiServer {
    /// Starts the API server, serves it on `addr` over TLS and writes the kubeconfig to `kubeconfig`.
    pub async fn start(clock: Clock, addr: SocketAddr, kubeconfig: &Path) -> Result<Self, Error> {
        let api = ApiServer::start(clock)?;
        let endpoint = api.serve_tls(addr).await?;
        endpoint.write_kubeconfig(kubeconfig)?;
        Ok(Self {
            api,
            endpoint,
            kubeconfig: kubeconfig.to_path_buf(),
        })
    }
}

/// kwok settings for scalability runs: leases off (docs/reference/kwok-rules.md §1.4: a
/// duration of 0 disables them), since nothing in the embedded cluster
/// reads them and 1,000 leases renewed every 10 s dominate long runs.
pub fn kwok_config_for_scale() -> kwok::Config {
    kwok::Config {
        node_lease_duration: std::time::Duration::ZERO,
        ..kwok::Config::default()
    }
}

/// The default kubeconfig path of `testbed up`: under the system temp directory.
pub fn default_kubeconfig_path() -> PathBuf {
    std::env::temp_dir().join("testbed").join("kubeconfig")
}

/// A plain HTTP/1.0 GET on 127.0.0.1 (an autoscaler's `/metrics`,
/// `/health-check` or `/decisions`): the status code and the body.
pub async fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).await?;
    let code = buf
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = buf
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((code, body))
}

/// The value of the first sample of `name` in a Prometheus text exposition
/// whose labels hold `label` (`key="value"`; any sample when empty).
pub fn metric_value(text: &str, name: &str, label: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let rest = l.strip_prefix(name)?;
        let (labels, value) = match rest.strip_prefix('{') {
            Some(r) => r.split_once('}')?,
            None if rest.starts_with(' ') => ("", rest),
            None => return None,
        };
        if !label.is_empty() && !labels.split(',').any(|l| l == label) {
            return None;
        }
        value.split_whitespace().next()?.parse().ok()
    })
}
