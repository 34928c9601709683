//! How instances are named: a node's `spec.providerID`
//! (`aws:///<zone>/<instance id>`), and the placeholder instances that stand
//! for capacity an ASG has not launched yet (their id prefix and the error
//! code of those AWS cannot fulfil).

use k8s_openapi::api::core::v1::Node;

use crate::cloudprovider::CloudError;

/// The instance id prefix of placeholder instances.
pub const PLACEHOLDER_PREFIX: &str = "i-placeholder-";
/// The error code of placeholders AWS cannot fulfil (upstream's).
pub const CANNOT_BE_FULFILLED: &str = "placeholder-cannot-be-fulfilled";
/// `aws:///<zone>/<instance id>`.
pub fn provider_id(zone: &str, instance: &str) -> String {
    format!("aws:///{zone}/{instance}")
}

/// The zone and instance id of an `aws:///<zone>/<instance id>` provider ID.
pub fn parse_provider_id(id: &str) -> Result<(&str, &str), CloudError> {
    id.strip_prefix("aws:///")
        .and_then(|rest| rest.split_once('/'))
        .filter(|(_, instance)| !instance.is_empty() && !instance.contains('/'))
        .ok_or_else(|| {
            CloudError::provider(format!(
                "wrong id: expected format aws:///<zone>/<name>, got {id}"
            ))
        })
}

/// A node's `spec.providerID` (empty without one).
pub(super) fn provider_id_of(node: &Node) -> &str {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .unwrap_or_default()
}
