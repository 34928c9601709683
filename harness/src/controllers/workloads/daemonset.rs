//! The DaemonSet controller: one pod on every node the DaemonSet's pods
//! may run on, pinned to it, with the tolerations daemon pods get.
//!
//! A sync reads again only the nodes in the DaemonSet's `NodeScope`:
//! those that changed in what places its pods, or whose daemon pod
//! changed, since its last sync (every node when its pod template changed
//! or the nodes were listed again). At 1,000 nodes a sync of every node
//! at every daemon pod's change was a twelfth of a recorded day's replay.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Pod, PodTemplateSpec, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use serde_json::json;

use super::controller::Controllers;
use super::placement::{DaemonPlacement, NodeScope, daemon_placement};
use super::pods::owner_ref;

/// What one sync found to do on the nodes it read.
#[derive(Default)]
struct Plan {
    /// Nodes with no daemon pod that should run one.
    missing: Vec<String>,
    /// Daemon pods to delete (a second one on a node, or one on a node it
    /// may not run on), with their node.
    surplus: Vec<(String, String)>,
}

impl Controllers {
    pub(super) async fn reconcile_daemonset(&mut self, k: &str) {
        let scope = self.daemon_scopes.remove(k).unwrap_or_default();
        let Some(ds) = self.daemonsets.get(k).cloned() else {
            self.daemon_placements.remove(k);
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
        let daemon = Pod {
            metadata: template.metadata.clone().unwrap_or_default(),
            spec: template.spec.clone(),
            status: None,
        };
        // The plan is made over the cached nodes first (no copies), then
        // carried out: creating and deleting pods needs the controller.
        let full = scope == NodeScope::All || !self.daemon_placements.contains_key(k);
        let placements = self.daemon_placements.entry(k.to_string()).or_default();
        let pods = self.owned_by.get(&uid).map(|o| &o.daemon_pods);
        let plan = match scope {
            NodeScope::Nodes(names) if !full => {
                let names = names.iter().map(String::as_str);
                plan_nodes(&daemon, &self.nodes, names, placements, pods)
            }
            _ => {
                placements.clear();
                let names = self.nodes.keys().map(String::as_str);
                plan_nodes(&daemon, &self.nodes, names, placements, pods)
            }
        };
        let desired = placements
            .values()
            .filter(|p| **p == DaemonPlacement::Run)
            .count();
        // A node whose pod could not be made or deleted is read again at
        // the next sync.
        let mut retry = NodeScope::default();
        for name in plan.missing {
            let mut t = template.clone();
            pin_to_node(&mut t, &name);
            let meta = ObjectMeta {
                generate_name: Some(format!("{}-", ds.name_any())),
                owner_references: Some(vec![owner_ref(&ds)]),
                ..ObjectMeta::default()
            };
            if !self.create_pod(&ns, &t, meta).await {
                retry.mark(&name);
            }
        }
        for (pod, node) in &plan.surplus {
            if !self.delete_pod(pod, None).await {
                retry.mark(node);
            }
        }
        if retry != NodeScope::default() {
            self.daemon_scopes
                .entry(k.to_string())
                .or_default()
                .merge(retry);
        }
        let (active, ready, scheduled) = self
            .owned_by
            .get(&uid)
            .map_or((0, 0, 0), |o| (o.active, o.ready, o.scheduled));
        let st = ds.status.clone().unwrap_or_default();
        let counts = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        if (
            st.desired_number_scheduled,
            st.current_number_scheduled,
            st.number_ready,
            st.observed_generation,
        ) != (
            counts(desired),
            counts(scheduled),
            counts(ready),
            ds.metadata.generation,
        ) {
            self.patch_status(&ds, json!({
                "desiredNumberScheduled": desired, "currentNumberScheduled": scheduled,
                "numberReady": ready, "numberAvailable": ready, "updatedNumberScheduled": active,
                "numberMisscheduled": 0, "observedGeneration": ds.metadata.generation,
            })).await;
        }
    }
}

/// Where the daemon pod belongs on each of `names` (a node gone is
/// forgotten: its pods are left to pod GC), kept in `placements`, and
/// what to create and delete there, given the DaemonSet's active pods by
/// node.
fn plan_nodes<'a>(
    daemon: &Pod,
    nodes: &BTreeMap<String, Node>,
    names: impl Iterator<Item = &'a str>,
    placements: &mut BTreeMap<String, DaemonPlacement>,
    pods: Option<&BTreeMap<String, BTreeSet<String>>>,
) -> Plan {
    let mut plan = Plan::default();
    for name in names {
        let Some(node) = nodes.get(name) else {
            placements.remove(name);
            continue;
        };
        let placement = daemon_placement(daemon, node);
        placements.insert(name.to_string(), placement);
        let existing = pods.and_then(|p| p.get(name)).into_iter().flatten();
        let keep = match placement {
            DaemonPlacement::Run => {
                if pods
                    .and_then(|p| p.get(name))
                    .is_none_or(BTreeSet::is_empty)
                {
                    plan.missing.push(name.to_string());
                }
                1
            }
            DaemonPlacement::KeepRunning => 1,
            DaemonPlacement::No => 0,
        };
        plan.surplus
            .extend(existing.skip(keep).map(|k| (k.clone(), name.to_string())));
    }
    plan
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
