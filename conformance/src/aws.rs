//! The suite's node groups in AWS mode: each declared group becomes an EC2
//! Auto Scaling group of the AWS emulator (moto, one server for the
//! process, reset before each scenario), with a launch template and tags:
//! the discovery tags, and node template tags for the group's labels
//! (`kwok-nodegroup=<name>` among them), taints and resources. The
//! testbed's bridge ([`harness::aws::Bridge`]) makes its instances kwok
//! Nodes; the autoscaler under test reaches it with `--cloud-provider=aws`
//! and tag auto-discovery.

use std::collections::BTreeMap;

use harness::aws::{AsgSpec, CREDENTIALS, Emulator, REGION};
use serde_json::Value;

use crate::world::groups::GroupSpec;

/// The auto-discovery flag the autoscaler gets.
pub const DISCOVERY: &str = "--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/testbed";

/// What every group's launch template launches (the resource tags say
/// what its nodes have).
pub const INSTANCE_TYPE: &str = "m5.large";

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

/// The environment a binary reaches the emulator with.
pub fn environment(endpoint: &str) -> [(&'static str, String); 4] {
    [
        ("AWS_ENDPOINT_URL", endpoint.to_string()),
        ("AWS_REGION", REGION.to_string()),
        ("AWS_ACCESS_KEY_ID", CREDENTIALS.0.to_string()),
        ("AWS_SECRET_ACCESS_KEY", CREDENTIALS.1.to_string()),
    ]
}

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
