//! The conformance suite: cucumber step definitions that check, end to end on
//! a test cluster from the `harness` crate, the behaviours that the Cluster
//! Autoscaler FAQ promises. The `.feature` files live in `features/` at the
//! workspace root.
//!
//! Nothing is implemented yet: the runner (a `cargo test` target with
//! `harness = false`) and the step definitions come with the conformance
//! issue, once the embedded cluster and the autoscaler exist.
