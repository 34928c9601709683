//! The cache's front door: what a watch event means ([`Change`]) and
//! [`apply`], which updates the [`State`] and says which waiters to wake
//! ([`WakeUps`]). Pure: no server, no lock, no channel; the watch loop
//! fires the wake-ups.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod, PodTemplate};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use kube::runtime::watcher::Event;
use predicates::nodeinfo::pod_key;
use simclock::Clock;

use super::dra::DraObject;
use super::pod::{is_recent_unschedulable, node_name};
use super::state::{CachedController, State};
use super::storage::StorageObject;
use crate::provisioningrequest::types::ProvisioningRequest;

/// What one watch event means for the cache.
#[derive(Debug)]
pub enum Change {
    /// A (re)list of `kind` starts: what it does not contain is gone.
    Listing(&'static str),
    /// The (re)list of `kind` is complete.
    Listed(&'static str),
    /// A node was added or updated.
    NodeApplied(Box<Node>),
    /// The node of this name was deleted.
    NodeDeleted(String),
    /// A pod was added or updated; `listed` when it came in a (re)list
    /// rather than as a change.
    PodApplied {
        /// The pod.
        pod: Box<Pod>,
        /// Whether it came in a (re)list.
        listed: bool,
    },
    /// The pod of this key (`namespace/name`) was deleted.
    PodDeleted(String),
    /// A PodDisruptionBudget was added or updated.
    BudgetApplied(Box<PodDisruptionBudget>),
    /// The budget of this key (`namespace/name`) was deleted.
    BudgetDeleted(String),
    /// A DaemonSet was added or updated.
    DaemonSetApplied(Box<DaemonSet>),
    /// A DaemonSet was deleted.
    DaemonSetDeleted {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// A ProvisioningRequest was added or updated.
    ProvisioningRequestApplied(Box<ProvisioningRequest>),
    /// The ProvisioningRequest of this key (`namespace/name`) was deleted.
    ProvisioningRequestDeleted(String),
    /// A PodTemplate was added or updated.
    PodTemplateApplied(Box<PodTemplate>),
    /// The PodTemplate of this key (`namespace/name`) was deleted.
    PodTemplateDeleted(String),
    /// A controller the drainability rules look up was added or updated.
    ControllerApplied {
        /// Its kind (`ReplicaSet`, `Job`...).
        kind: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its uid.
        uid: String,
        /// Its desired replicas, for the kinds that have them.
        replicas: Option<i32>,
        /// The pods it wants to exist, for proactive scale-up
        /// ([`super::desired_pods`]).
        desired_pods: Option<i32>,
    },
    /// A CSINode, claim, volume or class was added or updated.
    StorageApplied(Box<StorageObject>),
    /// The storage object of this kind and key was deleted.
    StorageDeleted {
        /// Its kind ([`super::storage::STORAGE_KINDS`]).
        kind: &'static str,
        /// Its key.
        key: String,
    },
    /// A DeviceClass, ResourceClaim or ResourceSlice was added or updated.
    DraApplied(Box<DraObject>),
    /// The DRA object of this kind and key was deleted.
    DraDeleted {
        /// Its kind ([`super::dra::DRA_KINDS`]).
        kind: &'static str,
        /// Its key.
        key: String,
    },
    /// A controller was deleted.
    ControllerDeleted {
        /// Its kind.
        kind: &'static str,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl Change {
    /// The change a watcher's event of `kind` means: `applied` makes the
    /// change of an object added or updated (`true` when it came in a
    /// list), `deleted` that of an object deleted.
    pub fn from_event<K>(
        kind: &'static str,
        event: Event<K>,
        applied: impl FnOnce(K, bool) -> Change,
        deleted: impl FnOnce(K) -> Change,
    ) -> Change {
        match event {
            Event::Apply(k) => applied(k, false),
            Event::InitApply(k) => applied(k, true),
            Event::Delete(k) => deleted(k),
            Event::Init => Change::Listing(kind),
            Event::InitDone => Change::Listed(kind),
        }
    }
}

/// The waiters a change wakes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WakeUps {
    /// A recently Unschedulable pod changed
    /// ([`super::ClusterCache::unschedulable_pod`]).
    pub unschedulable_pod: bool,
    /// A pod was bound while nodes are upcoming
    /// ([`super::ClusterCache::pod_bound`]).
    pub pod_bound: bool,
    /// Every watch has delivered its initial list
    /// ([`super::ClusterCache::wait_ready`]).
    pub ready: bool,
    /// A pod was added, updated or deleted outside a list
    /// ([`super::ClusterCache::pod_events`]).
    pub pod_event: bool,
}

/// Counts the lists the watches delivered: the cache is ready once there
/// are as many as watches. Every list counts, a relist too.
#[derive(Debug)]
pub struct Lists {
    watches: usize,
    done: usize,
}

impl Lists {
    /// No list in yet from `watches` watches.
    pub fn new(watches: usize) -> Self {
        Self { watches, done: 0 }
    }

    /// Counts a list; whether the cache is now ready.
    fn done(&mut self) -> bool {
        self.done += 1;
        self.done >= self.watches
    }
}

/// Applies `change` to `state` and says whom it wakes. `clock` dates
/// Unschedulable marks; `nodes_upcoming` is whether the last loop left
/// nodes upcoming (binds wake [`WakeUps::pod_bound`] only then).
pub fn apply(
    state: &mut State,
    change: Change,
    lists: &mut Lists,
    clock: &Clock,
    nodes_upcoming: bool,
) -> WakeUps {
    let mut wake = WakeUps::default();
    match change {
        Change::Listing(kind) => state.relist_started(kind),
        Change::Listed(kind) => {
            state.relist_done(kind);
            wake.ready = lists.done();
        }
        Change::NodeApplied(node) => {
            let name = node.name_any();
            state.seen("Node", &name);
            state.put_node(name, *node);
        }
        Change::NodeDeleted(name) => state.drop_node(&name),
        Change::PodApplied { pod, listed } => {
            let key = pod_key(&pod);
            state.seen("Pod", &key);
            wake.unschedulable_pod = is_recent_unschedulable(&pod, clock.now());
            wake.pod_bound = node_name(&pod).is_some()
                && nodes_upcoming
                && state.unbound.contains_key(key.as_str());
            wake.pod_event = !listed;
            state.put_pod(key, *pod);
        }
        Change::PodDeleted(key) => {
            state.drop_pod(&key);
            wake.pod_event = true;
        }
        Change::BudgetApplied(budget) => {
            let key = namespaced_key(&*budget);
            state.seen("PodDisruptionBudget", &key);
            state.budgets.insert(key, Arc::new(*budget));
        }
        Change::BudgetDeleted(key) => {
            state.budgets.remove(&key);
        }
        Change::ProvisioningRequestApplied(pr) => {
            state.seen("ProvisioningRequest", &pr.key());
            state.put_provisioning_request(*pr);
        }
        Change::ProvisioningRequestDeleted(key) => {
            state.provisioning_requests.remove(&key);
        }
        Change::PodTemplateApplied(t) => {
            let key = namespaced_key(&*t);
            state.seen("PodTemplate", &key);
            state.pod_templates.insert(key, Arc::new(*t));
        }
        Change::PodTemplateDeleted(key) => {
            state.pod_templates.remove(&key);
        }
        Change::DaemonSetApplied(ds) => {
            let (namespace, name) = (ds.namespace().unwrap_or_default(), ds.name_any());
            state.seen("DaemonSet", &format!("{namespace}/{name}"));
            state.put_daemonset(namespace, name, *ds);
        }
        Change::DaemonSetDeleted { namespace, name } => state.drop_daemonset(namespace, name),
        Change::ControllerApplied {
            kind,
            namespace,
            name,
            uid,
            replicas,
            desired_pods,
        } => {
            state.seen(kind, &format!("{namespace}/{name}"));
            let info = CachedController {
                uid,
                replicas,
                desired_pods,
            };
            state
                .controllers
                .insert((kind.to_string(), namespace, name), info);
        }
        Change::StorageApplied(obj) => state.put_storage(*obj),
        Change::StorageDeleted { kind, key } => state.drop_storage(kind, &key),
        Change::DraApplied(obj) => state.put_dra(*obj),
        Change::DraDeleted { kind, key } => state.drop_dra(kind, &key),
        Change::ControllerDeleted {
            kind,
            namespace,
            name,
        } => {
            state
                .controllers
                .remove(&(kind.to_string(), namespace, name));
        }
    }
    wake
}

/// An object's `namespace/name`.
pub fn namespaced_key(object: &impl ResourceExt) -> String {
    format!(
        "{}/{}",
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::time::{Duration, SystemTime};

    use serde_json::{Value, json};

    use super::*;
    use crate::cache::pod::RECENT_UNSCHEDULABLE;

    /// Now, on the tests' clock.
    fn now() -> SystemTime {
        SystemTime::from("2026-01-01T00:01:00Z".parse::<jiff::Timestamp>().unwrap())
    }

    /// A cache fed by `watches` watches, its clock at [`now`].
    struct Fixture {
        state: State,
        lists: Lists,
        clock: Clock,
    }

    impl Fixture {
        fn new(watches: usize) -> Self {
            Self {
                state: State::default(),
                lists: Lists::new(watches),
                clock: Clock::starting_at(now()),
            }
        }

        fn apply(&mut self, change: Change, nodes_upcoming: bool) -> WakeUps {
            apply(
                &mut self.state,
                change,
                &mut self.lists,
                &self.clock,
                nodes_upcoming,
            )
        }
    }

    fn pod(value: Value) -> Box<Pod> {
        Box::new(serde_json::from_value(value).unwrap())
    }

    /// A pending pod marked Unschedulable `ago` before [`now`].
    fn unschedulable(name: &str, ago: Duration) -> Box<Pod> {
        let marked = jiff::Timestamp::try_from(now() - ago).unwrap();
        pod(json!({"metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled",
                "status": "False", "reason": "Unschedulable",
                "lastTransitionTime": marked.to_string()}]}}))
    }

    /// A running pod bound to `node`.
    fn bound(name: &str, node: &str) -> Box<Pod> {
        pod(json!({"metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running"}}))
    }

    fn node(name: &str) -> Box<Node> {
        Box::new(serde_json::from_value(json!({"metadata": {"name": name}})).unwrap())
    }

    fn applied(pod: Box<Pod>) -> Change {
        Change::PodApplied { pod, listed: false }
    }

    fn none() -> WakeUps {
        WakeUps::default()
    }

    #[test]
    fn a_recently_unschedulable_pod_wakes_the_loop_and_counts_as_a_pod_event() {
        let mut f = Fixture::new(1);
        let wake = f.apply(applied(unschedulable("p", Duration::from_secs(5))), false);
        assert_eq!(
            wake,
            WakeUps {
                unschedulable_pod: true,
                pod_event: true,
                ..none()
            }
        );
        assert!(f.state.unbound.contains_key("default/p"));
        // Each change to it within the window wakes the loop again (the
        // Notify keeps one permit, so repeats cost nothing).
        let wake = f.apply(applied(unschedulable("p", Duration::from_secs(5))), false);
        assert!(wake.unschedulable_pod);
    }

    #[test]
    fn a_pod_marked_too_long_ago_or_listed_wakes_no_loop() {
        let mut f = Fixture::new(1);
        let old = RECENT_UNSCHEDULABLE + Duration::from_secs(1);
        assert_eq!(
            f.apply(applied(unschedulable("old", old)), false),
            WakeUps {
                pod_event: true,
                ..none()
            }
        );
        // A pod from a (re)list is not a pod event; a recent mark still wakes.
        let wake = f.apply(
            Change::PodApplied {
                pod: unschedulable("listed", Duration::ZERO),
                listed: true,
            },
            false,
        );
        assert_eq!(
            wake,
            WakeUps {
                unschedulable_pod: true,
                ..none()
            }
        );
        assert_eq!(f.state.unbound.len(), 2);
    }

    #[test]
    fn a_bind_wakes_pod_bound_only_while_nodes_are_upcoming_and_once() {
        let mut f = Fixture::new(1);
        f.apply(applied(unschedulable("p", Duration::from_secs(60))), true);
        // Bound while nodes are upcoming: pod_bound wakes.
        let wake = f.apply(applied(bound("p", "n1")), true);
        assert_eq!(
            wake,
            WakeUps {
                pod_bound: true,
                pod_event: true,
                ..none()
            }
        );
        assert!(f.state.unbound.is_empty());
        assert!(f.state.by_node["n1"].contains("default/p"));
        // The same event again: the pod was no longer unbound.
        assert_eq!(
            f.apply(applied(bound("p", "n1")), true),
            WakeUps {
                pod_event: true,
                ..none()
            }
        );
        // Bound with no nodes upcoming: no wake-up.
        f.apply(applied(unschedulable("q", Duration::from_secs(60))), false);
        assert!(!f.apply(applied(bound("q", "n1")), false).pod_bound);
        // A pod first seen bound was never unbound: no wake-up.
        assert!(!f.apply(applied(bound("r", "n1")), true).pod_bound);
    }

    #[test]
    fn a_succeeded_pod_is_dropped() {
        let mut f = Fixture::new(1);
        f.apply(applied(bound("p", "n1")), false);
        let mut done = bound("p", "n1");
        done.status.as_mut().unwrap().phase = Some("Succeeded".into());
        let wake = f.apply(applied(done), true);
        assert_eq!(
            wake,
            WakeUps {
                pod_event: true,
                ..none()
            },
            "a pod leaving the cache wakes no loop"
        );
        assert!(!f.state.pods.contains_key("default/p"));
        assert!(f.state.by_node["n1"].is_empty());
    }

    #[test]
    fn a_deleted_pod_leaves_the_indexes_as_a_pod_event() {
        let mut f = Fixture::new(1);
        f.apply(applied(bound("a", "n1")), false);
        f.apply(applied(unschedulable("b", Duration::ZERO)), false);
        let wake = f.apply(Change::PodDeleted("default/a".into()), true);
        assert_eq!(
            wake,
            WakeUps {
                pod_event: true,
                ..none()
            }
        );
        f.apply(Change::PodDeleted("default/b".into()), false);
        assert!(f.state.pods.is_empty());
        assert!(f.state.unbound.is_empty());
        assert!(f.state.by_node["n1"].is_empty());
    }

    #[test]
    fn a_deleted_node_leaves_the_snapshot_and_its_pods_wait_for_their_own_deletion() {
        let mut f = Fixture::new(1);
        assert_eq!(f.apply(Change::NodeApplied(node("n1")), true), none());
        f.apply(Change::NodeApplied(node("n2")), true);
        f.apply(applied(bound("p", "n1")), false);
        let infos = f.state.node_infos(0);
        assert_eq!(infos.len(), 2);
        assert_eq!((infos[0].name(), infos[0].pods.len()), ("n1", 1));
        assert_eq!(f.apply(Change::NodeDeleted("n1".into()), true), none());
        assert!(!f.state.nodes.contains_key("n1"));
        let infos = f.state.node_infos(0);
        assert_eq!(infos.len(), 1);
        assert_eq!(infos[0].name(), "n2");
        assert_eq!(f.state.pods_on("n1").len(), 1);
    }

    #[test]
    fn ready_once_every_watch_has_listed_and_a_relist_drops_what_is_gone() {
        let mut f = Fixture::new(2);
        assert_eq!(f.apply(Change::Listing("Node"), false), none());
        f.apply(Change::NodeApplied(node("n1")), false);
        f.apply(Change::NodeApplied(node("n2")), false);
        assert_eq!(f.apply(Change::Listed("Node"), false), none());
        f.apply(Change::Listing("Pod"), false);
        assert_eq!(
            f.apply(Change::Listed("Pod"), false),
            WakeUps {
                ready: true,
                ..none()
            }
        );
        // A relist without n2: n2 was deleted while the watch was down.
        f.apply(Change::Listing("Node"), false);
        f.apply(Change::NodeApplied(node("n1")), false);
        assert!(f.apply(Change::Listed("Node"), false).ready);
        assert_eq!(f.state.nodes.keys().collect::<Vec<_>>(), ["n1"]);
    }

    #[test]
    fn controllers_daemonsets_and_budgets_are_kept_by_namespace_and_name() {
        use crate::simulator::drainability::{ControllerState, Controllers};
        let mut f = Fixture::new(1);
        let wake = f.apply(
            Change::ControllerApplied {
                kind: "ReplicaSet",
                namespace: "ns".into(),
                name: "rs".into(),
                uid: "u1".into(),
                replicas: Some(3),
                desired_pods: Some(3),
            },
            true,
        );
        assert_eq!(wake, none());
        assert!(matches!(
            f.state.lookup("ReplicaSet", "ns", "rs"),
            ControllerState::Found { replicas: Some(3) }
        ));
        let ds: DaemonSet =
            serde_json::from_value(json!({"metadata": {"name": "ds", "namespace": "ns"}})).unwrap();
        f.apply(Change::DaemonSetApplied(Box::new(ds)), false);
        assert!(f.state.daemonsets.contains_key("ns/ds"));
        assert!(matches!(
            f.state.lookup("DaemonSet", "ns", "ds"),
            ControllerState::Found { replicas: None }
        ));
        let pdb: PodDisruptionBudget =
            serde_json::from_value(json!({"metadata": {"name": "b", "namespace": "ns"}})).unwrap();
        f.apply(Change::BudgetApplied(Box::new(pdb)), false);
        assert!(f.state.budgets.contains_key("ns/b"));
        f.apply(
            Change::ControllerDeleted {
                kind: "ReplicaSet",
                namespace: "ns".into(),
                name: "rs".into(),
            },
            false,
        );
        f.apply(
            Change::DaemonSetDeleted {
                namespace: "ns".into(),
                name: "ds".into(),
            },
            false,
        );
        f.apply(Change::BudgetDeleted("ns/b".into()), false);
        assert!(f.state.controllers.is_empty());
        assert!(f.state.daemonsets.is_empty());
        assert!(f.state.budgets.is_empty());
    }

    #[test]
    fn a_watch_event_maps_to_its_change() {
        let applied = |p: Pod, listed| Change::PodApplied {
            pod: Box::new(p),
            listed,
        };
        let deleted = |p: Pod| Change::PodDeleted(pod_key(&p));
        let p = *bound("p", "n1");
        assert!(matches!(
            Change::from_event("Pod", Event::Apply(p.clone()), applied, deleted),
            Change::PodApplied { listed: false, .. }
        ));
        assert!(matches!(
            Change::from_event("Pod", Event::InitApply(p.clone()), applied, deleted),
            Change::PodApplied { listed: true, .. }
        ));
        assert!(matches!(
            Change::from_event("Pod", Event::Delete(p), applied, deleted),
            Change::PodDeleted(k) if k == "default/p"
        ));
        assert!(matches!(
            Change::from_event("Pod", Event::<Pod>::Init, applied, deleted),
            Change::Listing("Pod")
        ));
        assert!(matches!(
            Change::from_event("Pod", Event::<Pod>::InitDone, applied, deleted),
            Change::Listed("Pod")
        ));
    }
}
