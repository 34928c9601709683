//! Template nodes (docs/reference/ca-rules.md §4.9, upstream's
//! `processors/nodeinfosprovider`, the mixed provider): what a new node of each group would
//! look like. A ready, schedulable node of the group, ready for over a
//! minute ([`STABILIZATION_DELAY`]), is copied when there is one; else the copy cached within `--node-info-cache-expire-time`;
//! else the provider's template. The DaemonSet pods that would run on it
//! are added, and the copy is sanitised (name, uid, taints).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use predicates::dynamicresources::api::ResourceSlice;
use predicates::{CsiNode, NodeInfo, PodInfo};

use crate::cache::LoopHasher;
use crate::cloudprovider::CloudError;
use crate::clusterstate::ClusterStateRegistry;
use crate::context::AutoscalingContext;
use crate::simulator::drainability::{is_daemonset_pod, is_mirror_pod};
use crate::simulator::dynamicresources::slices_for_node;
use crate::taints;

/// How long a node must have been ready to serve as a template (upstream's
/// `stabilizationDelay`): a node just started may not show its final
/// allocatable yet. Until then the group's template is the cached copy or
/// the provider's (with its kube-proxy pod).
pub const STABILIZATION_DELAY: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether the node's Ready condition turned true over
/// [`STABILIZATION_DELAY`] before `now`.
fn ready_long_enough(node: &Node, now: SystemTime) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_transition_time.as_ref())
        .is_some_and(|t| SystemTime::from(t.0) + STABILIZATION_DELAY < now)
}

/// The template nodes, with the copies of real nodes cached across loops.
#[derive(Debug, Default)]
pub struct TemplateNodes {
    cache: HashMap<String, (NodeInfo, SystemTime)>,
    /// The node-local slices of the last loop's templates, by group
    /// (upstream's `TemplateNodeInfoRegistry`, read by the DRA readiness
    /// rule before this loop's templates are built).
    last_slices: HashMap<String, Vec<Arc<ResourceSlice>>>,
}

impl TemplateNodes {
    /// The slices of the group's template as the last loop built it;
    /// `None` before its first template.
    pub fn last_slices(&self, group: &str) -> Option<&[Arc<ResourceSlice>]> {
        self.last_slices.get(group).map(Vec::as_slice)
    }

    /// Template nodes per group (docs/reference/ca-rules.md §4.9): a good node of the group,
    /// else the cached template, else the provider's.
    pub fn build(
        &mut self,
        ctx: &AutoscalingContext,
        registry: &ClusterStateRegistry,
        nodes: &[Arc<Node>],
        now: SystemTime,
    ) -> BTreeMap<String, NodeInfo> {
        let mut out = BTreeMap::new();
        let state = ctx.cache.read();
        let daemonsets: Vec<Arc<DaemonSet>> = state.daemonsets.values().cloned().collect();
        // Each group's first node good for a template, in one walk.
        let mut good: HashMap<&str, &Arc<Node>, LoopHasher> = HashMap::default();
        for n in nodes {
            let name = n.metadata.name.as_deref().unwrap_or("");
            if let Some(group) = registry.node_group(name)
                && !good.contains_key(group)
                && registry.is_ready(name)
                && ready_long_enough(n, now)
                && n.spec.as_ref().and_then(|s| s.unschedulable) != Some(true)
                && !taints::has_to_be_deleted(n)
            {
                good.insert(group, n);
            }
        }
        for g in ctx.provider.node_groups() {
            let id = g.id();
            let from_node = good.get(id.as_str()).map(|&n| {
                let pods: Vec<PodInfo> = state
                    .pod_infos_on(n.metadata.name.as_deref().unwrap_or(""))
                    .into_iter()
                    .filter(|p| p.pod.metadata.deletion_timestamp.is_none())
                    .filter(|p| is_daemonset_pod(&p.pod) || is_mirror_pod(&p.pod))
                    .collect();
                let name = n.metadata.name.as_deref().unwrap_or("");
                let csi = state.csi_nodes.get(name);
                let devices = Devices {
                    csi: csi.map(|c| (**c).clone()),
                    slices: state.dra.node_slices(name),
                };
                sanitize(ctx, &id, (**n).clone(), pods, devices)
            });
            let template = match from_node {
                Some(t) => {
                    self.cache.insert(id.clone(), (t.clone(), now));
                    Some(t)
                }
                None => match self.cache.get(&id) {
                    Some((t, at)) if *at + ctx.flags.node_info_cache_expire_time > now => {
                        Some(t.clone())
                    }
                    _ => match g.template_node_info() {
                        Ok(t) => {
                            let pods = t
                                .pods
                                .into_iter()
                                .map(|p| PodInfo::new(Arc::new(p)))
                                .collect();
                            let devices = Devices {
                                csi: t.csi,
                                slices: t.slices.into_iter().map(Arc::new).collect(),
                            };
                            Some(sanitize(ctx, &id, t.node, pods, devices))
                        }
                        Err(CloudError::NotImplemented) => None,
                        Err(e) => {
                            tracing::warn!("template of node group {id}: {e}");
                            None
                        }
                    },
                },
            };
            if let Some(mut t) = template {
                add_daemonset_pods(ctx, &mut t, &daemonsets);
                out.insert(id, t);
            }
        }
        self.last_slices = out
            .iter()
            .map(|(id, t)| (id.clone(), t.slices.clone()))
            .collect();
        out
    }
}

/// Adds to a template the pods of the DaemonSets that would run on it
/// but are not there yet (docs/reference/ca-rules.md §4.9 step 3): all of them with
/// `--force-ds`, else only `system-node-critical` ones that may preempt.
fn add_daemonset_pods(
    ctx: &AutoscalingContext,
    template: &mut NodeInfo,
    daemonsets: &[Arc<DaemonSet>],
) {
    let name = template.name().to_string();
    for ds in daemonsets {
        let uid = ds.metadata.uid.clone().unwrap_or_default();
        let present = template.pods.iter().any(|p| {
            p.pod
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == uid)
        });
        let Some(spec) = ds.spec.as_ref().and_then(|s| s.template.spec.clone()) else {
            continue;
        };
        let critical = spec.priority_class_name.as_deref() == Some("system-node-critical")
            && spec
                .preemption_policy
                .as_deref()
                .is_none_or(|p| p == "PreemptLowerPriority");
        if present || !(ctx.flags.force_ds || critical) {
            continue;
        }
        let meta = ds
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.clone())
            .unwrap_or_default();
        let ds_name = ds.metadata.name.clone().unwrap_or_default();
        let mut pod = Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(format!("{ds_name}-{name}")),
                namespace: ds.metadata.namespace.clone(),
                labels: meta.labels,
                annotations: meta.annotations,
                owner_references: Some(vec![
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "DaemonSet".into(),
                        name: ds_name,
                        uid,
                        controller: Some(true),
                        block_owner_deletion: None,
                    },
                ]),
                ..Default::default()
            },
            spec: Some(spec),
            status: None,
        };
        // The tolerations the DaemonSet controller adds.
        if let Some(spec) = pod.spec.as_mut() {
            let tols = spec.tolerations.get_or_insert_with(Vec::new);
            for key in [
                "node.kubernetes.io/not-ready",
                "node.kubernetes.io/unreachable",
                "node.kubernetes.io/disk-pressure",
                "node.kubernetes.io/memory-pressure",
                "node.kubernetes.io/pid-pressure",
                "node.kubernetes.io/unschedulable",
            ] {
                tols.push(k8s_openapi::api::core::v1::Toleration {
                    key: Some(key.into()),
                    operator: Some("Exists".into()),
                    ..Default::default()
                });
            }
        }
        let tolerations = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.clone())
            .unwrap_or_default();
        let taints = template
            .node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        if !predicates::filters::node_affinity_matches(&pod, template)
            || predicates::filters::untolerated_taint(&taints, &tolerations).is_some()
        {
            continue;
        }
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(name.clone());
        }
        template.add_pod(PodInfo::new(Arc::new(pod)));
    }
}

/// What a template keeps of its node's devices.
struct Devices {
    /// Its CSINode's drivers.
    csi: Option<CsiNode>,
    /// Its node-local ResourceSlices.
    slices: Vec<Arc<ResourceSlice>>,
}

/// The template from a node: renamed, with the template-node label, the
/// taints kept that new nodes would have, its CSI drivers with
/// `--enable-csi-node-aware-scheduling` (upstream's snapshot keeps a
/// template's CSINode only then) and its ResourceSlices made its own.
fn sanitize(
    ctx: &AutoscalingContext,
    group: &str,
    mut node: Node,
    pods: Vec<PodInfo>,
    devices: Devices,
) -> NodeInfo {
    let name = format!("template-node-for-{group}");
    node.metadata.name = Some(name.clone());
    node.metadata.uid = None;
    node.metadata.resource_version = None;
    let labels = node.metadata.labels.get_or_insert_with(Default::default);
    labels.insert("kubernetes.io/hostname".into(), name.clone());
    labels.insert(
        "cluster-autoscaler.kubernetes.io/template-node".into(),
        "true".into(),
    );
    if let Some(spec) = node.spec.as_mut() {
        if let Some(ts) = spec.taints.as_mut() {
            ts.retain(|t| ctx.taints.keep_on_template(&t.key));
        }
        if ctx.flags.scale_from_unschedulable {
            spec.unschedulable = None;
        }
    }
    let mut info = NodeInfo::new(Arc::new(node));
    if ctx.flags.enable_csi_node_aware_scheduling {
        info.csi = devices.csi.map(Arc::new);
    }
    info.slices = slices_for_node(&devices.slices, &name);
    for p in pods {
        let mut pod = (*p.pod).clone();
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(name.clone());
        }
        info.add_pod(p.with_pod(pod));
    }
    info
}
