//! Proactive scale-up (`--enable-proactive-scaleup`, upstream's
//! `processors/podinjection`): a workload whose controller has not created
//! all its pods yet (a ReplicaSet held back by a ResourceQuota, a Job
//! still starting its parallel pods) gets fake copies of its newest pod for
//! the pods still missing, so that one scale-up makes room for all of them
//! rather than one per batch the controller creates.
//!
//! - [`crate::cache::desired_pods`]: how many pods each kind wants to
//!   exist, read when the cache keeps the controller: a ReplicaSet's replicas (Deployments
//!   through their ReplicaSets), a Job's still-incomplete pods up to its
//!   parallelism, a StatefulSet's replicas only with `Parallel` pod
//!   management (one with `OrderedReady` waits for each pod anyway).
//! - [`PodInjectionPodListProcessor`], first in the pod-list chain: for each
//!   such controller with at least one pod, `desired − pods` fake pods, each
//!   named `<newest pod>-copy-<i>`, uid `<controller uid>-<i>`, annotated
//!   `podtype: fakepod`, unbound. They then go through the chain as any pod:
//!   those that fit existing or upcoming nodes are placed there and dropped.
//! - [`EnforceInjectedPodsLimitProcessor`], last in the chain
//!   (`--pod-injection-limit`): when the pods left exceed the limit, fake
//!   pods are dropped, never real ones, and
//!   `unschedulable_pods_count{type="injected"|"skipped_injection"}` say how
//!   many stayed and went.
//! - [`FakePodsScaleUpStatusProcessor`]: the fake pods get no event of
//!   their own (the eventing processor skips them, [`is_fake`]); this one
//!   logs upstream's "Filtered out N pods from ... for controllers ..." line.
//!
//! The pods counted against a controller are every active pod the cache
//! holds for it, bound or not; upstream counts those in its snapshot, the
//! pending ones and the scheduling-gated ones, which differ only for a pod
//! the scheduler has not yet looked at. Upstream backs off a controller
//! whose fake pods found no node, but keys the backoff by the fake pod's
//! uid while looking it up by the controller's (so it never applies): fake
//! pods are injected every loop there, and here.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use predicates::PodInfo;

use super::pods::{PodListContext, PodListProcessor};
use super::status::ScaleUpStatusProcessor;
use crate::cache::{ClusterCache, State};
use crate::context::AutoscalingContext;
use crate::metrics::Metrics;
use crate::scaleup::orchestrator::ScaleUpOutcome;
use crate::simulator::drainability::controller_of;
pub use crate::simulator::fake::{FAKE_POD_ANNOTATION, is_fake};

/// Adds the fake pods of the controllers missing pods (upstream's
/// `PodInjectionPodListProcessor`).
pub struct PodInjectionPodListProcessor(pub Arc<ClusterCache>);

impl PodListProcessor for PodInjectionPodListProcessor {
    fn name(&self) -> &'static str {
        "PodInjectionPodListProcessor"
    }

    fn process(&self, _ctx: &mut PodListContext<'_>, mut pods: Vec<PodInfo>) -> Vec<PodInfo> {
        pods.extend(fake_pods(&self.0.read()));
        pods
    }
}

/// The fake pods of every controller of `state` missing pods, in name
/// order.
pub fn fake_pods(state: &State) -> Vec<PodInfo> {
    let mut fakes = Vec::new();
    for c in state.controllers.values() {
        let Some(desired) = c.desired_pods else {
            continue;
        };
        // Counted from the index first: most controllers miss no pod, and
        // their pods are then not read at all.
        let count = state.by_owner.get(&c.uid).map_or(0, |keys| keys.len());
        let missing = desired - i32::try_from(count).unwrap_or(i32::MAX);
        if missing <= 0 {
            continue;
        }
        if let Some(sample) = newest(&state.pods_of_owner(&c.uid)) {
            fakes.extend(make_fake_pods(&c.uid, sample, missing));
        }
    }
    fakes.sort_by(|a, b| a.key.cmp(&b.key));
    fakes
}

/// The pod created last (the first of those created at the same instant).
fn newest(pods: &[PodInfo]) -> Option<&PodInfo> {
    let created = |p: &PodInfo| p.pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
    pods.iter()
        .fold(None, |best: Option<&PodInfo>, p| match best {
            Some(b) if created(p) <= created(b) => Some(b),
            _ => Some(p),
        })
}

/// `count` fake copies of `sample`, unbound, named `<sample>-copy-<i>`
/// with uid `<owner uid>-<i>` (upstream's `makeFakePods`).
fn make_fake_pods(owner_uid: &str, sample: &PodInfo, count: i32) -> Vec<PodInfo> {
    let name = sample.pod.metadata.name.clone().unwrap_or_default();
    (1..=count)
        .map(|i| {
            let mut pod = (*sample.pod).clone();
            pod.metadata.name = Some(format!("{name}-copy-{i}"));
            pod.metadata.uid = Some(format!("{owner_uid}-{i}"));
            pod.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(FAKE_POD_ANNOTATION.0.into(), FAKE_POD_ANNOTATION.1.into());
            if let Some(spec) = pod.spec.as_mut() {
                spec.node_name = None;
            }
            sample.with_pod(pod)
        })
        .collect()
}

/// Drops fake pods past `--pod-injection-limit` pods in all (upstream's
/// `EnforceInjectedPodsLimitProcessor`): real pods are never dropped.
pub struct EnforceInjectedPodsLimitProcessor {
    /// `--pod-injection-limit`.
    pub limit: usize,
}

impl PodListProcessor for EnforceInjectedPodsLimitProcessor {
    fn name(&self) -> &'static str {
        "EnforceInjectedPodsLimitProcessor"
    }

    fn process(&self, ctx: &mut PodListContext<'_>, pods: Vec<PodInfo>) -> Vec<PodInfo> {
        let to_remove = pods.len().saturating_sub(self.limit);
        let (mut removed, mut injected) = (0, 0);
        let mut kept = Vec::with_capacity(pods.len());
        for p in pods {
            if is_fake(&p.pod) {
                if removed < to_remove {
                    removed += 1;
                    continue;
                }
                injected += 1;
            }
            kept.push(p);
        }
        let gauge = &ctx.metrics.unschedulable_pods_count;
        Metrics::set(gauge, &[("type", "injected")], injected as f64);
        Metrics::set(gauge, &[("type", "skipped_injection")], removed as f64);
        kept
    }
}

/// Says which fake pods the pods' events leave out (upstream's
/// `FakePodsScaleUpStatusProcessor` of `processors/podinjection`, which
/// removes them from the status; here the eventing processor skips them).
pub struct FakePodsScaleUpStatusProcessor;

impl ScaleUpStatusProcessor for FakePodsScaleUpStatusProcessor {
    fn name(&self) -> &'static str {
        "FakePodsScaleUpStatusProcessor"
    }

    fn process(&self, _ctx: &AutoscalingContext, outcome: &ScaleUpOutcome) {
        let remain = outcome.pods_remain_unschedulable.iter().map(|(p, _)| &**p);
        log_filtered(remain, "PodsRemainUnschedulable");
        let triggered = outcome.pods_triggered_scale_up.iter().map(|p| &**p);
        log_filtered(triggered, "PodsTriggeredScaleUp");
    }
}

/// Upstream's "Filtered out ..." line for the fake pods among `pods`.
fn log_filtered<'a>(pods: impl Iterator<Item = &'a Pod>, list: &str) {
    let controllers: Vec<&str> = pods
        .filter(|p| is_fake(p))
        .filter_map(|p| controller_of(p).map(|(_, name, _)| name))
        .collect();
    if !controllers.is_empty() {
        tracing::info!(
            "Filtered out {} pods from {list} for controllers {}",
            controllers.len(),
            controllers.join(", ")
        );
    }
}

#[cfg(test)]
mod tests;
