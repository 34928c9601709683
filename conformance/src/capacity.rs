//! CapacityBuffers and CapacityQuotas in the suite: upstream CA 1.36.1's
//! CRDs (`apis/config/crd/autoscaling.x-k8s.io_capacitybuffers.yaml` and
//! `_capacityquotas.yaml`, with their schemas, defaults and CEL rules,
//! which the embedded API server enforces as kube-apiserver does).

/// Upstream's CapacityBuffer CRD, as JSON.
pub const BUFFER_CRD: &str =
    include_str!("../../harness/apiserver/tests/fixtures/crd-capacitybuffers.json");

/// Upstream's CapacityQuota CRD, as JSON.
pub const QUOTA_CRD: &str =
    include_str!("../../harness/apiserver/tests/fixtures/crd-capacityquotas.json");

/// Both CRDs as objects to create.
pub fn crds() -> Result<Vec<serde_json::Value>, String> {
    [BUFFER_CRD, QUOTA_CRD]
        .iter()
        .map(|t| serde_json::from_str(t).map_err(|e| format!("a capacity CRD: {e}")))
        .collect()
}
