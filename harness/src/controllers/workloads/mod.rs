//! The workload controllers (see the module docs of [`super`]): the
//! controller task with its cache (`controller`), one file per reconciler
//! (`replicaset`, `deployment`, `daemonset`, `statefulset`, `job`), where
//! a DaemonSet's pods belong (`placement`), and what they read off pods
//! (`pods`).

mod controller;
mod daemonset;
mod deployment;
mod job;
mod placement;
mod pods;
mod replicaset;
mod statefulset;

pub use controller::Controllers;
