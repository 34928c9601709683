//! ProvisioningRequests in the suite: the CRD a scenario (or `testbed up
//! --provisioning-request-crd`) installs, upstream CA 1.36.1's own
//! (`apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml`, v1 and
//! v1beta1 with their schemas and CEL rules, which the embedded API server
//! enforces as kube-apiserver does), and the full names of the classes.

/// Upstream's ProvisioningRequest CRD, as JSON.
pub const CRD: &str =
    include_str!("../../harness/apiserver/tests/fixtures/crd-provisioningrequests.json");

/// The CRD as an object to create.
pub fn crd() -> Result<serde_json::Value, String> {
    serde_json::from_str(CRD).map_err(|e| format!("the ProvisioningRequest CRD: {e}"))
}
