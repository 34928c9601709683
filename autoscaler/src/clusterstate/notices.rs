//! What the registry noticed in an update that the world should hear of:
//! scale-ups that timed out or whose instances failed, reported as events
//! on the status ConfigMap and in the failure metrics.

use std::time::Duration;

use crate::cloudprovider::InstanceErrorInfo;
use crate::events::{EventReason, EventRecorder, EventType};
use crate::metrics::Metrics;

/// Something the registry noticed that the status should report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// `ScaleUpTimedOut`.
    ScaleUpTimedOut {
        /// Group.
        group: String,
        /// Provision time.
        after: Duration,
        /// Nodes that did not come.
        increase: usize,
    },
    /// `ScaleUpFailed`: instances reported creation errors.
    ScaleUpFailed {
        /// Group.
        group: String,
        /// Count.
        count: usize,
        /// The error.
        error: InstanceErrorInfo,
        /// The distinct error messages.
        messages: Vec<String>,
    },
}

/// Reports the notices of one update. `dra_drivers` gives a group's
/// `dra_drivers` metric label (from its provider template).
pub fn report_notices(
    notices: Vec<Notice>,
    events: &EventRecorder,
    metrics: &Metrics,
    dra_drivers: &dyn Fn(&str) -> String,
) {
    for n in notices {
        match n {
            Notice::ScaleUpTimedOut {
                group,
                after,
                increase,
            } => {
                let drivers = dra_drivers(&group);
                Metrics::inc_scale(
                    &metrics.failed_scale_ups,
                    &[("reason", "timeout")],
                    &drivers,
                    1,
                );
                Metrics::inc(
                    &metrics.failed_node_creations,
                    &[("reason", "timeout")],
                    increase as u64,
                );
                events.status(
                    EventType::Warning,
                    EventReason::ScaleUpTimedOut,
                    format!(
                        "Nodes added to group {group} failed to register within {}",
                        simclock::format_go_duration(after)
                    ),
                )
            }
            Notice::ScaleUpFailed {
                group,
                count,
                error,
                messages,
            } => {
                let mut sources = messages
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ");
                if messages.len() > 3 {
                    sources.push_str(", ...");
                }
                let drivers = dra_drivers(&group);
                let reason = [("reason", error.code.as_str())];
                Metrics::inc_scale(&metrics.failed_scale_ups, &reason, &drivers, 1);
                Metrics::inc(
                    &metrics.failed_node_creations,
                    &[("reason", &error.code)],
                    count as u64,
                );
                events.status(
                    EventType::Warning,
                    EventReason::ScaleUpFailed,
                    format!(
                        "Failed adding {count} nodes to group {group} due to {}.{}; source errors: {sources}",
                        error.class, error.code
                    ),
                )
            }
        }
    }
}
