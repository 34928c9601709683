//! Per-group options from the `<group>/autoscaling-options-<name>`
//! annotations (upstream's `autoscalingOptions`).

use std::collections::BTreeMap;

use super::keys::Keys;
use crate::cloudprovider::NodeGroupOptions;

/// Per-group options from `<group>/autoscaling-options-<name>` annotations;
/// a value that does not parse is logged and the default kept.
pub(super) fn options_from(
    annotations: &BTreeMap<String, String>,
    keys: &Keys,
    id: &str,
    defaults: &NodeGroupOptions,
) -> Option<NodeGroupOptions> {
    let prefix = keys.options_prefix();
    let mut options = defaults.clone();
    let mut any = false;
    for (k, v) in annotations {
        let Some(name) = k.strip_prefix(&prefix) else {
            continue;
        };
        let v = v.to_lowercase();
        if name.is_empty() || v.is_empty() {
            continue;
        }
        let float = |target: &mut f64| match v.parse::<f64>() {
            Ok(f) => {
                *target = f;
                true
            }
            Err(e) => {
                tracing::warn!(
                    "failed to convert autoscaling_options option {name:?} (value {v:?}) for scalable resource {id:?} to float: {e}"
                );
                false
            }
        };
        let duration = |target: &mut std::time::Duration| match simclock::parse_go_duration(&v) {
            Some(d) => {
                *target = d;
                true
            }
            None => {
                tracing::warn!(
                    "failed to convert autoscaling_options option {name:?} (value {v:?}) for scalable resource {id:?} to duration: time: invalid duration {v:?}"
                );
                false
            }
        };
        any |= match name {
            "scaledownutilizationthreshold" => float(&mut options.scale_down_utilization_threshold),
            "scaledowngpuutilizationthreshold" => {
                float(&mut options.scale_down_gpu_utilization_threshold)
            }
            "scaledownunneededtime" => duration(&mut options.scale_down_unneeded_time),
            "scaledownunreadytime" => duration(&mut options.scale_down_unready_time),
            "maxnodeprovisiontime" => duration(&mut options.max_node_provision_time),
            "maxnodestartuptime" => duration(&mut options.max_node_startup_time),
            _ => false,
        };
    }
    any.then_some(options)
}
