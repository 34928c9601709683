//! Scale-up latency as the FAQ defines it: "the latency time measured
//! from the time a pod is marked as unschedulable (by K8S scheduler) to the
//! time CA issues scale-up request to the cloud provider".
//!
//! A pod's mark is the first `FailedScheduling` event the scheduler wrote
//! on it (it writes one each time it marks the pod `PodScheduled=False,
//! reason Unschedulable`, so the first is when the pod was first marked).
//! The kwok providers create a group's nodes as they take the scale-up
//! request, so a node's creation is when the request for it was issued,
//! whichever autoscaler issued it.
//!
//! The increase that covers a pod: pods of one workload (one controller)
//! are interchangeable, and which of them the scheduler binds to which new
//! node is the scheduler's choice (its queue order and backoff), not the
//! autoscaler's. A pod created late, never marked, often takes a slot on a
//! node the autoscaler requested for pods marked earlier, which then wait
//! for a later node: that wait is the scheduler's order, and the slot it
//! took was still capacity the autoscaler had requested. So, within a
//! workload, the slots its pods occupy (one a pod, at its node's creation)
//! are the capacity requested for it, and the k-th pod to be marked is
//! covered by the k-th earliest slot: first marked, first covered. Slots
//! on nodes older than the workload's first mark count only when a marked
//! pod holds them (an unmarked pod there needed no scale-up); a pairing
//! with a slot older than the mark counts as 0 s. A pod without a
//! controller is its own workload. A pod that was never marked needed no
//! scale-up and is not measured. Used by the objective's step and by
//! `testbed compare`, which also keeps each marked pod's wait for its own
//! node.

use std::collections::HashMap;
use std::time::Duration;

use harness::cluster::for_each_page;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Client;
use kube::api::ListParams;

/// Latencies of a sample, with the figures a report needs.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencySummary {
    /// How many pods were measured.
    pub pods: usize,
    /// Mean latency.
    pub mean: Duration,
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// The slowest pod.
    pub max: Duration,
}

impl LatencySummary {
    /// The summary of `sample` (`None` when it is empty).
    pub fn of(mut sample: Vec<Duration>) -> Option<Self> {
        if sample.is_empty() {
            return None;
        }
        sample.sort();
        let n = sample.len();
        let at = |q: f64| sample[((n - 1) as f64 * q).round() as usize];
        let total: Duration = sample.iter().sum();
        Some(Self {
            pods: n,
            mean: total / u32::try_from(n).unwrap_or(u32::MAX),
            p50: at(0.50),
            p99: at(0.99),
            max: sample[n - 1],
        })
    }
}

impl std::fmt::Display for LatencySummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} pods: mean {:.1} s, p50 {:.1} s, p99 {:.1} s, max {:.1} s",
            self.pods,
            self.mean.as_secs_f64(),
            self.p50.as_secs_f64(),
            self.p99.as_secs_f64(),
            self.max.as_secs_f64()
        )
    }
}

/// What [`scale_up_latencies`] measured.
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    /// One per pod that was marked unschedulable and is covered by a slot.
    pub measured: Vec<Duration>,
    /// Pods that were marked unschedulable and have no node yet.
    pub unplaced: Vec<String>,
}

/// One pod of a measured workload, as read from the cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadPod {
    /// The workload: its controller's uid, or the pod's own key.
    pub workload: String,
    /// `namespace/name`.
    pub pod: String,
    /// When it was created (ms since the epoch).
    pub created_ms: Option<i64>,
    /// When it was first marked unschedulable (ms since the epoch), if it
    /// ever was.
    pub marked_ms: Option<i64>,
    /// When the node it runs on was created (ms since the epoch).
    pub node_created_ms: Option<i64>,
}

impl Latencies {
    /// Pairs, per workload, the k-th marked pod with the k-th earliest slot
    /// of the workload (module docs).
    pub fn of(pods: &[WorkloadPod]) -> Self {
        let mut workloads: HashMap<&str, Vec<&WorkloadPod>> = HashMap::new();
        for p in pods {
            workloads.entry(p.workload.as_str()).or_default().push(p);
        }
        let mut out = Self::default();
        for pods in workloads.into_values() {
            let mut marks: Vec<i64> = pods.iter().filter_map(|p| p.marked_ms).collect();
            let Some(&first_mark) = marks.iter().min() else {
                continue;
            };
            let mut slots: Vec<i64> = pods
                .iter()
                .filter_map(|p| {
                    let node = p.node_created_ms?;
                    (p.marked_ms.is_some() || node >= first_mark).then_some(node)
                })
                .collect();
            marks.sort_unstable();
            slots.sort_unstable();
            for (mark, slot) in marks.iter().zip(&slots) {
                let millis = u64::try_from(slot - mark).unwrap_or(0);
                out.measured.push(Duration::from_millis(millis));
            }
            out.unplaced.extend(
                pods.iter()
                    .filter(|p| p.marked_ms.is_some() && p.node_created_ms.is_none())
                    .map(|p| p.pod.clone()),
            );
        }
        out.unplaced.sort();
        out
    }
}

/// Every pod matching `selector`, with its first mark (if it was marked
/// unschedulable) and its node's creation. The pods, events and nodes are
/// read a page at a time: at 300,000 pods a list in one piece would hold
/// gigabytes.
pub async fn workload_pods(client: &Client, selector: &str) -> Result<Vec<WorkloadPod>, String> {
    let mut marked: HashMap<(String, String), i64> = HashMap::new();
    let failed_scheduling = ListParams::default().fields("reason=FailedScheduling");
    for_each_page::<Event>(client, failed_scheduling, |events| {
        for e in events {
            let o = e.involved_object;
            let (Some(ns), Some(name)) = (o.namespace, o.name) else {
                continue;
            };
            let Some(at) = e
                .first_timestamp
                .or(e.last_timestamp)
                .map(|t| t.0.as_millisecond())
            else {
                continue;
            };
            let first = marked.entry((ns, name)).or_insert(at);
            *first = (*first).min(at);
        }
    })
    .await?;
    let mut nodes: HashMap<String, i64> = HashMap::new();
    for_each_page::<Node>(client, ListParams::default(), |page| {
        nodes.extend(page.into_iter().filter_map(|n| {
            let at = n.metadata.creation_timestamp?.0.as_millisecond();
            Some((n.metadata.name?, at))
        }));
    })
    .await?;
    let mut out = Vec::new();
    let lp = ListParams::default().labels(selector);
    for_each_page::<Pod>(client, lp, |pods| {
        for p in pods {
            let ns = p.metadata.namespace.clone().unwrap_or_default();
            let name = p.metadata.name.clone().unwrap_or_default();
            let marked_ms = marked.get(&(ns.clone(), name.clone())).copied();
            let key = format!("{ns}/{name}");
            let workload = p
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map_or_else(|| key.clone(), |o| o.uid.clone());
            let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
            let created_ms = p
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_millisecond());
            out.push(WorkloadPod {
                workload,
                pod: key,
                created_ms,
                marked_ms,
                node_created_ms: node.and_then(|n| nodes.get(n)).copied(),
            });
        }
    })
    .await?;
    Ok(out)
}

/// The latencies of the pods matching `selector` ([`Latencies::of`]).
pub async fn scale_up_latencies(client: &Client, selector: &str) -> Result<Latencies, String> {
    Ok(Latencies::of(&workload_pods(client, selector).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_has_the_mean_percentiles_and_max() {
        let s = LatencySummary::of((1..=100).map(Duration::from_secs).collect()).expect("a sample");
        assert_eq!(s.pods, 100);
        assert_eq!(s.mean, Duration::from_millis(50_500));
        assert_eq!(s.p50, Duration::from_secs(51));
        assert_eq!(s.p99, Duration::from_secs(99));
        assert_eq!(s.max, Duration::from_secs(100));
        assert!(LatencySummary::of(Vec::new()).is_none());
    }

    fn pod(workload: &str, pod: &str, marked_ms: Option<i64>, node: Option<i64>) -> WorkloadPod {
        WorkloadPod {
            workload: workload.into(),
            pod: pod.into(),
            created_ms: None,
            marked_ms,
            node_created_ms: node,
        }
    }

    fn secs(l: &Latencies) -> Vec<u64> {
        let mut secs: Vec<u64> = l.measured.iter().map(Duration::as_secs).collect();
        secs.sort_unstable();
        secs
    }

    #[test]
    fn a_workloads_first_marked_pod_is_covered_by_its_first_node() {
        // The scheduler put the first-marked pod on a later node: paired by
        // order, the latencies are 1, 3 and 2 s, not 11, 0 and 2 s.
        let pods = [
            pod("rs", "default/a", Some(0), Some(11_000)),
            pod("rs", "default/b", Some(8_000), Some(1_000)),
            pod("rs", "default/c", Some(9_000), Some(11_000)),
        ];
        let l = Latencies::of(&pods);
        assert_eq!(secs(&l), [1, 2, 3]);
        assert!(l.unplaced.is_empty());
    }

    #[test]
    fn a_slot_an_unmarked_pod_took_on_a_new_node_covers_a_marked_pod() {
        // a and b were marked at 0 s and the autoscaler requested two slots
        // at 1 s; c, created later and never marked, took one, so b ran on
        // the node requested at 12 s for nobody else. b was covered at 1 s.
        let pods = [
            pod("rs", "default/a", Some(0), Some(1_000)),
            pod("rs", "default/b", Some(0), Some(12_000)),
            pod("rs", "default/c", None, Some(1_000)),
        ];
        let l = Latencies::of(&pods);
        assert_eq!(secs(&l), [1, 1]);
        assert!(l.unplaced.is_empty());
    }

    #[test]
    fn unmarked_pods_on_nodes_older_than_the_first_mark_cover_nobody() {
        // c ran at once on a node from before; a waited for the node of 9 s.
        let pods = [
            pod("rs", "default/a", Some(2_000), Some(9_000)),
            pod("rs", "default/c", None, Some(-60_000)),
        ];
        assert_eq!(secs(&Latencies::of(&pods)), [7]);
        // A marked pod that ran on an older node was covered at once.
        let pods = [pod("rs", "default/a", Some(2_000), Some(-60_000))];
        assert_eq!(secs(&Latencies::of(&pods)), [0]);
    }

    #[test]
    fn workloads_are_paired_apart_and_unplaced_pods_are_named() {
        // Another workload's early node does not cover this one's pods.
        let pods = [
            pod("fast", "default/f", Some(0), Some(1_000)),
            pod("slow", "default/s1", Some(0), Some(20_000)),
            pod("slow", "default/s2", Some(5_000), None),
        ];
        let l = Latencies::of(&pods);
        assert_eq!(secs(&l), [1, 20]);
        assert_eq!(l.unplaced, ["default/s2"]);
    }
}
