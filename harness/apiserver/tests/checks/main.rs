//! The API server's integration tests, in one test binary: `cargo test -p
//! apiserver --test checks MODULE::` runs one subject.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod eviction;
mod eviction_protobuf;
mod faults;
mod fidelity;
mod kube_client;
mod protobuf_kinds;
mod rbac;
mod restore;
