//! `cluster-autoscaler`: a drop-in replacement for the upstream Kubernetes
//! Cluster Autoscaler (CA).
//!
//! The modules mirror upstream CA's packages, so that a CA engineer finds
//! their way at once:
//!
//! - [`config`]: the command-line flags (the FAQ's table is the contract).
//! - [`cloudprovider`]: node groups and the providers (`kwok` so far).
//! - [`simulator`]: the forkable snapshot and the drainability rules.
//!
//! Still to come (issue "The autoscaler"): `clusterstate` (readiness,
//! upcoming nodes, backoff, health), `simulator` (snapshot with
//! fork/revert, drainability), `scaleup`, `scaledown`, `status` and the
//! main loop.

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
