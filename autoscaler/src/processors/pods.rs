//! Pod-list processors (upstream's `processors/pods` and
//! `core/podlistprocessor`): the steps that turn the unschedulable pods
//! into the pods scale-up should help. Each step may drop pods (they need
//! no new node, or another mechanism owns them), add pods (that need a
//! place too), or place pods in the loop's snapshot. They run in one chain,
//! in upstream's default order ([`PodListProcessors::default`]):
//!
//! 1. [`FilterOutExpendable`]: pods below `--expendable-pods-priority-cutoff`
//!    (overprovisioning pause pods, say) never trigger a scale-up; pods
//!    waiting for the preemption of lower-priority pods (a nominated node)
//!    have a place already.
//! 2. [`CurrentlyDrainedNodes`]: the pods of nodes being drained need a
//!    place too.
//! 3. [`FilterOutSchedulable`]: pods that fit on existing or upcoming nodes
//!    are placed there in the snapshot and need no new node.
//! 4. [`FilterOutDaemonSet`]: DaemonSet pods never trigger a scale-up.
//!
//! A new source of pods is one more type and one more entry in the chain:
//! with `--enable-provisioning-requests`, `crate::processors::provreq`'s
//! three come after these four, as upstream adds them.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use predicates::PodInfo;

use crate::cache::{LoopHasher, is_active, is_expendable};
use crate::context::AutoscalingContext;
use crate::metrics::Metrics;
use crate::scaleup::equivalence::Compared;
use crate::simulator::Snapshot;
use crate::simulator::drainability::{controller_uid, is_daemonset_pod, is_mirror_pod};

/// What a pod-list processor may read or change besides the pod list.
pub struct PodListContext<'a> {
    /// The loop's snapshot: pods placed in it stay placed for the rest of
    /// the loop.
    pub snapshot: &'a mut Snapshot,
    /// `--expendable-pods-priority-cutoff`.
    pub expendable_cutoff: i32,
    /// The pods of nodes being drained, unbound
    /// ([`CurrentlyDrainedNodes::read_pods`]).
    pub draining_pods: Vec<PodInfo>,
    /// Where processors report their durations.
    pub metrics: &'a Metrics,
    /// The pods [`FilterOutSchedulable`] placed on existing or upcoming
    /// nodes (the debugging snapshot's `UnscheduledPodsCanBeScheduled`).
    pub schedulable: Vec<PodInfo>,
    /// With `--enable-graceful-degradation`: how long
    /// [`FilterOutSchedulable`] may take (`--pending-pods-batching-timeout`).
    pub batching_timeout: Option<std::time::Duration>,
    /// How many pods [`FilterOutSchedulable`] did not reach in its
    /// `batching_timeout`: they are left out of this loop.
    pub skipped: usize,
}

#[cfg(test)]
impl<'a> PodListContext<'a> {
    /// A context as a loop starts one: the default expendable cutoff
    /// (`-10`), no draining pods, no batching timeout.
    pub fn for_test(snapshot: &'a mut Snapshot, metrics: &'a Metrics) -> Self {
        Self {
            snapshot,
            expendable_cutoff: -10,
            draining_pods: Vec::new(),
            metrics,
            schedulable: Vec::new(),
            batching_timeout: None,
            skipped: 0,
        }
    }
}

/// One step of the chain (upstream's `PodListProcessor`).
pub trait PodListProcessor: Send + Sync {
    /// Upstream's name of the processor.
    fn name(&self) -> &'static str;
    /// The pods left (and added) after this step.
    fn process(&self, ctx: &mut PodListContext<'_>, pods: Vec<PodInfo>) -> Vec<PodInfo>;
}

/// The chain, run in order (upstream's `defaultPodListProcessor`).
pub struct PodListProcessors(Vec<Box<dyn PodListProcessor>>);

impl Default for PodListProcessors {
    /// Upstream's default chain.
    fn default() -> Self {
        Self(vec![
            Box::new(FilterOutExpendable),
            Box::new(CurrentlyDrainedNodes),
            Box::new(FilterOutSchedulable),
            Box::new(FilterOutDaemonSet),
        ])
    }
}

impl PodListProcessors {
    /// A chain of these processors, in this order.
    pub fn new(processors: Vec<Box<dyn PodListProcessor>>) -> Self {
        Self(processors)
    }

    /// Puts a processor first in the chain (upstream's
    /// `NewCombinedPodListProcessor([p, chain])`, as the CapacityBuffer
    /// injector is wired).
    pub fn add_first(&mut self, processor: Box<dyn PodListProcessor>) {
        self.0.insert(0, processor);
    }

    /// Adds a processor at the end of the chain (upstream's `AddProcessor`).
    pub fn add(&mut self, processor: Box<dyn PodListProcessor>) {
        self.0.push(processor);
    }

    /// The processors' names, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|p| p.name()).collect()
    }

    /// Runs every processor in order on the pods.
    pub fn process(&self, ctx: &mut PodListContext<'_>, pods: Vec<PodInfo>) -> Vec<PodInfo> {
        self.0.iter().fold(pods, |pods, p| p.process(ctx, pods))
    }
}

/// Drops expendable pods and pods waiting for a preemption (upstream's
/// `FilterOutExpendablePodListProcessor`). FAQ: pods with priority lower
/// than the cutoff "don't trigger scale-ups"; `--expendable-pods-priority-cutoff`:
/// "they don't cause scale up".
pub struct FilterOutExpendable;

impl PodListProcessor for FilterOutExpendable {
    fn name(&self) -> &'static str {
        "FilterOutExpendablePodListProcessor"
    }

    fn process(&self, ctx: &mut PodListContext<'_>, mut pods: Vec<PodInfo>) -> Vec<PodInfo> {
        pods.retain(|info| {
            let p = &info.pod;
            let nominated = p
                .status
                .as_ref()
                .and_then(|s| s.nominated_node_name.as_deref())
                .is_some_and(|n| !n.is_empty());
            !nominated && !is_expendable(p, ctx.expendable_cutoff)
        });
        pods
    }
}

/// Adds the pods of nodes being drained (upstream's
/// `CurrentlyDrainedNodesPodListProcessor`): scale-up finds them a place
/// before their node goes.
pub struct CurrentlyDrainedNodes;

impl CurrentlyDrainedNodes {
    /// The pods of the nodes being drained, unbound, read from the API
    /// server (the cache keeps bound pods compact): not terminating, not
    /// finished, neither DaemonSet nor mirror pods.
    pub async fn read_pods(ctx: &AutoscalingContext, draining: &[String]) -> Vec<PodInfo> {
        let mut out = Vec::new();
        for node in draining {
            let lp = kube::api::ListParams::default().fields(&format!("spec.nodeName={node}"));
            let pods = match Api::<Pod>::all(ctx.client.clone()).list(&lp).await {
                Ok(l) => l.items,
                Err(e) => {
                    tracing::warn!("listing the pods of draining node {node}: {e}");
                    continue;
                }
            };
            for mut p in pods {
                if p.metadata.deletion_timestamp.is_none()
                    && is_active(&p)
                    && !is_daemonset_pod(&p)
                    && !is_mirror_pod(&p)
                {
                    if let Some(s) = p.spec.as_mut() {
                        s.node_name = None;
                    }
                    out.push(PodInfo::new(Arc::new(p)).compact());
                }
            }
        }
        out
    }
}

impl PodListProcessor for CurrentlyDrainedNodes {
    fn name(&self) -> &'static str {
        "CurrentlyDrainedNodesPodListProcessor"
    }

    fn process(&self, ctx: &mut PodListContext<'_>, mut pods: Vec<PodInfo>) -> Vec<PodInfo> {
        pods.append(&mut ctx.draining_pods);
        pods
    }
}

/// Places the pods that fit on existing or upcoming nodes in the snapshot
/// and drops them (upstream's `FilterOutSchedulablePodListProcessor`,
/// docs/reference/ca-rules.md §4.1 step 6).
pub struct FilterOutSchedulable;

impl PodListProcessor for FilterOutSchedulable {
    fn name(&self) -> &'static str {
        "FilterOutSchedulablePodListProcessor"
    }

    fn process(&self, ctx: &mut PodListContext<'_>, pods: Vec<PodInfo>) -> Vec<PodInfo> {
        let t = std::time::Instant::now();
        let deadline = ctx.batching_timeout.map(|timeout| t + timeout);
        let candidates = pods.len();
        let filtered = filter_out_schedulable(ctx.snapshot, pods, deadline);
        let skipped = filtered.unreached.len();
        if skipped > 0 {
            tracing::debug!(
                "Scheduling simulation aborted early due to context deadline exceeded. \
                 Requestor: {}, Simulated {} pods. {skipped} pods were unprocessed",
                REQUESTOR,
                candidates - skipped
            );
        }
        let skipped_message = if skipped > 0 {
            format!(" {skipped} pods were skipped due to exceeding pending pod batching timeout.")
        } else {
            String::new()
        };
        tracing::debug!(
            "{} pods marked as unschedulable can be scheduled.{skipped_message}",
            filtered.placed.len()
        );
        ctx.schedulable = filtered.placed;
        ctx.skipped = skipped;
        ctx.metrics.observe("filterOutSchedulable", t.elapsed());
        ctx.snapshot.commit();
        filtered.left
    }
}

/// Upstream's name for [`FilterOutSchedulable`]'s simulation, in its logs
/// and in `skipped_pods_count{requestor}`.
pub const REQUESTOR: &str = "filter-out-pod-list-processor";

/// What [`filter_out_schedulable`] made of the pending pods.
#[derive(Debug, Default)]
pub struct Filtered {
    /// The pods that fit nowhere: scale-up's.
    pub left: Vec<PodInfo>,
    /// The pods placed on existing or upcoming nodes.
    pub placed: Vec<PodInfo>,
    /// The pods not tried before the deadline.
    pub unreached: Vec<PodInfo>,
}

/// Drops the pods that fit on existing or upcoming nodes, placing them in
/// the snapshot. Pods go by priority, highest first; once a pod of an
/// equivalence group fits nowhere, its equals are not tried again. Past
/// `deadline`, the pods not yet tried are left unreached.
pub fn filter_out_schedulable(
    snapshot: &mut Snapshot,
    pods: Vec<PodInfo>,
    deadline: Option<std::time::Instant>,
) -> Filtered {
    let mut pods = pods;
    pods.sort_by_key(|p| std::cmp::Reverse(p.priority));
    // The pods that fit nowhere, by controller uid: only pods of the same
    // controller can be equivalent.
    let mut failed: HashMap<String, Vec<Compared<PodInfo>>, LoopHasher> = HashMap::default();
    let mut out = Filtered::default();
    let mut hint = 0;
    let mut pods = pods.into_iter();
    while let Some(pod) = pods.next() {
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            out.unreached.push(pod);
            out.unreached.extend(pods);
            break;
        }
        let compared = Compared::new(&pod);
        let known_to_fail = controller_uid(&pod.pod)
            .and_then(|uid| failed.get(uid))
            .is_some_and(|same| same.iter().any(|f| f.equivalent(&compared)));
        if known_to_fail {
            out.left.push(pod);
            continue;
        }
        match snapshot.find_fit(&pod, hint, |_| true) {
            Some(i) => {
                snapshot.add_pod(i, pod.clone());
                out.placed.push(pod);
                hint = i;
            }
            None => {
                if let Some(uid) = controller_uid(&pod.pod) {
                    failed
                        .entry(uid.to_string())
                        .or_default()
                        .push(Compared::new(pod.clone()));
                }
                out.left.push(pod);
            }
        }
    }
    out
}

/// Drops DaemonSet pods (upstream's `FilterOutDaemonSetPodListProcessor`):
/// a new node brings its own.
pub struct FilterOutDaemonSet;

impl PodListProcessor for FilterOutDaemonSet {
    fn name(&self) -> &'static str {
        "FilterOutDaemonSetPodListProcessor"
    }

    fn process(&self, _ctx: &mut PodListContext<'_>, mut pods: Vec<PodInfo>) -> Vec<PodInfo> {
        pods.retain(|p| !is_daemonset_pod(&p.pod));
        pods
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use predicates::NodeInfo;
    use serde_json::{Value, json};

    use super::*;

    fn pod(name: &str, cpu: &str, extra: Value) -> PodInfo {
        let mut p = json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
        });
        for (k, v) in extra.as_object().unwrap() {
            for (kk, vv) in v.as_object().unwrap() {
                p[k][kk] = vv.clone();
            }
        }
        PodInfo::new(Arc::new(serde_json::from_value(p).unwrap())).compact()
    }

    fn node(name: &str, cpu: &str) -> NodeInfo {
        NodeInfo::new(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name},
                "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}))
            .unwrap(),
        ))
    }

    /// The pods left by `chain` from a mix of every kind, on one node with
    /// room for one 1-CPU pod.
    fn left_by(chain: &PodListProcessors) -> Vec<String> {
        let metrics = Metrics::new(false);
        let mut snapshot = Snapshot::new(vec![node("n1", "1")]);
        let mut ctx = PodListContext::for_test(&mut snapshot, &metrics);
        ctx.draining_pods = vec![pod("from-draining-node", "2", json!({}))];
        let pods = vec![
            pod("fits", "1", json!({})),
            pod("too-big", "2", json!({})),
            pod("expendable", "2", json!({"spec": {"priority": -100}})),
            pod(
                "nominated",
                "2",
                json!({"status": {"nominatedNodeName": "n1"}}),
            ),
            pod(
                "ds",
                "2",
                json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1",
                    "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": true}]}}),
            ),
        ];
        let mut left: Vec<String> = chain
            .process(&mut ctx, pods)
            .iter()
            .map(|p| p.key.clone())
            .collect();
        left.sort();
        left
    }

    #[test]
    fn the_default_chain_runs_upstreams_processors_in_order() {
        assert_eq!(
            PodListProcessors::default().names(),
            [
                "FilterOutExpendablePodListProcessor",
                "CurrentlyDrainedNodesPodListProcessor",
                "FilterOutSchedulablePodListProcessor",
                "FilterOutDaemonSetPodListProcessor",
            ]
        );
        assert_eq!(
            left_by(&PodListProcessors::default()),
            ["default/from-draining-node", "default/too-big"]
        );
    }

    #[test]
    fn past_the_batching_timeout_the_pods_not_reached_are_left_out() {
        let pods = || {
            vec![
                pod("low", "1", json!({"spec": {"priority": 1}})),
                pod("high", "1", json!({"spec": {"priority": 100}})),
                pod("too-big", "4", json!({"spec": {"priority": 50}})),
            ]
        };
        let keys =
            |pods: &[PodInfo]| -> Vec<String> { pods.iter().map(|p| p.key.clone()).collect() };
        // No timeout: the highest priority first takes the room.
        let mut snapshot = Snapshot::new(vec![node("n1", "1")]);
        let all = filter_out_schedulable(&mut snapshot, pods(), None);
        assert_eq!(keys(&all.placed), ["default/high"]);
        assert_eq!(keys(&all.left), ["default/too-big", "default/low"]);
        assert!(all.unreached.is_empty());
        // A deadline already passed: no pod is tried, none placed.
        let mut snapshot = Snapshot::new(vec![node("n1", "1")]);
        let passed = std::time::Instant::now();
        let none = filter_out_schedulable(&mut snapshot, pods(), Some(passed));
        assert!(none.placed.is_empty() && none.left.is_empty());
        assert_eq!(
            keys(&none.unreached),
            ["default/high", "default/too-big", "default/low"]
        );
        // Through the chain, with a zero timeout: nothing for scale-up, and
        // the count of pods not reached.
        let metrics = Metrics::new(false);
        let mut snapshot = Snapshot::new(vec![node("n1", "1")]);
        let mut ctx = PodListContext::for_test(&mut snapshot, &metrics);
        ctx.batching_timeout = Some(std::time::Duration::ZERO);
        assert!(FilterOutSchedulable.process(&mut ctx, pods()).is_empty());
        assert_eq!(ctx.skipped, 3);
    }

    #[test]
    fn each_processor_of_the_chain_decides_its_part() {
        let without = |name: &str| {
            let kept: Vec<Box<dyn PodListProcessor>> = [
                Box::new(FilterOutExpendable) as Box<dyn PodListProcessor>,
                Box::new(CurrentlyDrainedNodes),
                Box::new(FilterOutSchedulable),
                Box::new(FilterOutDaemonSet),
            ]
            .into_iter()
            .filter(|p| p.name() != name)
            .collect();
            left_by(&PodListProcessors::new(kept))
        };
        assert_eq!(
            without("FilterOutExpendablePodListProcessor"),
            [
                "default/expendable",
                "default/from-draining-node",
                "default/nominated",
                "default/too-big"
            ]
        );
        assert_eq!(
            without("CurrentlyDrainedNodesPodListProcessor"),
            ["default/too-big"]
        );
        assert_eq!(
            without("FilterOutSchedulablePodListProcessor"),
            [
                "default/fits",
                "default/from-draining-node",
                "default/too-big"
            ]
        );
        assert_eq!(
            without("FilterOutDaemonSetPodListProcessor"),
            [
                "default/ds",
                "default/from-draining-node",
                "default/too-big"
            ]
        );
    }
}
