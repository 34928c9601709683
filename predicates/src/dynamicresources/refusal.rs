//! Why a pod's claims keep it off a node, each rendered once, in
//! kube-scheduler's words (DynamicResources plugin and the structured
//! allocator).

use std::fmt;

/// A request the allocator cannot evaluate: the pod fits on no node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AllocationError {
    /// The request names a DeviceClass that does not exist.
    ClassNotFound {
        /// The claim's `namespace/name`.
        claim: String,
        /// The request (`request/subrequest` for an alternative).
        request: String,
        /// The missing class.
        class: String,
    },
    /// A selector failed on a device (a missing attribute, a non-bool
    /// result) or did not compile.
    Cel {
        /// `class <name>` or `claim <namespace/name>`.
        owner: String,
        /// The request.
        request: String,
        /// The selector's index.
        selector: usize,
        /// CEL's error.
        message: String,
    },
}

impl fmt::Display for AllocationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ClassNotFound { request, class, .. } => {
                write!(f, "request {request}: device class {class} does not exist")
            }
            Self::Cel {
                owner,
                selector,
                message,
                ..
            } => write!(
                f,
                "{owner}: selector #{selector}: CEL runtime error: {message}"
            ),
        }
    }
}

/// Why the pod's claims do not fit a node (or any node).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClaimRefusal {
    /// A template's claim is not created yet (no `resourceClaimStatuses`
    /// entry for the pod's claim): the pod's `namespace/name`.
    NotCreatedYet(String),
    /// The claim (`namespace/name`) does not exist.
    NotFound(String),
    /// The claim is being deleted.
    BeingDeleted(String),
    /// The claim is reserved for as many pods as it may be.
    ReservedForMaximum(String),
    /// An allocated claim's devices are not reachable from the node.
    NotAvailableOnNode,
    /// The node's devices cannot satisfy the unallocated claims.
    CannotAllocate,
    /// The allocator could not evaluate a request.
    Allocation(AllocationError),
}

impl ClaimRefusal {
    /// Whether kube-scheduler reports it as an error of the plugin (the
    /// attempt fails with `running "DynamicResources" filter plugin: ...`,
    /// reason `SchedulerError`) rather than as the pod not fitting.
    pub fn is_error(&self) -> bool {
        matches!(self, Self::Allocation(AllocationError::Cel { .. }))
    }
}

impl ClaimRefusal {
    /// Whether it holds for every node (PreFilter: the node does not
    /// matter).
    pub fn every_node(&self) -> bool {
        matches!(
            self,
            Self::NotCreatedYet(_)
                | Self::NotFound(_)
                | Self::BeingDeleted(_)
                | Self::ReservedForMaximum(_)
                | Self::Allocation(AllocationError::ClassNotFound { .. })
        )
    }
}

impl fmt::Display for ClaimRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotCreatedYet(pod) => write!(f, "pod {pod:?}: ResourceClaim not created yet"),
            Self::NotFound(key) => write!(f, "could not find ResourceClaim {key:?}"),
            Self::BeingDeleted(name) => write!(f, "resourceclaim {name:?} is being deleted"),
            Self::ReservedForMaximum(_) => f.write_str("resourceclaim in use"),
            Self::NotAvailableOnNode => f.write_str("resourceclaim not available on the node"),
            Self::CannotAllocate => f.write_str("cannot allocate all claims"),
            Self::Allocation(e) => e.fmt(f),
        }
    }
}
