//! The cached state: nodes, pods and their indexes, budgets, controllers
//! and DaemonSets, with the updates a watch event makes to them and the
//! reads the loop makes of them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod, PodTemplate};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use predicates::{CsiNode, NodeInfo, PodInfo, VolumeObjects};

use super::pod::{is_active, is_expendable, node_name};
use crate::provisioningrequest::types::ProvisioningRequest;
use crate::simulator::drainability::{
    Budget, Budgets, ControllerState, Controllers, controller_uid,
};

/// The kind under which DaemonSets are kept among the controllers.
const DAEMON_SET: &str = "DaemonSet";

/// A pod's `namespace/name` as the cache's indexes hold it: one string
/// shared by all of them.
pub type PodKey = Arc<str>;

/// What the cache keeps of a controller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CachedController {
    /// Its uid (its pods' controller reference).
    pub uid: String,
    /// Its desired replicas, for the kinds that have them (the
    /// drainability rules' check).
    pub replicas: Option<i32>,
    /// The pods it wants to exist, for the kinds proactive scale-up
    /// completes (ReplicaSets, Jobs, Parallel StatefulSets).
    pub desired_pods: Option<i32>,
}

/// The cached state.
#[derive(Default)]
pub struct State {
    /// Nodes by name.
    pub nodes: BTreeMap<String, Arc<Node>>,
    /// Active pods by `namespace/name` (compact). A pod's key is one
    /// [`PodKey`] shared by the indexes below (a copy in each was about
    /// 20 MB at 300,000 pods).
    pub pods: HashMap<PodKey, PodInfo>,
    /// Pod keys by node name (bound pods only).
    pub by_node: HashMap<String, BTreeSet<PodKey>>,
    /// Pod keys by controller uid.
    pub by_owner: HashMap<String, BTreeSet<PodKey>>,
    /// Unbound active pods by key (compact, as in `pods`).
    pub unbound: BTreeMap<PodKey, PodInfo>,
    /// Budgets by `namespace/name`.
    pub budgets: BTreeMap<String, Arc<PodDisruptionBudget>>,
    /// Controllers by (kind, namespace, name).
    pub controllers: HashMap<(String, String, String), CachedController>,
    /// DaemonSets by `namespace/name` (their pods go on template nodes).
    pub daemonsets: BTreeMap<String, Arc<DaemonSet>>,
    /// ProvisioningRequests by `namespace/name` (watched with
    /// `--enable-provisioning-requests`).
    pub provisioning_requests: BTreeMap<String, Arc<ProvisioningRequest>>,
    /// PodTemplates by `namespace/name` (watched with
    /// `--enable-provisioning-requests`).
    pub pod_templates: BTreeMap<String, Arc<PodTemplate>>,
    /// CSINodes' drivers by node name ([`super::storage`]).
    pub csi_nodes: BTreeMap<String, Arc<CsiNode>>,
    /// Claims, volumes and classes ([`super::storage`]).
    pub volumes: Arc<VolumeObjects>,
    /// DeviceClasses, ResourceClaims, ResourceSlices ([`super::dra`]).
    pub dra: super::dra::DraCache,
    /// Per-node infos (non-expendable pods), rebuilt when dirty: one per
    /// node of [`Self::nodes`], in the same order.
    infos: BTreeMap<String, NodeInfo>,
    dirty: BTreeSet<String>,
    /// Keys seen since a relist started, per kind: at the end of the relist
    /// everything not seen is gone (deleted while the watch was down).
    relisting: HashMap<&'static str, BTreeSet<String>>,
}

impl State {
    /// Starts a relist of `kind`: from now on, [`Self::seen`] records keys.
    pub(super) fn relist_started(&mut self, kind: &'static str) {
        self.relisting.insert(kind, BTreeSet::new());
    }

    /// Records that the relist of `kind` under way (if any) contains `key`.
    pub(super) fn seen(&mut self, kind: &'static str, key: &str) {
        if let Some(set) = self.relisting.get_mut(kind) {
            set.insert(key.to_string());
        }
    }

    /// Ends a relist: drops what the relist did not contain.
    pub(super) fn relist_done(&mut self, kind: &'static str) {
        let Some(seen) = self.relisting.remove(kind) else {
            return;
        };
        match kind {
            "Node" => {
                let gone: Vec<String> = self
                    .nodes
                    .keys()
                    .filter(|k| !seen.contains(*k))
                    .cloned()
                    .collect();
                for name in gone {
                    self.drop_node(&name);
                }
            }
            "Pod" => {
                let gone: Vec<PodKey> = self
                    .pods
                    .keys()
                    .filter(|k| !seen.contains(&k[..]))
                    .cloned()
                    .collect();
                for key in gone {
                    self.drop_pod(&key);
                }
            }
            "PodDisruptionBudget" => self.budgets.retain(|k, _| seen.contains(k)),
            "ProvisioningRequest" => self.provisioning_requests.retain(|k, _| seen.contains(k)),
            "PodTemplate" => self.pod_templates.retain(|k, _| seen.contains(k)),
            storage if super::storage::STORAGE_KINDS.contains(&storage) => {
                self.storage_relisted(storage, &seen)
            }
            dra if super::dra::DRA_KINDS.contains(&dra) => self.dra_relisted(dra, &seen),
            controller => {
                if controller == DAEMON_SET {
                    self.daemonsets.retain(|k, _| seen.contains(k));
                }
                self.controllers.retain(|(k, ns, name), _| {
                    k != controller || seen.contains(&format!("{ns}/{name}"))
                })
            }
        }
    }

    /// Keeps a ProvisioningRequest, unless the cache has a newer version of
    /// it (the autoscaler's own status write may come before the watch
    /// delivers an older change).
    pub fn put_provisioning_request(&mut self, pr: ProvisioningRequest) {
        let version = |p: &ProvisioningRequest| {
            p.metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
        };
        let key = pr.key();
        if let Some(old) = self.provisioning_requests.get(&key)
            && let (Some(o), Some(n)) = (version(old), version(&pr))
            && o > n
        {
            return;
        }
        self.provisioning_requests.insert(key, Arc::new(pr));
    }

    /// Marks a node's info for rebuilding.
    pub(super) fn touch(&mut self, node: &str) {
        self.dirty.insert(node.to_string());
    }

    /// Keeps `node` under its name (without its managed fields).
    pub(super) fn put_node(&mut self, name: String, mut node: Node) {
        node.metadata.managed_fields = None;
        self.nodes.insert(name.clone(), Arc::new(node));
        self.touch(&name);
    }

    /// Forgets the node `name` (its pods stay until their own deletion).
    pub(super) fn drop_node(&mut self, name: &str) {
        self.nodes.remove(name);
        self.touch(name);
    }

    /// Keeps `pod` under `key` (its [`predicates::nodeinfo::pod_key`]), or
    /// forgets it if it is no longer active.
    pub(super) fn put_pod(&mut self, key: String, pod: Pod) {
        self.drop_pod(&key);
        if !is_active(&pod) {
            return;
        }
        let key = PodKey::from(key);
        if let Some(uid) = controller_uid(&pod) {
            let uid = uid.to_string();
            self.by_owner.entry(uid).or_default().insert(key.clone());
        }
        let info = PodInfo::new(Arc::new(pod)).compact();
        match node_name(&info.pod).map(str::to_string) {
            Some(n) => {
                self.by_node
                    .entry(n.clone())
                    .or_default()
                    .insert(key.clone());
                self.touch(&n);
            }
            None => {
                self.unbound.insert(key.clone(), info.clone());
            }
        }
        self.pods.insert(key, info);
    }

    /// Forgets the pod under `key` and its place in the indexes.
    pub(super) fn drop_pod(&mut self, key: &str) {
        if let Some(old) = self.pods.remove(key) {
            if let Some(uid) = controller_uid(&old.pod)
                && let Some(set) = self.by_owner.get_mut(uid)
            {
                set.remove(key);
                if set.is_empty() {
                    self.by_owner.remove(uid);
                }
            }
            match node_name(&old.pod) {
                Some(n) => {
                    let n = n.to_string();
                    if let Some(set) = self.by_node.get_mut(&n) {
                        set.remove(key);
                    }
                    self.touch(&n);
                }
                None => {
                    self.unbound.remove(key);
                }
            }
        }
    }

    /// Keeps a DaemonSet (without its managed fields), also as a controller
    /// without replicas.
    pub(super) fn put_daemonset(&mut self, namespace: String, name: String, mut ds: DaemonSet) {
        ds.metadata.managed_fields = None;
        let key = format!("{namespace}/{name}");
        let info = CachedController {
            uid: ds.metadata.uid.clone().unwrap_or_default(),
            ..CachedController::default()
        };
        self.controllers
            .insert((DAEMON_SET.into(), namespace, name), info);
        self.daemonsets.insert(key, Arc::new(ds));
    }

    /// Forgets a DaemonSet, also as a controller.
    pub(super) fn drop_daemonset(&mut self, namespace: String, name: String) {
        let key = format!("{namespace}/{name}");
        self.controllers
            .remove(&(DAEMON_SET.into(), namespace, name));
        self.daemonsets.remove(&key);
    }

    /// Pods of a controller (by its uid), bound or not.
    pub fn pods_of_owner(&self, uid: &str) -> Vec<PodInfo> {
        self.by_owner
            .get(uid)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k).cloned())
            .collect()
    }

    /// Pods bound to a node (compact: no containers).
    pub fn pods_on(&self, node: &str) -> Vec<Arc<Pod>> {
        self.pod_infos_on(node)
            .into_iter()
            .map(|p| p.pod.clone())
            .collect()
    }

    /// The scheduling facts of the pods bound to a node.
    pub fn pod_infos_on(&self, node: &str) -> Vec<PodInfo> {
        self.by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k).cloned())
            .collect()
    }

    /// NodeInfos of every node with its non-expendable pods; rebuilds the
    /// ones whose pods or node changed since the last call.
    pub fn node_infos(&mut self, expendable_cutoff: i32) -> Vec<NodeInfo> {
        let dirty = std::mem::take(&mut self.dirty);
        for name in dirty {
            let Some(node) = self.nodes.get(&name).cloned() else {
                self.infos.remove(&name);
                continue;
            };
            let mut info = NodeInfo::new(node);
            info.csi = self.csi_nodes.get(&name).cloned();
            info.slices = self.dra.node_slices(&name);
            for pod in self.pod_infos_on(&name) {
                if !is_expendable(&pod.pod, expendable_cutoff) {
                    info.add_pod(pod);
                }
            }
            self.infos.insert(name, info);
        }
        // Every node came with a touch, every node gone too: the infos
        // are the nodes'.
        debug_assert!(self.infos.keys().eq(self.nodes.keys()));
        self.infos.values().cloned().collect()
    }

    /// The budgets, as the drainability rules use them.
    pub fn budgets(&self) -> Budgets {
        self.budgets
            .values()
            .filter_map(|b| {
                Some(Budget {
                    namespace: b.metadata.namespace.clone().unwrap_or_default(),
                    name: b.metadata.name.clone().unwrap_or_default(),
                    selector: b.spec.as_ref()?.selector.clone()?,
                    disruptions_allowed: b.status.as_ref().map_or(0, |s| s.disruptions_allowed),
                })
            })
            .collect()
    }
}

impl Controllers for State {
    fn lookup(&self, kind: &str, namespace: &str, name: &str) -> ControllerState {
        match self
            .controllers
            .get(&(kind.to_string(), namespace.to_string(), name.to_string()))
        {
            Some(c) => ControllerState::Found {
                replicas: c.replicas,
            },
            None => ControllerState::NotFound,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn put(s: &mut State, pod: Pod) {
        s.put_pod(predicates::nodeinfo::pod_key(&pod), pod);
    }

    #[test]
    fn pods_are_kept_compact_with_their_scheduling_facts() {
        let mut s = State::default();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}", "keep": "me"}},
            "spec": {"nodeName": "n1",
                "initContainers": [{"name": "init", "image": "i", "resources": {"requests": {"cpu": "2"}}}],
                "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080}], "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "c", "image": "i", "imageID": "x", "ready": true, "restartCount": 0}]}
        }))
        .unwrap();
        put(&mut s, pod.clone());
        let info = &s.pods["default/p"];
        assert_eq!(info.requests.milli_cpu, 2000, "init container counted");
        assert_eq!(info.ports.len(), 1);
        assert!(info.pod.spec.as_ref().unwrap().containers.is_empty());
        assert!(
            info.pod
                .status
                .as_ref()
                .unwrap()
                .container_statuses
                .is_none()
        );
        let annotations = info.pod.metadata.annotations.as_ref().unwrap();
        assert!(!annotations.contains_key("kubectl.kubernetes.io/last-applied-configuration"));
        assert_eq!(annotations["keep"], "me");
        // Unbound pods too: scale-up reads their facts.
        let mut pending = pod;
        pending.metadata.name = Some("q".into());
        pending.spec.as_mut().unwrap().node_name = None;
        put(&mut s, pending);
        let q = &s.unbound["default/q"];
        assert!(q.pod.spec.as_ref().unwrap().containers.is_empty());
        assert_eq!(q.requests.milli_cpu, 2000);
        assert_eq!(q.ports.len(), 1);
    }

    #[test]
    fn pods_are_indexed_by_node_and_by_owner() {
        let mut s = State::default();
        let pod = |name: &str, node: Option<&str>, owner: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": owner, "controller": true}]},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}}))
            .unwrap()
        };
        put(&mut s, pod("a", Some("n1"), "rs1"));
        put(&mut s, pod("b", Some("n2"), "rs1"));
        put(&mut s, pod("c", None, "rs2"));
        assert_eq!(s.pods_of_owner("rs1").len(), 2);
        assert_eq!(s.pods_of_owner("rs2").len(), 1);
        assert_eq!(s.pods_on("n1").len(), 1);
        // Moving and deleting keep the indexes right.
        put(&mut s, pod("a", Some("n2"), "rs1"));
        assert!(s.pods_on("n1").is_empty());
        assert_eq!(s.pods_on("n2").len(), 2);
        s.drop_pod("default/b");
        assert_eq!(s.pods_of_owner("rs1").len(), 1);
        s.drop_pod("default/a");
        assert!(!s.by_owner.contains_key("rs1"));
    }
}
