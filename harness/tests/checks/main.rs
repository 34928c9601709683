//! The testbed's integration tests, in one test binary: `cargo test -p
//! harness --test checks MODULE::` runs one subject.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod capi;
mod cluster;
mod dra;
mod kwok_nodes;
