//! CapacityBuffers and CapacityQuotas in the suite: upstream CA 1.37's
//! CRDs ([`harness::crds`]).

/// Upstream's CapacityBuffer CRD, as JSON.
pub const BUFFER_CRD: &str = harness::crds::CAPACITY_BUFFERS;

/// Both CRDs as objects to create.
pub fn crds() -> Result<Vec<serde_json::Value>, String> {
    [
        harness::crds::CAPACITY_BUFFERS,
        harness::crds::CAPACITY_QUOTAS,
    ]
    .into_iter()
    .map(harness::crds::object)
    .collect()
}
