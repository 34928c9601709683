//! The DaemonSet controller: one pod on every node the DaemonSet's pods
//! may run on, pinned to it, with the tolerations daemon pods get.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Node, Pod, PodTemplateSpec, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use serde_json::json;

use super::controller::Controllers;
use super::pods::{CachedPod, owner_ref};

impl Controllers {
    pub(super) async fn reconcile_daemonset(&mut self, k: &str) {
        let Some(ds) = self.daemonsets.get(k).cloned() else {
            return;
        };
        if ds.metadata.deletion_timestamp.is_some() || !self.nodes_synced {
            return;
        }
        let ns = ds.metadata.namespace.clone().unwrap_or_default();
        let uid = ds.metadata.uid.clone().unwrap_or_default();
        let spec = ds.spec.clone().unwrap_or_default();
        let mut template = spec.template.clone();
        add_daemonset_tolerations(&mut template);
        let mut by_node: HashMap<String, Vec<String>> = HashMap::new();
        for p in self.owned(&ns, &uid) {
            if p.is_active() {
                by_node
                    .entry(p.daemon_node().unwrap_or_default().to_string())
                    .or_default()
                    .push(p.key());
            }
        }
        // The plan is made over the cached nodes first (no copies), then
        // carried out: creating and deleting pods needs the controller.
        let daemon = Pod {
            metadata: template.metadata.clone().unwrap_or_default(),
            spec: template.spec.clone(),
            status: None,
        };
        let mut desired = 0;
        let mut missing = Vec::new();
        let mut surplus = Vec::new();
        for (name, node) in &self.nodes {
            let placement = daemon_placement(&daemon, node);
            let existing = by_node.remove(name).unwrap_or_default();
            match placement {
                DaemonPlacement::Run | DaemonPlacement::KeepRunning => {
                    if placement == DaemonPlacement::Run {
                        desired += 1;
                        if existing.is_empty() {
                            missing.push(name.clone());
                        }
                    }
                    surplus.extend(existing.into_iter().skip(1));
                }
                DaemonPlacement::No => surplus.extend(existing),
            }
        }
        for name in missing {
            let mut t = template.clone();
            pin_to_node(&mut t, &name);
            let meta = ObjectMeta {
                generate_name: Some(format!("{}-", ds.name_any())),
                owner_references: Some(vec![owner_ref(&ds)]),
                ..ObjectMeta::default()
            };
            self.create_pod(&ns, &t, meta).await;
        }
        for k in &surplus {
            self.delete_pod(k, None).await;
        }
        // Pods for nodes that are gone are left to pod GC.
        let owned: Vec<&CachedPod> = self
            .owned(&ns, &uid)
            .into_iter()
            .filter(|p| p.is_active())
            .collect();
        let scheduled = owned.iter().filter(|p| p.node_name.is_some()).count();
        let ready = owned.iter().filter(|p| p.ready).count();
        let st = ds.status.clone().unwrap_or_default();
        if (
            st.desired_number_scheduled,
            st.current_number_scheduled,
            st.number_ready,
            st.observed_generation,
        ) != (
            desired,
            scheduled as i32,
            ready as i32,
            ds.metadata.generation,
        ) {
            self.patch_status(&ds, json!({
                "desiredNumberScheduled": desired, "currentNumberScheduled": scheduled,
                "numberReady": ready, "numberAvailable": ready, "updatedNumberScheduled": owned.len(),
                "numberMisscheduled": 0, "observedGeneration": ds.metadata.generation,
            })).await;
        }
    }
}

/// The tolerations the DaemonSet controller adds to its pods.
fn add_daemonset_tolerations(t: &mut PodTemplateSpec) {
    let Some(spec) = t.spec.as_mut() else { return };
    let tols = spec.tolerations.get_or_insert_with(Vec::new);
    let mut add = |key: &str, effect: &str| {
        if !tols
            .iter()
            .any(|t| t.key.as_deref() == Some(key) && t.effect.as_deref() == Some(effect))
        {
            tols.push(Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some(effect.into()),
                ..Toleration::default()
            });
        }
    };
    add("node.kubernetes.io/not-ready", "NoExecute");
    add("node.kubernetes.io/unreachable", "NoExecute");
    add("node.kubernetes.io/disk-pressure", "NoSchedule");
    add("node.kubernetes.io/memory-pressure", "NoSchedule");
    add("node.kubernetes.io/pid-pressure", "NoSchedule");
    add("node.kubernetes.io/unschedulable", "NoSchedule");
    if spec.host_network == Some(true) {
        add("node.kubernetes.io/network-unavailable", "NoSchedule");
    }
}

/// Pins a daemon pod to its node with required node affinity on
/// `metadata.name`, as the DaemonSet controller does.
fn pin_to_node(t: &mut PodTemplateSpec, node: &str) {
    let Some(spec) = t.spec.as_mut() else { return };
    let affinity = spec.affinity.get_or_insert_with(Default::default);
    let na = affinity.node_affinity.get_or_insert_with(Default::default);
    na.required_during_scheduling_ignored_during_execution = Some(
        serde_json::from_value(json!({"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}))
        .unwrap_or_default(),
    );
}

/// Where a daemon pod belongs, as the DaemonSet controller's
/// `NodeShouldRunDaemonPod` decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DaemonPlacement {
    /// Node selector/affinity match and every NoSchedule/NoExecute taint is
    /// tolerated: a pod is created if missing.
    Run,
    /// A NoSchedule taint (such as `ToBeDeletedByClusterAutoscaler`) is not
    /// tolerated: no new pod, but a running one stays.
    KeepRunning,
    /// No match, or a NoExecute taint is not tolerated: the pod goes.
    No,
}

fn daemon_placement(pod: &Pod, node: &Node) -> DaemonPlacement {
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let tols = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    if !predicates::filters::node_affinity_matches_node(pod, node) {
        return DaemonPlacement::No;
    }
    if predicates::filters::untolerated_taint(taints, tols).is_none() {
        return DaemonPlacement::Run;
    }
    let evicting = taints
        .iter()
        .any(|t| t.effect == "NoExecute" && !predicates::labels::tolerated_by(tols, t));
    if evicting {
        DaemonPlacement::No
    } else {
        DaemonPlacement::KeepRunning
    }
}
