//! Pod equivalence groups (docs/reference/ca-rules.md §4.2, upstream's
//! `core/scaleup/equivalence`): pods of one controller with the same labels
//! and scheduling spec are checked once for the whole group.

use std::cell::OnceCell;
use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use predicates::PodInfo;

use crate::simulator::drainability::{controller_uid, is_daemonset_pod};

/// Pods that are the same for scheduling: same controller, labels and
/// (sanitised) spec. One check stands for the whole group.
#[derive(Debug, Clone)]
pub struct PodGroup {
    /// The pods, oldest first.
    pub pods: Vec<PodInfo>,
}

impl PodGroup {
    /// The pod checked for the group.
    pub fn sample(&self) -> &PodInfo {
        &self.pods[0]
    }
}

/// The spec compared for equivalence: env, hostname and projected volumes
/// (with their mounts) removed, as upstream's `PodSpecSemanticallyEqual`.
fn sanitized_spec(pod: &Pod) -> Option<PodSpec> {
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

/// Whether two pods are the same for scheduling: same controller, equal
/// labels, the same requests and host ports, and specs equal after
/// sanitising (compared directly first, which is the common case and
/// allocates nothing). The requests and ports stand for the containers,
/// which compact pods ([`PodInfo::compact`](predicates::PodInfo::compact)) no longer have.
pub fn equivalent(a: &PodInfo, b: &PodInfo) -> bool {
    Compared::new(a).equivalent(&Compared::new(b))
}

/// A pod as [`equivalent`] compares it, its sanitised spec made at most
/// once however many pods it is compared with (a pod made by a controller
/// has a projected token volume of its own name, so pods of one controller
/// differ until sanitised).
pub struct Compared<P> {
    /// The pod.
    pub pod: P,
    sanitized: OnceCell<Option<PodSpec>>,
}

impl<P: std::borrow::Borrow<PodInfo>> Compared<P> {
    /// `pod`, its spec not sanitised yet.
    pub fn new(pod: P) -> Self {
        Self {
            pod,
            sanitized: OnceCell::new(),
        }
    }

    fn sanitized(&self) -> &Option<PodSpec> {
        self.sanitized
            .get_or_init(|| sanitized_spec(&self.pod.borrow().pod))
    }

    /// Whether the two pods are the same for scheduling ([`equivalent`]).
    pub fn equivalent<Q: std::borrow::Borrow<PodInfo>>(&self, other: &Compared<Q>) -> bool {
        let (a, b) = (self.pod.borrow(), other.pod.borrow());
        let (pa, pb) = (&a.pod, &b.pod);
        // What tells one controller's pods apart first (a DaemonSet's pods
        // differ in their specs, each naming its node); the labels, nearly
        // always equal within a controller, last.
        controller_uid(pa).is_some()
            && controller_uid(pa) == controller_uid(pb)
            && a.requests == b.requests
            && a.ports == b.ports
            && (pa.spec == pb.spec || self.sanitized() == other.sanitized())
            && pa.metadata.labels == pb.metadata.labels
    }
}

/// Groups pods by equivalence (docs/reference/ca-rules.md §4.2): pods without a controller
/// and DaemonSet pods are alone; at most 10 groups per controller, further
/// distinct pods are alone.
pub fn equivalence_groups(pods: &[PodInfo]) -> Vec<PodGroup> {
    let mut groups: Vec<PodGroup> = Vec::new();
    // Per controller uid: the first pod of each of its groups.
    let mut by_controller: HashMap<&str, Vec<(Compared<&PodInfo>, usize)>> = HashMap::new();
    for pod in pods {
        let Some(uid) = controller_uid(&pod.pod).filter(|_| !is_daemonset_pod(&pod.pod)) else {
            groups.push(PodGroup {
                pods: vec![pod.clone()],
            });
            continue;
        };
        let known = by_controller.entry(uid).or_default();
        let compared = Compared::new(pod);
        if let Some((_, i)) = known.iter().find(|(rep, _)| rep.equivalent(&compared)) {
            groups[*i].pods.push(pod.clone());
        } else {
            if known.len() < 10 {
                known.push((compared, groups.len()));
            }
            groups.push(PodGroup {
                pods: vec![pod.clone()],
            });
        }
    }
    groups
}
