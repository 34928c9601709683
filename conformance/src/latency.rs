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
//! autoscaler's. So within a workload the k-th pod to be marked is paired
//! with the k-th earliest node its marked pods run on: first marked, first
//! covered. A pod without a controller is its own workload (its own node).
//! A pod that was never marked needed no scale-up and is not counted; a
//! pairing with a node older than the mark counts as 0 s. Used by the
//! objective's step and by `testbed compare`.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::ListParams;
use kube::{Api, Client};

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
    /// One per pod that was marked unschedulable and is covered by a node.
    pub measured: Vec<Duration>,
    /// Pods that were marked unschedulable and have no node yet.
    pub unplaced: Vec<String>,
}

/// One marked pod, as read from the cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct MarkedPod {
    /// The workload: its controller's uid, or the pod's own key.
    pub workload: String,
    /// `namespace/name`.
    pub pod: String,
    /// When it was first marked unschedulable (ms since the epoch).
    pub marked_ms: i64,
    /// When the node it runs on was created (ms since the epoch).
    pub node_created_ms: Option<i64>,
}

impl Latencies {
    /// Pairs, per workload, the k-th marked pod with the k-th earliest node
    /// of its marked pods (module docs).
    pub fn of(pods: &[MarkedPod]) -> Self {
        let mut workloads: HashMap<&str, (Vec<i64>, Vec<i64>)> = HashMap::new();
        let mut out = Self::default();
        for p in pods {
            let (marks, nodes) = workloads.entry(p.workload.as_str()).or_default();
            marks.push(p.marked_ms);
            match p.node_created_ms {
                Some(at) => nodes.push(at),
                None => out.unplaced.push(p.pod.clone()),
            }
        }
        for (mut marks, mut nodes) in workloads.into_values() {
            marks.sort_unstable();
            nodes.sort_unstable();
            for (mark, node) in marks.iter().zip(&nodes) {
                let millis = u64::try_from(node - mark).unwrap_or(0);
                out.measured.push(Duration::from_millis(millis));
            }
        }
        out.unplaced.sort();
        out
    }
}

/// Every pod matching `selector` that was marked unschedulable, with its
/// mark and its node's creation.
pub async fn marked_pods(client: &Client, selector: &str) -> Result<Vec<MarkedPod>, String> {
    let pods = harness::cluster::list::<Pod>(client, selector).await?;
    let events = Api::<Event>::all(client.clone())
        .list(&ListParams::default().fields("reason=FailedScheduling"))
        .await
        .map_err(|e| format!("listing FailedScheduling events: {e}"))?
        .items;
    let mut marked: HashMap<(String, String), i64> = HashMap::new();
    for e in events {
        let o = &e.involved_object;
        let (Some(ns), Some(name)) = (o.namespace.clone(), o.name.clone()) else {
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
    let nodes: HashMap<String, i64> = harness::cluster::list::<Node>(client, "")
        .await?
        .into_iter()
        .filter_map(|n| {
            let at = n.metadata.creation_timestamp?.0.as_millisecond();
            Some((n.metadata.name?, at))
        })
        .collect();
    let mut out = Vec::new();
    for p in pods {
        let ns = p.metadata.namespace.clone().unwrap_or_default();
        let name = p.metadata.name.clone().unwrap_or_default();
        let Some(&marked_ms) = marked.get(&(ns.clone(), name.clone())) else {
            continue;
        };
        let key = format!("{ns}/{name}");
        let workload = p
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map_or_else(|| key.clone(), |o| o.uid.clone());
        let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
        out.push(MarkedPod {
            workload,
            pod: key,
            marked_ms,
            node_created_ms: node.and_then(|n| nodes.get(n)).copied(),
        });
    }
    Ok(out)
}

/// The latencies of the pods matching `selector` ([`Latencies::of`]).
pub async fn scale_up_latencies(client: &Client, selector: &str) -> Result<Latencies, String> {
    Ok(Latencies::of(&marked_pods(client, selector).await?))
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

    fn marked(workload: &str, pod: &str, marked_ms: i64, node: Option<i64>) -> MarkedPod {
        MarkedPod {
            workload: workload.into(),
            pod: pod.into(),
            marked_ms,
            node_created_ms: node,
        }
    }

    #[test]
    fn a_workloads_first_marked_pod_is_covered_by_its_first_node() {
        // The scheduler put the first-marked pod on a later node: paired by
        // order, the latencies are 1, 3 and 2 s, not 11, 0 and 2 s.
        let pods = [
            marked("rs", "default/a", 0, Some(11_000)),
            marked("rs", "default/b", 8_000, Some(1_000)),
            marked("rs", "default/c", 9_000, Some(11_000)),
        ];
        let mut l = Latencies::of(&pods);
        l.measured.sort();
        let secs: Vec<u64> = l.measured.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [1, 2, 3]);
        assert!(l.unplaced.is_empty());
    }

    #[test]
    fn workloads_are_paired_apart_and_unplaced_pods_are_named() {
        // Another workload's early node does not cover this one's pods.
        let pods = [
            marked("fast", "default/f", 0, Some(1_000)),
            marked("slow", "default/s1", 0, Some(20_000)),
            marked("slow", "default/s2", 5_000, None),
        ];
        let mut l = Latencies::of(&pods);
        l.measured.sort();
        let secs: Vec<u64> = l.measured.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [1, 20]);
        assert_eq!(l.unplaced, ["default/s2"]);
    }
}
