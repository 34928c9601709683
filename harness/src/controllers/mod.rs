//! The workload controllers of the embedded cluster (kube-controller-manager's
//! role): ReplicaSet, Deployment, DaemonSet, StatefulSet, Job, and pod
//! garbage collection for pods bound to nodes that no longer exist.
//! (Owner-reference GC, namespace termination and PodDisruptionBudget status
//! are done by the API server's own loop, `apiserver::gc`.)
//!
//! One task watches pods, nodes and the workload kinds through the API
//! server, keeps a cache, and after each batch of changes reconciles the
//! owners that changed. Pods it creates or deletes are recorded in the cache
//! at once (kube's "expectations"), so a reconcile never acts twice on
//! changes the watch has not delivered yet. As kube-controller-manager's, a
//! ReplicaSet's sync creates or deletes at most `burstReplicas` (500) pods;
//! an owner whose sync was cut short is synced again at the next round,
//! after the changes delivered meanwhile, and each creation yields to the
//! other tasks, so that a 300,000-pod scale-up does not hold the runtime
//! while the scheduler and kwok wait. The task and its cache are in
//! `workloads/controller.rs`, each reconciler in a file of its own.
//!
//! The workload controllers read pods as [`crate::slim_pod::SlimPod`], the
//! resourceclaim controller as [`crate::slim_pod::BarePod`]: decoded with
//! the fields they read only.
//!
//! [`resourceclaim`] makes ResourceClaims from templates for pods and
//! releases claims whose pods are gone (a task of its own).
//!
//! [`capi`] is the Cluster API side, started only by
//! [`crate::cluster::ClusterBuilder::capi`]: its CRDs and a controller that
//! reconciles MachineDeployment → MachineSet → Machine → kwok Node.

pub mod capi;
pub mod resourceclaim;
mod workloads;

pub use capi::CapiController;
pub use resourceclaim::ResourceClaimController;

pub use workloads::Controllers;
