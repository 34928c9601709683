//! The conformance crate's tests that run in Rust's test harness, in one
//! test binary: one link instead of one per file, and their tests side by
//! side instead of one binary after another. Each module is a subject of
//! its own; `cargo test -p conformance --test checks MODULE::` runs one
//! (`--features aws` for `autoscaler_aws` and the AWS parts of the others).
//! The suite itself (`--test conformance`), its Cluster API and AWS passes
//! and the container backend have binaries of their own: they run as their
//! own harness.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod autoscaler_aws;
mod autoscaler_binary;
mod autoscaler_clusterapi;
mod autoscaler_e2e;
mod autoscaler_kwok_provider;
mod deploy;
mod docs;
mod extension_check;
mod kubectl;
mod kwok_binary;
mod parsers;
mod shards;
mod tree;
mod watch_check;
mod whatif_predicts;
