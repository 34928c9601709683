//! The autoscaler's view of the cluster, kept up to date by watches (no
//! relisting per loop): nodes, pods (indexed by node), PodDisruptionBudgets
//! and the controllers the drainability rules look up; CSINodes, claims,
//! volumes and classes (NodeVolumeLimits); DeviceClasses, ResourceClaims
//! and ResourceSlices (DRA, [`dra`]); with
//! `--enable-provisioning-requests`, ProvisioningRequests and PodTemplates. Per-node
//! [`NodeInfo`](predicates::NodeInfo)s are rebuilt only for nodes whose pods changed, so building
//! the loop's snapshot costs a clone.
//!
//! Pods in phase Succeeded or Failed are invisible (docs/reference/ca-rules.md §0.2);
//! expendable pods (priority below `--expendable-pods-priority-cutoff`) do
//! not enter the snapshot. An unbound pod added or updated within
//! [`RECENT_UNSCHEDULABLE`] of being marked Unschedulable notifies
//! [`ClusterCache::unschedulable_pod`], so the loop can start at once
//! (upstream's `UnschedulablePodObserver`: a re-mark with a new message,
//! after the scheduler's backoff, triggers a loop too). While the loop has
//! nodes upcoming ([`ClusterCache::set_nodes_upcoming`]), a pod the
//! scheduler binds notifies [`ClusterCache::pod_bound`]: the room a loop
//! counted on upcoming nodes for marked pods may have gone to pods the
//! scheduler had not tried, and the marked pods would otherwise wait for
//! its backoff to mark them again (a tail of seconds at 30,000 pods).
//! Upstream has no such trigger; it changes when a loop starts, not what it
//! decides.
//!
//! Pods are kept compact: their scheduling facts (requests, ports,
//! priority, anti-affinity) are computed once into a [`PodInfo`](predicates::PodInfo) when the
//! pod changes, and the copy kept drops what CA never reads again
//! (containers, container statuses, managed fields, the last-applied
//! annotation; [`PodInfo::compact`](predicates::PodInfo::compact)). A pending pod's `Container`s alone are over
//! 2 KB, at 150,000 pending pods a third of the autoscaler's memory; what
//! scale-up needs of them is in the `PodInfo`.
//!
//! The parts: `pod`, the questions asked of one pod; the [`State`] and its
//! updates; the pure front door, `apply`, which turns a watch event's
//! `Change` into state updates and the wake-ups to fire (tested without a
//! server); and the [`ClusterCache`], whose loop over the watch streams
//! applies changes and fires their wake-ups.

mod apply;
pub mod desired_pods;
pub mod dra;
pub mod node_memo;
mod pod;
mod state;
mod storage;
mod watch;

pub use pod::{RECENT_UNSCHEDULABLE, is_active, is_expendable, is_unschedulable};
pub use state::{CachedController, State};
pub use storage::StorageObject;
pub use watch::{ClusterCache, Extra};

/// The hasher of the maps that every loop reads once or more per node
/// (keyed by node name or object address): foldhash, several times faster
/// than the standard library's SipHash on short keys, and seeded at random
/// as it is.
pub type LoopHasher = foldhash::fast::RandomState;
