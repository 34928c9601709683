//! The drainability rules, one type per rule of upstream's
//! `simulator/drainability/rules` (each named after its package), and
//! [`DEFAULT`], the list in upstream's order. A new rule is a type here and
//! a line in [`DEFAULT`].

use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;

use super::context::{
    BlockingReason, Context, ControllerState, DrainRules, Outcome, SAFE_TO_EVICT,
    SAFE_TO_EVICT_LOCAL_VOLUMES, annotation, controller_of, is_daemonset_pod, is_long_terminating,
    is_mirror_pod, phase, pod_name, pod_ns,
};

/// One drainability rule (upstream's `rules.Rule`).
pub trait Rule {
    /// Upstream's name for the rule (its `Name()`).
    fn name(&self) -> &'static str;

    /// Whether the flags turn the rule on (upstream's `skip` in
    /// `Default()`); on unless the rule says otherwise.
    fn enabled(&self, _flags: &DrainRules) -> bool {
        true
    }

    /// The rule's verdict on a pod; [`Outcome::Undefined`] when it has no
    /// opinion and the next rule decides.
    fn drainable(&self, pod: &Pod, ctx: &Context<'_>) -> Outcome;
}

/// The rules in upstream's order (`rules.Default()`): the first with an
/// opinion wins.
pub const DEFAULT: &[&dyn Rule] = &[
    &Mirror,
    &LongTerminating,
    &ReplicaCount,
    // Interrupting checks.
    &DaemonSet,
    &SafeToEvict,
    &Terminal,
    &OnCompletion,
    // Blocking checks.
    &Replicated,
    &System,
    &NotSafeToEvict,
    &LocalStorage,
    &Pdb,
];

/// Mirror (static) pods are skipped: not moved, not evicted, not blocking
/// (upstream's `mirror`). The FAQ's flag table: kube-system pods block
/// "except for DaemonSet or mirror pods".
pub struct Mirror;

impl Rule for Mirror {
    fn name(&self) -> &'static str {
        "Mirror"
    }

    fn drainable(&self, pod: &Pod, _ctx: &Context<'_>) -> Outcome {
        if is_mirror_pod(pod) {
            Outcome::Skip
        } else {
            Outcome::Undefined
        }
    }
}

/// Pods whose deletion was requested more than their grace period + 30 s
/// ago are skipped (upstream's `longterminating`; the FAQ has no sentence
/// for it).
pub struct LongTerminating;

impl Rule for LongTerminating {
    fn name(&self) -> &'static str {
        "LongTerminating"
    }

    fn drainable(&self, pod: &Pod, ctx: &Context<'_>) -> Outcome {
        if is_long_terminating(pod, ctx.now) {
            Outcome::Skip
        } else {
            Outcome::Undefined
        }
    }
}

/// A pod whose ReplicationController, ReplicaSet, Job, StatefulSet or
/// DaemonSet is missing blocks with `ControllerNotFound`; one whose
/// ReplicationController or ReplicaSet has fewer replicas than
/// `--min-replica-count` blocks with `MinReplicasReached` (upstream's
/// `replicacount`, on with `--skip-nodes-with-custom-controller-pods`).
/// The FAQ's flag table: `--min-replica-count` is the "minimum number or
/// replicas that a replica set or replication controller should have to
/// allow their pods deletion in scale down".
pub struct ReplicaCount;

impl Rule for ReplicaCount {
    fn name(&self) -> &'static str {
        "ReplicaCount"
    }

    fn enabled(&self, flags: &DrainRules) -> bool {
        flags.skip_nodes_with_custom_controller_pods
    }

    fn drainable(&self, pod: &Pod, ctx: &Context<'_>) -> Outcome {
        let Some((kind, owner, group)) = controller_of(pod) else {
            return Outcome::Undefined;
        };
        let what = match kind {
            "ReplicationController" => "replication controller",
            "ReplicaSet" => "replica set",
            "Job" => "job",
            "StatefulSet" if group == "apps" => "statefulset",
            "DaemonSet" if group == "apps" => "daemonset",
            _ => return Outcome::Undefined,
        };
        let (ns, name) = (pod_ns(pod), pod_name(pod));
        let min = ctx.rules.min_replica_count;
        match ctx.controllers.lookup(kind, ns, owner) {
            ControllerState::NotFound => Outcome::Block(
                BlockingReason::ControllerNotFound,
                format!("{what} for {ns}/{name} is not available, err: {kind} {owner} not found"),
            ),
            ControllerState::Found { replicas: Some(r) }
                if matches!(kind, "ReplicationController" | "ReplicaSet") && r < min =>
            {
                Outcome::Block(
                    BlockingReason::MinReplicasReached,
                    format!(
                        "{ns}/{name}'s controller has {r} replicas, below the minimum of {min}"
                    ),
                )
            }
            ControllerState::Found { .. } => Outcome::Undefined,
        }
    }
}

/// DaemonSet pods can be drained (upstream's `daemonset`): the FAQ's
/// kube-system pods block only if they "are not run on the node by
/// default", and its flag table excepts "DaemonSet or mirror pods".
pub struct DaemonSet;

impl Rule for DaemonSet {
    fn name(&self) -> &'static str {
        "DaemonSet"
    }

    fn drainable(&self, pod: &Pod, _ctx: &Context<'_>) -> Outcome {
        if is_daemonset_pod(pod) {
            Outcome::DrainOk
        } else {
            Outcome::Undefined
        }
    }
}

/// `safe-to-evict: "true"` pods can be drained (upstream's `safetoevict`).
/// The FAQ: the pods marked * block "unless the pod has the following
/// annotation ... `"cluster-autoscaler.kubernetes.io/safe-to-evict":
/// "true"`".
pub struct SafeToEvict;

impl Rule for SafeToEvict {
    fn name(&self) -> &'static str {
        "SafeToEvict"
    }

    fn drainable(&self, pod: &Pod, _ctx: &Context<'_>) -> Outcome {
        if annotation(pod, SAFE_TO_EVICT) == Some("true") {
            Outcome::DrainOk
        } else {
            Outcome::Undefined
        }
    }
}

/// Pods that will not run again (failed, or succeeded with restart policy
/// `Never` or `OnFailure`) can be drained (upstream's `terminal`; the FAQ
/// has no sentence for it).
pub struct Terminal;

impl Rule for Terminal {
    fn name(&self) -> &'static str {
        "Terminal"
    }

    fn drainable(&self, pod: &Pod, _ctx: &Context<'_>) -> Outcome {
        let restart = pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.as_deref())
            .unwrap_or("Always");
        match (restart, phase(pod)) {
            (_, "Failed") | ("Never" | "OnFailure", "Succeeded") => Outcome::DrainOk,
            _ => Outcome::Undefined,
        }
    }
}

/// `safe-to-evict: "on-completion"` pods are not evicted: the node waits
/// for them to complete (upstream's `oncompletion`; the FAQ has no
/// sentence for it yet).
pub struct OnCompletion;

impl Rule for OnCompletion {
    fn name(&self) -> &'static str {
        "OnCompletion"
    }

    fn drainable(&self, pod: &Pod, _ctx: &Context<'_>) -> Outcome {
        if annotation(pod, SAFE_TO_EVICT) == Some("on-completion") {
            Outcome::WaitForCompletion
        } else {
            Outcome::Undefined
        }
    }
}

/// Pods without a controller block with `NotReplicated`, and so do pods of
/// custom controllers under `--skip-nodes-with-custom-controller-pods`
/// (upstream's `replicated`). The FAQ: "Pods that are not backed by a
/// controller object (so not created by deployment, replica set, job,
/// stateful set etc)".
pub struct Replicated;

impl Rule for Replicated {
    fn name(&self) -> &'static str {
        "Replicated"
    }

    fn drainable(&self, pod: &Pod, ctx: &Context<'_>) -> Outcome {
        let replicated = controller_of(pod).is_some_and(|(kind, _, _)| {
            !ctx.rules.skip_nodes_with_custom_controller_pods
                || matches!(
                    kind,
                    "ReplicationController" | "Job" | "ReplicaSet" | "StatefulSet"
                )
        });
        if replicated {
            return Outcome::Undefined;
        }
        Outcome::Block(
            BlockingReason::NotReplicated,
            format!("{}/{} is not replicated", pod_ns(pod), pod_name(pod)),
        )
    }
}

/// kube-system pods no budget selects block with `UnmovableKubeSystemPod`
/// until `--blocking-system-pod-distruption-timeout` after their creation,
/// and can be drained past it (upstream's `system`, on with
/// `--skip-nodes-with-system-pods`). The FAQ: "Kube-system pods that ...
/// don't have a pod disruption budget set".
pub struct System;

impl Rule for System {
    fn name(&self) -> &'static str {
        "System"
    }

    fn enabled(&self, flags: &DrainRules) -> bool {
        flags.skip_nodes_with_system_pods
    }

    fn drainable(&self, pod: &Pod, ctx: &Context<'_>) -> Outcome {
        if pod_ns(pod) != "kube-system" || ctx.budgets.selecting(pod).next().is_some() {
            return Outcome::Undefined;
        }
        let created = pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| SystemTime::from(t.0));
        match created {
            Some(c) if c + ctx.rules.system_pod_timeout < ctx.now => Outcome::DrainOk,
            _ => Outcome::Block(
                BlockingReason::UnmovableKubeSystemPod,
                format!(
                    "non-daemonset, non-mirrored, non-pdb-assigned kube-system pod present: {}",
                    pod_name(pod)
                ),
            ),
        }
    }
}

/// `safe-to-evict: "false"` pods block with `NotSafeToEvictAnnotation`
/// (upstream's `notsafetoevict`). The FAQ: "Pods that have the following
/// annotation set: `"cluster-autoscaler.kubernetes.io/safe-to-evict":
/// "false"`".
pub struct NotSafeToEvict;

impl Rule for NotSafeToEvict {
    fn name(&self) -> &'static str {
        "NotSafeToEvict"
    }

    fn drainable(&self, pod: &Pod, _ctx: &Context<'_>) -> Outcome {
        if annotation(pod, SAFE_TO_EVICT) != Some("false") {
            return Outcome::Undefined;
        }
        Outcome::Block(
            BlockingReason::NotSafeToEvictAnnotation,
            format!(
                "pod annotated as not safe to evict present: {}",
                pod_name(pod)
            ),
        )
    }
}

/// Pods with local storage (`hostPath`, or `emptyDir` not in memory) block
/// with `LocalStorageRequested` (upstream's `localstorage`, on with
/// `--skip-nodes-with-local-storage`). The FAQ: "Pods with local storage
/// ... unless the pod has the following annotation set:
/// `"cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"` ...
/// and all of the pod's local volumes are listed in the annotation value".
pub struct LocalStorage;

impl Rule for LocalStorage {
    fn name(&self) -> &'static str {
        "LocalStorage"
    }

    fn enabled(&self, flags: &DrainRules) -> bool {
        flags.skip_nodes_with_local_storage
    }

    fn drainable(&self, pod: &Pod, _ctx: &Context<'_>) -> Outcome {
        let allowed: Vec<&str> = annotation(pod, SAFE_TO_EVICT_LOCAL_VOLUMES)
            .map(|v| v.split(',').collect())
            .unwrap_or_default();
        let blocking = pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .any(|v| {
                let local = v.host_path.is_some()
                    || v.empty_dir
                        .as_ref()
                        .is_some_and(|e| e.medium.as_deref() != Some("Memory"));
                local && !allowed.contains(&v.name.as_str())
            });
        if !blocking {
            return Outcome::Undefined;
        }
        Outcome::Block(
            BlockingReason::LocalStorageRequested,
            format!("pod with local storage present: {}", pod_name(pod)),
        )
    }
}

/// Pods a budget with no disruptions left selects block with
/// `NotEnoughPdb` (upstream's `pdb`). The FAQ: "Pods with restrictive
/// PodDisruptionBudget".
pub struct Pdb;

impl Rule for Pdb {
    fn name(&self) -> &'static str {
        "PDB"
    }

    fn drainable(&self, pod: &Pod, ctx: &Context<'_>) -> Outcome {
        let exhausted = ctx
            .budgets
            .selecting(pod)
            .any(|b| b.disruptions_allowed < 1);
        if !exhausted {
            return Outcome::Undefined;
        }
        Outcome::Block(
            BlockingReason::NotEnoughPdb,
            format!(
                "not enough pod disruption budget to move {}/{}",
                pod_ns(pod),
                pod_name(pod)
            ),
        )
    }
}
