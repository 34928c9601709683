//! Why a scenario's cluster or autoscaler did not start
//! ([`StartError`]), and why the autoscaler's endpoints could not be read
//! ([`EndpointError`]). Steps turn them into their messages for the report.

use std::path::PathBuf;

use harness::cluster::ClusterError;

use crate::binary::{FlagError, ProviderError};

/// Why the cluster or the autoscaler under test of a scenario did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configured cluster backend is unknown or unusable.
    #[error("the cluster backend {name:?}: {reason}")]
    Backend {
        /// The backend's name (`--cluster`).
        name: String,
        /// Why.
        reason: String,
    },
    /// The node groups' Auto Scaling groups could not be made.
    #[error("creating the node groups in the AWS emulator: {0}")]
    AwsGroups(String),
    /// The AWS emulator is not running.
    #[error("the AWS emulator: {0}")]
    AwsEmulator(String),
    /// The cluster did not start.
    #[error("starting the cluster ({backend} backend): {source}")]
    Cluster {
        /// The backend's name.
        backend: String,
        /// Why.
        #[source]
        source: ClusterError,
    },
    /// One of the suite's kwok Stages could not be created.
    #[error("creating the kwok stage {name}: {source}")]
    Stage {
        /// The Stage's name.
        name: String,
        /// Why.
        #[source]
        source: ClusterError,
    },
    /// A starting node of a group could not be created.
    #[error("creating a starting node of {group}: {source}")]
    StartingNode {
        /// The group.
        group: String,
        /// Why.
        #[source]
        source: ClusterError,
    },
    /// The starting nodes did not become Ready.
    #[error("the initial nodes: {0}")]
    InitialNodes(#[source] ClusterError),
    /// The priority expander's ConfigMap could not be created.
    #[error("creating the priority expander's ConfigMap: {0}")]
    ExpanderPriorities(#[source] ClusterError),
    /// An object the scenario declared could not be created.
    #[error("{0}")]
    Object(String),
    /// Our autoscaler could not be built in-process.
    #[error("building the in-process autoscaler ({provider} provider): {source}")]
    InProcess {
        /// The provider's `--cloud-provider` value.
        provider: &'static str,
        /// Why.
        #[source]
        source: autoscaler::inprocess::InProcessError,
    },
    /// Binary mode was lost between scenarios (restarting a binary).
    #[error("binary mode is not configured")]
    NotBinaryMode,
    /// The binary lacks the scenario's cloud provider.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// A flag for the binary could not be scaled to the time scale.
    #[error(transparent)]
    Flags(#[from] FlagError),
    /// No free port for the binary's `--address`.
    #[error("picking a port for --address: {0}")]
    Port(#[source] std::io::Error),
    /// A binary's log file or its directory could not be created.
    #[error("creating {}: {source}", path.display())]
    Log {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The binary could not be started.
    #[error("starting {}: {source}", path.display())]
    Spawn {
        /// The executable.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The binary exited before its first loop ended: its status and log.
    #[error("{0}")]
    Exited(String),
    /// A binary needs the embedded API server, which a cluster in a
    /// container does not have.
    #[error("an autoscaler binary needs the embedded API server")]
    NoEmbeddedApiServer,
    /// The embedded API server could not be served over TLS.
    #[error("serving the API server over TLS: {0}")]
    ServeTls(#[source] apiserver::ServeError),
    /// The temp dir for the binary's kubeconfig could not be created.
    #[error("creating a temp dir: {0}")]
    TempDir(#[source] std::io::Error),
    /// The binary's kubeconfig could not be written.
    #[error("writing the kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        /// The kubeconfig's path.
        path: PathBuf,
        /// Why.
        #[source]
        source: apiserver::ServeError,
    },
}

/// Why the autoscaler's endpoints (`/decisions`, `/metrics`,
/// `/health-check`) could not be read.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// Several replicas run: there is no one autoscaler to read.
    #[error(
        "this step reads the autoscaler's endpoints, and a scenario with several replicas has no one autoscaler to read"
    )]
    Replicas,
    /// The GET failed.
    #[error("GET http://127.0.0.1:{port}{path}: {source}")]
    Http {
        /// The binary's port.
        port: u16,
        /// The endpoint.
        path: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The binary answered `/decisions` with an error: it has no decision
    /// record.
    #[error(
        "the autoscaler under test publishes no decision record (GET /decisions: {code}); this step needs it"
    )]
    NoDecisionRecord {
        /// The status code.
        code: u16,
    },
    /// The decision record does not parse.
    #[error("GET /decisions: {source}: {body}")]
    Decisions {
        /// Why.
        #[source]
        source: serde_json::Error,
        /// What the binary answered.
        body: String,
    },
    /// The endpoint answered with an error.
    #[error("GET {path}: {code}: {body}")]
    Status {
        /// The endpoint.
        path: &'static str,
        /// The status code.
        code: u16,
        /// What the binary answered.
        body: String,
    },
}
