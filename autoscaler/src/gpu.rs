//! GPUs as upstream's `utils/gpu` sees them (CA 1.35 and later): the
//! vendors' extended resource names, whether a pod requests a GPU, whether
//! a node has GPUs and which resource they are. Every GPU rule (the 30 s
//! wait for new GPU pods, unready GPU nodes, the GPU utilization threshold
//! of scale-down) asks here.

use k8s_openapi::api::core::v1::Node;
use predicates::resources::Resources;

/// NVIDIA's GPU resource (`ResourceNvidiaGPU`): a labelled GPU node whose
/// GPUs are not allocatable yet is taken to have these.
pub const NVIDIA_GPU: &str = "nvidia.com/gpu";

/// Every vendor's GPU resource, in upstream's order (`GPUVendorResourceNames`):
/// the first a node has allocatable is its GPU resource.
pub const VENDOR_RESOURCES: [&str; 5] = [
    NVIDIA_GPU,
    "habana.ai/gaudi",
    "gpu.intel.com/xe",
    "amd.com/gpu",
    "microsoft.com/directx",
];

/// Whether a pod's requests (its effective requests: init containers
/// included, as upstream's `PodRequests` counts them) name any vendor's
/// GPU (`PodRequestsGpu`).
pub fn pod_requests_gpu(requests: &Resources) -> bool {
    VENDOR_RESOURCES
        .iter()
        .any(|r| requests.scalar.contains_key(*r))
}

/// The first vendor's GPU resource of which the node has a non-zero amount
/// allocatable (`NodeHasGpuAllocatable`, `DetectNodeGPUResourceName`).
pub fn allocatable_resource(node: &Node) -> Option<&'static str> {
    let status = node.status.as_ref();
    let alloc = status
        .and_then(|s| s.allocatable.as_ref())
        .or_else(|| status.and_then(|s| s.capacity.as_ref()))?;
    VENDOR_RESOURCES.into_iter().find(|r| {
        alloc
            .get(*r)
            .and_then(|q| predicates::quantity::parse_value(&q.0))
            .unwrap_or(0)
            > 0
    })
}

/// Whether the node carries the provider's GPU label (none when the
/// provider has no GPU label).
fn has_gpu_label(node: &Node, gpu_label: &str) -> bool {
    !gpu_label.is_empty()
        && node
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(gpu_label))
}

/// The GPU resource of a node that has GPUs, by the provider's label or by
/// its allocatable resources (`allocatable`: the node's
/// [`allocatable_resource`]); `None` for a node without
/// (`GetNodeGPUFromCloudProvider`). A labelled node whose GPUs are not
/// allocatable yet counts as NVIDIA's.
pub fn node_resource(
    node: &Node,
    allocatable: Option<&'static str>,
    gpu_label: &str,
) -> Option<&'static str> {
    match allocatable {
        Some(resource) => Some(resource),
        None => has_gpu_label(node, gpu_label).then_some(NVIDIA_GPU),
    }
}

/// A node labelled as a GPU node with no GPU allocatable yet (drivers
/// still installing) is not ready: reason
/// `cluster-autoscaler.kubernetes.io/resource-not-ready`
/// (`FilterOutNodesWithUnreadyResources`). `allocatable`: the node's
/// [`allocatable_resource`].
pub fn unready(node: &Node, allocatable: Option<&'static str>, gpu_label: &str) -> bool {
    has_gpu_label(node, gpu_label) && allocatable.is_none()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn node(labels: serde_json::Value, allocatable: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n", "labels": labels},
            "status": {"allocatable": allocatable, "capacity": allocatable},
        }))
        .unwrap()
    }

    #[test]
    fn a_node_has_the_first_vendor_resource_it_has_allocatable() {
        let amd = node(json!({}), json!({"cpu": "4", "amd.com/gpu": "2"}));
        assert_eq!(
            node_resource(&amd, allocatable_resource(&amd), "accelerator"),
            Some("amd.com/gpu")
        );
        let zero = node(json!({}), json!({"cpu": "4", "nvidia.com/gpu": "0"}));
        assert_eq!(
            node_resource(&zero, allocatable_resource(&zero), "accelerator"),
            None
        );
        let both = node(
            json!({}),
            json!({"amd.com/gpu": "1", "nvidia.com/gpu": "1"}),
        );
        assert_eq!(
            node_resource(&both, allocatable_resource(&both), ""),
            Some(NVIDIA_GPU)
        );
    }

    #[test]
    fn a_labelled_node_without_allocatable_gpus_is_unready_and_counts_as_nvidia() {
        let waiting = node(json!({"accelerator": "t4"}), json!({"cpu": "4"}));
        assert!(unready(
            &waiting,
            allocatable_resource(&waiting),
            "accelerator"
        ));
        assert_eq!(
            node_resource(&waiting, allocatable_resource(&waiting), "accelerator"),
            Some(NVIDIA_GPU)
        );
        let ready = node(
            json!({"accelerator": "xe"}),
            json!({"gpu.intel.com/xe": "1"}),
        );
        assert!(!unready(
            &ready,
            allocatable_resource(&ready),
            "accelerator"
        ));
        assert!(
            !unready(&waiting, allocatable_resource(&waiting), ""),
            "no GPU label, no GPU rule"
        );
        assert_eq!(
            node_resource(&waiting, allocatable_resource(&waiting), ""),
            None
        );
    }

    #[test]
    fn any_vendor_gpu_in_the_requests_makes_a_gpu_pod() {
        let mut requests = Resources::default();
        assert!(!pod_requests_gpu(&requests));
        requests.scalar.insert("example.com/fpga".into(), 1);
        assert!(!pod_requests_gpu(&requests));
        requests.scalar.insert("habana.ai/gaudi".into(), 1);
        assert!(pod_requests_gpu(&requests));
    }
}
