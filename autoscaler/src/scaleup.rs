//! Scale-up (ca-compat §4): which pending pods count, equivalence groups,
//! the binpacking estimator, node-group filtering, the expander, limits and
//! balancing of similar groups. Everything here is pure computation on the
//! snapshot; [`crate::core`] executes the plan.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use predicates::{NodeInfo, PodInfo};

use crate::cache::is_expendable;
use crate::expander::{self, Priorities, PriorityNotice, ScaleUpOption};
use crate::simulator::drainability::{controller_of, is_daemonset_pod};
use crate::simulator::{Snapshot, node_from_template};

/// `cluster-autoscaler.kubernetes.io/pod-scale-up-delay`.
pub const POD_SCALE_UP_DELAY: &str = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay";

/// Pods the scheduler could not place, or that a bypassed scheduler owns
/// (ca-compat §4.1 classification), minus expendable and nominated ones.
pub fn pending_pods<'a>(
    unbound: impl Iterator<Item = &'a Arc<Pod>>,
    expendable_cutoff: i32,
    bypassed_schedulers: &[String],
) -> Vec<Arc<Pod>> {
    unbound
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.nominated_node_name.as_deref())
                .is_none_or(str::is_empty)
        })
        .filter(|p| {
            if crate::cache::is_unschedulable(p) {
                return true;
            }
            let scheduler = p
                .spec
                .as_ref()
                .and_then(|s| s.scheduler_name.as_deref())
                .unwrap_or("default-scheduler");
            let unprocessed = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
                .is_none_or(|c| {
                    c.status == "False" && c.reason.as_deref().unwrap_or("").is_empty()
                });
            bypassed_schedulers.iter().any(|b| b == scheduler) && unprocessed
        })
        .filter(|p| !is_expendable(p, expendable_cutoff))
        .cloned()
        .collect()
}

/// Whether a pod is old enough to count: older than `--new-pod-scale-up-delay`
/// or its own (larger) `pod-scale-up-delay` annotation. An unparsable or
/// smaller annotation is logged and the flag is used.
pub fn old_enough(pod: &Pod, delay: Duration, now: SystemTime) -> bool {
    let mut d = delay;
    if let Some(v) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_SCALE_UP_DELAY))
    {
        match simclock::parse_go_duration(v) {
            Some(own) if own >= delay => d = own,
            _ => tracing::error!(
                "pod {}/{}: annotation {POD_SCALE_UP_DELAY}={v:?} is not a Go duration at least --new-pod-scale-up-delay ({}); using the flag",
                pod.metadata.namespace.as_deref().unwrap_or(""),
                pod.metadata.name.as_deref().unwrap_or(""),
                simclock::format_go_duration(delay)
            ),
        }
    }
    let created = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| SystemTime::from(t.0));
    created + d < now || (d.is_zero() && created <= now)
}

/// Pods that are the same for scheduling: same controller, labels and
/// (sanitised) spec. One check stands for the whole group.
#[derive(Debug, Clone)]
pub struct PodGroup {
    /// The pods, oldest first.
    pub pods: Vec<Arc<Pod>>,
}

impl PodGroup {
    /// The pod checked for the group.
    pub fn sample(&self) -> &Arc<Pod> {
        &self.pods[0]
    }
}

/// The spec compared for equivalence: env, hostname and projected volumes
/// (with their mounts) removed, as upstream's `PodSpecSemanticallyEqual`.
fn sanitized_spec(pod: &Pod) -> Option<k8s_openapi::api::core::v1::PodSpec> {
    let mut spec = pod.spec.clone()?;
    let projected: Vec<String> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.projected.is_some())
        .map(|v| v.name.clone())
        .collect();
    spec.hostname = None;
    spec.node_name = None;
    if let Some(vs) = spec.volumes.as_mut() {
        vs.retain(|v| v.projected.is_none());
    }
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        c.env = None;
        if let Some(ms) = c.volume_mounts.as_mut() {
            ms.retain(|m| !projected.contains(&m.name));
        }
    }
    Some(spec)
}

fn controller_uid(pod: &Pod) -> Option<&str> {
    pod.metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.iter().find(|r| r.controller == Some(true)))
        .map(|r| r.uid.as_str())
}

/// Whether two pods are the same for scheduling: same controller, equal
/// labels, and specs equal after sanitising (compared directly first, which
/// is the common case and allocates nothing).
pub fn equivalent(a: &Pod, b: &Pod) -> bool {
    controller_uid(a).is_some()
        && controller_uid(a) == controller_uid(b)
        && a.metadata.labels == b.metadata.labels
        && (a.spec == b.spec || sanitized_spec(a) == sanitized_spec(b))
}

/// Groups pods by equivalence (ca-compat §4.2): pods without a controller
/// and DaemonSet pods are alone; at most 10 groups per controller, further
/// distinct pods are alone.
pub fn equivalence_groups(pods: &[Arc<Pod>]) -> Vec<PodGroup> {
    let mut groups: Vec<PodGroup> = Vec::new();
    // Per controller uid: the first pod of each of its groups.
    let mut by_controller: HashMap<&str, Vec<(Arc<Pod>, usize)>> = HashMap::new();
    for pod in pods {
        let Some(uid) = controller_uid(pod).filter(|_| !is_daemonset_pod(pod)) else {
            groups.push(PodGroup {
                pods: vec![pod.clone()],
            });
            continue;
        };
        let known = by_controller.entry(uid).or_default();
        if let Some((_, i)) = known.iter().find(|(rep, _)| equivalent(rep, pod)) {
            groups[*i].pods.push(pod.clone());
        } else {
            if known.len() < 10 {
                known.push((pod.clone(), groups.len()));
            }
            groups.push(PodGroup {
                pods: vec![pod.clone()],
            });
        }
    }
    groups
}

/// Drops the pods that fit on existing or upcoming nodes (ca-compat §4.1
/// step 6), placing them in the snapshot for the rest of the loop. Pods go
/// by priority, highest first; once a pod of an equivalence group fits
/// nowhere, its equals are not tried again.
pub fn filter_out_schedulable(snapshot: &mut Snapshot, pods: Vec<Arc<Pod>>) -> Vec<Arc<Pod>> {
    let mut pods = pods;
    pods.sort_by_key(|p| std::cmp::Reverse(p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)));
    let mut failed: Vec<Arc<Pod>> = Vec::new();
    let mut left = Vec::new();
    let mut hint = 0;
    for pod in pods {
        if failed.iter().any(|f| equivalent(f, &pod)) {
            left.push(pod);
            continue;
        }
        let info = PodInfo::new(pod.clone());
        match snapshot.find_fit(&info, hint, |_| true) {
            Some(i) => {
                snapshot.add_pod(i, info);
                hint = i;
            }
            None => {
                if controller_of(&pod).is_some() {
                    failed.push(pod.clone());
                }
                left.push(pod);
            }
        }
    }
    left
}

/// What the estimator found for one node group.
#[derive(Debug, Clone, Default)]
pub struct Estimate {
    /// New nodes that received pods.
    pub node_count: usize,
    /// Pods placed, by key.
    pub pods: Vec<String>,
    /// Their summed CPU (milli) and memory requests.
    pub requests: (i64, i64),
}

/// The binpacking estimator (ca-compat §4.4): how many template nodes the
/// pod groups need, at most `limit` new nodes. The snapshot is left as it
/// was.
pub fn estimate(
    snapshot: &mut Snapshot,
    template: &NodeInfo,
    groups: &[&PodGroup],
    limit: usize,
    name_prefix: &str,
    time_box: Duration,
) -> Estimate {
    let started = std::time::Instant::now();
    let alloc = (
        template.allocatable.milli_cpu.max(1) as f64,
        template.allocatable.memory.max(1) as f64,
    );
    let mut ordered: Vec<&PodGroup> = groups.to_vec();
    let score = |g: &PodGroup| {
        let r = predicates::resources::pod_requests(g.sample());
        r.milli_cpu as f64 / alloc.0 + r.memory as f64 / alloc.1
    };
    ordered.sort_by(|a, b| score(b).total_cmp(&score(a)));
    snapshot.fork();
    let mut added: Vec<usize> = Vec::new();
    let mut used: Vec<bool> = Vec::new();
    let mut out = Estimate::default();
    let template_pods = template.pods.len();
    'groups: for group in ordered {
        let mut try_all = true;
        for pod in &group.pods {
            let info = PodInfo::new(pod.clone());
            let mut placed = None;
            if try_all {
                placed = added.iter().position(|&i| snapshot.fits(&info, i).is_ok());
                if placed.is_none() {
                    try_all = false;
                }
            } else if let Some(&last) = added.last()
                && snapshot.fits(&info, last).is_ok()
            {
                placed = Some(added.len() - 1);
            }
            if placed.is_none() {
                if let Some(&last) = added.last()
                    && snapshot.node(last).pods.len() == template_pods
                {
                    // Even an empty template node cannot take this pod.
                    continue 'groups;
                }
                if added.len() >= limit || started.elapsed() > time_box {
                    break 'groups;
                }
                let node = node_from_template(template, &format!("{name_prefix}-{}", added.len()));
                let i = snapshot.add_node(node);
                added.push(i);
                used.push(false);
                if snapshot.fits(&info, i).is_ok() {
                    placed = Some(added.len() - 1);
                } else {
                    continue 'groups;
                }
            }
            if let Some(k) = placed {
                out.requests.0 += info.requests.milli_cpu;
                out.requests.1 += info.requests.memory;
                out.pods.push(info.key.clone());
                snapshot.add_pod(added[k], info);
                used[k] = true;
            }
        }
    }
    out.node_count = used.iter().filter(|u| **u).count();
    snapshot.revert();
    out
}

/// A node group that scale-up may use.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Group id.
    pub id: String,
    /// Template node (with its DaemonSet/mirror pods).
    pub template: NodeInfo,
    /// Target size.
    pub target: usize,
    /// Max size.
    pub max: usize,
}

/// One group's part of a scale-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleUpInfo {
    /// Group id.
    pub group: String,
    /// Current target.
    pub current: usize,
    /// New target.
    pub new: usize,
    /// Max size.
    pub max: usize,
}

/// Cluster-wide limits (`--max-nodes-total`, `--cores-total`, `--memory-total`).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Max nodes (0: none).
    pub max_nodes_total: usize,
    /// Nodes in the snapshot (upcoming included).
    pub nodes_now: usize,
    /// Max cores and the cores now.
    pub cores: (i64, i64),
    /// Max memory bytes and the bytes now.
    pub memory: (i64, i64),
    /// `--max-nodes-per-scaleup`.
    pub max_nodes_per_scaleup: usize,
}

impl Limits {
    /// How many nodes of this shape fit under the cluster-wide limits;
    /// `Err` names the exceeded resources when not even one does.
    fn nodes_allowed(&self, template: &NodeInfo) -> Result<usize, String> {
        let cap = template
            .node
            .status
            .as_ref()
            .and_then(|s| s.capacity.as_ref());
        let res = predicates::resources::Resources::from_list(cap);
        let cores = (res.milli_cpu + 999) / 1000;
        let mut allowed = usize::MAX;
        let mut exceeded = Vec::new();
        for (name, per_node, (max, now)) in [
            ("cpu", cores, self.cores),
            ("memory", res.memory, self.memory),
        ] {
            if per_node <= 0 {
                continue;
            }
            let n = usize::try_from((max - now).max(0) / per_node).unwrap_or(0);
            if n == 0 {
                exceeded.push(name);
            }
            allowed = allowed.min(n);
        }
        if !exceeded.is_empty() {
            return Err(format!(
                "exceeded quota: \"cluster-wide\", resources: {}",
                exceeded.join(", ")
            ));
        }
        Ok(allowed)
    }
}

/// Balancing settings (`--balance-similar-node-groups` and friends).
#[derive(Debug, Clone, Default)]
pub struct Balancing {
    /// Enabled.
    pub enabled: bool,
    /// Extra ignored labels.
    pub ignore_labels: Vec<String>,
    /// Only these labels decide similarity (when non-empty).
    pub labels: Vec<String>,
    /// `--memory-difference-ratio`.
    pub memory_ratio: f64,
    /// `--max-allocatable-difference-ratio`.
    pub allocatable_ratio: f64,
    /// `--max-free-difference-ratio`.
    pub free_ratio: f64,
}

const ALWAYS_IGNORED: [&str; 7] = [
    "kubernetes.io/hostname",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "beta.kubernetes.io/fluentd-ds-ready",
    "kops.k8s.io/instancegroup",
];

fn within(a: i64, b: i64, ratio: f64) -> bool {
    let (lo, hi) = (a.min(b) as f64, a.max(b) as f64);
    hi - lo <= ratio * hi
}

/// Whether two templates are similar enough to balance (ca-compat §4.5).
pub fn similar(a: &NodeInfo, b: &NodeInfo, cfg: &Balancing) -> bool {
    let labels_a = a.labels();
    let labels_b = b.labels();
    if !cfg.labels.is_empty() {
        return cfg
            .labels
            .iter()
            .all(|l| labels_a.get(l).is_some() && labels_a.get(l) == labels_b.get(l));
    }
    let ignored =
        |k: &String| ALWAYS_IGNORED.contains(&k.as_str()) || cfg.ignore_labels.contains(k);
    let la: BTreeMap<_, _> = labels_a.iter().filter(|(k, _)| !ignored(k)).collect();
    let lb: BTreeMap<_, _> = labels_b.iter().filter(|(k, _)| !ignored(k)).collect();
    if la != lb {
        return false;
    }
    let cap = |n: &NodeInfo| {
        predicates::resources::Resources::from_list(
            n.node.status.as_ref().and_then(|s| s.capacity.as_ref()),
        )
    };
    let (ca, cb) = (cap(a), cap(b));
    if ca.milli_cpu != cb.milli_cpu
        || ca.pods != cb.pods
        || ca.scalar != cb.scalar
        || !within(ca.memory, cb.memory, cfg.memory_ratio)
    {
        return false;
    }
    let (aa, ab) = (&a.allocatable, &b.allocatable);
    if !within(aa.milli_cpu, ab.milli_cpu, cfg.allocatable_ratio)
        || !within(aa.memory, ab.memory, cfg.allocatable_ratio)
    {
        return false;
    }
    let free = |n: &NodeInfo| {
        (
            n.allocatable.milli_cpu - n.requested.milli_cpu,
            n.allocatable.memory - n.requested.memory,
        )
    };
    let (fa, fb) = (free(a), free(b));
    within(fa.0, fb.0, cfg.free_ratio) && within(fa.1, fb.1, cfg.free_ratio)
}

/// Splits `nodes` over similar groups (ca-compat §4.5): groups at max are
/// dropped; each node goes to the group with the smallest new size (ties
/// to the one with the smaller current size, then the earlier one).
pub fn balance(groups: &[(String, usize, usize)], nodes: usize) -> Vec<ScaleUpInfo> {
    let mut sizes: Vec<(String, usize, usize, usize)> = groups
        .iter()
        .filter(|(_, cur, max)| cur < max)
        .map(|(id, cur, max)| (id.clone(), *cur, *cur, *max))
        .collect();
    sizes.sort_by_key(|(_, cur, _, _)| *cur);
    let capacity: usize = sizes.iter().map(|(_, cur, _, max)| max - cur).sum();
    for _ in 0..nodes.min(capacity) {
        let pick = sizes
            .iter()
            .enumerate()
            .filter(|(_, (_, _, new, max))| new < max)
            .min_by_key(|(_, (_, _, new, _))| *new)
            .map(|(i, _)| i);
        if let Some(i) = pick {
            sizes[i].2 += 1;
        }
    }
    sizes
        .into_iter()
        .filter(|(_, cur, new, _)| new > cur)
        .map(|(group, current, new, max)| ScaleUpInfo {
            group,
            current,
            new,
            max,
        })
        .collect()
}

/// The outcome of planning.
#[derive(Debug, Clone)]
pub enum Plan {
    /// Scale these groups; these pods would be helped.
    ScaleUp {
        /// Per-group changes.
        infos: Vec<ScaleUpInfo>,
        /// The chosen option.
        option: ScaleUpOption,
        /// Options considered (for decision records).
        considered: Vec<ScaleUpOption>,
        /// Per pod key: node group → chosen, not chosen, or why rejected.
        groups: BTreeMap<String, BTreeMap<String, String>>,
    },
    /// No option: why each pod was not helped (reason → number of groups).
    NoOptions {
        /// Per pod key.
        reasons: BTreeMap<String, BTreeMap<String, usize>>,
        /// Per pod key: node group → why it was rejected.
        groups: BTreeMap<String, BTreeMap<String, String>>,
    },
}

/// Inputs of [`plan`].
pub struct PlanInputs<'a> {
    /// Pending pods still unhelped after filtering.
    pub pods: &'a [Arc<Pod>],
    /// Usable groups (healthy, not backed off, with templates).
    pub candidates: &'a [Candidate],
    /// Groups skipped before estimation, with their reason.
    pub skipped: &'a BTreeMap<String, String>,
    /// Limits.
    pub limits: &'a Limits,
    /// Expander chain.
    pub expanders: &'a [crate::config::ExpanderName],
    /// Priority expander config.
    pub priorities: Option<&'a Priorities>,
    /// Balancing.
    pub balancing: &'a Balancing,
    /// `--max-binpacking-time`: estimation of all groups together.
    pub max_binpacking_time: Duration,
    /// `--max-nodegroup-binpacking-duration`: one group's estimate.
    pub max_group_binpacking_time: Duration,
}

/// Plans one scale-up.
pub fn plan(
    snapshot: &mut Snapshot,
    inputs: &PlanInputs<'_>,
    notices: &mut Vec<PriorityNotice>,
    limit_hits: &mut Vec<String>,
) -> Plan {
    let groups = equivalence_groups(inputs.pods);
    // per_group[pod group index]: node group -> why it was rejected
    let mut per_group: Vec<BTreeMap<String, Vec<String>>> = vec![BTreeMap::new(); groups.len()];
    for g in per_group.iter_mut() {
        for (id, reason) in inputs.skipped {
            g.insert(id.clone(), vec![reason.clone()]);
        }
    }
    let mut options = Vec::new();
    let mut schedulable_on: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let started = std::time::Instant::now();
    for c in inputs.candidates {
        if started.elapsed() > inputs.max_binpacking_time {
            tracing::warn!(
                "--max-binpacking-time reached: node group {} and the ones after it are not estimated",
                c.id
            );
            break;
        }
        let remaining = c.max.saturating_sub(c.target);
        if remaining == 0 {
            for g in per_group.iter_mut() {
                g.insert(c.id.clone(), vec!["max node group size reached".into()]);
            }
            continue;
        }
        let allowed = match inputs.limits.nodes_allowed(&c.template) {
            Ok(n) => n,
            Err(reason) => {
                for g in per_group.iter_mut() {
                    g.insert(c.id.clone(), vec![reason.clone()]);
                }
                limit_hits.push(reason);
                continue;
            }
        };
        // Which pod groups can run on this template at all.
        snapshot.fork();
        let probe = snapshot.add_node(node_from_template(
            &c.template,
            &format!("template-node-for-{}", c.id),
        ));
        let mut fitting = Vec::new();
        for (i, g) in groups.iter().enumerate() {
            match snapshot.fits(&PodInfo::new(g.sample().clone()), probe) {
                Ok(()) => fitting.push(i),
                Err(rs) => {
                    per_group[i].insert(c.id.clone(), rs.iter().map(ToString::to_string).collect());
                }
            }
        }
        snapshot.revert();
        if fitting.is_empty() {
            continue;
        }
        let limit = remaining
            .min(inputs.limits.max_nodes_per_scaleup)
            .min(allowed);
        let refs: Vec<&PodGroup> = fitting.iter().map(|&i| &groups[i]).collect();
        let est = estimate(
            snapshot,
            &c.template,
            &refs,
            limit,
            &format!("template-node-for-{}", c.id),
            inputs.max_group_binpacking_time,
        );
        for &i in &fitting {
            let placed = groups[i]
                .pods
                .iter()
                .any(|p| est.pods.contains(&predicates::nodeinfo::pod_key(p)));
            let note = if placed {
                format!("option of {} node(s)", est.node_count)
            } else {
                "does not fit a new node within the limits".to_string()
            };
            per_group[i].insert(c.id.clone(), vec![note]);
        }
        if est.node_count == 0 || est.pods.is_empty() {
            continue;
        }
        schedulable_on.insert(c.id.clone(), fitting);
        let cap = predicates::resources::Resources::from_list(
            c.template
                .node
                .status
                .as_ref()
                .and_then(|s| s.capacity.as_ref()),
        );
        options.push(ScaleUpOption {
            group: c.id.clone(),
            node_count: est.node_count,
            pods: est.pods,
            pod_requests: est.requests,
            node_capacity: (cap.milli_cpu, cap.memory),
        });
    }
    let considered = options.clone();
    let chosen_option = expander::choose(inputs.expanders, options, inputs.priorities, notices);
    // The record per pod: every node group and its verdict.
    let mut by_pod_groups = BTreeMap::new();
    let mut by_pod_counts = BTreeMap::new();
    for (i, g) in groups.iter().enumerate() {
        let mut verdicts: BTreeMap<String, String> = BTreeMap::new();
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for (id, rs) in &per_group[i] {
            let is_option = considered.iter().any(|o| &o.group == id);
            let verdict = match &chosen_option {
                Some(o) if &o.group == id && is_option => "chosen".to_string(),
                Some(_) if is_option => "not chosen by the expander".to_string(),
                _ => rs.join("; "),
            };
            if !is_option {
                for r in rs {
                    *counts.entry(r.clone()).or_default() += 1;
                }
            }
            verdicts.insert(id.clone(), verdict);
        }
        for p in &g.pods {
            let key = predicates::nodeinfo::pod_key(p);
            by_pod_groups.insert(key.clone(), verdicts.clone());
            by_pod_counts.insert(key, counts.clone());
        }
    }
    let Some(option) = chosen_option else {
        return Plan::NoOptions {
            reasons: by_pod_counts,
            groups: by_pod_groups,
        };
    };
    // Cap by --max-nodes-total.
    let mut count = option.node_count;
    if inputs.limits.max_nodes_total > 0 {
        count = count.min(
            inputs
                .limits
                .max_nodes_total
                .saturating_sub(inputs.limits.nodes_now),
        );
    }
    let chosen = inputs.candidates.iter().find(|c| c.id == option.group);
    let infos = match chosen {
        None => Vec::new(),
        Some(c) if inputs.balancing.enabled => {
            let pod_groups = schedulable_on.get(&c.id).cloned().unwrap_or_default();
            let mut similar_groups = vec![(c.id.clone(), c.target, c.max)];
            for other in inputs.candidates.iter().filter(|o| o.id != c.id) {
                let same_pods = schedulable_on
                    .get(&other.id)
                    .is_some_and(|g| pod_groups.iter().all(|i| g.contains(i)));
                if same_pods && similar(&c.template, &other.template, inputs.balancing) {
                    similar_groups.push((other.id.clone(), other.target, other.max));
                }
            }
            balance(&similar_groups, count)
        }
        Some(c) => vec![ScaleUpInfo {
            group: c.id.clone(),
            current: c.target,
            new: (c.target + count).min(c.max),
            max: c.max,
        }],
    };
    Plan::ScaleUp {
        infos,
        option,
        considered,
        groups: by_pod_groups,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn pod(name: &str, owner: Option<&str>, cpu: &str) -> Arc<Pod> {
        let owners = owner.map(|o| json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": o, "uid": format!("uid-{o}"), "controller": true}]));
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": "x"}, "ownerReferences": owners,
                "creationTimestamp": "2027-01-01T00:00:00Z"},
                "spec": {"containers": [{"name": "c", "image": "i", "env": [{"name": "POD", "value": name}], "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
                "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}))
            .unwrap(),
        )
    }

    fn template(cpu: &str) -> NodeInfo {
        NodeInfo::new(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "t", "labels": {"pool": "a"}},
                "status": {"capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"}, "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}))
            .unwrap(),
        ))
    }

    #[test]
    fn equivalent_pods_share_a_group_despite_env() {
        let pods = vec![
            pod("a", Some("rs"), "1"),
            pod("b", Some("rs"), "1"),
            pod("c", Some("rs"), "2"),
            pod("d", None, "1"),
            pod("e", None, "1"),
        ];
        let groups = equivalence_groups(&pods);
        let sizes: Vec<usize> = groups.iter().map(|g| g.pods.len()).collect();
        assert_eq!(sizes, [2, 1, 1, 1]);
    }

    #[test]
    fn binpacking_counts_nodes() {
        let pods: Vec<Arc<Pod>> = (0..10)
            .map(|i| pod(&format!("p{i}"), Some("rs"), "1"))
            .collect();
        let groups = equivalence_groups(&pods);
        let refs: Vec<&PodGroup> = groups.iter().collect();
        let mut snap = Snapshot::new(Vec::new());
        // 4-CPU nodes take 4 pods each: 3 nodes for 10 pods.
        let est = estimate(
            &mut snap,
            &template("4"),
            &refs,
            100,
            "t",
            Duration::from_secs(10),
        );
        assert_eq!((est.node_count, est.pods.len()), (3, 10));
        assert_eq!(est.requests.0, 10_000);
        assert!(snap.nodes().is_empty(), "the snapshot is restored");
        // A limit of 2 nodes places 8 pods.
        let est = estimate(
            &mut snap,
            &template("4"),
            &refs,
            2,
            "t",
            Duration::from_secs(10),
        );
        assert_eq!((est.node_count, est.pods.len()), (2, 8));
        // Too big for the template: no node.
        let big = equivalence_groups(&[pod("huge", Some("rs2"), "8")]);
        let est = estimate(
            &mut snap,
            &template("4"),
            &[&big[0]],
            100,
            "t",
            Duration::from_secs(10),
        );
        assert_eq!(est.node_count, 0);
    }

    #[test]
    fn pods_fitting_existing_nodes_are_dropped() {
        let mut node = template("2");
        let n = Arc::make_mut(&mut node.node);
        n.metadata.name = Some("n1".into());
        let mut snap = Snapshot::new(vec![node]);
        let pods: Vec<Arc<Pod>> = (0..5)
            .map(|i| pod(&format!("p{i}"), Some("rs"), "1"))
            .collect();
        let left = filter_out_schedulable(&mut snap, pods);
        assert_eq!(left.len(), 3);
        assert_eq!(snap.node(0).pods.len(), 2);
    }

    #[test]
    fn balancing_splits_evenly() {
        let groups = vec![
            ("a".to_string(), 3, 10),
            ("b".to_string(), 1, 10),
            ("c".to_string(), 5, 5),
        ];
        let infos = balance(&groups, 4);
        assert_eq!(
            infos,
            [
                ScaleUpInfo {
                    group: "b".into(),
                    current: 1,
                    new: 4,
                    max: 10
                },
                ScaleUpInfo {
                    group: "a".into(),
                    current: 3,
                    new: 4,
                    max: 10
                },
            ]
        );
    }

    #[test]
    fn similarity_ignores_zone_labels_and_small_memory_differences() {
        let cfg = Balancing {
            enabled: true,
            memory_ratio: 0.015,
            allocatable_ratio: 0.05,
            free_ratio: 0.05,
            ..Default::default()
        };
        let mk = |zone: &str, mem: &str, pool: &str| {
            NodeInfo::new(Arc::new(
                serde_json::from_value(json!({"metadata": {"name": zone, "labels": {"topology.kubernetes.io/zone": zone, "pool": pool}},
                    "status": {"capacity": {"cpu": "4", "memory": mem}, "allocatable": {"cpu": "4", "memory": mem}}}))
                .unwrap(),
            ))
        };
        assert!(similar(
            &mk("a", "16000Mi", "x"),
            &mk("b", "16100Mi", "x"),
            &cfg
        ));
        assert!(!similar(&mk("a", "16Gi", "x"), &mk("b", "20Gi", "x"), &cfg));
        assert!(!similar(&mk("a", "16Gi", "x"), &mk("b", "16Gi", "y"), &cfg));
        let by_label = Balancing {
            labels: vec!["pool".into()],
            ..cfg
        };
        assert!(similar(
            &mk("a", "16Gi", "x"),
            &mk("b", "20Gi", "x"),
            &by_label
        ));
    }

    #[test]
    fn young_pods_wait() {
        let now = SystemTime::from(jiff::Timestamp::from_second(1_798_761_620).unwrap()); // 20 s after creation
        let p = pod("p", None, "1");
        assert!(old_enough(&p, Duration::ZERO, now));
        assert!(!old_enough(&p, Duration::from_secs(30), now));
        let mut annotated = (*p).clone();
        annotated.metadata.annotations =
            Some([(POD_SCALE_UP_DELAY.to_string(), "1m".to_string())].into());
        assert!(!old_enough(&annotated, Duration::from_secs(10), now));
        annotated.metadata.annotations =
            Some([(POD_SCALE_UP_DELAY.to_string(), "5s".to_string())].into());
        assert!(
            !old_enough(&annotated, Duration::from_secs(30), now),
            "a smaller annotation is ignored"
        );
    }

    #[test]
    fn pending_pods_skip_nominated_and_expendable() {
        let normal = pod("a", Some("rs"), "1");
        let mut nominated = (*pod("b", Some("rs"), "1")).clone();
        nominated.status.as_mut().unwrap().nominated_node_name = Some("n".into());
        let mut expendable = (*pod("c", Some("rs"), "1")).clone();
        expendable.spec.as_mut().unwrap().priority = Some(-100);
        let mut fresh = (*pod("d", Some("rs"), "1")).clone();
        fresh.status = None;
        let all = [
            normal,
            Arc::new(nominated),
            Arc::new(expendable),
            Arc::new(fresh),
        ];
        let left = pending_pods(all.iter(), -10, &[]);
        assert_eq!(left.len(), 1);
        let mut bypassed = (*all[3]).clone();
        bypassed.spec.as_mut().unwrap().scheduler_name = Some("custom".into());
        let with = [Arc::new(bypassed)];
        assert_eq!(
            pending_pods(with.iter(), -10, &["custom".to_string()]).len(),
            1
        );
    }

    fn inputs<'a>(
        pods: &'a [Arc<Pod>],
        candidates: &'a [Candidate],
        limits: &'a Limits,
        skipped: &'a BTreeMap<String, String>,
        balancing: &'a Balancing,
    ) -> PlanInputs<'a> {
        PlanInputs {
            pods,
            candidates,
            skipped,
            limits,
            expanders: &[crate::config::ExpanderName::LeastWaste],
            priorities: None,
            balancing,
            max_binpacking_time: Duration::from_secs(300),
            max_group_binpacking_time: Duration::from_secs(10),
        }
    }

    #[test]
    fn limits_cap_and_skip_groups() {
        let pods: Vec<Arc<Pod>> = (0..10)
            .map(|i| pod(&format!("p{i}"), Some("rs"), "1"))
            .collect();
        let candidates = vec![Candidate {
            id: "a".into(),
            template: template("4"),
            target: 0,
            max: 10,
        }];
        let skipped = BTreeMap::new();
        let balancing = Balancing::default();
        let roomy = Limits {
            max_nodes_total: 0,
            nodes_now: 0,
            cores: (320_000, 0),
            memory: (i64::MAX, 0),
            max_nodes_per_scaleup: 1000,
        };
        let mut snap = Snapshot::new(Vec::new());
        let (mut n, mut hits) = (Vec::new(), Vec::new());
        let Plan::ScaleUp { infos, .. } = plan(
            &mut snap,
            &inputs(&pods, &candidates, &roomy, &skipped, &balancing),
            &mut n,
            &mut hits,
        ) else {
            panic!("no scale-up")
        };
        assert_eq!(
            infos,
            [ScaleUpInfo {
                group: "a".into(),
                current: 0,
                new: 3,
                max: 10
            }]
        );
        // --cores-total max of 8 with 2 cores in use: one more 4-core node.
        let tight = Limits {
            cores: (8, 2),
            ..roomy.clone()
        };
        let Plan::ScaleUp { infos, .. } = plan(
            &mut snap,
            &inputs(&pods, &candidates, &tight, &skipped, &balancing),
            &mut n,
            &mut hits,
        ) else {
            panic!("no scale-up")
        };
        assert_eq!(infos[0].new, 1);
        // No room at all: the group is skipped with upstream's reason.
        let full = Limits {
            cores: (8, 8),
            ..roomy.clone()
        };
        let Plan::NoOptions { reasons, groups } = plan(
            &mut snap,
            &inputs(&pods, &candidates, &full, &skipped, &balancing),
            &mut n,
            &mut hits,
        ) else {
            panic!("scaled up past the limit")
        };
        assert_eq!(
            reasons["default/p0"],
            BTreeMap::from([(
                "exceeded quota: \"cluster-wide\", resources: cpu".to_string(),
                1
            )])
        );
        assert_eq!(hits, ["exceeded quota: \"cluster-wide\", resources: cpu"]);
        assert_eq!(
            groups["default/p0"]["a"],
            "exceeded quota: \"cluster-wide\", resources: cpu"
        );
        // --max-nodes-total caps the count.
        let capped = Limits {
            max_nodes_total: 5,
            nodes_now: 4,
            ..roomy
        };
        let Plan::ScaleUp { infos, .. } = plan(
            &mut snap,
            &inputs(&pods, &candidates, &capped, &skipped, &balancing),
            &mut n,
            &mut hits,
        ) else {
            panic!("no scale-up")
        };
        assert_eq!(infos[0].new, 1);
    }
}
