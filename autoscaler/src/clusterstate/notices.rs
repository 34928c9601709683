//! What the registry noticed in an update that the world should hear of:
//! scale-ups that timed out or whose instances failed, reported as events
//! on the status ConfigMap and in the failure metrics.

use std::sync::Arc;
use std::time::Duration;

use crate::cloudprovider::{InstanceErrorInfo, NodeGroup};
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

impl Notice {
    /// The group and the increase of a scale-up that timed out.
    pub fn timed_out(&self) -> Option<(&str, usize)> {
        match self {
            Notice::ScaleUpTimedOut {
                group, increase, ..
            } => Some((group, *increase)),
            Notice::ScaleUpFailed { .. } => None,
        }
    }
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

/// Takes back the scale-ups that timed out, as upstream since 1.36: each
/// group's target is lowered by the increase that did not come, so the
/// cloud stops trying to provision it. A provider that refuses (its
/// instances registered, say) leaves the target as it is, with a warning
/// and a `FailedToRevertScaleUp` event.
pub async fn revert_timed_out_scale_ups(
    events: &EventRecorder,
    timed_out: Vec<(Arc<dyn NodeGroup>, usize)>,
) {
    for (g, increase) in timed_out {
        if increase == 0 {
            continue;
        }
        let group = g.id();
        tracing::warn!(
            "Reverting timed-out scale-up for node group {group} by decreasing target size by {increase}"
        );
        let delta = -i64::try_from(increase).unwrap_or(i64::MAX);
        if let Err(e) = g.decrease_target_size(delta).await {
            tracing::warn!("Failed to revert timed-out scale-up for node group {group}: {e}");
            events.status(
                EventType::Warning,
                EventReason::FailedToRevertScaleUp,
                format!(
                    "Failed to decrease target size for group {group} after scale-up timeout: {e}"
                ),
            );
        }
    }
}
