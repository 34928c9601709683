//! Which `--cloud-provider` names this autoscaler implements (upstream's
//! `cloudprovider/builder`). [`ProviderName::IMPLEMENTED`] is the one list:
//! the flag's help, the error for any other name and the README's provider
//! line are made from it (a test checks the README), so they cannot drift
//! apart. It lives with the flags, which name the providers without
//! depending on them; `cloudprovider::builder` re-exports it.

use std::fmt;

/// A cloud provider this autoscaler implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderName {
    /// kwok's provider: fake nodes from ConfigMap templates.
    Kwok,
    /// Cluster API: MachineDeployments and MachineSets.
    ClusterApi,
    /// AWS: EC2 Auto Scaling groups.
    Aws,
}

/// Upstream CA's providers that this autoscaler does not implement
/// (named so that their error says "not supported" rather than "unknown").
const UPSTREAM_ONLY: [&str; 29] = [
    "alicloud",
    "azure",
    "baiducloud",
    "bizflycloud",
    "brightbox",
    "cherryservers",
    "civo",
    "cloudstack",
    "coreweave",
    "digitalocean",
    "equinixmetal",
    "exoscale",
    "externalgrpc",
    "gce",
    "hetzner",
    "huaweicloud",
    "ionoscloud",
    "kamatera",
    "kubemark",
    "linode",
    "magnum",
    "oci",
    "ovhcloud",
    "rancher",
    "scaleway",
    "tencentcloud",
    "utho",
    "volcengine",
    "vultr",
];

impl ProviderName {
    /// Every implemented provider, in the order the help lists them.
    pub const IMPLEMENTED: &'static [ProviderName] = &[
        ProviderName::Kwok,
        ProviderName::ClusterApi,
        ProviderName::Aws,
    ];

    /// The `--cloud-provider` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kwok => "kwok",
            Self::ClusterApi => "clusterapi",
            Self::Aws => "aws",
        }
    }

    /// The implemented names, comma separated (`kwok, clusterapi, aws`).
    pub fn implemented_list() -> String {
        Self::IMPLEMENTED
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The `--cloud-provider` flag's help text.
    pub fn flag_help() -> String {
        format!(
            "Cloud provider type. Implemented: {}.",
            Self::implemented_list()
        )
    }

    /// The provider a `--cloud-provider` value names.
    pub fn parse(name: &str) -> Result<Self, UnsupportedProvider> {
        if let Some(p) = Self::IMPLEMENTED.iter().find(|p| p.as_str() == name) {
            return Ok(*p);
        }
        if UPSTREAM_ONLY.contains(&name) {
            Err(UnsupportedProvider::UpstreamOnly(name.to_string()))
        } else {
            Err(UnsupportedProvider::Unknown(name.to_string()))
        }
    }
}

impl fmt::Display for ProviderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `--cloud-provider` value this autoscaler cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnsupportedProvider {
    /// One of upstream CA's providers, not implemented here.
    UpstreamOnly(String),
    /// No provider of that name anywhere (upstream's `Unknown cloud provider`).
    Unknown(String),
}

impl fmt::Display for UnsupportedProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let implemented = ProviderName::implemented_list();
        match self {
            Self::UpstreamOnly(name) => write!(
                f,
                "--cloud-provider={name}: not supported by this autoscaler (implemented: {implemented})"
            ),
            Self::Unknown(name) => write!(
                f,
                "Unknown cloud provider: {name} (implemented: {implemented})"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn implemented_names_parse_and_others_say_why() {
        for p in ProviderName::IMPLEMENTED {
            assert_eq!(ProviderName::parse(p.as_str()), Ok(*p));
            assert!(!UPSTREAM_ONLY.contains(&p.as_str()), "{p} is implemented");
        }
        assert_eq!(
            ProviderName::parse("gce").map_err(|e| e.to_string()),
            Err(
                "--cloud-provider=gce: not supported by this autoscaler (implemented: kwok, clusterapi, aws)".into()
            )
        );
        assert_eq!(
            ProviderName::parse("nimbus").map_err(|e| e.to_string()),
            Err("Unknown cloud provider: nimbus (implemented: kwok, clusterapi, aws)".into())
        );
        assert_eq!(
            ProviderName::flag_help(),
            "Cloud provider type. Implemented: kwok, clusterapi, aws."
        );
    }
}
