//! The scale-up executor (upstream's `ScaleUpExecutor`): the one place
//! where node groups are increased, for a planned scale-up and for
//! `--enforce-node-group-min-size` alike. Each increase is announced on the
//! status ConfigMap before and after; a failure backs the group off with
//! the provider's error code.
//!
//! By default the increases run one after the other and the first failure
//! stops the rest (upstream's `executeScaleUpsSync`: the groups after it
//! are not tried this loop). With `--parallel-scale-up` every group is
//! increased at once and every failure is registered; the log line then
//! combines the errors as upstream's `errors.Combine` does.

use std::collections::BTreeMap;
use std::time::SystemTime;

use predicates::NodeInfo;

use super::types::ScaleUpInfo;
use crate::cloudprovider::{CloudError, NodeGroup};
use crate::clusterstate::ClusterStateRegistry;
use crate::context::AutoscalingContext;
use crate::events::{EventReason, EventType};
use crate::metrics::Metrics;

/// One planned increase: its info, its group, and the template the
/// scale-up used for it.
type Planned<'a> = (&'a ScaleUpInfo, &'a dyn NodeGroup, Option<&'a NodeInfo>);

/// An increase the provider refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to increase node group size: {source}")]
pub struct IncreaseError {
    /// The node group.
    pub group: String,
    /// The provider's error.
    #[source]
    pub source: CloudError,
}

/// What executing a scale-up did.
#[derive(Debug, Clone, Default)]
pub struct Executed {
    /// The increases that succeeded.
    pub done: Vec<ScaleUpInfo>,
    /// Whether any increase failed.
    pub failed: bool,
}

/// Increases the groups and registers each increase (or its failure) with
/// the cluster state: in order, stopping at the first failure, or all at
/// once with `--parallel-scale-up`. `atomic` (a best-effort-atomic
/// ProvisioningRequest) asks the provider for each increase in one piece
/// (`AtomicIncreaseSize`), falling back to a plain increase where the
/// provider does not implement it, as upstream does.
pub async fn execute(
    ctx: &AutoscalingContext,
    registry: &mut ClusterStateRegistry,
    infos: &[ScaleUpInfo],
    templates: &BTreeMap<String, NodeInfo>,
    now: SystemTime,
    atomic: bool,
) -> Executed {
    let groups = ctx.node_groups_by_id();
    let planned: Vec<Planned<'_>> = infos
        .iter()
        .filter_map(|i| {
            let g = groups.get(&i.group)?;
            Some((i, &**g, templates.get(&i.group)))
        })
        .collect();
    let mut out = Executed::default();
    let mut errors = Vec::new();
    if ctx.flags.parallel_scale_up {
        let increases = planned.iter().map(|&(info, g, _)| async move {
            announce(ctx, info);
            increase(g, info, atomic).await
        });
        let results = futures::future::join_all(increases).await;
        for (p, result) in planned.iter().zip(results) {
            if let Err(e) = record(ctx, registry, *p, result, now, &mut out) {
                errors.push(e.to_string());
            }
        }
    } else {
        for p in &planned {
            announce(ctx, p.0);
            let result = increase(p.1, p.0, atomic).await;
            if let Err(e) = record(ctx, registry, *p, result, now, &mut out) {
                errors.push(e.to_string());
                break;
            }
        }
    }
    if !errors.is_empty() {
        out.failed = true;
        tracing::error!("Failed to scale up: {}", combine(errors));
    }
    out
}

/// "Scale-up: setting group … size to …": the log line and the event.
fn announce(ctx: &AutoscalingContext, info: &ScaleUpInfo) {
    let (id, current, new, max) = (&info.group, info.current, info.new, info.max);
    tracing::info!("Scale-up: setting group {id} size to {new}");
    ctx.events.status(
        EventType::Normal,
        EventReason::ScaledUpGroup,
        format!("Scale-up: setting group {id} size to {new} instead of {current} (max: {max})"),
    );
}

/// The provider call of one increase.
async fn increase(g: &dyn NodeGroup, info: &ScaleUpInfo, atomic: bool) -> Result<(), CloudError> {
    let delta = info.new - info.current;
    if atomic {
        match g.atomic_increase_size(delta).await {
            Err(CloudError::NotImplemented) => g.increase_size(delta).await,
            other => other,
        }
    } else {
        g.increase_size(delta).await
    }
}

/// Registers one increase's outcome: the event, the cluster state (a
/// scale-up, or a failure that backs the group off) and the metrics,
/// labelled with the drivers of the template the scale-up used (a
/// failure: of the provider's template, as upstream). Returns the failure
/// as upstream words it.
fn record(
    ctx: &AutoscalingContext,
    registry: &mut ClusterStateRegistry,
    (info, g, template): Planned<'_>,
    result: Result<(), CloudError>,
    now: SystemTime,
    out: &mut Executed,
) -> Result<(), IncreaseError> {
    let (id, current, new, max) = (&info.group, info.current, info.new, info.max);
    match result {
        Ok(()) => {
            ctx.events.status(
                EventType::Normal,
                EventReason::ScaledUpGroup,
                format!("Scale-up: group {id} size set to {new} instead of {current} (max: {max})"),
            );
            let provision = ctx.options_for(g).max_node_provision_time;
            registry.register_scale_up(id, new - current, provision, now);
            let drivers = template.map_or_else(String::new, |t| {
                crate::metrics::dra_drivers(t.slices.iter().map(|s| s.spec.driver.as_str()))
            });
            let added = (new - current) as u64;
            Metrics::inc_scale(&ctx.metrics.scaled_up_nodes, &[], &drivers, added);
            out.done.push(info.clone());
            Ok(())
        }
        Err(e) => {
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
            let drivers = crate::cloudprovider::template_dra_drivers(g);
            Metrics::inc_scale(
                &ctx.metrics.failed_scale_ups,
                &[("reason", &code)],
                &drivers,
                1,
            );
            Err(IncreaseError {
                group: id.clone(),
                source: e,
            })
        }
    }
}

/// Several failures in one message (upstream's `errors.Combine`): one
/// failure, or several with the same text, is that text; otherwise the
/// first in sorted order, then the others quoted:
/// `a ...and other errors: ["b", "c"]`.
fn combine(mut errors: Vec<String>) -> String {
    errors.sort();
    let Some(first) = errors.first().cloned() else {
        return String::new();
    };
    if errors.iter().all(|e| *e == first) {
        return first;
    }
    let others: Vec<String> = errors[1..].iter().map(|e| format!("{e:?}")).collect();
    format!("{first} ...and other errors: [{}]", others.join(", "))
}

#[cfg(test)]
mod tests {
    use super::combine;

    #[test]
    fn errors_are_combined_as_upstream_does() {
        assert_eq!(combine(vec!["x".into()]), "x");
        assert_eq!(combine(vec!["x".into(), "x".into()]), "x");
        assert_eq!(
            combine(vec!["b".into(), "a".into(), "c \"q\"".into()]),
            r#"a ...and other errors: ["b", "c \"q\""]"#
        );
    }
}
