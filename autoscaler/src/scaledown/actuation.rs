//! Node deletion (docs/reference/ca-rules.md §3.6): taint the chosen nodes with
//! `ToBeDeletedByClusterAutoscaler` at once, then per node, in the
//! background: wait `--node-delete-delay-after-taint` (or, with
//! `--dynamic-node-delete-delay-after-taint-enabled`, twice the taints'
//! measured latency: `latency`), check the node again
//! (a pod that now blocks, or new pods on an "empty" node, abort), evict its
//! pods through the Eviction API (retried until `--max-pod-eviction-time`),
//! wait for them to go, wait for `delay-deletion.*` annotations, and delete
//! it through its node group. Any failure removes the taint again; a
//! removal the API server refuses is retried at the start of each later
//! scale-down ([`Actuator::retry_untaints`]) until it succeeds or the node
//! is gone, so an API error never leaves a node unschedulable for good.
//!
//! The eviction and the wait for the evicted pods are in `drain`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use tokio::task::JoinSet;

use crate::cache::ClusterCache;
use crate::cloudprovider::NodeGroup;
use crate::config::DrainPriority;
use crate::events::{EventReason, EventRecorder, EventType, ObjectRef};
use crate::simulator::drainability::{self, Context, DrainRules, is_daemonset_pod, is_mirror_pod};
use crate::taints;

mod batcher;
mod drain;
mod latency;

pub use batcher::Batcher;
pub use latency::TaintLatency;

/// `cluster-autoscaler.kubernetes.io/enable-ds-eviction`.
pub const ENABLE_DS_EVICTION: &str = "cluster-autoscaler.kubernetes.io/enable-ds-eviction";
/// Prefix of the annotations that delay deletion.
pub const DELAY_DELETION_PREFIX: &str = "delay-deletion.cluster-autoscaler.kubernetes.io/";

/// Deletion settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--cordon-node-before-terminating`.
    pub cordon: bool,
    /// `--node-delete-delay-after-taint`.
    pub delay_after_taint: Duration,
    /// `--dynamic-node-delete-delay-after-taint-enabled`: the delay is
    /// measured instead ([`TaintLatency`]).
    pub dynamic_delay_after_taint: bool,
    /// `--node-deletion-batcher-interval` ([`Batcher`]; zero: one call per
    /// node).
    pub batcher_interval: Duration,
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
    /// The drainability rules, re-checked before draining.
    pub drain: DrainRules,
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
    Failed(DeletionError),
    /// The node group's `delete_nodes` failed.
    CloudDeleteFailed(DeletionError),
}

/// Why a deletion failed, naming the node or pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeletionError {
    /// Tainting a node failed, so none of the batch is deleted.
    #[error("couldn't taint {count} nodes with ToBeDeleted")]
    Taint {
        /// Nodes in the batch.
        count: usize,
    },
    /// The re-check found a pod that blocks the removal.
    #[error("pod {pod} blocks the removal: {message}")]
    BlockedByPod {
        /// `namespace/name`.
        pod: String,
        /// The drainability rule's message.
        message: String,
    },
    /// An empty node got pods after it was chosen.
    #[error("failed to delete empty node \"{node}\", new pods scheduled")]
    NewPodsScheduled {
        /// The node.
        node: String,
    },
    /// The node runs on-completion pods.
    #[error("failed to delete node \"{node}\", active on-completion pods present")]
    OnCompletionPods {
        /// The node.
        node: String,
    },
    /// A pod could not be evicted within `--max-pod-eviction-time`.
    #[error("failed to evict pod {namespace}/{name} within allowed timeout (last error: {last})")]
    Eviction {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
        /// The last error of the eviction API.
        last: String,
    },
    /// Evictions failed.
    #[error("Failed to drain node /{node}, due to following errors: [{}]", .errors.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Drain {
        /// The node.
        node: String,
        /// The failed evictions.
        errors: Vec<DeletionError>,
    },
    /// Evicted pods were still on the node after their grace period.
    #[error("Failed to drain node /{node}: pods remaining after timeout")]
    PodsRemaining {
        /// The node.
        node: String,
    },
    /// The Node object disappeared before the cloud deletion.
    #[error("node {node} is gone")]
    NodeGone {
        /// The node.
        node: String,
    },
    /// The node group's `delete_nodes` failed.
    #[error("failed to delete node {node} from group {group}: {error}")]
    Cloud {
        /// The node.
        node: String,
        /// Its group.
        group: String,
        /// The provider's error.
        error: Box<crate::cloudprovider::CloudError>,
    },
}

/// A node being deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InProgress {
    /// Its group.
    pub group: String,
    /// Whether it is drained (else: empty).
    pub drain: bool,
}

/// A deletion that ended since the last report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The node.
    pub node: String,
    /// Its group.
    pub group: String,
    /// How it ended.
    pub outcome: Outcome,
}

/// Deletions in progress and finished ones not yet reported.
#[derive(Default)]
struct Progress {
    in_progress: BTreeMap<String, InProgress>,
    /// Nodes whose `ToBeDeletedByClusterAutoscaler` taint could not be
    /// removed after their deletion was given up: retried each loop.
    untaints_owed: BTreeSet<String>,
    finished: Vec<Finished>,
    evicted_ok: u64,
    evicted_failed: u64,
}

/// Whether a pod is evicted when its node goes (docs/reference/ca-rules.md §1.1): every
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

/// The eviction group of a pod and its grace period (docs/reference/ca-rules.md §3.6): one
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
    progress: Arc<Mutex<Progress>>,
    /// The deletions running now, each its own task.
    deletions: Arc<Mutex<JoinSet<()>>>,
    /// `--node-deletion-batcher-interval` above zero: the cloud deletions
    /// gathered per group.
    batcher: Option<Batcher>,
    /// The taints' latencies (with a dynamic delay after taint).
    taint_latency: Arc<TaintLatency>,
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
            events,
            cache,
            batcher: (!settings.batcher_interval.is_zero())
                .then(|| Batcher::new(settings.batcher_interval)),
            settings: Arc::new(settings),
            progress: Arc::new(Mutex::new(Progress::default())),
            deletions: Arc::default(),
            taint_latency: Arc::default(),
        }
    }

    /// Stops every deletion still running, where it is, as a process that
    /// exits does: a node may keep its `ToBeDeletedByClusterAutoscaler`
    /// taint, which the next autoscaler to lead cleans up at its start.
    pub fn abort_deletions(&self) {
        self.deletions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .abort_all();
        if let Some(b) = &self.batcher {
            b.abort();
        }
    }

    fn progress(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The nodes being deleted now.
    pub fn in_progress(&self) -> BTreeMap<String, InProgress> {
        self.progress().in_progress.clone()
    }

    /// The nodes being drained now.
    pub fn draining(&self) -> Vec<String> {
        self.progress()
            .in_progress
            .iter()
            .filter(|(_, d)| d.drain)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// The deletions that ended since the last call.
    pub fn take_finished(&self) -> Vec<Finished> {
        std::mem::take(&mut self.progress().finished)
    }

    /// Evictions that succeeded and failed since the last call.
    pub fn take_eviction_counts(&self) -> (u64, u64) {
        let mut p = self.progress();
        (
            std::mem::take(&mut p.evicted_ok),
            std::mem::take(&mut p.evicted_failed),
        )
    }

    /// Taints the nodes and starts their deletion. A taint failure rolls
    /// back the others and is returned (it starts the failure cooldown).
    pub async fn start(&self, nodes: Vec<ToDelete>) -> Result<(), DeletionError> {
        let now = self.clock.now();
        let mut tainted: Vec<&ToDelete> = Vec::new();
        let mut sent = Vec::new();
        for n in &nodes {
            let uid = self.node_uid(&n.name);
            sent.push((n.name.clone(), self.clock.now()));
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
                        EventType::Normal,
                        EventReason::ScaleDown,
                        "marked the node as toBeDeleted/unschedulable".into(),
                    );
                    self.progress().untaints_owed.remove(&n.name);
                    tainted.push(n);
                }
                Err(e) => {
                    self.events.record(
                        &ObjectRef::node(&n.name, &uid),
                        EventType::Warning,
                        EventReason::ScaleDownFailed,
                        format!("failed to mark the node as toBeDeleted/unschedulable: {e}"),
                    );
                    for t in &tainted {
                        self.untaint(&t.name, "a failed taint of its batch").await;
                    }
                    return Err(DeletionError::Taint { count: nodes.len() });
                }
            }
        }
        let delay = self.delay_after_taint(sent).await;
        if !delay.is_zero() {
            tracing::info!(
                "Scale-down: waiting {} before trying to delete nodes",
                simclock::format_go_duration(delay)
            );
        }
        for n in nodes {
            if n.drain {
                tracing::info!(
                    "Scale-down: removing node {}, utilization: {}, pods to reschedule: {}",
                    n.name,
                    n.utilization,
                    n.pods.join(",")
                );
            } else {
                tracing::info!("Scale-down: removing empty node {:?}", n.name);
            }
            if n.drain {
                self.events.status(
                    EventType::Normal,
                    EventReason::ScaleDown,
                    format!(
                        "Scale-down: removing node {}, utilization: {}, pods to reschedule: {}",
                        n.name,
                        n.utilization,
                        n.pods.join(",")
                    ),
                );
            } else {
                self.events.status(
                    EventType::Normal,
                    EventReason::ScaleDownEmpty,
                    format!("Scale-down: removing empty node \"{}\"", n.name),
                );
            }
            let deleting = InProgress {
                group: n.group.id(),
                drain: n.drain,
            };
            self.progress().in_progress.insert(n.name.clone(), deleting);
            let this = self.clone();
            let mut deletions = self.deletions.lock().unwrap_or_else(|e| e.into_inner());
            while deletions.try_join_next().is_some() {}
            deletions.spawn(async move { this.delete(n, delay).await });
        }
        Ok(())
    }

    /// Removes the `ToBeDeletedByClusterAutoscaler` taint from a node whose
    /// deletion was given up `after` something failed; a refusal is owed,
    /// and retried by [`Actuator::retry_untaints`].
    async fn untaint(&self, node: &str, after: &str) {
        match taints::remove(
            &self.client,
            node,
            taints::TO_BE_DELETED,
            self.settings.cordon,
        )
        .await
        {
            Ok(_) => {
                self.progress().untaints_owed.remove(node);
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                self.progress().untaints_owed.remove(node);
            }
            Err(e) => {
                tracing::warn!(
                    "removing the {} taint from node {node} after {after}: {e}; retried next loop",
                    taints::TO_BE_DELETED
                );
                self.progress().untaints_owed.insert(node.to_string());
            }
        }
    }

    /// Retries the taint removals refused earlier, for the nodes not being
    /// deleted again now.
    pub async fn retry_untaints(&self) {
        let owed: Vec<String> = {
            let p = self.progress();
            p.untaints_owed
                .iter()
                .filter(|n| !p.in_progress.contains_key(*n))
                .cloned()
                .collect()
        };
        for node in owed {
            self.untaint(&node, "an earlier refusal").await;
        }
    }

    /// How long the deletions wait after the taints: the flag's delay, or
    /// with a dynamic delay the one measured on these taints.
    async fn delay_after_taint(&self, sent: Vec<(String, SystemTime)>) -> Duration {
        if !self.settings.dynamic_delay_after_taint {
            return self.settings.delay_after_taint;
        }
        self.taint_latency
            .measure(&self.cache, &self.clock, sent)
            .await
            .unwrap_or(self.settings.delay_after_taint)
    }

    fn node_uid(&self, name: &str) -> String {
        self.cache
            .read()
            .nodes
            .get(name)
            .and_then(|n| n.metadata.uid.clone())
            .unwrap_or_default()
    }

    async fn delete(self, n: ToDelete, delay: Duration) {
        let result = self.delete_steps(&n, delay).await;
        let uid = self.node_uid(&n.name);
        let outcome = match result {
            Ok(()) => {
                self.events.record(
                    &ObjectRef::node(&n.name, &uid),
                    EventType::Normal,
                    EventReason::ScaleDown,
                    "nodes removed by cluster autoscaler".into(),
                );
                if n.drain {
                    self.events.status(
                        EventType::Normal,
                        EventReason::ScaleDown,
                        format!("Scale-down: node {} removed with drain", n.name),
                    );
                } else {
                    self.events.status(
                        EventType::Normal,
                        EventReason::ScaleDownEmpty,
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
            Err(e) => {
                if n.drain {
                    tracing::error!(
                        "Scale-down: couldn't delete node {:?} with drain, {e}",
                        n.name
                    );
                } else {
                    tracing::error!("Scale-down: couldn't delete empty node {:?}, {e}", n.name);
                }
                let message = if n.drain {
                    format!("failed to drain and delete node: {e}")
                } else {
                    format!("failed to delete empty node: {e}")
                };
                self.events.record(
                    &ObjectRef::node(&n.name, &uid),
                    EventType::Warning,
                    EventReason::ScaleDownFailed,
                    message,
                );
                self.untaint(&n.name, "a failed deletion").await;
                if matches!(e, DeletionError::Cloud { .. }) {
                    Outcome::CloudDeleteFailed(e)
                } else {
                    Outcome::Failed(e)
                }
            }
        };
        let mut p = self.progress();
        p.in_progress.remove(&n.name);
        p.finished.push(Finished {
            node: n.name.clone(),
            group: n.group.id(),
            outcome,
        });
    }

    /// The deletion steps.
    async fn delete_steps(&self, n: &ToDelete, delay: Duration) -> Result<(), DeletionError> {
        tokio::time::sleep(delay).await;
        let pods = self.recheck(n)?;
        let to_evict: Vec<Eviction> = pods
            .into_iter()
            .filter(|(p, full)| *full || self.evict_daemonset_pod(p, n.drain))
            .collect();
        self.drain(&n.name, &to_evict).await?;
        self.wait_for_delay_annotations(&n.name).await;
        let node: Node = self
            .cache
            .read()
            .nodes
            .get(&n.name)
            .map(|n| (**n).clone())
            .ok_or_else(|| DeletionError::NodeGone {
                node: n.name.clone(),
            })?;
        let deleted = match &self.batcher {
            Some(b) => b.delete(n.group.clone(), node).await,
            None => n.group.delete_nodes(vec![node]).await,
        };
        deleted.map_err(|error| DeletionError::Cloud {
            node: n.name.clone(),
            group: n.group.id(),
            error: Box::new(error),
        })
    }

    /// Checks the node again on fresh data; returns the pods to evict
    /// (`true`: must succeed; `false`: DaemonSet pods, best effort).
    fn recheck(&self, n: &ToDelete) -> Result<Vec<Eviction>, DeletionError> {
        let state = self.cache.read();
        let pods: Vec<Arc<Pod>> = state
            .pods_on(&n.name)
            .into_iter()
            .filter(|p| !crate::cache::is_expendable(p, self.settings.expendable_cutoff))
            .collect();
        let budgets = state.budgets();
        let ctx = Context {
            now: self.clock.now(),
            rules: self.settings.drain,
            budgets: &budgets,
            controllers: &*state,
        };
        let drain =
            drainability::pods_to_move(&pods, &ctx).map_err(|b| DeletionError::BlockedByPod {
                pod: predicates::nodeinfo::pod_key(&b.pod),
                message: b.message,
            })?;
        if !n.drain && !drain.pods_to_move.is_empty() {
            return Err(DeletionError::NewPodsScheduled {
                node: n.name.clone(),
            });
        }
        if !drain.on_completion.is_empty() {
            return Err(DeletionError::OnCompletionPods {
                node: n.name.clone(),
            });
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
            dynamic_delay_after_taint: false,
            batcher_interval: Duration::ZERO,
            max_pod_eviction_time: Duration::from_secs(120),
            max_graceful_termination_sec: 600,
            drain_priorities: prios,
            ds_eviction_empty: false,
            ds_eviction_occupied: true,
            deletion_delay_timeout: Duration::from_secs(120),
            drain: DrainRules::default(),
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
