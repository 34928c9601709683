//! Drainability: which pods block removing their node (ca-compat §2). The
//! rules run in upstream's order and the first with an opinion wins:
//!
//! | # | rule | outcome |
//! |---|---|---|
//! | 1 | Mirror | skip |
//! | 2 | LongTerminating | skip |
//! | 3 | ReplicaCount (`--skip-nodes-with-custom-controller-pods`) | block `ControllerNotFound` / `MinReplicasReached` |
//! | 4 | DaemonSet | drain ok |
//! | 5 | SafeToEvict (`"true"`) | drain ok |
//! | 6 | Terminal | drain ok |
//! | 7 | OnCompletion (`"on-completion"`) | wait for completion |
//! | 8 | Replicated | block `NotReplicated` |
//! | 9 | System (`--skip-nodes-with-system-pods`) | block `UnmovableKubeSystemPod`, or drain ok past the timeout |
//! | 10 | NotSafeToEvict (`"false"`) | block `NotSafeToEvictAnnotation` |
//! | 11 | LocalStorage (`--skip-nodes-with-local-storage`) | block `LocalStorageRequested` |
//! | 12 | PDB | block `NotEnoughPdb` |

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use predicates::labels::{labels_of, selector_matches};

/// `cluster-autoscaler.kubernetes.io/safe-to-evict`.
pub const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
/// `cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes`.
pub const SAFE_TO_EVICT_LOCAL_VOLUMES: &str =
    "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes";
/// `cluster-autoscaler.kubernetes.io/daemonset-pod`.
pub const DAEMONSET_POD: &str = "cluster-autoscaler.kubernetes.io/daemonset-pod";
/// `kubernetes.io/config.mirror`.
pub const MIRROR: &str = "kubernetes.io/config.mirror";

/// Why a pod blocks its node (`BlockingPodReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BlockingReason {
    /// `ControllerNotFound`.
    ControllerNotFound,
    /// `MinReplicasReached`.
    MinReplicasReached,
    /// `NotReplicated`.
    NotReplicated,
    /// `LocalStorageRequested`.
    LocalStorageRequested,
    /// `NotSafeToEvictAnnotation`.
    NotSafeToEvictAnnotation,
    /// `UnmovableKubeSystemPod`.
    UnmovableKubeSystemPod,
    /// `NotEnoughPdb`.
    NotEnoughPdb,
    /// `UnexpectedError`.
    UnexpectedError,
}

impl BlockingReason {
    /// Upstream's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ControllerNotFound => "ControllerNotFound",
            Self::MinReplicasReached => "MinReplicasReached",
            Self::NotReplicated => "NotReplicated",
            Self::LocalStorageRequested => "LocalStorageRequested",
            Self::NotSafeToEvictAnnotation => "NotSafeToEvictAnnotation",
            Self::UnmovableKubeSystemPod => "UnmovableKubeSystemPod",
            Self::NotEnoughPdb => "NotEnoughPdb",
            Self::UnexpectedError => "UnexpectedError",
        }
    }
}

/// A rule's verdict on a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// No rule decided: the pod is drainable.
    Undefined,
    /// The pod can be moved.
    DrainOk,
    /// The pod blocks its node.
    Block(BlockingReason, String),
    /// The pod is ignored (not moved, not evicted, not blocking).
    Skip,
    /// The node waits until the pod completes.
    WaitForCompletion,
}

/// What the cluster says about a pod's controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControllerState {
    /// It exists; `replicas` when the kind has a replica count.
    Found {
        /// `spec.replicas`.
        replicas: Option<i32>,
    },
    /// It does not exist.
    NotFound,
}

/// Looks up controllers (ReplicaSet, ReplicationController, Job,
/// StatefulSet, DaemonSet) by kind, namespace and name.
pub trait Controllers {
    /// The controller's state.
    fn lookup(&self, kind: &str, namespace: &str, name: &str) -> ControllerState;
}

/// A PodDisruptionBudget as the rules need it, with its remaining
/// disruptions (charged as nodes are found removable in one pass).
#[derive(Debug, Clone)]
pub struct Budget {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Selector.
    pub selector: LabelSelector,
    /// Remaining `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
}

impl Budget {
    /// Whether the budget selects the pod.
    pub fn selects(&self, pod: &Pod) -> bool {
        pod.metadata.namespace.as_deref().unwrap_or("default") == self.namespace
            && selector_matches(&self.selector, labels_of(pod.metadata.labels.as_ref()))
    }
}

/// The drainability flags. The planner and the actuator's re-check read
/// the same rules, built once from the flags.
#[derive(Debug, Clone, Copy)]
pub struct DrainRules {
    /// `--skip-nodes-with-system-pods`.
    pub skip_nodes_with_system_pods: bool,
    /// `--skip-nodes-with-local-storage`.
    pub skip_nodes_with_local_storage: bool,
    /// `--skip-nodes-with-custom-controller-pods`.
    pub skip_nodes_with_custom_controller_pods: bool,
    /// `--min-replica-count`.
    pub min_replica_count: i32,
    /// `--blocking-system-pod-distruption-timeout`.
    pub system_pod_timeout: Duration,
}

impl DrainRules {
    /// The rules the flags set.
    pub fn from_flags(f: &crate::config::Flags) -> Self {
        Self {
            skip_nodes_with_system_pods: f.skip_nodes_with_system_pods,
            skip_nodes_with_local_storage: f.skip_nodes_with_local_storage,
            skip_nodes_with_custom_controller_pods: f.skip_nodes_with_custom_controller_pods,
            min_replica_count: f.min_replica_count,
            system_pod_timeout: f.blocking_system_pod_distruption_timeout,
        }
    }
}

impl Default for DrainRules {
    /// CA's defaults.
    fn default() -> Self {
        Self {
            skip_nodes_with_system_pods: true,
            skip_nodes_with_local_storage: true,
            skip_nodes_with_custom_controller_pods: true,
            min_replica_count: 0,
            system_pod_timeout: Duration::from_secs(3600),
        }
    }
}

/// The rules and the cluster facts they read.
pub struct Context<'a> {
    /// Now.
    pub now: SystemTime,
    /// The flags' rules.
    pub rules: DrainRules,
    /// Budgets in the cluster.
    pub budgets: &'a [Budget],
    /// Controller lookups.
    pub controllers: &'a dyn Controllers,
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The owner reference marked `controller: true`.
pub fn controller_ref(pod: &Pod) -> Option<&OwnerReference> {
    pod.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// The controller's uid.
pub fn controller_uid(pod: &Pod) -> Option<&str> {
    controller_ref(pod).map(|r| r.uid.as_str())
}

/// The controller owner reference (kind, name, api group).
pub fn controller_of(pod: &Pod) -> Option<(&str, &str, &str)> {
    controller_ref(pod).map(|r| {
        let group = r.api_version.split_once('/').map_or("", |(g, _)| g);
        (r.kind.as_str(), r.name.as_str(), group)
    })
}

/// Whether a pod is a DaemonSet pod (controller kind DaemonSet, or the
/// `daemonset-pod: "true"` annotation).
pub fn is_daemonset_pod(pod: &Pod) -> bool {
    controller_of(pod).is_some_and(|(k, _, _)| k == "DaemonSet")
        || annotation(pod, DAEMONSET_POD) == Some("true")
}

/// Whether a pod is a mirror (static) pod.
pub fn is_mirror_pod(pod: &Pod) -> bool {
    annotation(pod, MIRROR).is_some()
}

/// Whether deletion was requested more than grace period + 30 s ago.
pub fn is_long_terminating(pod: &Pod, now: SystemTime) -> bool {
    let Some(ts) = pod.metadata.deletion_timestamp.as_ref() else {
        return false;
    };
    let grace = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    let grace = Duration::from_secs(u64::try_from(grace).unwrap_or(0));
    SystemTime::from(ts.0) + grace + Duration::from_secs(30) < now
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn pod_name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("")
}

fn pod_ns(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

fn has_blocking_local_storage(pod: &Pod) -> bool {
    let allowed: Vec<&str> = annotation(pod, SAFE_TO_EVICT_LOCAL_VOLUMES)
        .map(|v| v.split(',').collect())
        .unwrap_or_default();
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|v| {
            let local = v.host_path.is_some()
                || v.empty_dir
                    .as_ref()
                    .is_some_and(|e| e.medium.as_deref() != Some("Memory"));
            local && !allowed.contains(&v.name.as_str())
        })
}

/// Runs the rule chain on one pod.
pub fn evaluate(pod: &Pod, ctx: &Context<'_>) -> Outcome {
    let (ns, name) = (pod_ns(pod), pod_name(pod));
    // 1. Mirror.
    if is_mirror_pod(pod) {
        return Outcome::Skip;
    }
    // 2. LongTerminating.
    if is_long_terminating(pod, ctx.now) {
        return Outcome::Skip;
    }
    // 3. ReplicaCount.
    if ctx.rules.skip_nodes_with_custom_controller_pods
        && let Some((kind, owner, group)) = controller_of(pod)
    {
        let checked = match kind {
            "ReplicationController" | "ReplicaSet" | "Job" => true,
            "StatefulSet" | "DaemonSet" => group == "apps",
            _ => false,
        };
        if checked {
            match ctx.controllers.lookup(kind, ns, owner) {
                ControllerState::NotFound => {
                    let what = match kind {
                        "ReplicationController" => "replication controller",
                        "ReplicaSet" => "replica set",
                        "Job" => "job",
                        "StatefulSet" => "statefulset",
                        _ => "daemonset",
                    };
                    return Outcome::Block(
                        BlockingReason::ControllerNotFound,
                        format!(
                            "{what} for {ns}/{name} is not available, err: {kind} {owner} not found"
                        ),
                    );
                }
                ControllerState::Found { replicas: Some(r) }
                    if matches!(kind, "ReplicationController" | "ReplicaSet")
                        && r < ctx.rules.min_replica_count =>
                {
                    return Outcome::Block(
                        BlockingReason::MinReplicasReached,
                        format!(
                            "{ns}/{name}'s controller has {r} replicas, below the minimum of {}",
                            ctx.rules.min_replica_count
                        ),
                    );
                }
                ControllerState::Found { .. } => {}
            }
        }
    }
    // 4. DaemonSet.
    if is_daemonset_pod(pod) {
        return Outcome::DrainOk;
    }
    let safe_to_evict = annotation(pod, SAFE_TO_EVICT);
    // 5. SafeToEvict.
    if safe_to_evict == Some("true") {
        return Outcome::DrainOk;
    }
    // 6. Terminal.
    let restart = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    let terminal = matches!(
        (restart, phase(pod)),
        (_, "Failed") | ("Never" | "OnFailure", "Succeeded")
    );
    if terminal {
        return Outcome::DrainOk;
    }
    // 7. OnCompletion.
    if safe_to_evict == Some("on-completion") {
        return Outcome::WaitForCompletion;
    }
    // 8. Replicated.
    let replicated = match controller_of(pod) {
        None => false,
        Some((kind, _, _)) => {
            !ctx.rules.skip_nodes_with_custom_controller_pods
                || matches!(
                    kind,
                    "ReplicationController" | "Job" | "ReplicaSet" | "StatefulSet"
                )
        }
    };
    if !replicated {
        return Outcome::Block(
            BlockingReason::NotReplicated,
            format!("{ns}/{name} is not replicated"),
        );
    }
    // 9. System.
    if ctx.rules.skip_nodes_with_system_pods
        && ns == "kube-system"
        && !ctx.budgets.iter().any(|b| b.selects(pod))
    {
        let created = pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| SystemTime::from(t.0));
        return match created {
            Some(c) if c + ctx.rules.system_pod_timeout < ctx.now => Outcome::DrainOk,
            _ => Outcome::Block(
                BlockingReason::UnmovableKubeSystemPod,
                format!(
                    "non-daemonset, non-mirrored, non-pdb-assigned kube-system pod present: {name}"
                ),
            ),
        };
    }
    // 10. NotSafeToEvict.
    if safe_to_evict == Some("false") {
        return Outcome::Block(
            BlockingReason::NotSafeToEvictAnnotation,
            format!("pod annotated as not safe to evict present: {name}"),
        );
    }
    // 11. LocalStorage.
    if ctx.rules.skip_nodes_with_local_storage && has_blocking_local_storage(pod) {
        return Outcome::Block(
            BlockingReason::LocalStorageRequested,
            format!("pod with local storage present: {name}"),
        );
    }
    // 12. PDB.
    if ctx
        .budgets
        .iter()
        .any(|b| b.selects(pod) && b.disruptions_allowed < 1)
    {
        return Outcome::Block(
            BlockingReason::NotEnoughPdb,
            format!("not enough pod disruption budget to move {ns}/{name}"),
        );
    }
    Outcome::Undefined
}

/// The pods of a node sorted by what removal does with them.
#[derive(Debug, Clone, Default)]
pub struct NodeDrain {
    /// Pods that must be rescheduled elsewhere.
    pub pods_to_move: Vec<Arc<Pod>>,
    /// DaemonSet pods (evicted per the DaemonSet eviction flags).
    pub daemonset_pods: Vec<Arc<Pod>>,
    /// `safe-to-evict: on-completion` pods.
    pub on_completion: Vec<Arc<Pod>>,
}

/// A pod that blocks its node.
#[derive(Debug, Clone)]
pub struct BlockingPod {
    /// The pod.
    pub pod: Arc<Pod>,
    /// Why.
    pub reason: BlockingReason,
    /// Upstream's error text.
    pub message: String,
}

/// Sorts a node's pods (`GetPodsToMove`); the first blocking pod stops the
/// evaluation.
pub fn pods_to_move(pods: &[Arc<Pod>], ctx: &Context<'_>) -> Result<NodeDrain, BlockingPod> {
    let mut out = NodeDrain::default();
    for pod in pods {
        match evaluate(pod, ctx) {
            Outcome::Undefined | Outcome::DrainOk => {
                if is_daemonset_pod(pod) {
                    out.daemonset_pods.push(pod.clone());
                } else {
                    out.pods_to_move.push(pod.clone());
                }
            }
            Outcome::WaitForCompletion => out.on_completion.push(pod.clone()),
            Outcome::Skip => {}
            Outcome::Block(reason, message) => {
                return Err(BlockingPod {
                    pod: pod.clone(),
                    reason,
                    message,
                });
            }
        }
    }
    Ok(out)
}

/// Charges the budgets for pods that would be evicted; returns whether
/// some budget is exceeded by this node alone (a "risky" node).
pub fn charge_budgets(budgets: &mut [Budget], pods: &[Arc<Pod>]) -> bool {
    let mut counts: BTreeMap<usize, i32> = BTreeMap::new();
    for pod in pods {
        for (i, b) in budgets.iter().enumerate() {
            if b.selects(pod) {
                *counts.entry(i).or_default() += 1;
            }
        }
    }
    let mut risky = false;
    for (i, n) in counts {
        risky |= n > budgets[i].disruptions_allowed;
        budgets[i].disruptions_allowed -= n;
    }
    risky
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::{Value, json};

    struct Fake(Vec<(&'static str, &'static str, Option<i32>)>);

    impl Controllers for Fake {
        fn lookup(&self, kind: &str, _ns: &str, name: &str) -> ControllerState {
            self.0
                .iter()
                .find(|(k, n, _)| *k == kind && *n == name)
                .map_or(ControllerState::NotFound, |(_, _, r)| {
                    ControllerState::Found { replicas: *r }
                })
        }
    }

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    fn pod(extra: Value) -> Pod {
        let mut base = json!({
            "metadata": {"name": "p", "namespace": "default", "creationTimestamp": "2027-01-15T08:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true}]},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running"}
        });
        merge(&mut base, extra);
        serde_json::from_value(base).unwrap()
    }

    fn merge(a: &mut Value, b: Value) {
        match (a, b) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    fn check(p: &Pod, budgets: &[Budget], flags: (bool, bool, bool)) -> Outcome {
        let controllers = Fake(vec![
            ("ReplicaSet", "rs", Some(3)),
            ("DaemonSet", "ds", None),
        ]);
        let ctx = Context {
            now: now(),
            rules: DrainRules {
                skip_nodes_with_system_pods: flags.0,
                skip_nodes_with_local_storage: flags.1,
                skip_nodes_with_custom_controller_pods: flags.2,
                ..DrainRules::default()
            },
            budgets,
            controllers: &controllers,
        };
        evaluate(p, &ctx)
    }

    const DEFAULTS: (bool, bool, bool) = (true, true, true);

    fn reason(o: Outcome) -> Option<BlockingReason> {
        match o {
            Outcome::Block(r, _) => Some(r),
            _ => None,
        }
    }

    #[test]
    fn a_replicated_pod_is_drainable() {
        assert_eq!(check(&pod(json!({})), &[], DEFAULTS), Outcome::Undefined);
    }

    #[test]
    fn mirror_and_long_terminating_pods_are_skipped() {
        let mirror =
            pod(json!({"metadata": {"annotations": {MIRROR: "x"}, "ownerReferences": null}}));
        assert_eq!(check(&mirror, &[], DEFAULTS), Outcome::Skip);
        let old = pod(
            json!({"metadata": {"deletionTimestamp": "2027-01-15T07:00:00Z", "ownerReferences": null}}),
        );
        assert_eq!(check(&old, &[], DEFAULTS), Outcome::Skip);
        // Deleted 10 s ago with a 30 s grace period: not long terminating.
        let recent = pod(
            json!({"metadata": {"deletionTimestamp": "2027-01-15T07:59:50Z", "ownerReferences": null}}),
        );
        assert_eq!(
            reason(check(&recent, &[], DEFAULTS)),
            Some(BlockingReason::NotReplicated)
        );
    }

    #[test]
    fn a_missing_controller_blocks_unless_custom_controller_checks_are_off() {
        let orphan = pod(
            json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone", "uid": "u", "controller": true}]}}),
        );
        assert_eq!(
            reason(check(&orphan, &[], DEFAULTS)),
            Some(BlockingReason::ControllerNotFound)
        );
        assert_eq!(check(&orphan, &[], (true, true, false)), Outcome::Undefined);
        // ...even with safe-to-evict: the controller rule comes first.
        let safe = pod(
            json!({"metadata": {"annotations": {SAFE_TO_EVICT: "true"}, "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone", "uid": "u", "controller": true}]}}),
        );
        assert_eq!(
            reason(check(&safe, &[], DEFAULTS)),
            Some(BlockingReason::ControllerNotFound)
        );
    }

    #[test]
    fn min_replica_count_blocks_small_replica_sets() {
        let controllers = Fake(vec![("ReplicaSet", "rs", Some(3))]);
        let ctx = |min| Context {
            now: now(),
            rules: DrainRules {
                min_replica_count: min,
                ..DrainRules::default()
            },
            budgets: &[],
            controllers: &controllers,
        };
        assert_eq!(
            reason(evaluate(&pod(json!({})), &ctx(5))),
            Some(BlockingReason::MinReplicasReached)
        );
        assert_eq!(evaluate(&pod(json!({})), &ctx(3)), Outcome::Undefined);
    }

    #[test]
    fn daemonset_and_safe_to_evict_pods_drain() {
        let ds = pod(
            json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": true}]}}),
        );
        assert_eq!(check(&ds, &[], DEFAULTS), Outcome::DrainOk);
        let bare_safe = pod(
            json!({"metadata": {"annotations": {SAFE_TO_EVICT: "true"}, "ownerReferences": null}, "spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}),
        );
        assert_eq!(check(&bare_safe, &[], DEFAULTS), Outcome::DrainOk);
    }

    #[test]
    fn unreplicated_pods_block_and_report_not_replicated_first() {
        let bare = pod(
            json!({"metadata": {"ownerReferences": null, "annotations": {SAFE_TO_EVICT: "false"}}}),
        );
        assert_eq!(
            reason(check(&bare, &[], DEFAULTS)),
            Some(BlockingReason::NotReplicated)
        );
        let on_completion = pod(
            json!({"metadata": {"ownerReferences": null, "annotations": {SAFE_TO_EVICT: "on-completion"}}}),
        );
        assert_eq!(
            check(&on_completion, &[], DEFAULTS),
            Outcome::WaitForCompletion
        );
    }

    #[test]
    fn kube_system_pods_block_for_an_hour_without_a_budget() {
        let young = pod(
            json!({"metadata": {"namespace": "kube-system", "creationTimestamp": "2027-01-15T07:30:00Z"}}),
        );
        assert_eq!(
            reason(check(&young, &[], DEFAULTS)),
            Some(BlockingReason::UnmovableKubeSystemPod)
        );
        assert_eq!(check(&young, &[], (false, true, true)), Outcome::Undefined);
        let old = pod(
            json!({"metadata": {"namespace": "kube-system", "creationTimestamp": "2027-01-15T06:00:00Z", "annotations": {SAFE_TO_EVICT: "false"}}}),
        );
        assert_eq!(
            check(&old, &[], DEFAULTS),
            Outcome::DrainOk,
            "past the timeout, later rules are not consulted"
        );
        let budget = Budget {
            namespace: "kube-system".into(),
            name: "b".into(),
            selector: serde_json::from_value(json!({"matchLabels": {"app": "dns"}})).unwrap(),
            disruptions_allowed: 1,
        };
        let covered = pod(
            json!({"metadata": {"namespace": "kube-system", "creationTimestamp": "2027-01-15T07:30:00Z", "labels": {"app": "dns"}}}),
        );
        assert_eq!(check(&covered, &[budget], DEFAULTS), Outcome::Undefined);
    }

    #[test]
    fn not_safe_to_evict_blocks() {
        let p = pod(json!({"metadata": {"annotations": {SAFE_TO_EVICT: "false"}}}));
        let o = check(&p, &[], DEFAULTS);
        assert_eq!(
            o,
            Outcome::Block(
                BlockingReason::NotSafeToEvictAnnotation,
                "pod annotated as not safe to evict present: p".into()
            )
        );
    }

    #[test]
    fn local_storage_blocks_unless_listed_or_in_memory() {
        let disk = pod(
            json!({"spec": {"volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "ram", "emptyDir": {"medium": "Memory"}}]}}),
        );
        assert_eq!(
            reason(check(&disk, &[], DEFAULTS)),
            Some(BlockingReason::LocalStorageRequested)
        );
        assert_eq!(check(&disk, &[], (true, false, true)), Outcome::Undefined);
        let listed = pod(
            json!({"metadata": {"annotations": {SAFE_TO_EVICT_LOCAL_VOLUMES: "scratch"}}, "spec": {"volumes": [{"name": "scratch", "emptyDir": {}}]}}),
        );
        assert_eq!(check(&listed, &[], DEFAULTS), Outcome::Undefined);
        let host = pod(
            json!({"metadata": {"annotations": {SAFE_TO_EVICT_LOCAL_VOLUMES: "other"}}, "spec": {"volumes": [{"name": "h", "hostPath": {"path": "/x"}}]}}),
        );
        assert_eq!(
            reason(check(&host, &[], DEFAULTS)),
            Some(BlockingReason::LocalStorageRequested)
        );
    }

    #[test]
    fn exhausted_budgets_block_and_charging_finds_risky_nodes() {
        let mut budgets = vec![Budget {
            namespace: "default".into(),
            name: "web".into(),
            selector: serde_json::from_value(json!({"matchLabels": {"app": "web"}})).unwrap(),
            disruptions_allowed: 1,
        }];
        let web = Arc::new(pod(json!({"metadata": {"labels": {"app": "web"}}})));
        assert_eq!(check(&web, &budgets, DEFAULTS), Outcome::Undefined);
        assert!(!charge_budgets(&mut budgets, std::slice::from_ref(&web)));
        assert_eq!(
            reason(check(&web, &budgets, DEFAULTS)),
            Some(BlockingReason::NotEnoughPdb)
        );
        assert!(
            charge_budgets(&mut budgets, &[web.clone(), web]),
            "two pods against a used-up budget"
        );
    }

    #[test]
    fn pods_are_sorted_into_lists() {
        let controllers = Fake(vec![
            ("ReplicaSet", "rs", Some(3)),
            ("DaemonSet", "ds", None),
        ]);
        let ctx = Context {
            now: now(),
            rules: DrainRules::default(),
            budgets: &[],
            controllers: &controllers,
        };
        let pods = vec![
            Arc::new(pod(json!({}))),
            Arc::new(pod(
                json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": true}]}}),
            )),
            Arc::new(pod(json!({"metadata": {"annotations": {MIRROR: "x"}}}))),
        ];
        let d = pods_to_move(&pods, &ctx).unwrap();
        assert_eq!(
            (
                d.pods_to_move.len(),
                d.daemonset_pods.len(),
                d.on_completion.len()
            ),
            (1, 1, 0)
        );
        let blocked = vec![
            pods[0].clone(),
            Arc::new(pod(json!({"metadata": {"ownerReferences": null}}))),
        ];
        assert_eq!(
            pods_to_move(&blocked, &ctx).unwrap_err().reason,
            BlockingReason::NotReplicated
        );
    }
}
