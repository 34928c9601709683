//! Upstream Cluster Autoscaler's own CustomResourceDefinitions (the
//! `cluster-autoscaler-release-1.37` branch's `apis/config/crd/`), with their schemas, defaults and CEL rules, which
//! the embedded API server enforces as kube-apiserver does: the
//! CapacityBuffers, CapacityQuotas and ProvisioningRequests a cluster
//! running the autoscaler serves.

use serde_json::Value;

/// The CapacityBuffer CRD (`autoscaling.x-k8s.io`, v1alpha1 and v1beta1).
pub const CAPACITY_BUFFERS: &str =
    include_str!("../apiserver/tests/fixtures/crd-capacitybuffers.json");

/// The CapacityQuota CRD (`autoscaling.x-k8s.io`, v1beta1 stored, v1alpha1
/// served and deprecated).
pub const CAPACITY_QUOTAS: &str =
    include_str!("../apiserver/tests/fixtures/crd-capacityquotas.json");

/// The ProvisioningRequest CRD (`autoscaling.x-k8s.io`, v1 and v1beta1).
pub const PROVISIONING_REQUESTS: &str =
    include_str!("../apiserver/tests/fixtures/crd-provisioningrequests.json");

/// A CRD's text as an object to create.
pub fn object(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("an autoscaler CRD does not parse: {e}"))
}

/// All three, as objects to create.
pub fn all() -> Result<Vec<Value>, String> {
    [CAPACITY_BUFFERS, CAPACITY_QUOTAS, PROVISIONING_REQUESTS]
        .into_iter()
        .map(object)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_crd_parses_and_names_its_kind() {
        let kinds: Vec<String> = super::all()
            .unwrap()
            .iter()
            .map(|c| c["spec"]["names"]["kind"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            kinds,
            ["CapacityBuffer", "CapacityQuota", "ProvisioningRequest"]
        );
    }
}
