//! The suite's node groups in AWS mode: each declared group becomes an EC2
//! Auto Scaling group of the AWS emulator (moto, one server for the
//! process, reset before each scenario), with a launch template and tags:
//! the discovery tags, and node template tags for the group's labels
//! (`kwok-nodegroup=<name>` among them), taints and resources. The
//! testbed's bridge ([`harness::aws::Bridge`]) makes its instances kwok
//! Nodes; the autoscaler under test reaches it with `--cloud-provider=aws`
//! and tag auto-discovery.
//!
//! The emulator's clients are the AWS SDK's, built only with the `aws`
//! feature (`cargo run -p conformance --features aws --bin testbed -- run
//! --cloud-provider aws`); without it, AWS mode fails at its start with
//! [`NOT_BUILT`].

use std::collections::BTreeMap;

use serde_json::Value;

use crate::world::groups::GroupSpec;
#[cfg(feature = "aws")]
pub use emulated::*;

/// Why AWS mode does not run in a build without the `aws` feature.
pub const NOT_BUILT: &str = "AWS node groups need the testbed built with the `aws` feature \
     (cargo run -p conformance --features aws --bin testbed -- run --cloud-provider aws)";

/// The auto-discovery flag the autoscaler gets.
pub const DISCOVERY: &str = "--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/testbed";

/// What every group's launch template launches (the resource tags say
/// what its nodes have).
pub const INSTANCE_TYPE: &str = "m5.large";

fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// The tags of a group's ASG.
pub fn tags(g: &GroupSpec) -> BTreeMap<String, String> {
    let mut tags = BTreeMap::from([
        (
            "k8s.io/cluster-autoscaler/enabled".to_string(),
            "true".to_string(),
        ),
        (
            "k8s.io/cluster-autoscaler/testbed".to_string(),
            "owned".to_string(),
        ),
    ]);
    let label = |k: &str| format!("k8s.io/cluster-autoscaler/node-template/label/{k}");
    let resource = |k: &str| format!("k8s.io/cluster-autoscaler/node-template/resources/{k}");
    tags.insert(label("kwok-nodegroup"), g.name.clone());
    for (k, v) in &g.labels {
        tags.insert(label(k), text(v));
    }
    for t in &g.taints {
        let key = t.get("key").map(text).unwrap_or_default();
        let value = t.get("value").map(text).unwrap_or_default();
        let effect = t.get("effect").map(text).unwrap_or_default();
        tags.insert(
            format!("k8s.io/cluster-autoscaler/node-template/taint/{key}"),
            format!("{value}:{effect}"),
        );
    }
    tags.insert(resource("cpu"), g.cpu.clone());
    tags.insert(resource("memory"), g.memory.clone());
    tags.insert(resource("pods"), "110".into());
    for (k, v) in &g.resources {
        tags.insert(resource(k), text(v));
    }
    tags
}

#[cfg(feature = "aws")]
mod emulated {
    use harness::aws::{AsgSpec, CREDENTIALS, Emulator, REGION};

    use super::{DISCOVERY, INSTANCE_TYPE, tags};
    use crate::world::StartError;
    use crate::world::groups::GroupSpec;

    static EMULATOR: tokio::sync::OnceCell<Result<Emulator, String>> =
        tokio::sync::OnceCell::const_new();

    /// The process's emulator, started on first use.
    pub async fn emulator() -> Result<&'static Emulator, String> {
        EMULATOR
            .get_or_init(|| async { Emulator::start().await.map_err(|e| e.to_string()) })
            .await
            .as_ref()
            .map_err(Clone::clone)
    }

    /// How our autoscaler reaches the emulator.
    pub fn connection(endpoint: &str) -> autoscaler::cloudprovider::aws::Connection {
        autoscaler::cloudprovider::aws::Connection {
            region: Some(REGION.into()),
            endpoint: Some(endpoint.into()),
            credentials: Some((CREDENTIALS.0.into(), CREDENTIALS.1.into())),
        }
    }

    /// A group as an ASG.
    pub fn asg(g: &GroupSpec) -> AsgSpec {
        AsgSpec {
            name: g.name.clone(),
            instance_type: INSTANCE_TYPE.into(),
            min: g.min,
            max: g.max,
            desired: g.initial.max(g.min),
            zone: format!("{REGION}a"),
            tags: tags(g),
        }
    }

    /// Forgets the previous scenario's resources and creates the groups'
    /// ASGs; returns the emulator's endpoint.
    pub async fn create_groups(groups: &[GroupSpec]) -> Result<String, String> {
        let emulator = emulator().await?;
        emulator.reset().await.map_err(|e| e.to_string())?;
        let clients = emulator.clients();
        for g in groups {
            clients
                .create_asg(&asg(g))
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(emulator.endpoint().to_string())
    }

    /// Writes the groups' tags again (labels or taints changed): nodes made
    /// from then on follow them, and the autoscaler reads them at its next
    /// refresh.
    pub async fn update_templates(groups: &[GroupSpec]) -> Result<(), String> {
        let clients = emulator().await?.clients();
        for g in groups {
            clients
                .tag_asg(&g.name, &tags(g))
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The process's emulator's endpoint, the emulator started on first use.
    async fn emulator_endpoint() -> Result<String, String> {
        Ok(emulator().await?.endpoint().to_string())
    }

    /// The environment a binary reaches the emulator with, the emulator
    /// started on first use.
    pub async fn emulator_environment() -> Result<[(&'static str, String); 4], String> {
        let endpoint = emulator_endpoint().await?;
        Ok([
            ("AWS_ENDPOINT_URL", endpoint),
            ("AWS_REGION", REGION.to_string()),
            ("AWS_ACCESS_KEY_ID", CREDENTIALS.0.to_string()),
            ("AWS_SECRET_ACCESS_KEY", CREDENTIALS.1.to_string()),
        ])
    }

    /// Our autoscaler in-process with `--cloud-provider=aws` on `client`,
    /// reaching the emulator and discovering the groups by their tags.
    pub async fn in_process(
        client: kube::Client,
        clock: simclock::Clock,
        flags: &[String],
    ) -> Result<autoscaler::inprocess::InProcess, StartError> {
        let endpoint = emulator_endpoint().await.map_err(StartError::AwsEmulator)?;
        let mut flags = flags.to_vec();
        flags.push(DISCOVERY.to_string());
        autoscaler::inprocess::aws(client, clock, connection(&endpoint), &flags)
            .await
            .map_err(|source| StartError::InProcess {
                provider: "aws",
                source,
            })
    }
}

#[cfg(not(feature = "aws"))]
pub use absent::*;

/// AWS mode in a build without the `aws` feature: each entry point fails
/// with [`NOT_BUILT`].
#[cfg(not(feature = "aws"))]
mod absent {
    use super::NOT_BUILT;
    use crate::world::StartError;
    use crate::world::groups::GroupSpec;

    /// Fails with [`NOT_BUILT`].
    pub async fn emulator_environment() -> Result<[(&'static str, String); 4], String> {
        Err(NOT_BUILT.to_string())
    }

    /// Fails with [`NOT_BUILT`].
    pub async fn create_groups(_groups: &[GroupSpec]) -> Result<String, String> {
        Err(NOT_BUILT.to_string())
    }

    /// Fails with [`NOT_BUILT`].
    pub async fn update_templates(_groups: &[GroupSpec]) -> Result<(), String> {
        Err(NOT_BUILT.to_string())
    }

    /// Fails with [`NOT_BUILT`].
    pub async fn in_process(
        _client: kube::Client,
        _clock: simclock::Clock,
        _flags: &[String],
    ) -> Result<autoscaler::inprocess::InProcess, StartError> {
        Err(StartError::AwsEmulator(NOT_BUILT.to_string()))
    }
}
