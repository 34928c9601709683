//! `cluster-autoscaler`: a drop-in replacement for the upstream Kubernetes
//! Cluster Autoscaler (CA).
//!
//! This crate will hold, mirroring upstream CA's packages so that a CA
//! engineer finds their way at once: `cloudprovider` (node groups; the
//! `kwok`, `clusterapi` and `aws` providers), `clusterstate` (readiness,
//! upcoming nodes, backoff, health), `simulator` (cluster snapshot with
//! fork/revert, scheduler predicates shared with the testbed's scheduler,
//! drainability rules), `scaleup` (pod filtering, equivalence groups,
//! estimator, expanders, balancing, limits), `scaledown` (unneeded tracking,
//! removal simulation, taints, eviction) and `status` (ConfigMap, events,
//! metrics), plus the `cluster-autoscaler` binary with CA's flags.
//!
//! Nothing is implemented yet: the workspace foundation (issue "Workspace
//! foundation and the embedded Kubernetes API server") comes first.
