//! Which `--cloud-provider` names this autoscaler implements (upstream's
//! `cloudprovider/builder`): the one list is [`ProviderName::IMPLEMENTED`],
//! defined beside the flags ([`crate::config::provider`]) so that the flags
//! do not depend on the providers.

pub use crate::config::provider::{ProviderName, UnsupportedProvider};
