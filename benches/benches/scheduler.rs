//! The embedded scheduler's scheduling cycle at 10,000 nodes: one 1-CPU pod
//! onto 10,000 nodes of 30 CPU, each holding 15 pods, filtering and
//! scoring every node (`find_node_with`, the cycle before issue 44) and
//! kube-scheduler's adaptive sample (`find_node_from` with
//! `Sample::adaptive`: 500 feasible nodes at 10,000), in one run, with the
//! ratio of their times; then a pod that fits nowhere, which examines
//! every node either way.
//!
//! `cargo bench -p benches --bench scheduler`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use k8s_openapi::api::core::v1::{Node, Pod};
use predicates::{NodeInfo, Objects, PodInfo, Sample, find_node_from, find_node_with};
use serde_json::json;

const NODES: usize = 10_000;
const PODS_PER_NODE: usize = 15;

fn pod(name: &str, cpu: &str) -> PodInfo {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "backlog"}},
        "spec": {"containers": [{"name": "c", "image": "pause",
            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}
    }))
    .expect("a pod");
    PodInfo::new(Arc::new(p))
}

fn nodes() -> Vec<NodeInfo> {
    (0..NODES)
        .map(|i| {
            let name = format!("node-{i:05}");
            let n: Node = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": {"cpu": "30", "memory": "256Gi", "pods": "110"}}
            }))
            .expect("a node");
            let mut info = NodeInfo::new(Arc::new(n));
            for k in 0..PODS_PER_NODE {
                info.add_pod(pod(&format!("p-{i}-{k}"), "1"));
            }
            info
        })
        .collect()
}

/// The mean time of `n` cycles of `f`.
fn mean(n: u32, mut f: impl FnMut()) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed() / n
}

fn bench(c: &mut Criterion) {
    let nodes = nodes();
    let fits = pod("new", "1");
    let nowhere = pod("huge", "64");
    let mut start = 0;
    let mut sampled = || {
        let found = find_node_from(
            &fits,
            &nodes,
            Objects::default(),
            Sample::adaptive(nodes.len(), start),
        );
        start = (start + found.examined) % nodes.len();
        assert!(found.result.is_ok());
    };
    let every = || {
        assert!(find_node_with(&fits, &nodes, Objects::default()).is_ok());
    };
    let whole = mean(20, every);
    let sample = mean(200, &mut sampled);
    println!(
        "\nscheduling cycle, a 1-CPU pod onto {NODES} nodes of 30 CPU with {PODS_PER_NODE} pods each:"
    );
    println!("| cycle | mean | nodes filtered |");
    println!("|---|---|---|");
    println!(
        "| every node (before) | {:.2} ms | {NODES} |",
        whole.as_secs_f64() * 1e3
    );
    println!(
        "| adaptive sample (kube-scheduler's percentageOfNodesToScore) | {:.2} ms | {} |",
        sample.as_secs_f64() * 1e3,
        Sample::adaptive(NODES, 0).to_find
    );
    println!(
        "| ratio, sample / every node | {:.3}x | |",
        sample.as_secs_f64() / whole.as_secs_f64()
    );

    let mut g = c.benchmark_group("scheduler_cycle_10k_nodes");
    g.sample_size(10);
    g.bench_function("every_node", |b| b.iter(every));
    g.bench_function("adaptive_sample", |b| b.iter(&mut sampled));
    g.bench_function("fits_nowhere", |b| {
        b.iter(|| {
            let found = find_node_from(
                &nowhere,
                &nodes,
                Objects::default(),
                Sample::adaptive(nodes.len(), 0),
            );
            assert_eq!(found.examined, NODES);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
