//! ProvisioningRequests (upstream's `provisioningrequest` packages; the FAQ's
//! "How can I use ProvisioningRequest to run batch workloads?"): a namespaced
//! `autoscaling.x-k8s.io/v1` object asking for room for groups of pods, each
//! group a `PodTemplate` and a count. With `--enable-provisioning-requests`
//! the loop handles two classes:
//!
//! - `check-capacity.autoscaling.x-k8s.io` ([`checkcapacity`]): are there
//!   places for all the pods in the cluster as it is? Never a scale-up.
//! - `best-effort-atomic-scale-up.autoscaling.x-k8s.io`
//!   ([`besteffortatomic`]): places for all the pods, from the cluster and one
//!   all-or-nothing scale-up.
//!
//! How a request goes through the loop:
//!
//! 1. At the loop's start (`crate::processors::provreq`, `refresh`) a booking older
//!    than 10 minutes expires (`BookingExpired`), a request never provisioned
//!    in 7 days fails (`Expired`), and requests ended for 7 days are deleted.
//! 2. The pod-list processors (`crate::processors::provreq`) drop the real
//!    pods that consume a request (their capacity is the request's), inject the
//!    pods of the next request to serve (marking it `Accepted`, or `Failed`
//!    when its pods cannot be made), and place the pods of every booked
//!    request (`Provisioned=True`, not expired) in the loop's snapshot, so
//!    that neither other requests nor scale-down take their room.
//! 3. Scale-up ([`orchestrator`]) serves either the injected pods or the
//!    other pending pods, in turns when there are both.
//!
//! Every condition is written in one place ([`conditions::Verdict`]), with
//! upstream's types, reasons and messages. The objects come from the
//! autoscaler's cache (watches, `crate::cache`); writes go through
//! [`client`].

pub mod besteffortatomic;
pub mod checkcapacity;
pub mod client;
pub mod conditions;
pub mod orchestrator;
pub mod pods;
pub mod types;

pub use client::ProvReqClient;
pub use types::{
    CLASS_ANNOTATION, CONSUME_ANNOTATION, DEPRECATED_CLASS_ANNOTATION,
    DEPRECATED_CONSUME_ANNOTATION, GROUP, NO_RETRY_PARAMETER, PROCESSOR_INSTANCE_PARAMETER, PodSet,
    PodTemplateRef, ProvisioningClass, ProvisioningRequest, ProvisioningRequestSpec,
    ProvisioningRequestStatus, WithTemplates, consumed_request,
};

#[cfg(test)]
mod tests;
