//! `kwok`: the fake-kubelet controller of the testbed.
//!
//! This crate will hold the kwok controller (library and `kwok` binary): it
//! watches nodes and pods through any Kubernetes API server (the testbed's
//! embedded one or a real one through a kubeconfig) and drives their
//! lifecycle with kwok's Stage API (`kwok.x-k8s.io/v1alpha1`): fake nodes
//! become Ready with capacity, heartbeats and leases; bound pods become
//! Running and Ready; pods being deleted are removed. Delays, jitter and
//! failures are configured per scenario with Stages (see
//! `shared/spec/kwok-compat.md`).
//!
//! Nothing is implemented yet; the embedded API server comes first.
