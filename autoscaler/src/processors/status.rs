//! Scale-up status processors (upstream's `processors/status`): what is
//! told of a loop's scale-up once it is done. The default,
//! [`EventingScaleUpStatusProcessor`], tells each pod: `TriggeredScaleUp`
//! with the increases made for it, or `NotTriggerScaleUp` with why not;
//! a CapacityBuffer's fake pods are told of per buffer instead
//! ([`super::capacitybuffer`]), proactive scale-up's are not told of
//! ([`super::podinjection`]).

use k8s_openapi::api::core::v1::Pod;

use crate::capacitybuffer::is_fake_pod;
use crate::context::AutoscalingContext;
use crate::events::{EventReason, EventType, ObjectRef};
use crate::scaleup::orchestrator::ScaleUpOutcome;
use crate::scaleup::types::format_increases;
use crate::simulator::fake;

/// One processor of a scale-up's outcome (upstream's
/// `ScaleUpStatusProcessor`).
pub trait ScaleUpStatusProcessor: Send + Sync {
    /// Upstream's name of the processor.
    fn name(&self) -> &'static str;
    /// Reports the outcome.
    fn process(&self, ctx: &AutoscalingContext, outcome: &ScaleUpOutcome);
}

/// The default chain: the pods' events.
pub fn default_scale_up_status_processors() -> Vec<Box<dyn ScaleUpStatusProcessor>> {
    vec![Box::new(EventingScaleUpStatusProcessor)]
}

/// Records an event on every pod the scale-up considered (upstream's
/// `EventingScaleUpStatusProcessor`).
pub struct EventingScaleUpStatusProcessor;

impl ScaleUpStatusProcessor for EventingScaleUpStatusProcessor {
    fn name(&self) -> &'static str {
        "EventingScaleUpStatusProcessor"
    }

    fn process(&self, ctx: &AutoscalingContext, outcome: &ScaleUpOutcome) {
        for (pod, why) in &outcome.pods_remain_unschedulable {
            if simulated(pod) {
                continue;
            }
            ctx.events.record(
                &ObjectRef::pod(pod),
                EventType::Normal,
                EventReason::NotTriggerScaleUp,
                format!("pod didn't trigger scale-up: {why}"),
            );
        }
        if outcome.scaled.is_empty() {
            return;
        }
        let message = format!(
            "pod triggered scale-up: [{}]",
            format_increases(&outcome.scaled)
        );
        for pod in outcome
            .pods_triggered_scale_up
            .iter()
            .filter(|p| !simulated(p))
        {
            ctx.events.record(
                &ObjectRef::pod(pod),
                EventType::Normal,
                EventReason::TriggeredScaleUp,
                message.clone(),
            );
        }
    }
}

/// Whether a pod exists only in the simulation (a buffer's or proactive
/// scale-up's fake pod): no event names it.
fn simulated(pod: &Pod) -> bool {
    is_fake_pod(pod) || fake::is_fake(pod)
}
