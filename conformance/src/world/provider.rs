//! The cloud provider the suite's node groups are made for, chosen once per
//! run ([`configure_provider`]).

use std::sync::OnceLock;

/// The cloud provider the suite's node groups are made for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Provider {
    /// kwok's provider: groups are template nodes in a ConfigMap.
    #[default]
    Kwok,
    /// Cluster API: groups are MachineDeployments ([`crate::capi`]).
    #[value(name = "clusterapi")]
    ClusterApi,
    /// AWS: groups are Auto Scaling groups of an AWS emulator
    /// ([`crate::aws`]).
    Aws,
}

impl Provider {
    /// The `--cloud-provider` value.
    pub fn flag(self) -> &'static str {
        match self {
            Self::Kwok => "kwok",
            Self::ClusterApi => "clusterapi",
            Self::Aws => "aws",
        }
    }
}

static PROVIDER: OnceLock<Provider> = OnceLock::new();

/// Sets the provider of this process's scenarios (once; later calls are
/// ignored and return false). A scenario may still ask for Cluster API
/// itself (`Given node groups are Cluster API MachineDeployments`).
pub fn configure_provider(provider: Provider) -> bool {
    PROVIDER.set(provider).is_ok()
}

/// The provider configured for this run.
pub fn configured_provider() -> Provider {
    PROVIDER.get().copied().unwrap_or_default()
}
