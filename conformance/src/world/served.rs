//! The embedded API server served over TLS for an autoscaler binary
//! ([`serve_for_binary`]), and a free port for the binary's `--address`.

use harness::cluster::Cluster;

use super::errors::StartError;

/// The embedded API server served over TLS for an autoscaler binary: its
/// kubeconfig in a temp dir, and a free port for its `--address`.
pub struct Served {
    /// The TLS endpoint (served while held).
    pub endpoint: harness::TlsEndpoint,
    /// Holds the kubeconfig.
    pub dir: tempfile::TempDir,
    /// The kubeconfig's path.
    pub kubeconfig: std::path::PathBuf,
    /// A free port on 127.0.0.1.
    pub port: u16,
}

/// A free port on 127.0.0.1, for a binary's `--address`.
pub fn free_port() -> Result<u16, StartError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(StartError::Port)
}

/// Serves the cluster's API server over TLS for a binary.
pub async fn serve_for_binary(cluster: &Cluster) -> Result<Served, StartError> {
    let api = cluster
        .api_server()
        .ok_or(StartError::NoEmbeddedApiServer)?;
    let endpoint = api
        .serve_tls(([127, 0, 0, 1], 0).into())
        .await
        .map_err(StartError::ServeTls)?;
    let dir = tempfile::tempdir().map_err(StartError::TempDir)?;
    let kubeconfig = dir.path().join("kubeconfig");
    endpoint
        .write_kubeconfig(&kubeconfig)
        .map_err(|source| StartError::Kubeconfig {
            path: kubeconfig.clone(),
            source,
        })?;
    let port = free_port()?;
    Ok(Served {
        endpoint,
        dir,
        kubeconfig,
        port,
    })
}
