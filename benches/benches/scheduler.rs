//! The embedded scheduler's scheduling cycle at 10,000 nodes: one 1-CPU pod
//! onto 10,000 nodes of 30 CPU, each holding 15 pods, filtering and
//! scoring every node (`find_node_with`, a cycle without sampling) and
//! kube-scheduler's adaptive sample (`find_node_from` with
//! `Sample::adaptive`: 500 feasible nodes at 10,000), in one run, with the
//! ratio of their times; then a pod that fits nowhere, which examines
//! every node either way.
//!
//! Then the scheduling queue at 300,000 pending pods, all parked
//! unschedulable, when a pass takes (and binds) 1,000 new pods: the queue
//! ([`harness::scheduler::queue::Queue`], pods indexed by when they are
//! due) against a scanning pass, reproduced here, which visits
//! every pending pod for the due ones and again for the next deadline.
//!
//! `cargo bench -p benches --bench scheduler`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use harness::scheduler::queue::Queue;
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

const PENDING: usize = 300_000;
const NEW_PER_PASS: usize = 1_000;

/// A pending pod as a scanning pass keeps it: its place, when it
/// is next due, and whether it waits for a cluster change.
struct Scanned {
    place: (i32, u64),
    due: Instant,
    parked: bool,
}

/// A scanning pass: every pending pod visited to find the due
/// ones (sorted by place), then again for the next deadline. The new pods
/// are bound (taken out).
fn scan_pass(pending: &mut HashMap<String, Scanned>, entries: &mut u64, new: &[String]) {
    for key in new {
        *entries += 1;
        let scanned = Scanned {
            place: (0, *entries),
            due: Instant::now(),
            parked: false,
        };
        pending.insert(key.clone(), scanned);
    }
    let now = Instant::now();
    let parked_for = Duration::from_secs(300);
    let due_at = |p: &Scanned| if p.parked { p.due + parked_for } else { p.due };
    let mut due: Vec<((i32, u64), String)> = pending
        .iter()
        .filter(|(_, p)| now >= due_at(p))
        .map(|(k, p)| (p.place, k.clone()))
        .collect();
    due.sort();
    assert_eq!(due.len(), new.len());
    for (_, key) in due {
        pending.remove(&key);
    }
    assert!(pending.values().map(due_at).min().is_some());
}

/// The same pass through the queue.
fn queue_pass(queue: &mut Queue, new: &[String]) {
    for key in new {
        queue.add(key, 0);
    }
    let due = queue.pop_due(tokio::time::Instant::now());
    assert_eq!(due.len(), new.len());
    for key in &due {
        queue.remove(key);
    }
    assert!(queue.next_due().is_some());
}

fn bench_queue(c: &mut Criterion) {
    let parked: Vec<String> = (0..PENDING)
        .map(|i| format!("default/parked-{i}"))
        .collect();
    let new: Vec<String> = (0..NEW_PER_PASS)
        .map(|i| format!("default/new-{i}"))
        .collect();
    let mut queue = Queue::new(1.0);
    for key in &parked {
        queue.add(key, 0);
    }
    for key in queue.pop_due(tokio::time::Instant::now()) {
        queue.failed(&key, true);
    }
    // Their backoff over, the parked pods wait for a cluster change.
    std::thread::sleep(Duration::from_millis(1100));
    assert!(queue.pop_due(tokio::time::Instant::now()).is_empty());
    let mut entries = 0;
    let mut pending: HashMap<String, Scanned> = parked
        .iter()
        .map(|key| {
            entries += 1;
            let scanned = Scanned {
                place: (0, entries),
                due: Instant::now() + Duration::from_secs(1),
                parked: true,
            };
            (key.clone(), scanned)
        })
        .collect();
    let scan = mean(20, || scan_pass(&mut pending, &mut entries, &new));
    let indexed = mean(20, || queue_pass(&mut queue, &new));
    println!(
        "\nscheduling queue, a pass binding {NEW_PER_PASS} new pods while {PENDING} wait parked:"
    );
    println!("| pass | mean |");
    println!("|---|---|");
    println!(
        "| every pending pod scanned (before) | {:.2} ms |",
        scan.as_secs_f64() * 1e3
    );
    println!(
        "| the queue, pods indexed by when they are due | {:.2} ms |",
        indexed.as_secs_f64() * 1e3
    );
    println!(
        "| ratio, queue / scan | {:.3}x |",
        indexed.as_secs_f64() / scan.as_secs_f64()
    );

    let mut g = c.benchmark_group("scheduler_queue_300k_pending");
    g.sample_size(10);
    g.bench_function("scan", |b| {
        b.iter(|| scan_pass(&mut pending, &mut entries, &new))
    });
    g.bench_function("queue", |b| b.iter(|| queue_pass(&mut queue, &new)));
    g.finish();
}

criterion_group!(benches, bench, bench_queue);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
