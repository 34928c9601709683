//! Node deletion (ca-compat §3.6): taint the chosen nodes with
//! `ToBeDeletedByClusterAutoscaler` at once, then per node, in the
//! background: wait `--node-delete-delay-after-taint`, check the node again
//! (a pod that now blocks, or new pods on an "empty" node, abort), evict its
//! pods through the Eviction API (retried until `--max-pod-eviction-time`),
//! wait for them to go, wait for `delay-deletion.*` annotations, and delete
//! it through its node group. Any failure removes the taint again.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, EvictParams};
use kube::{Api, Client};

use crate::cache::ClusterCache;
use crate::cloudprovider::NodeGroup;
use crate::config::DrainPriority;
use crate::simulator::drainability::{self, Context, is_daemonset_pod, is_mirror_pod};
use crate::status::{EventRecorder, ObjectRef};
use crate::taints;

/// `cluster-autoscaler.kubernetes.io/enable-ds-eviction`.
pub const ENABLE_DS_EVICTION: &str = "cluster-autoscaler.kubernetes.io/enable-ds-eviction";
/// Prefix of the annotations that delay deletion.
pub const DELAY_DELETION_PREFIX: &str = "delay-deletion.cluster-autoscaler.kubernetes.io/";
/// How often a drain checks the API server for evicted pods that are
/// still there when no pod event wakes it.
const DRAIN_POLL: Duration = Duration::from_secs(5);

/// Drainability flags, for the re-check before draining.
#[derive(Debug, Clone)]
pub struct DrainFlags {
    /// `--skip-nodes-with-system-pods`.
    pub skip_system_pods: bool,
    /// `--skip-nodes-with-local-storage`.
    pub skip_local_storage: bool,
    /// `--skip-nodes-with-custom-controller-pods`.
    pub skip_custom_controller_pods: bool,
    /// `--min-replica-count`.
    pub min_replica_count: i32,
    /// `--blocking-system-pod-distruption-timeout`.
    pub system_pod_timeout: Duration,
}

/// Deletion settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--cordon-node-before-terminating`.
    pub cordon: bool,
    /// `--node-delete-delay-after-taint`.
    pub delay_after_taint: Duration,
    /// `--max-pod-eviction-time`.
    pub max_pod_eviction_time: Duration,
    /// `--max-graceful-termination-sec`.
    pub max_graceful_termination_sec: i64,
    /// `--drain-priority-config`, ascending.
    pub drain_priorities: Vec<DrainPriority>,
    /// `--daemonset-eviction-for-empty-nodes`.
    pub ds_eviction_empty: bool,
    /// `--daemonset-eviction-for-occupied-nodes`.
    pub ds_eviction_occupied: bool,
    /// `--node-deletion-delay-timeout`.
    pub deletion_delay_timeout: Duration,
    /// Drainability flags.
    pub drain: DrainFlags,
    /// `--expendable-pods-priority-cutoff`.
    pub expendable_cutoff: i32,
}

/// A node to delete.
#[derive(Clone)]
pub struct ToDelete {
    /// Node name.
    pub name: String,
    /// Its group.
    pub group: Arc<dyn NodeGroup>,
    /// Whether it needs a drain (else: empty).
    pub drain: bool,
    /// Ready when chosen (decides the metric reason).
    pub ready: bool,
    /// For the start event: utilization and pods to move.
    pub utilization: String,
    /// Pods to reschedule (keys).
    pub pods: Vec<String>,
}

/// A pod to evict and whether its eviction must succeed (DaemonSet pods
/// are best effort).
type Eviction = (Arc<Pod>, bool);

/// How a deletion ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Removed; `empty`, `underutilized` or `unready`.
    Removed(&'static str),
    /// Failed before the cloud deletion (taint, drain...), with the error.
    Failed(String),
    /// The node group's `delete_nodes` failed.
    CloudDeleteFailed(String),
}

/// Deletions in progress and finished ones not yet reported.
#[derive(Default)]
pub struct Progress {
    /// Node → (group id, drain).
    pub in_progress: BTreeMap<String, (String, bool)>,
    /// Finished since the last report: node, group, outcome.
    pub finished: Vec<(String, String, Outcome)>,
    /// Full evictions that succeeded since the last report.
    pub evicted_ok: u64,
    /// Full evictions that failed since the last report.
    pub evicted_failed: u64,
}

/// Whether a pod is evicted when its node goes (ca-compat §1.1): every
/// non-DaemonSet pod; a DaemonSet pod per its `enable-ds-eviction`
/// annotation when present, else per the flag for empty or occupied nodes.
pub fn daemonset_pod_evicted(pod: &Pod, occupied: bool, settings: &Settings) -> bool {
    if !is_daemonset_pod(pod) {
        return true;
    }
    match pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ENABLE_DS_EVICTION))
    {
        Some(v) => v == "true",
        None if occupied => settings.ds_eviction_occupied,
        None => settings.ds_eviction_empty,
    }
}

/// The eviction group of a pod and its grace period (ca-compat §3.6): one
/// group with `--max-graceful-termination-sec` by default; with
/// `--drain-priority-config`, the entry with the largest priority at most
/// the pod's (the lowest entry for pods below all).
pub fn grace_group(pod: &Pod, settings: &Settings) -> (i32, i64) {
    let prios = &settings.drain_priorities;
    if prios.is_empty() {
        return (i32::MIN, settings.max_graceful_termination_sec);
    }
    let p = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
    let entry = prios
        .iter()
        .rev()
        .find(|d| d.priority <= p)
        .unwrap_or(&prios[0]);
    (entry.priority, entry.grace_seconds)
}

/// The actuator.
#[derive(Clone)]
pub struct Actuator {
    client: Client,
    clock: simclock::Clock,
    settings: Arc<Settings>,
    events: EventRecorder,
    cache: Arc<ClusterCache>,
    /// Progress, shared with the loop.
    pub progress: Arc<Mutex<Progress>>,
}

impl Actuator {
    /// An actuator.
    pub fn new(
        client: Client,
        clock: simclock::Clock,
        settings: Settings,
        events: EventRecorder,
        cache: Arc<ClusterCache>,
    ) -> Self {
        Self {
            client,
            clock,
            settings: Arc::new(settings),
            events,
            cache,
            progress: Arc::new(Mutex::new(Progress::default())),
        }
    }

    fn progress(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Taints the nodes and starts their deletion. A taint failure rolls
    /// back the others and is returned (it starts the failure cooldown).
    pub async fn start(&self, nodes: Vec<ToDelete>) -> Result<(), String> {
        let now = self.clock.now();
        let mut tainted: Vec<&ToDelete> = Vec::new();
        for n in &nodes {
            let uid = self.node_uid(&n.name);
            match taints::add(
                &self.client,
                &n.name,
                taints::TO_BE_DELETED,
                "NoSchedule",
                now,
                self.settings.cordon,
            )
            .await
            {
                Ok(()) => {
                    self.events.record(
                        &ObjectRef::node(&n.name, &uid),
                        "Normal",
                        "ScaleDown",
                        "marked the node as toBeDeleted/unschedulable".into(),
                    );
                    tainted.push(n);
                }
                Err(e) => {
                    self.events.record(
                        &ObjectRef::node(&n.name, &uid),
                        "Warning",
                        "ScaleDownFailed",
                        format!("failed to mark the node as toBeDeleted/unschedulable: {e}"),
                    );
                    for t in &tainted {
                        let _ = taints::remove(
                            &self.client,
                            &t.name,
                            taints::TO_BE_DELETED,
                            self.settings.cordon,
                        )
                        .await;
                    }
                    return Err(format!(
                        "couldn't taint {} nodes with ToBeDeleted",
                        nodes.len()
                    ));
                }
            }
        }
        for n in nodes {
            if n.drain {
                self.events.status(
                    "Normal",
                    "ScaleDown",
                    format!(
                        "Scale-down: removing node {}, utilization: {}, pods to reschedule: {}",
                        n.name,
                        n.utilization,
                        n.pods.join(",")
                    ),
                );
            } else {
                self.events.status(
                    "Normal",
                    "ScaleDownEmpty",
                    format!("Scale-down: removing empty node \"{}\"", n.name),
                );
            }
            self.progress()
                .in_progress
                .insert(n.name.clone(), (n.group.id(), n.drain));
            let this = self.clone();
            tokio::spawn(async move { this.delete(n).await });
        }
        Ok(())
    }

    fn node_uid(&self, name: &str) -> String {
        self.cache
            .read()
            .nodes
            .get(name)
            .and_then(|n| n.metadata.uid.clone())
            .unwrap_or_default()
    }

    async fn delete(self, n: ToDelete) {
        let result = self.delete_steps(&n).await;
        let uid = self.node_uid(&n.name);
        let outcome = match result {
            Ok(()) => {
                self.events.record(
                    &ObjectRef::node(&n.name, &uid),
                    "Normal",
                    "ScaleDown",
                    "nodes removed by cluster autoscaler".into(),
                );
                if n.drain {
                    self.events.status(
                        "Normal",
                        "ScaleDown",
                        format!("Scale-down: node {} removed with drain", n.name),
                    );
                } else {
                    self.events.status(
                        "Normal",
                        "ScaleDownEmpty",
                        format!("Scale-down: empty node {} removed", n.name),
                    );
                }
                Outcome::Removed(if !n.ready {
                    "unready"
                } else if n.drain {
                    "underutilized"
                } else {
                    "empty"
                })
            }
            Err((cloud, e)) => {
                let message = if n.drain {
                    format!("failed to drain and delete node: {e}")
                } else {
                    format!("failed to delete empty node: {e}")
                };
                self.events.record(
                    &ObjectRef::node(&n.name, &uid),
                    "Warning",
                    "ScaleDownFailed",
                    message,
                );
                if let Err(err) = taints::remove(
                    &self.client,
                    &n.name,
                    taints::TO_BE_DELETED,
                    self.settings.cordon,
                )
                .await
                {
                    tracing::warn!(
                        "removing the {} taint from node {} after a failed deletion: {err}",
                        taints::TO_BE_DELETED,
                        n.name
                    );
                }
                if cloud {
                    Outcome::CloudDeleteFailed(e)
                } else {
                    Outcome::Failed(e)
                }
            }
        };
        let mut p = self.progress();
        p.in_progress.remove(&n.name);
        p.finished.push((n.name.clone(), n.group.id(), outcome));
    }

    /// The deletion steps; an error says whether the cloud deletion failed.
    async fn delete_steps(&self, n: &ToDelete) -> Result<(), (bool, String)> {
        let before_cloud = |e: String| (false, e);
        tokio::time::sleep(self.settings.delay_after_taint).await;
        let pods = self.recheck(n).map_err(before_cloud)?;
        let to_evict: Vec<Eviction> = pods
            .into_iter()
            .filter(|(p, full)| *full || self.evict_daemonset_pod(p, n.drain))
            .collect();
        self.drain(&n.name, &to_evict).await.map_err(before_cloud)?;
        self.wait_for_delay_annotations(&n.name).await;
        let node: Node = self
            .cache
            .read()
            .nodes
            .get(&n.name)
            .map(|n| (**n).clone())
            .ok_or_else(|| (false, format!("node {} is gone", n.name)))?;
        n.group.delete_nodes(vec![node]).await.map_err(|e| {
            (
                true,
                format!(
                    "failed to delete node {} from group {}: {e}",
                    n.name,
                    n.group.id()
                ),
            )
        })
    }

    /// Checks the node again on fresh data; returns the pods to evict
    /// (`true`: must succeed; `false`: DaemonSet pods, best effort).
    fn recheck(&self, n: &ToDelete) -> Result<Vec<Eviction>, String> {
        let state = self.cache.read();
        let pods: Vec<Arc<Pod>> = state
            .pods_on(&n.name)
            .into_iter()
            .filter(|p| !crate::cache::is_expendable(p, self.settings.expendable_cutoff))
            .collect();
        let budgets = state.budgets();
        let f = &self.settings.drain;
        let ctx = Context {
            now: self.clock.now(),
            skip_nodes_with_system_pods: f.skip_system_pods,
            skip_nodes_with_local_storage: f.skip_local_storage,
            skip_nodes_with_custom_controller_pods: f.skip_custom_controller_pods,
            min_replica_count: f.min_replica_count,
            system_pod_timeout: f.system_pod_timeout,
            budgets: &budgets,
            controllers: &*state,
        };
        let drain = drainability::pods_to_move(&pods, &ctx).map_err(|b| {
            format!(
                "pod {} blocks the removal: {}",
                predicates::nodeinfo::pod_key(&b.pod),
                b.message
            )
        })?;
        if !n.drain && !drain.pods_to_move.is_empty() {
            return Err(format!(
                "failed to delete empty node \"{}\", new pods scheduled",
                n.name
            ));
        }
        if !drain.on_completion.is_empty() {
            return Err(format!(
                "failed to delete node \"{}\", active on-completion pods present",
                n.name
            ));
        }
        let mut out: Vec<Eviction> = drain.pods_to_move.into_iter().map(|p| (p, true)).collect();
        let full_ds = !self.settings.drain_priorities.is_empty();
        out.extend(
            drain
                .daemonset_pods
                .into_iter()
                .filter(|p| !is_mirror_pod(p))
                .map(|p| (p, full_ds)),
        );
        Ok(out)
    }

    fn evict_daemonset_pod(&self, pod: &Pod, occupied: bool) -> bool {
        daemonset_pod_evicted(pod, occupied, &self.settings)
    }

    fn grace_for(&self, pod: &Pod) -> (i32, i64) {
        grace_group(pod, &self.settings)
    }

    async fn drain(&self, node: &str, pods: &[Eviction]) -> Result<(), String> {
        let mut groups: BTreeMap<i32, (i64, Vec<Eviction>)> = BTreeMap::new();
        for (p, full) in pods {
            let (prio, grace) = self.grace_for(p);
            groups
                .entry(prio)
                .or_insert((grace, Vec::new()))
                .1
                .push((p.clone(), *full));
        }
        for (_, (group_grace, pods)) in groups {
            let deadline = tokio::time::Instant::now() + self.settings.max_pod_eviction_time;
            let mut errors = Vec::new();
            let evictions = pods
                .iter()
                .map(|(p, full)| self.evict(p.clone(), group_grace, deadline, *full));
            for (result, (p, full)) in futures::future::join_all(evictions)
                .await
                .into_iter()
                .zip(&pods)
            {
                if let Err(e) = result
                    && *full
                {
                    self.events.record(
                        &ObjectRef::pod(p),
                        "Warning",
                        "ScaleDownFailed",
                        "failed to delete pod for ScaleDown".into(),
                    );
                    errors.push(e);
                }
            }
            if !errors.is_empty() {
                return Err(format!(
                    "Failed to drain node /{node}, due to following errors: [{}]",
                    errors.join(", ")
                ));
            }
            // Wait for the evicted pods to go: checked with the API server
            // when the cache no longer has them on the node (each pod event
            // wakes the wait), and at least every 5 s.
            let wait = Duration::from_secs(u64::try_from(group_grace.max(0)).unwrap_or(0) + 30);
            let until = tokio::time::Instant::now() + wait;
            let mut pod_events = self.cache.pod_events();
            let mut ask_api = true;
            loop {
                if (ask_api || self.still_in_cache(node, &pods) == 0)
                    && self.remaining(node, &pods).await == 0
                {
                    break;
                }
                if tokio::time::Instant::now() >= until {
                    return Err(format!(
                        "Failed to drain node /{node}: pods remaining after timeout"
                    ));
                }
                ask_api = match tokio::time::timeout(DRAIN_POLL, pod_events.changed()).await {
                    Ok(Ok(())) => false,
                    Ok(Err(_)) => {
                        tokio::time::sleep(DRAIN_POLL).await;
                        true
                    }
                    Err(_) => true,
                };
            }
        }
        Ok(())
    }

    async fn evict(
        &self,
        pod: Arc<Pod>,
        group_grace: i64,
        deadline: tokio::time::Instant,
        full: bool,
    ) -> Result<(), String> {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let own = pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(30);
        let grace = if group_grace <= 0 {
            own
        } else {
            own.min(group_grace)
        };
        self.events.record(
            &ObjectRef::pod(&pod),
            "Normal",
            "ScaleDown",
            "deleting pod for node scale down".into(),
        );
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let params = EvictParams {
            delete_options: Some(
                DeleteParams::default().grace_period(u32::try_from(grace.max(0)).unwrap_or(0)),
            ),
            ..EvictParams::default()
        };
        loop {
            let last = match api.evict(&name, &params).await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                Err(e) => e.to_string(),
            };
            if !full || tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "failed to evict pod {ns}/{name} within allowed timeout (last error: {last})"
                ));
            }
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
    }

    /// How many of the pods the cache still has on the node (same uid).
    fn still_in_cache(&self, node: &str, pods: &[Eviction]) -> usize {
        let state = self.cache.read();
        pods.iter()
            .filter(|(p, _)| {
                state
                    .pods
                    .get(&predicates::nodeinfo::pod_key(p))
                    .is_some_and(|c| {
                        c.pod.metadata.uid == p.metadata.uid
                            && c.pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
                                == Some(node)
                    })
            })
            .count()
    }

    /// How many of the pods are still on the node (same uid, same node).
    async fn remaining(&self, node: &str, pods: &[Eviction]) -> usize {
        let mut n = 0;
        for (p, _) in pods {
            let api: Api<Pod> = Api::namespaced(
                self.client.clone(),
                p.metadata.namespace.as_deref().unwrap_or("default"),
            );
            if let Ok(Some(current)) = api.get_opt(p.metadata.name.as_deref().unwrap_or("")).await
                && current.metadata.uid == p.metadata.uid
                && current.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
            {
                n += 1;
            }
        }
        n
    }

    /// Waits (polling every 5 s) until the node has no
    /// `delay-deletion.cluster-autoscaler.kubernetes.io/*` annotation, for
    /// at most `--node-deletion-delay-timeout`; then goes on anyway.
    async fn wait_for_delay_annotations(&self, node: &str) {
        let timeout = self.settings.deletion_delay_timeout;
        if timeout.is_zero() {
            return;
        }
        let until = tokio::time::Instant::now() + timeout;
        loop {
            let delayed = self
                .cache
                .read()
                .nodes
                .get(node)
                .and_then(|n| n.metadata.annotations.clone())
                .is_some_and(|a| a.keys().any(|k| k.starts_with(DELAY_DELETION_PREFIX)));
            if !delayed {
                return;
            }
            if tokio::time::Instant::now() >= until {
                tracing::warn!(
                    "node {node}: delay-deletion annotations still present after {}; deleting anyway",
                    simclock::format_go_duration(timeout)
                );
                return;
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn settings(prios: Vec<DrainPriority>) -> Settings {
        Settings {
            cordon: false,
            delay_after_taint: Duration::from_secs(5),
            max_pod_eviction_time: Duration::from_secs(120),
            max_graceful_termination_sec: 600,
            drain_priorities: prios,
            ds_eviction_empty: false,
            ds_eviction_occupied: true,
            deletion_delay_timeout: Duration::from_secs(120),
            drain: DrainFlags {
                skip_system_pods: true,
                skip_local_storage: true,
                skip_custom_controller_pods: true,
                min_replica_count: 0,
                system_pod_timeout: Duration::from_secs(3600),
            },
            expendable_cutoff: -10,
        }
    }

    fn pod(ds: bool, annotation: Option<&str>, priority: i32) -> Pod {
        let owner = if ds { "DaemonSet" } else { "ReplicaSet" };
        let annotations = annotation.map(|v| json!({ENABLE_DS_EVICTION: v}));
        serde_json::from_value(json!({"metadata": {"name": "p", "annotations": annotations,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": "o", "uid": "u", "controller": true}]},
            "spec": {"priority": priority, "containers": []}}))
        .unwrap()
    }

    #[test]
    fn daemonset_eviction_follows_the_annotation_then_the_flags() {
        let s = settings(Vec::new());
        assert!(
            daemonset_pod_evicted(&pod(false, None, 0), false, &s),
            "ordinary pods always go"
        );
        assert!(
            !daemonset_pod_evicted(&pod(true, None, 0), false, &s),
            "empty nodes: default false"
        );
        assert!(
            daemonset_pod_evicted(&pod(true, None, 0), true, &s),
            "occupied nodes: default true"
        );
        assert!(daemonset_pod_evicted(
            &pod(true, Some("true"), 0),
            false,
            &s
        ));
        assert!(
            !daemonset_pod_evicted(&pod(true, Some("no"), 0), true, &s),
            "any other value: not evicted"
        );
    }

    #[test]
    fn grace_periods_by_priority() {
        assert_eq!(
            grace_group(&pod(false, None, 5), &settings(Vec::new())),
            (i32::MIN, 600)
        );
        let prios = vec![
            DrainPriority {
                priority: 0,
                grace_seconds: 60,
            },
            DrainPriority {
                priority: 1000,
                grace_seconds: 100,
            },
            DrainPriority {
                priority: 10000,
                grace_seconds: 20,
            },
        ];
        let s = settings(prios);
        assert_eq!(grace_group(&pod(false, None, 5000), &s), (1000, 100));
        assert_eq!(grace_group(&pod(false, None, 10000), &s), (10000, 20));
        assert_eq!(
            grace_group(&pod(false, None, -5), &s),
            (0, 60),
            "below all: the lowest"
        );
    }
}
