//! The binpacking estimator (docs/compat.md §4.4, upstream's `estimator`): how
//! many template nodes a set of pod groups needs.

use std::time::Duration;

use predicates::NodeInfo;

use super::equivalence::PodGroup;
use crate::simulator::{Snapshot, node_from_template};

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

/// The binpacking estimator (docs/compat.md §4.4): how many template nodes the
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
        let r = &g.sample().requests;
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
        for info in &group.pods {
            let mut placed = None;
            if try_all {
                placed = added.iter().position(|&i| snapshot.fits(info, i).is_ok());
                if placed.is_none() {
                    try_all = false;
                }
            } else if let Some(&last) = added.last()
                && snapshot.fits(info, last).is_ok()
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
                if snapshot.fits(info, i).is_ok() {
                    placed = Some(added.len() - 1);
                } else {
                    continue 'groups;
                }
            }
            if let Some(k) = placed {
                out.requests.0 += info.requests.milli_cpu;
                out.requests.1 += info.requests.memory;
                out.pods.push(info.key.clone());
                snapshot.add_pod(added[k], info.clone());
                used[k] = true;
            }
        }
    }
    out.node_count = used.iter().filter(|u| **u).count();
    snapshot.revert();
    out
}
