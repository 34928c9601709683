//! Starting a scenario's cluster and autoscaler ([`CaWorld::start`]): the
//! cluster with the provider's objects, the suite's Stages and the starting
//! nodes, then the autoscaler under test (in-process or binaries, one or
//! replicas), then what the scenario declared.

use std::sync::Arc;
use std::time::Duration;

use harness::cluster::{Cluster, ClusterBuilder};

use super::CaWorld;
use super::autoscaler::{Autoscaler, Replica, start_binary, start_in_process};
use super::backend::{backend, backend_reads_stages};
use super::create_object;
use super::errors::StartError;
use super::groups::{
    GroupSpec, priority_expander_config_map, provider_config_map, templates_config_map,
};
use super::provider::Provider;
use super::running::Running;
use super::stages::{NOT_READY_LABEL, graceful_termination_stage, not_ready_stage};
use super::under_test::{UnderTest, time_scale, under_test};
use crate::binary::BinaryInfo;
use crate::invariants::{Bounds, Observer};
use crate::replicas;

impl CaWorld {
    /// Starts the cluster, then the autoscaler, then creates the objects
    /// the scenario declared.
    pub(super) async fn start(&self) -> Result<Running, StartError> {
        let provider = self.provider();
        let cluster = self.start_cluster(provider).await?;
        let observer = self.observe.then(|| self.observer(&cluster));
        create_stages(&cluster).await?;
        for crd in &self.crds {
            create_object(&cluster, crd.clone())
                .await
                .map_err(StartError::Object)?;
        }
        let mut sidecars = Vec::new();
        if !self.csi_drivers.is_empty() {
            let client = cluster.client();
            sidecars.push(crate::csi::spawn_registrar(
                client,
                self.csi_drivers.clone(),
            ));
        }
        self.create_starting_nodes(&cluster, provider).await?;
        if !self.csi_drivers.is_empty() {
            wait_initial_nodes(&cluster, &self.groups, Duration::from_secs(120)).await?;
            crate::csi::wait_registered(&cluster.client(), Duration::from_secs(30))
                .await
                .map_err(StartError::Object)?;
        }
        let clock = match self.clock_skew {
            Some((skew, ahead)) => cluster.clock().skewed(skew, ahead),
            None => cluster.clock().clone(),
        };
        let (autoscaler, time_scale) = match under_test() {
            UnderTest::InProcess => {
                let autoscaler = self.start_in_process(&cluster, &clock, provider).await?;
                (autoscaler, 1.0)
            }
            UnderTest::Binary { info, args, .. } => {
                let scale = time_scale();
                let autoscaler = self
                    .start_binaries(&cluster, &info, &args, scale, provider)
                    .await?;
                (autoscaler, scale)
            }
        };
        self.create_expander_priorities(&cluster).await?;
        for o in &self.objects {
            create_object(&cluster, o.clone())
                .await
                .map_err(StartError::Object)?;
        }
        Ok(Running {
            cluster,
            autoscaler,
            started: tokio::time::Instant::now(),
            time_scale,
            flags: self.flags.clone(),
            extensions: self.extensions.clone(),
            provider,
            observer,
            clock,
            sidecars,
        })
    }

    /// The cluster on the configured backend, with the node groups of
    /// `provider`.
    async fn start_cluster(&self, provider: Provider) -> Result<Cluster, StartError> {
        let builder = self
            .with_groups(Cluster::builder().time_scale(time_scale()), provider)
            .await?;
        let backend = backend()?;
        backend
            .start(builder)
            .await
            .map_err(|source| StartError::Cluster {
                backend: backend.name().to_string(),
                source,
            })
    }

    /// `builder` with the declared node groups as `provider` reads them.
    async fn with_groups(
        &self,
        builder: ClusterBuilder,
        provider: Provider,
    ) -> Result<ClusterBuilder, StartError> {
        Ok(match provider {
            Provider::Kwok => builder
                .object(provider_config_map())
                .object(templates_config_map(&self.groups)),
            Provider::ClusterApi => {
                let objects = self.groups.iter().flat_map(crate::capi::group_objects);
                builder
                    .capi()
                    .objects(std::iter::once(crate::capi::cluster()).chain(objects))
            }
            Provider::Aws => {
                let endpoint = crate::aws::create_groups(&self.groups)
                    .await
                    .map_err(StartError::AwsGroups)?;
                builder.aws(&endpoint)
            }
        })
    }

    /// The safety invariants' observer of the declared groups' bounds.
    fn observer(&self, cluster: &Cluster) -> Observer {
        let bounds = self
            .groups
            .iter()
            .map(|g| {
                let b = Bounds {
                    min: g.min,
                    max: g.max,
                };
                (g.name.clone(), b)
            })
            .collect();
        Observer::start(cluster.client(), bounds)
    }

    /// The starting nodes exist, Ready, before the autoscaler starts, as
    /// in a running cluster (upstream's kwok provider creates none: it
    /// only takes its target sizes from the templates). In Cluster API
    /// mode the MachineDeployments' replicas make them.
    async fn create_starting_nodes(
        &self,
        cluster: &Cluster,
        provider: Provider,
    ) -> Result<(), StartError> {
        for g in self.groups.iter().filter(|_| provider == Provider::Kwok) {
            for i in 0..g.initial.max(g.min) {
                cluster.create(g.starting_node(i)).await.map_err(|source| {
                    StartError::StartingNode {
                        group: g.name.clone(),
                        source,
                    }
                })?;
            }
        }
        Ok(())
    }

    /// Our autoscaler in-process, once the starting nodes are Ready: one,
    /// or replicas with leader election.
    async fn start_in_process(
        &self,
        cluster: &Cluster,
        clock: &simclock::Clock,
        provider: Provider,
    ) -> Result<Autoscaler, StartError> {
        wait_initial_nodes(cluster, &self.groups, Duration::from_secs(120)).await?;
        if self.replicas <= 1 {
            return start_in_process(cluster, clock, provider, &self.flags).await;
        }
        let replicas = (0..self.replicas).map(|i| {
            let name: Arc<str> = format!("replica-{i}").into();
            let task = replicas::spawn_in_process(
                cluster,
                clock,
                provider,
                self.flags.clone(),
                name.to_string(),
            );
            (name, Replica::InProcess(task))
        });
        Ok(Autoscaler::Replicas(replicas.collect()))
    }

    /// The autoscaler binary, once the starting nodes are Ready: one, or
    /// replicas with leader election and a hostname each. Returns when the
    /// first loop is over ([`wait_first_loop`]).
    async fn start_binaries(
        &self,
        cluster: &Cluster,
        info: &BinaryInfo,
        args: &[String],
        time_scale: f64,
        provider: Provider,
    ) -> Result<Autoscaler, StartError> {
        wait_initial_nodes(cluster, &self.groups, Duration::from_secs(60)).await?;
        let replicas = self.replicas.max(1);
        let mut args = args.to_vec();
        if replicas > 1 {
            args.extend(replicas::BINARY_FLAGS.map(String::from));
        }
        let mut started = Vec::new();
        for i in 0..replicas {
            let hostname = (replicas > 1).then(|| format!("replica-{i}"));
            let b = start_binary(
                cluster,
                info,
                provider,
                &self.flags,
                &args,
                time_scale,
                hostname.as_deref(),
            )
            .await?;
            started.push(b);
        }
        let mut binary = if replicas == 1
            && let Some(b) = started.pop()
        {
            Autoscaler::Binary(b)
        } else {
            let named = started.into_iter().map(|b| {
                let name: Arc<str> = b.served.as_ref().map_or_else(
                    || "a binary on a cluster in a container".into(),
                    |s| s.endpoint.addr.to_string().into(),
                );
                (name, Replica::Binary(b))
            });
            Autoscaler::Replicas(named.collect())
        };
        wait_first_loop(cluster, &mut binary, Duration::from_secs(30)).await?;
        Ok(binary)
    }

    /// The priority expander's ConfigMap, when the scenario gave
    /// priorities. The expander matches group ids: `^pool$` is
    /// `^MachineDeployment/default/pool$` in Cluster API mode.
    async fn create_expander_priorities(&self, cluster: &Cluster) -> Result<(), StartError> {
        if self.expander_priorities.is_empty() {
            return Ok(());
        }
        let priorities = self
            .expander_priorities
            .iter()
            .map(|(value, patterns)| {
                let patterns = patterns
                    .iter()
                    .map(|p| match p.strip_prefix('^') {
                        Some(rest) => format!("^{}{rest}", self.group_id("")),
                        None => p.clone(),
                    })
                    .collect();
                (*value, patterns)
            })
            .collect();
        cluster
            .create(priority_expander_config_map(&priorities))
            .await
            .map_err(StartError::ExpanderPriorities)
    }
}

/// The suite's kwok Stages, on a backend whose kwok reads them.
async fn create_stages(cluster: &Cluster) -> Result<(), StartError> {
    if !backend_reads_stages() {
        return Ok(());
    }
    for stage in [not_ready_stage(), graceful_termination_stage()] {
        let name = stage["metadata"]["name"].to_string();
        cluster
            .create(stage)
            .await
            .map_err(|source| StartError::Stage { name, source })?;
    }
    Ok(())
}

/// Waits until the autoscaler binary has finished its first loop: every
/// CA writes its status ConfigMap at the end of each loop. Until then a
/// scenario's first step could race the binary's start-up (its cloud
/// provider reading the cluster, its HTTP endpoints opening). Fails when the
/// binary exits; after `timeout` the scenario goes on, as an autoscaler
/// that does not write the status (`--write-status-configmap=false`) may.
async fn wait_first_loop(
    cluster: &Cluster,
    autoscaler: &mut Autoscaler,
    timeout: Duration,
) -> Result<(), StartError> {
    let api = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
        cluster.client(),
        "kube-system",
    );
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if let Some(exited) = autoscaler.exited() {
            return Err(StartError::Exited(exited));
        }
        if matches!(api.get_opt("cluster-autoscaler-status").await, Ok(Some(_))) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Waits until the groups' starting nodes are Ready.
async fn wait_initial_nodes(
    cluster: &Cluster,
    groups: &[GroupSpec],
    timeout: Duration,
) -> Result<(), StartError> {
    // Groups whose nodes never become ready are not waited for.
    let initial: usize = groups
        .iter()
        .filter(|g| !g.labels.contains_key(NOT_READY_LABEL))
        .map(|g| g.initial.max(g.min))
        .sum();
    cluster
        .wait_nodes_ready(initial, timeout)
        .await
        .map(|_| ())
        .map_err(StartError::InitialNodes)
}
