//! The scenario state: the declared node groups, flags and workloads, then
//! the running cluster and the autoscaler under test.
//!
//! The autoscaler under test is chosen once per run ([`configure`]):
//! in-process on the cluster's virtual clock, or a CA-compatible binary
//! started against the embedded API server over TLS, in real time scaled by
//! [`UnderTest::Binary::time_scale`]. Steps never sleep or read clocks
//! themselves: they go through [`Running::pass`] and [`Running::real`], so
//! "10 minutes" means 10 virtual minutes in-process and 10 s of real time
//! at a scale of 60.
//!
//! The parts, each in its own module: the run's configuration
//! ([`provider`], [`backend`], [`under_test`]); the node groups and the
//! kwok provider's ConfigMaps ([`groups`]) and the suite's kwok Stages
//! ([`stages`]); starting a scenario (`CaWorld::start`, in `start.rs`);
//! the autoscaler of a scenario and how it starts ([`autoscaler`],
//! [`served`]); the running scenario ([`running`]); what went wrong
//! ([`errors`]).

pub mod autoscaler;
pub mod backend;
pub mod errors;
pub mod extensions;
pub mod groups;
pub mod provider;
pub mod running;
pub mod served;
pub mod stages;
mod start;
pub mod under_test;

use std::fmt;
use std::time::Duration;

use harness::cluster::Cluster;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::Api;
use serde_json::{Value, json};

pub use self::backend::{
    BackendChoice, EMBEDDED_STEPS, STAGE_STEPS, backend, backend_reads_stages, backend_unmet,
    configure_backend,
};
pub use self::errors::{EndpointError, StartError};
pub use self::extensions::Extensions;
pub use self::groups::{
    GroupSpec, TEMPLATES_CONFIG_MAP, ZeroCapacity, node_group_of, priority_expander_config_map,
    provider_config_map, templates_config_map,
};
pub use self::provider::{Provider, configure_provider, configured_provider};
pub use self::running::{Running, StepResult};
pub use self::served::{Served, serve_for_binary};
pub use self::stages::{
    GRACEFUL_TERMINATION_LABEL, NOT_READY_LABEL, graceful_termination_stage, not_ready_stage,
};
pub use self::under_test::{UnderTest, configure, set_example_time_scale, time_scale};

/// The cucumber world.
#[derive(Default, cucumber::World)]
pub struct CaWorld {
    /// Declared node groups.
    pub groups: Vec<GroupSpec>,
    /// Extra autoscaler flags (CA syntax, scenario time).
    pub flags: Vec<String>,
    /// Objects to create before the autoscaler starts.
    pub objects: Vec<Value>,
    /// CustomResourceDefinitions to install before the autoscaler starts
    /// (it may wait for their lists, as upstream waits for its informers).
    pub crds: Vec<Value>,
    /// The priority expander's priorities: value → group name regexes.
    pub expander_priorities: std::collections::BTreeMap<i64, Vec<String>>,
    /// The cluster, once started.
    pub running: Option<Running>,
    /// What the scenario used beyond CA's own interfaces.
    pub extensions: Extensions,
    /// The scenario asked for Cluster API whatever the run's provider.
    pub cluster_api: bool,
    /// Watch the safety invariants from the start ([`crate::invariants`]).
    pub observe: bool,
    /// Replicas of the autoscaler with leader election ([`crate::replicas`]);
    /// 0 or 1: one autoscaler, without.
    pub replicas: usize,
    /// How far the in-process autoscaler's clock is off the cluster's:
    /// the offset, and whether ahead.
    pub clock_skew: Option<(Duration, bool)>,
    /// A `/snapshotz` request under way: its status code and body.
    pub snapshot_request: Option<running::SnapshotRequest>,
    /// CSI drivers every node runs ([`crate::csi`]).
    pub csi_drivers: Vec<crate::csi::CsiDriver>,
}

impl fmt::Debug for CaWorld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaWorld")
            .field("groups", &self.groups)
            .field("flags", &self.flags)
            .field("started", &self.running.is_some())
            .finish()
    }
}

impl CaWorld {
    /// Starts the cluster and the autoscaler, once.
    pub async fn running(&mut self) -> Result<&mut Running, String> {
        if self.running.is_none() {
            self.running = Some(self.start().await.map_err(|e| e.to_string())?);
        }
        self.running
            .as_mut()
            .ok_or_else(|| "the cluster did not start".to_string())
    }

    /// The declared group `name`.
    pub fn group_mut(&mut self, name: &str) -> Result<&mut GroupSpec, String> {
        self.groups
            .iter_mut()
            .find(|g| g.name == name)
            .ok_or_else(|| format!("no node group {name:?} declared"))
    }

    /// The provider this scenario's node groups are made for.
    pub fn provider(&self) -> Provider {
        if self.cluster_api {
            Provider::ClusterApi
        } else {
            configured_provider()
        }
    }

    /// The id under which the autoscaler names group `name` (in events and
    /// the status ConfigMap).
    pub fn group_id(&self, name: &str) -> String {
        match self.provider() {
            Provider::Kwok | Provider::Aws => name.to_string(),
            Provider::ClusterApi => crate::capi::group_id(name),
        }
    }

    /// `text` with the declared groups named by their ids where CA's
    /// messages name a group (`{pool 0->3 (max: 10)}`, `setting group pool
    /// size`).
    pub fn with_group_ids(&self, text: &str) -> String {
        let mut out = text.to_string();
        for g in &self.groups {
            let id = self.group_id(&g.name);
            for (before, after) in [("{", " "), ("group ", " ")] {
                out = out.replace(
                    &format!("{before}{}{after}", g.name),
                    &format!("{before}{id}{after}"),
                );
            }
        }
        out
    }

    /// Scenario time since the autoscaler started (zero before).
    pub fn scenario_time(&self) -> Duration {
        self.running
            .as_ref()
            .map(Running::scenario_time)
            .unwrap_or_default()
    }

    /// Creates an object now if the cluster runs, else before it starts.
    pub async fn create(&mut self, obj: Value) -> StepResult {
        match &self.running {
            Some(r) => create_object(&r.cluster, obj).await,
            None => {
                self.objects.push(obj);
                Ok(())
            }
        }
    }

    /// Writes the node group templates again (a fault or label changed):
    /// the kwok provider reads them every loop.
    pub async fn update_templates(&mut self) -> StepResult {
        let Some(r) = &self.running else {
            return Ok(());
        };
        match self.provider() {
            Provider::ClusterApi => {
                return crate::capi::update_templates(&r.cluster, &self.groups).await;
            }
            Provider::Aws => return crate::aws::update_templates(&self.groups).await,
            Provider::Kwok => {}
        }
        let cm = templates_config_map(&self.groups);
        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(r.cluster.client(), "kube-system")
            .patch(
                TEMPLATES_CONFIG_MAP,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"data": cm["data"]})),
            )
            .await
            .map(|_| ())
            .map_err(|e| format!("updating the node group templates: {e}"))
    }

    /// Lets `d` of scenario time pass (starting the cluster first).
    pub async fn pass(&mut self, d: Duration) -> StepResult {
        self.running().await?.pass(d).await
    }

    /// The nodes of a group.
    pub async fn group_nodes(&mut self, group: &str) -> Result<Vec<Node>, String> {
        let r = self.running().await?;
        let nodes = Api::<Node>::all(r.cluster.client())
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(nodes
            .items
            .into_iter()
            .filter(|n| node_group_of(n) == Some(group))
            .collect())
    }
}

/// Creates `obj`, and its namespace first when that does not exist yet: a
/// scenario that names a namespace expects the suite to make it, as
/// kube-system and default already are.
async fn create_object(cluster: &Cluster, obj: Value) -> StepResult {
    if let Some(ns) = obj.pointer("/metadata/namespace").and_then(Value::as_str) {
        ensure_namespace(cluster, ns).await?;
    }
    cluster.create(obj).await.map_err(|e| e.to_string())
}

/// Creates namespace `name` unless it exists.
async fn ensure_namespace(cluster: &Cluster, name: &str) -> StepResult {
    let api = Api::<Namespace>::all(cluster.client());
    let exists = api
        .get_opt(name)
        .await
        .map_err(|e| format!("reading namespace {name:?}: {e}"))?
        .is_some();
    if exists {
        return Ok(());
    }
    let ns = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&Default::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(format!("creating namespace {name:?}: {e}")),
    }
}

/// Checks a namespace named in a step: a DNS-1123 label (lower-case
/// letters, digits and '-', starting and ending with a letter or digit, at
/// most 63 characters), as the API server requires.
pub fn namespace_name(name: &str) -> Result<String, String> {
    let valid = apimachinery::validation::is_dns_label(name);
    if valid {
        Ok(name.to_string())
    } else {
        Err(format!(
            "namespace {name:?} is not a valid namespace name (a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_are_dns_labels() {
        for good in ["fresh-ns", "team-a", "a", "ns1"] {
            assert_eq!(namespace_name(good).as_deref(), Ok(good));
        }
        for bad in ["Team_A", "-ns", "ns-", "", "a.b", &"x".repeat(64)] {
            let err = namespace_name(bad).expect_err(bad);
            assert!(err.contains("is not a valid namespace name"), "{err}");
        }
    }
}
