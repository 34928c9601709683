//! CapacityBuffers (`autoscaling.x-k8s.io`, upstream's `capacitybuffer`
//! and `processors/capacitybuffer`): spare room kept ready for pods that
//! do not exist yet, the FAQ's overprovisioning without placeholder pods.
//!
//! - [`types`]: the API and every condition CA writes on it;
//! - [`translators`]: from a spec to the pod and the number of replicas
//!   (a PodTemplate; a scalable object's pods or template and replicas;
//!   `limits`); the dry-run or defaulting resolver;
//! - [`controller`] (`--capacity-buffer-controller-enabled`): the status,
//!   the managed PodTemplate and the namespace ResourceQuotas' cut;
//! - [`fakepods`] (`--capacity-buffer-pod-injection-enabled`): the fake
//!   pods each loop adds to the simulation, first among the pod-list
//!   processors (`processors::capacitybuffer`), so that scale-up makes room
//!   for them and scale-down keeps it.

pub mod controller;
pub mod fakepods;
pub mod translators;
pub mod types;

#[cfg(test)]
mod tests;

pub use controller::BufferController;
pub use fakepods::{BufferPodInjection, is_fake_pod};
pub use types::CapacityBuffer;
