//! ProvisioningRequests in the suite: the CRD a scenario (or `testbed up
//! --provisioning-request-crd`) installs, upstream CA 1.37's own
//! ([`harness::crds`]).

/// Upstream's ProvisioningRequest CRD, as JSON.
pub const CRD: &str = harness::crds::PROVISIONING_REQUESTS;

/// The CRD as an object to create.
pub fn crd() -> Result<serde_json::Value, String> {
    harness::crds::object(CRD)
}
