//! The scale-up executor (upstream's `ScaleUpExecutor`): the one place
//! where node groups are increased, for a planned scale-up and for
//! `--enforce-node-group-min-size` alike. Each increase is announced on the
//! status ConfigMap before and after; a failure backs the group off with
//! the provider's error code.

use std::time::SystemTime;

use super::types::ScaleUpInfo;
use crate::cloudprovider::CloudError;
use crate::clusterstate::ClusterStateRegistry;
use crate::context::AutoscalingContext;
use crate::events::{EventReason, EventType};
use crate::metrics::Metrics;

/// What executing a scale-up did.
#[derive(Debug, Clone, Default)]
pub struct Executed {
    /// The increases that succeeded.
    pub done: Vec<ScaleUpInfo>,
    /// Whether any increase failed.
    pub failed: bool,
}

/// Increases the groups, in order, and registers each increase (or its
/// failure) with the cluster state. `atomic` (a best-effort-atomic
/// ProvisioningRequest) asks the provider for each increase in one piece
/// (`AtomicIncreaseSize`), falling back to a plain increase where the
/// provider does not implement it, as upstream does.
pub async fn execute(
    ctx: &AutoscalingContext,
    registry: &mut ClusterStateRegistry,
    infos: &[ScaleUpInfo],
    now: SystemTime,
    atomic: bool,
) -> Executed {
    let groups = ctx.node_groups_by_id();
    let mut out = Executed::default();
    for info in infos {
        let Some(g) = groups.get(&info.group) else {
            continue;
        };
        let (id, current, new, max) = (&info.group, info.current, info.new, info.max);
        tracing::info!("Scale-up: setting group {id} size to {new}");
        ctx.events.status(
            EventType::Normal,
            EventReason::ScaledUpGroup,
            format!("Scale-up: setting group {id} size to {new} instead of {current} (max: {max})"),
        );
        let increased = if atomic {
            match g.atomic_increase_size(new - current).await {
                Err(CloudError::NotImplemented) => g.increase_size(new - current).await,
                other => other,
            }
        } else {
            g.increase_size(new - current).await
        };
        match increased {
            Ok(()) => {
                ctx.events.status(
                    EventType::Normal,
                    EventReason::ScaledUpGroup,
                    format!(
                        "Scale-up: group {id} size set to {new} instead of {current} (max: {max})"
                    ),
                );
                let provision = ctx.options_for(&**g).max_node_provision_time;
                registry.register_scale_up(id, new - current, provision, now);
                Metrics::inc_gpu(&ctx.metrics.scaled_up_nodes, &[], (new - current) as u64);
                out.done.push(info.clone());
            }
            Err(e) => {
                out.failed = true;
                ctx.events.status(
                    EventType::Warning,
                    EventReason::FailedToScaleUpGroup,
                    format!("Scale-up failed for group {id}: {e}"),
                );
                let (code, message) = match &e {
                    CloudError::Failed { info: Some(i), .. } => (i.code.clone(), i.message.clone()),
                    other => ("cloudProviderError".to_string(), other.to_string()),
                };
                registry.register_failed_scale_up(id, &code, &message, now);
                Metrics::inc_gpu(&ctx.metrics.failed_scale_ups, &[("reason", &code)], 1);
                tracing::error!("Failed to scale up: failed to increase node group size: {e}");
            }
        }
    }
    out
}
