//! The conformance suite: cucumber step definitions that check, end to end
//! on the embedded cluster from the `harness` crate, the behaviours that the
//! Cluster Autoscaler FAQ promises. The `.feature` files live in `features/`
//! at the workspace root; `tests/conformance.rs` runs them.
//!
//! Each scenario gets its own cluster: node groups declared by the
//! `Given` steps become the kwok provider's ConfigMaps, workloads are
//! created through the API, and the autoscaler under test starts on first
//! use. The autoscaler runs in-process on the cluster's virtual clock, so
//! "When 10 minutes pass" costs milliseconds. Every `Then` reads the cluster
//! (nodes, pods, events, the status ConfigMap) or the autoscaler's published
//! decision record, never its internals.
//!
//! The step library ([`steps`]) is meant for users' own feature files too.

pub mod runner;
pub mod steps;
pub mod world;

pub use world::CaWorld;
