//! Scale-up latency as the FAQ defines it: "the latency time measured
//! from the time a pod is marked as unschedulable (by K8S scheduler) to the
//! time CA issues scale-up request to the cloud provider".
//!
//! Per pod: from the first `FailedScheduling` event the scheduler wrote on
//! it (it writes one each time it marks the pod `PodScheduled=False,
//! reason Unschedulable`, so the first is when the pod was first marked) to
//! the creation of the node it runs on. The kwok providers create a group's
//! nodes as they take the scale-up request, so a node's creation is when the
//! request for it was issued, whichever autoscaler issued it. A pod that was
//! never marked unschedulable needed no scale-up and is not counted; a pod
//! that runs on a node older than its mark counts as 0 s. Used by the
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
    /// One per pod that was marked unschedulable and now has a node.
    pub measured: Vec<Duration>,
    /// Pods that were marked unschedulable and have no node yet.
    pub unplaced: Vec<String>,
}

/// Per pod matching `selector`: first marked unschedulable → its node
/// created.
pub async fn scale_up_latencies(client: &Client, selector: &str) -> Result<Latencies, String> {
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
    let mut out = Latencies::default();
    for p in &pods {
        let ns = p.metadata.namespace.clone().unwrap_or_default();
        let name = p.metadata.name.clone().unwrap_or_default();
        let Some(at) = marked.get(&(ns, name.clone())) else {
            continue;
        };
        let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
        match node.and_then(|n| nodes.get(n)) {
            Some(node_at) => {
                let millis = u64::try_from(node_at - at).unwrap_or(0);
                out.measured.push(Duration::from_millis(millis));
            }
            None => out.unplaced.push(name),
        }
    }
    out.unplaced.sort();
    Ok(out)
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
}
