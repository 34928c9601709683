//! The conformance suite: cucumber step definitions that check, end to end
//! on the embedded cluster from the `harness` crate, the behaviours that the
//! Cluster Autoscaler FAQ promises. The `.feature` files live in `features/`
//! at the workspace root; `tests/conformance.rs` runs them.
//!
//! Each scenario gets its own cluster ([`world`]): node groups declared by
//! the `Given` steps become the kwok provider's ConfigMaps, workloads are
//! created through the API, and the autoscaler under test starts on first
//! use: in-process on the cluster's virtual clock ("When 10 minutes pass"
//! costs milliseconds), or as a CA-compatible binary against the embedded
//! API server over TLS, in real time divided by a scale, its timing flags
//! divided alike. Every `Then` reads the cluster (nodes, pods, events, the
//! status ConfigMap) or what the autoscaler publishes (metrics, health,
//! decision records), never its internals.
//!
//! With `--cloud-provider clusterapi` (or the step `Given node groups are
//! Cluster API MachineDeployments`) the node groups are Cluster API
//! MachineDeployments instead ([`capi`]), served by the testbed's CAPI
//! controller, and the autoscaler runs with `--cloud-provider=clusterapi`.
//! With `--cloud-provider aws` they are Auto Scaling groups of an AWS
//! emulator ([`aws`]: moto, reset before each scenario), whose instances the
//! testbed's bridge makes kwok Nodes, and the autoscaler runs with
//! `--cloud-provider=aws`.
//!
//! [`compare`] runs one scale scenario against one or two autoscaler
//! binaries and reports what a user feels, with the ratios (`testbed
//! compare`). [`latency`] measures each pod's scale-up latency as the FAQ
//! defines it, for `compare` and for the objective's step. [`bench`] runs
//! the `compare` scenario at several scales for one binary and writes a
//! table and an SVG plot (`testbed bench`), with [`watch_check`]'s proof
//! that the testbed's watches lost no change. [`binary_side`] starts a CA
//! binary as a side of the what-if (crate `whatif`, `testbed whatif
//! --binary`), as binary mode starts one.
//!
//! [`invariants`] watches the safety promises over a whole scenario (group
//! bounds, blocking pods, PDBs, leftover taints, replicas back) for the
//! fault scenarios, whose API faults the embedded API server injects
//! (`apiserver::faults`, steps in [`steps::faults`]). [`replicas`] runs
//! the autoscaler as several replicas with leader election and tells from
//! the API server's log of writes which acted when. [`csi`] plays the
//! kubelet and CSI node plugins that give nodes their CSINodes.
//!
//! [`runner`] runs the features one scenario at a time and reports (a
//! line per scenario, a summary table, JUnit XML, cucumber JSON); `testbed
//! run` and the `conformance` test target both use it; test targets run
//! independent selections side by side in child processes ([`child_run`]).
//! The step library ([`steps`]) is meant for users' own feature files too.

pub mod aws;
pub mod bench;
pub mod binary;
pub mod binary_side;
pub mod capacity;
pub mod capi;
pub mod child_run;
pub mod compare;
pub mod csi;
pub mod invariants;
pub mod latency;
pub mod provreq;
pub mod replicas;
pub mod runner;
pub mod steps;
pub mod watch_check;
pub mod world;

pub use world::CaWorld;
