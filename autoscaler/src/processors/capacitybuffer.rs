//! The buffers' processors (upstream's `processors/capacitybuffer`): the
//! pod-list processor that adds the loop's fake pods after the pending
//! ones, first in the chain (so the expendable filter and the filter out
//! schedulable see them as any pod), and the scale-up status processor
//! that tells each buffer, once, what its fake pods did; the pods' own
//! events leave them out ([`crate::capacitybuffer::is_fake_pod`]).

use std::sync::Arc;

use predicates::PodInfo;

use super::pods::{PodListContext, PodListProcessor};
use super::status::ScaleUpStatusProcessor;
use crate::capacitybuffer::BufferPodInjection;
use crate::context::AutoscalingContext;
use crate::events::{EventReason, EventType};
use crate::scaleup::ScaleUpStatus;
use crate::scaleup::orchestrator::ScaleUpOutcome;
use crate::scaleup::types::format_increases;

/// Adds the buffers' fake pods (upstream's `CapacityBufferPodListProcessor`).
pub struct CapacityBufferPodListProcessor(pub Arc<BufferPodInjection>);

impl PodListProcessor for CapacityBufferPodListProcessor {
    fn name(&self) -> &'static str {
        "CapacityBufferPodListProcessor"
    }

    fn process(&self, _ctx: &mut PodListContext<'_>, mut pods: Vec<PodInfo>) -> Vec<PodInfo> {
        pods.extend(self.0.pods());
        pods
    }
}

/// One event per buffer whose fake pods took part in a scale-up
/// (upstream's `FakePodsScaleUpStatusProcessor`).
pub struct FakePodsScaleUpStatusProcessor(pub Arc<BufferPodInjection>);

impl ScaleUpStatusProcessor for FakePodsScaleUpStatusProcessor {
    fn name(&self) -> &'static str {
        "FakePodsScaleUpStatusProcessor"
    }

    fn process(&self, ctx: &AutoscalingContext, outcome: &ScaleUpOutcome) {
        if !outcome.scaled.is_empty() {
            let increases = format_increases(&outcome.scaled);
            let triggered = outcome.pods_triggered_scale_up.iter().map(|p| &**p);
            for (buffer, n) in self.0.buffers_of(triggered) {
                ctx.events.record(
                    &buffer,
                    EventType::Normal,
                    EventReason::TriggeredScaleUp,
                    format!("capacity buffer {n} fake pods triggered scale-up: [{increases}]"),
                );
            }
        }
        if matches!(
            outcome.status,
            ScaleUpStatus::Successful | ScaleUpStatus::Error
        ) {
            return;
        }
        for (buffer, n) in self
            .0
            .buffers_of(outcome.pods_remain_unschedulable.iter().map(|(p, _)| &**p))
        {
            let reasons: Vec<String> = outcome
                .pods_remain_unschedulable
                .iter()
                .filter(|(p, _)| {
                    p.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.uid == buffer.uid)
                })
                .map(|(_, why)| why.to_string())
                .collect();
            ctx.events.record(
                &buffer,
                EventType::Normal,
                EventReason::NotTriggerScaleUp,
                format!(
                    "capacity buffer {n} fake pods didn't trigger scale-up: {}",
                    reasons.join(",")
                ),
            );
        }
    }
}
