//! `cluster-autoscaler`: a drop-in replacement for the upstream Kubernetes
//! Cluster Autoscaler (CA).
//!
//! The modules mirror upstream CA's packages, so that a CA engineer finds
//! their way at once. Data flows in this order each loop ([`core`]):
//!
//! - [`config`]: the command-line flags (the FAQ's table is the contract)
//!   and the grouped `--help`.
//! - [`cache`]: nodes, pods, PDBs and controllers from watches.
//! - [`cloudprovider`]: node groups and the providers; `builder` holds the
//!   one list of implemented providers (`kwok` so far).
//! - [`clusterstate`]: readiness, unregistered instances, upcoming nodes,
//!   backoff and health.
//! - [`simulator`]: the forkable snapshot and the drainability rules.
//! - [`scaleup`] and [`expander`]: which pending pods get which node group.
//! - [`scaledown`] and [`actuation`]: unneeded nodes, and their deletion
//!   (taints from [`taints`]).
//! - [`status`], [`metrics`], [`server`]: the status ConfigMap, events,
//!   `/metrics`, `/health-check` and `/decisions`.
//! - [`leaderelection`]: the Lease; [`inprocess`]: the autoscaler as a
//!   library beside an embedded cluster (tests and the conformance suite).

/// The upstream Cluster Autoscaler release whose behaviour (flags, defaults,
/// texts) this autoscaler follows. Logged at start-up the way CA logs its
/// version (`Cluster Autoscaler <version>`), where the conformance suite
/// reads it to decide which version-tagged scenarios apply.
pub const CA_VERSION: &str = "1.36.1";

pub mod actuation;
pub mod cache;
pub mod cloudprovider;
pub mod clusterstate;
pub mod config;
pub mod core;
pub mod expander;
pub mod inprocess;
pub mod leaderelection;
pub mod metrics;
pub mod scaledown;
pub mod scaleup;
pub mod server;
pub mod simulator;
pub mod status;
pub mod taints;
