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
