//! What a new node of an ASG looks like (upstream's `buildNodeFromTemplate`):
//! the instance type's shape from the shipped table ([`lookup`]), the
//! generic labels, then the ASG's `k8s.io/cluster-autoscaler/node-template/`
//! tags: `label/<key>` = value, `taint/<key>` = `value:Effect`,
//! `resources/<name>` = quantity; and its per-group options from
//! `node-template/autoscaling-options/<option>` tags.
//!
//! Upstream silently skips a taint or resource tag that does not parse and
//! only logs a bad option; here every such tag is a [`BadTag`] that names
//! the tag and why, and keeps the ASG from being a node group.

use std::collections::BTreeMap;
use std::time::Duration;

use apimachinery::validation::{InvalidName, validate_key, validate_value};
use k8s_openapi::api::core::v1::Node;

use super::instance_types::INSTANCE_TYPES;
use super::shape::Shape;
use crate::cloudprovider::{NodeGroupOptions, Taint};

/// The prefix of every node template tag.
pub const NODE_TEMPLATE: &str = "k8s.io/cluster-autoscaler/node-template/";
/// Tags that label new nodes.
pub const LABEL_PREFIX: &str = "k8s.io/cluster-autoscaler/node-template/label/";
/// Tags that taint new nodes.
pub const TAINT_PREFIX: &str = "k8s.io/cluster-autoscaler/node-template/taint/";
/// Tags that give new nodes' resources.
pub const RESOURCES_PREFIX: &str = "k8s.io/cluster-autoscaler/node-template/resources/";
/// Tags that set per-group autoscaling options.
pub const OPTIONS_PREFIX: &str = "k8s.io/cluster-autoscaler/node-template/autoscaling-options/";

/// The shipped table's entry for an instance type.
pub fn lookup(instance_type: &str) -> Option<Shape> {
    INSTANCE_TYPES
        .binary_search_by(|(name, _)| (*name).cmp(instance_type))
        .ok()
        .map(|i| INSTANCE_TYPES[i].1)
}

/// A node template tag that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tag {key}={value:?}: {why}")]
pub struct BadTag {
    /// The tag's key.
    pub key: String,
    /// Its value.
    pub value: String,
    /// What is wrong with it.
    #[source]
    pub why: TagError,
}

/// What is wrong with a node template tag's key or value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TagError {
    /// A `label/<key>` whose key Kubernetes refuses.
    #[error("invalid label key: {0}")]
    LabelKey(#[source] InvalidName),
    /// A label value Kubernetes refuses.
    #[error("invalid label value: {0}")]
    LabelValue(#[source] InvalidName),
    /// A `resources/<name>` value that is no quantity.
    #[error("not a quantity (like \"4\", \"500m\", \"100Gi\")")]
    Quantity,
    /// A `taint/<key>` whose key Kubernetes refuses.
    #[error("invalid taint key: {0}")]
    TaintKey(#[source] InvalidName),
    /// A taint value without `:<effect>`.
    #[error("expected <value>:<effect>, like true:NoSchedule")]
    TaintShape,
    /// A taint effect Kubernetes does not know.
    #[error("the effect {0:?} is not NoSchedule, PreferNoSchedule or NoExecute")]
    TaintEffect(String),
    /// A taint value Kubernetes refuses.
    #[error("invalid taint value: {0}")]
    TaintValue(#[source] InvalidName),
    /// An option that takes a number.
    #[error("{0} must be a number, like 0.5")]
    Number(String),
    /// An option that takes a duration.
    #[error("{0} must be a duration, like 10m0s")]
    Duration(String),
    /// An option that takes a boolean.
    #[error("{0} must be true or false")]
    Bool(String),
}

/// The per-group options an ASG's tags set (upstream reads these five).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OptionTags {
    utilization: Option<f64>,
    gpu_utilization: Option<f64>,
    unneeded: Option<Duration>,
    unready: Option<Duration>,
    ignore_daemonsets: Option<bool>,
}

impl OptionTags {
    /// The defaults with these options over them; `None` when no tag sets any.
    pub fn apply(&self, defaults: &NodeGroupOptions) -> Option<NodeGroupOptions> {
        if *self == Self::default() {
            return None;
        }
        let mut o = defaults.clone();
        if let Some(v) = self.utilization {
            o.scale_down_utilization_threshold = v;
        }
        if let Some(v) = self.gpu_utilization {
            o.scale_down_gpu_utilization_threshold = v;
        }
        if let Some(v) = self.unneeded {
            o.scale_down_unneeded_time = v;
        }
        if let Some(v) = self.unready {
            o.scale_down_unready_time = v;
        }
        if let Some(v) = self.ignore_daemonsets {
            o.ignore_daemonsets_utilization = v;
        }
        Some(o)
    }
}

/// What an ASG's node template tags say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TemplateTags {
    /// Labels of new nodes.
    pub labels: BTreeMap<String, String>,
    /// Taints of new nodes.
    pub taints: Vec<Taint>,
    /// Resources of new nodes (quantity strings), over the instance type's.
    pub resources: BTreeMap<String, String>,
    /// Per-group options.
    pub options: OptionTags,
}

/// Reads the node template tags of an ASG; the first bad one is the error.
pub fn parse_tags(tags: &BTreeMap<String, String>) -> Result<TemplateTags, BadTag> {
    let mut out = TemplateTags::default();
    for (key, value) in tags {
        let bad = |why: TagError| BadTag {
            key: key.clone(),
            value: value.clone(),
            why,
        };
        if let Some(label) = key.strip_prefix(LABEL_PREFIX) {
            validate_key(label).map_err(|e| bad(TagError::LabelKey(e)))?;
            validate_value(value).map_err(|e| bad(TagError::LabelValue(e)))?;
            out.labels.insert(label.to_string(), value.clone());
        } else if let Some(taint) = key.strip_prefix(TAINT_PREFIX) {
            out.taints.push(parse_taint(taint, value).map_err(bad)?);
        } else if let Some(resource) = key.strip_prefix(RESOURCES_PREFIX) {
            if predicates::quantity::parse_milli(value).is_none() {
                return Err(bad(TagError::Quantity));
            }
            out.resources.insert(resource.to_string(), value.clone());
        } else if let Some(option) = key.strip_prefix(OPTIONS_PREFIX) {
            parse_option(&mut out.options, option, value).map_err(bad)?;
        }
    }
    Ok(out)
}

/// `value:Effect` (the value may be empty: `:NoSchedule`).
fn parse_taint(key: &str, value: &str) -> Result<Taint, TagError> {
    validate_key(key).map_err(TagError::TaintKey)?;
    let (v, effect) = value.rsplit_once(':').ok_or(TagError::TaintShape)?;
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        return Err(TagError::TaintEffect(effect.to_string()));
    }
    validate_value(v).map_err(TagError::TaintValue)?;
    Ok(Taint {
        key: key.to_string(),
        value: v.to_string(),
        effect: effect.to_string(),
    })
}

fn parse_option(options: &mut OptionTags, name: &str, value: &str) -> Result<(), TagError> {
    let float = || {
        value
            .parse::<f64>()
            .map_err(|_| TagError::Number(name.to_string()))
    };
    let duration =
        || simclock::parse_go_duration(value).ok_or_else(|| TagError::Duration(name.to_string()));
    match name {
        "scaledownutilizationthreshold" => options.utilization = Some(float()?),
        "scaledowngpuutilizationthreshold" => options.gpu_utilization = Some(float()?),
        "scaledownunneededtime" => options.unneeded = Some(duration()?),
        "scaledownunreadytime" => options.unready = Some(duration()?),
        "ignoredaemonsetsutilization" => {
            options.ignore_daemonsets = Some(match value.to_lowercase().as_str() {
                "true" | "1" | "t" => true,
                "false" | "0" | "f" => false,
                _ => return Err(TagError::Bool(name.to_string())),
            })
        }
        // Upstream reads only the five above; others are left alone.
        _ => {}
    }
    Ok(())
}

/// The template node of an ASG whose instances are `instance_type`, in
/// its first zone.
pub fn template_node(
    asg: &str,
    zone: &str,
    instance_type: &str,
    shape: Shape,
    tags: &TemplateTags,
    now: &str,
) -> Result<Node, serde_json::Error> {
    let name = format!("{asg}-asg-{}", apimachinery::rand::suffix(10));
    let region = zone.char_indices().last().map_or(zone, |(i, _)| &zone[..i]);
    let mut labels: BTreeMap<String, String> = [
        ("kubernetes.io/arch", shape.arch.as_str()),
        ("kubernetes.io/os", "linux"),
        ("node.kubernetes.io/instance-type", instance_type),
        ("topology.kubernetes.io/region", region),
        ("topology.kubernetes.io/zone", zone),
        ("topology.ebs.csi.aws.com/zone", zone),
        ("kubernetes.io/hostname", &name),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    labels.extend(tags.labels.clone());
    let mut resources: BTreeMap<String, String> = [
        ("pods", "110".to_string()),
        ("cpu", shape.vcpu.to_string()),
        ("memory", (shape.memory_mib * 1024 * 1024).to_string()),
        (crate::gpu::NVIDIA_GPU, shape.gpu.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    resources.extend(tags.resources.clone());
    crate::cloudprovider::template_node(&name, labels, &tags.taints, &resources, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloudprovider::aws::shape::Arch;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_shipped_table_knows_common_types() {
        let m5 = lookup("m5.large").unwrap();
        assert_eq!(
            (m5.vcpu, m5.memory_mib, m5.gpu, m5.arch),
            (2, 8192, 0, Arch::Amd64)
        );
        assert_eq!(lookup("m6g.large").unwrap().arch, Arch::Arm64);
        assert_eq!(lookup("g4dn.xlarge").unwrap().gpu, 1);
        assert_eq!(lookup("p4d.24xlarge").unwrap().gpu, 8);
        assert_eq!(lookup("z9.nonexistent"), None);
        assert!(
            INSTANCE_TYPES.windows(2).all(|w| w[0].0 < w[1].0),
            "the table is sorted"
        );
    }

    #[test]
    fn tags_make_labels_taints_resources_and_options() {
        let parsed = parse_tags(&tags(&[
            ("k8s.io/cluster-autoscaler/node-template/label/team", "ml"),
            (
                "k8s.io/cluster-autoscaler/node-template/taint/dedicated",
                "gpu:NoSchedule",
            ),
            (
                "k8s.io/cluster-autoscaler/node-template/taint/spot",
                ":PreferNoSchedule",
            ),
            (
                "k8s.io/cluster-autoscaler/node-template/resources/ephemeral-storage",
                "100Gi",
            ),
            (
                "k8s.io/cluster-autoscaler/node-template/autoscaling-options/scaledownunneededtime",
                "1m0s",
            ),
            ("k8s.io/cluster-autoscaler/enabled", "true"),
        ]))
        .unwrap();
        assert_eq!(parsed.labels, tags(&[("team", "ml")]));
        assert_eq!(
            parsed.taints,
            vec![
                Taint {
                    key: "dedicated".into(),
                    value: "gpu".into(),
                    effect: "NoSchedule".into()
                },
                Taint {
                    key: "spot".into(),
                    value: "".into(),
                    effect: "PreferNoSchedule".into()
                },
            ]
        );
        assert_eq!(parsed.resources, tags(&[("ephemeral-storage", "100Gi")]));
        let defaults = NodeGroupOptions {
            scale_down_utilization_threshold: 0.5,
            scale_down_gpu_utilization_threshold: 0.5,
            scale_down_unneeded_time: Duration::from_secs(600),
            scale_down_unready_time: Duration::from_secs(1200),
            max_node_provision_time: Duration::from_secs(900),
            max_node_startup_time: Duration::from_secs(900),
            ignore_daemonsets_utilization: false,
            zero_or_max_node_scaling: false,
        };
        let options = parsed.options.apply(&defaults).unwrap();
        assert_eq!(options.scale_down_unneeded_time, Duration::from_secs(60));
        assert_eq!(OptionTags::default().apply(&defaults), None);

        let node = template_node(
            "pool",
            "us-east-1a",
            "m5.large",
            lookup("m5.large").unwrap(),
            &parsed,
            "2026-01-01T00:00:00Z",
        )
        .unwrap();
        let labels = node.metadata.labels.unwrap();
        assert_eq!(labels["topology.kubernetes.io/region"], "us-east-1");
        assert_eq!(labels["node.kubernetes.io/instance-type"], "m5.large");
        assert_eq!(labels["team"], "ml");
        let capacity = node.status.unwrap().capacity.unwrap();
        assert_eq!(capacity["cpu"].0, "2");
        assert_eq!(capacity["memory"].0, "8589934592");
        assert_eq!(capacity["ephemeral-storage"].0, "100Gi");
        assert_eq!(node.spec.unwrap().taints.unwrap().len(), 2);
    }

    #[test]
    fn a_bad_tag_names_itself() {
        let err = |k: &str, v: &str| parse_tags(&tags(&[(k, v)])).unwrap_err().to_string();
        assert_eq!(
            err(
                "k8s.io/cluster-autoscaler/node-template/taint/dedicated",
                "gpu"
            ),
            "tag k8s.io/cluster-autoscaler/node-template/taint/dedicated=\"gpu\": expected <value>:<effect>, like true:NoSchedule"
        );
        assert!(
            err(
                "k8s.io/cluster-autoscaler/node-template/taint/dedicated",
                "gpu:NoScheduel"
            )
            .contains("the effect \"NoScheduel\"")
        );
        assert_eq!(
            err(
                "k8s.io/cluster-autoscaler/node-template/resources/ephemeral-storage",
                "lots"
            ),
            "tag k8s.io/cluster-autoscaler/node-template/resources/ephemeral-storage=\"lots\": not a quantity (like \"4\", \"500m\", \"100Gi\")"
        );
        assert!(
            err("k8s.io/cluster-autoscaler/node-template/label/bad key", "x")
                .contains("invalid label key")
        );
        assert!(
            err(
                "k8s.io/cluster-autoscaler/node-template/autoscaling-options/scaledownunneededtime",
                "soon"
            )
            .contains("must be a duration")
        );
    }
}
