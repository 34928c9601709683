//! Sizes and scale from zero (the Cluster API proposal "Opt-in Autoscaling
//! from Zero" and upstream's `clusterapi_unstructured.go`).
//!
//! A new node's capacity comes from the `capacity.cluster-autoscaler.kubernetes.io/*`
//! annotations on the MachineDeployment or MachineSet (`cpu`, `memory`,
//! `ephemeral-disk`, `gpu-type` + `gpu-count`, `maxPods`, `labels`,
//! `taints`), laid over the infrastructure template's `status.capacity`:
//! the annotations win. Architecture and OS come from the template's
//! `status.nodeInfo`, else `CAPI_SCALE_ZERO_DEFAULT_ARCH` and linux. A
//! group can scale from zero when the result has both CPU and memory.

use predicates::CsiNode;
use std::collections::BTreeMap;

use apimachinery::validation::{InvalidName, validate_key, validate_value};
use kube::api::DynamicObject;
use serde_json::Value;

use super::keys::Keys;
use crate::cloudprovider::TemplateNodeInfo;

/// The capacity annotations' prefix.
pub const CAPACITY_PREFIX: &str = "capacity.cluster-autoscaler.kubernetes.io/";

/// Why a group at zero is not a node group.
pub const UNAVAILABLE: &str = "cannot scale from zero: neither the capacity.cluster-autoscaler.kubernetes.io/cpu and memory annotations nor the infrastructure template's status.capacity give the new nodes' CPU and memory";

/// Pods per node when `maxPods` is not given (upstream's default, which
/// also overrides the template's `pods`).
pub const DEFAULT_MAX_PODS: &str = "110";

/// An annotation of a MachineDeployment or MachineSet that does not parse
/// (each names the annotation).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScaleFromZeroError {
    /// A min or max size that is not a non-negative integer.
    #[error(
        "error validating min/max annotations: invalid {which} annotation {key}: {value:?} is not a non-negative integer"
    )]
    Size {
        /// `min` or `max`.
        which: &'static str,
        /// The annotation.
        key: String,
        /// Its value.
        value: String,
    },
    /// A max size below the min size.
    #[error(
        "error validating min/max annotations: invalid max annotation {key}: {max} is below the min size {min}"
    )]
    MaxBelowMin {
        /// The max size annotation.
        key: String,
        /// The min size.
        min: usize,
        /// The max size.
        max: usize,
    },
    /// A min size above zero without a max size.
    #[error(
        "error validating min/max annotations: annotation {key} is missing (min size {min} needs a max)"
    )]
    NoMax {
        /// The max size annotation.
        key: String,
        /// The min size.
        min: usize,
    },
    /// A capacity that is not a quantity.
    #[error("annotation {key}: {value:?} is not a quantity (like \"4\", \"500m\", \"16Gi\")")]
    Quantity {
        /// The annotation.
        key: String,
        /// Its value.
        value: String,
    },
    /// A count that is not an integer.
    #[error("value {value:?} from annotation {key:?} expected to be an integer")]
    Integer {
        /// The annotation.
        key: String,
        /// Its value.
        value: String,
    },
    /// A taint of the taints annotation that does not parse.
    #[error("annotation {key}: invalid taint spec {item:?}: {why}")]
    Taint {
        /// The annotation.
        key: String,
        /// The taint as written.
        item: String,
        /// What is wrong with it.
        #[source]
        why: EntryError,
    },
    /// A label of the labels annotation that does not parse.
    #[error("annotation {key}: invalid label {item:?}: {why}")]
    Label {
        /// The annotation.
        key: String,
        /// The label as written.
        item: String,
        /// What is wrong with it.
        #[source]
        why: EntryError,
    },
}

/// What is wrong with one taint or label of an annotation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// A taint without `:Effect`.
    #[error("expected key[=value]:Effect")]
    TaintShape,
    /// A taint with two effects.
    #[error("more than one ':'")]
    Colons,
    /// An effect Kubernetes does not know.
    #[error("the effect must be NoSchedule, PreferNoSchedule or NoExecute")]
    Effect,
    /// A taint with two values.
    #[error("more than one '='")]
    Equals,
    /// A label without `=value`.
    #[error("expected key=value")]
    LabelShape,
    /// A key or value Kubernetes refuses.
    #[error("{0}")]
    Name(#[from] InvalidName),
}

fn capacity_key(name: &str) -> String {
    format!("{CAPACITY_PREFIX}{name}")
}

/// The min and max size annotations; a value that is not a non-negative
/// integer, or a max below the min, is an error naming the annotation.
pub fn size_annotations(
    annotations: &BTreeMap<String, String>,
    keys: &Keys,
) -> Result<(usize, usize), ScaleFromZeroError> {
    let read = |key: String, which: &'static str| -> Result<usize, ScaleFromZeroError> {
        match annotations.get(&key) {
            None => Ok(0),
            Some(v) => v.parse::<usize>().map_err(|_| ScaleFromZeroError::Size {
                which,
                key: key.clone(),
                value: v.clone(),
            }),
        }
    };
    let min = read(keys.min_size(), "min")?;
    let max = read(keys.max_size(), "max")?;
    if annotations.contains_key(&keys.max_size()) && max < min {
        return Err(ScaleFromZeroError::MaxBelowMin {
            key: keys.max_size(),
            min,
            max,
        });
    }
    if !annotations.contains_key(&keys.max_size()) && min > 0 {
        return Err(ScaleFromZeroError::NoMax {
            key: keys.max_size(),
            min,
        });
    }
    Ok((min, max))
}

pub use crate::cloudprovider::Taint;
use predicates::dynamicresources::api::ResourceSlice;

/// What a new node of a group has.
#[derive(Debug, Clone, PartialEq)]
pub struct Capacity {
    /// Resources as quantity strings (`cpu`, `memory`, `pods`, ...).
    pub resources: BTreeMap<String, String>,
    /// Labels from the labels annotation.
    pub labels: BTreeMap<String, String>,
    /// Taints from the taints annotation.
    pub taints: Vec<Taint>,
    /// `status.nodeInfo.architecture` of the template.
    pub architecture: Option<String>,
    /// `status.nodeInfo.operatingSystem` of the template.
    pub operating_system: Option<String>,
    /// The CSI drivers of the `csi-driver` annotation, if it names any.
    pub csi: Option<CsiNode>,
    /// The `dra-driver` annotation's driver with `gpu-count` devices (both
    /// set, the count above 0).
    pub dra: Option<(String, i64)>,
}

/// The `csi-driver` annotation: `driver=limit,driver2=limit2`. Malformed
/// entries are skipped (logged at V(4)); a limit of 0 means no limit.
pub fn parse_csi_drivers(value: &str) -> Option<CsiNode> {
    let mut csi = CsiNode::default();
    for spec in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let parsed = spec.split_once('=').and_then(|(name, limit)| {
            let name = name.trim();
            let limit = limit.trim().parse::<i32>().ok().filter(|l| *l >= 0)?;
            (!name.is_empty()).then(|| (name.to_string(), limit))
        });
        match parsed {
            Some((name, limit)) => {
                csi.drivers
                    .insert(name, (limit > 0).then_some(i64::from(limit)));
            }
            None => tracing::debug!(
                "Invalid CSI driver spec format (expected driver-name=volume-limit): {spec}"
            ),
        }
    }
    (!csi.drivers.is_empty()).then_some(csi)
}

fn quantity(
    annotations: &BTreeMap<String, String>,
    name: &str,
) -> Result<Option<String>, ScaleFromZeroError> {
    let key = capacity_key(name);
    let Some(v) = annotations.get(&key).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let valid = predicates::quantity::parse_milli(v).is_some();
    if !valid {
        return Err(ScaleFromZeroError::Quantity {
            key,
            value: v.clone(),
        });
    }
    // A zero quantity is as good as none.
    Ok((predicates::quantity::parse_milli(v) != Some(0)).then(|| v.clone()))
}

fn integer(
    annotations: &BTreeMap<String, String>,
    name: &str,
) -> Result<Option<i64>, ScaleFromZeroError> {
    let key = capacity_key(name);
    match annotations.get(&key).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => v
            .parse::<i64>()
            .map(Some)
            .map_err(|_| ScaleFromZeroError::Integer {
                key: key.clone(),
                value: v.clone(),
            }),
    }
}

/// Parses `key1=value1:NoSchedule,key2:NoExecute`.
pub fn parse_taints(s: &str) -> Result<Vec<Taint>, ScaleFromZeroError> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let taint = parse_taint(item).map_err(|why| ScaleFromZeroError::Taint {
            key: capacity_key("taints"),
            item: item.to_string(),
            why,
        })?;
        out.push(taint);
    }
    Ok(out)
}

/// Parses `key[=value]:Effect`.
fn parse_taint(item: &str) -> Result<Taint, EntryError> {
    let (kv, effect) = item.split_once(':').ok_or(EntryError::TaintShape)?;
    if effect.contains(':') {
        return Err(EntryError::Colons);
    }
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        return Err(EntryError::Effect);
    }
    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
    if v.contains('=') {
        return Err(EntryError::Equals);
    }
    validate_key(k)?;
    validate_value(v)?;
    Ok(Taint {
        key: k.to_string(),
        value: v.to_string(),
        effect: effect.to_string(),
    })
}

/// Parses `key1=value1,key2=value2`.
pub fn parse_labels(s: &str) -> Result<BTreeMap<String, String>, ScaleFromZeroError> {
    let mut out = BTreeMap::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = parse_label(item).map_err(|why| ScaleFromZeroError::Label {
            key: capacity_key("labels"),
            item: item.to_string(),
            why,
        })?;
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

/// Parses `key=value`.
fn parse_label(item: &str) -> Result<(&str, &str), EntryError> {
    let (k, v) = item.split_once('=').ok_or(EntryError::LabelShape)?;
    validate_key(k)?;
    validate_value(v)?;
    Ok((k, v))
}

impl Capacity {
    /// The capacity from the annotations over the template's status;
    /// `Ok(None)` when it lacks CPU or memory (no scale from zero), an
    /// error naming the annotation when one does not parse.
    pub fn of(
        annotations: &BTreeMap<String, String>,
        template: Option<&Value>,
    ) -> Result<Option<Self>, ScaleFromZeroError> {
        let mut from_annotations = BTreeMap::new();
        for (name, resource) in [
            ("cpu", "cpu"),
            ("memory", "memory"),
            ("ephemeral-disk", "ephemeral-storage"),
        ] {
            if let Some(q) = quantity(annotations, name)? {
                from_annotations.insert(resource.to_string(), q);
            }
        }
        let gpu_count = integer(annotations, "gpu-count")?;
        let gpu_type = annotations
            .get(&capacity_key("gpu-type"))
            .filter(|t| !t.is_empty());
        if let (Some(n), Some(t)) = (gpu_count, gpu_type)
            && n != 0
        {
            from_annotations.insert(t.clone(), n.to_string());
        }
        let pods = integer(annotations, "maxPods")?
            .map(|n| n.to_string())
            .unwrap_or_else(|| DEFAULT_MAX_PODS.to_string());
        from_annotations.insert("pods".to_string(), pods);
        let labels = match annotations.get(&capacity_key("labels")) {
            Some(s) => parse_labels(s)?,
            None => BTreeMap::new(),
        };
        let taints = match annotations.get(&capacity_key("taints")) {
            Some(s) => parse_taints(s)?,
            None => Vec::new(),
        };
        let status = template.and_then(|t| t.get("status"));
        let mut resources: BTreeMap<String, String> = status
            .and_then(|s| s.get("capacity"))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), value_string(v)?)))
                    .filter(|(_, v)| predicates::quantity::parse_milli(v).is_some())
                    .collect()
            })
            .unwrap_or_default();
        resources.extend(from_annotations);
        if !resources.contains_key("cpu") || !resources.contains_key("memory") {
            return Ok(None);
        }
        let info = |field: &str| {
            status
                .and_then(|s| s.pointer(&format!("/nodeInfo/{field}")))
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let csi = annotations
            .get(&capacity_key("csi-driver"))
            .and_then(|v| parse_csi_drivers(v));
        let dra = annotations
            .get(&capacity_key("dra-driver"))
            .filter(|d| !d.is_empty())
            .zip(gpu_count.filter(|n| *n > 0))
            .map(|(d, n)| (d.clone(), n));
        Ok(Some(Self {
            resources,
            labels,
            taints,
            csi,
            dra,
            architecture: info("architecture"),
            operating_system: info("operatingSystem"),
        }))
    }
}

fn value_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Label prefixes (before the `/`) that CAPI propagates from a Machine's
/// template labels to its Node, so a new node will have them.
fn is_managed_label(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    prefix == "node-role.kubernetes.io"
        || prefix == "node-restriction.kubernetes.io"
        || prefix.ends_with(".node-restriction.kubernetes.io")
        || prefix == "node.cluster.x-k8s.io"
        || prefix.ends_with(".node.cluster.x-k8s.io")
}

/// The template node of a group that can scale from zero: generic labels,
/// the template's architecture and OS, CAPI's managed labels from the
/// object's machine template, then the labels annotation; the taints
/// annotation; capacity = allocatable; Ready.
pub fn template_node(
    object: &DynamicObject,
    capacity: &Capacity,
    default_arch: &str,
    now: &str,
) -> Result<TemplateNodeInfo, serde_json::Error> {
    let base = object.metadata.name.clone().unwrap_or_default();
    let name = format!("{base}-asg-{}", apimachinery::rand::suffix(10));
    let mut labels = BTreeMap::new();
    labels.insert(
        "kubernetes.io/arch".to_string(),
        capacity
            .architecture
            .clone()
            .unwrap_or_else(|| default_arch.to_string()),
    );
    labels.insert(
        "kubernetes.io/os".to_string(),
        capacity
            .operating_system
            .clone()
            .unwrap_or_else(|| "linux".to_string()),
    );
    labels.insert("kubernetes.io/hostname".to_string(), name.clone());
    if let Some(m) = object
        .data
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object)
    {
        for (k, v) in m {
            if let (true, Some(v)) = (is_managed_label(k), v.as_str()) {
                labels.insert(k.clone(), v.to_string());
            }
        }
    }
    labels.extend(capacity.labels.clone());
    let node = crate::cloudprovider::template_node(
        &name,
        labels,
        &capacity.taints,
        &capacity.resources,
        now,
    )?;
    let slices = match &capacity.dra {
        Some((driver, count)) => vec![dra_slice(&name, driver, *count)?],
        None => Vec::new(),
    };
    Ok(TemplateNodeInfo {
        node,
        pods: vec![crate::cloudprovider::kube_proxy_pod(&base)],
        csi: capacity.csi.clone(),
        slices,
    })
}

/// The slice of the `dra-driver` annotation (upstream's scale from zero):
/// `<node>-<driver>`, local to the node, one pool named after it, `count`
/// devices `gpu-<i>` with the attribute `type: gpu`. Its pool counts one
/// slice, as upstream after 1.36.1 (kubernetes/autoscaler#10200); 1.36.1
/// leaves the count at 0, which makes the pool incomplete and the devices
/// never allocatable.
fn dra_slice(node: &str, driver: &str, count: i64) -> Result<ResourceSlice, serde_json::Error> {
    let devices: Vec<Value> = (0..count)
        .map(|i| serde_json::json!({"name": format!("gpu-{i}"), "attributes": {"type": {"string": "gpu"}}}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("{node}-{driver}")},
        "spec": {"driver": driver, "nodeName": node,
            "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
            "devices": devices}}))
}
