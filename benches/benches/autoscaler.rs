//! The autoscaler's loop at scale, against the in-memory API server (no
//! scheduler or kwok: nodes and pods are created Ready and Running), with
//! the kwok provider and three node groups of 32-CPU nodes:
//!
//! - `idle`: 1,000 nodes × 30 pods, nothing to do (target < 50 ms);
//! - `scale-up`: the same plus 30,000 identical pending pods (target < 1 s);
//! - `scale-down`: 1,000 nodes with one small pod each, all underutilized
//!   (target < 1 s);
//! - `memory`: 5,000 nodes × 30 pods, the growth of the process's resident
//!   memory from before the autoscaler starts to after its first loop
//!   (target < 1 GiB);
//! - `fastpath`: the binpacking estimate alone of 30,000 pending pods (one
//!   pod group of 1 CPU, and two groups of 1 and 3 CPU) on 32-CPU template
//!   nodes, without and with `--fastpath-binpacking-enabled`, in one run:
//!   the nodes each finds and the ratio of their times.
//!
//! `cargo bench -p benches --bench autoscaler` runs all five;
//! `-- idle 1000` (a case and a node count) runs one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use autoscaler::core::Autoscaler;
use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

async fn create_all(client: &Client, objects: Vec<Value>) {
    futures::stream::iter(objects)
        .for_each_concurrent(64, |o| {
            let client = client.clone();
            async move {
                let kind = o["kind"].as_str().unwrap().to_string();
                let (ar, namespaced) = match kind.as_str() {
                    "Node" => (kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Node>(&()), false),
                    "Pod" => (kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()), true),
                    "ConfigMap" => (kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()), true),
                    _ => (kube::api::ApiResource::erase::<k8s_openapi::api::apps::v1::ReplicaSet>(&()), true),
                };
                let api: Api<DynamicObject> = if namespaced {
                    Api::namespaced_with(client, o["metadata"]["namespace"].as_str().unwrap_or("default"), &ar)
                } else {
                    Api::all_with(client, &ar)
                };
                api.create(&PostParams::default(), &serde_json::from_value(o).unwrap()).await.unwrap();
            }
        })
        .await;
}

const GROUPS: [&str; 3] = ["g0", "g1", "g2"];

/// The scheduler's verdict on the pending pods (status is not taken on create).
async fn mark_unschedulable(client: &Client, pending: usize) {
    let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "default");
    let status = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes are available"}]}});
    futures::stream::iter(0..pending)
        .for_each_concurrent(64, |k| {
            let api = api.clone();
            let patch = kube::api::Patch::Merge(status.clone());
            async move {
                api.patch_status(
                    &format!("pending-{k}"),
                    &kube::api::PatchParams::default(),
                    &patch,
                )
                .await
                .unwrap();
            }
        })
        .await;
}

/// Creates the ReplicaSet that owns every pod and returns its uid (pods
/// whose owner does not exist are garbage collected).
async fn owner(client: &Client) -> String {
    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "default"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "load"}},
            "template": {"metadata": {"labels": {"app": "load"}}, "spec": {"containers": [{"name": "c", "image": "pause"}]}}}});
    create_all(client, vec![rs]).await;
    let rs = Api::<k8s_openapi::api::apps::v1::ReplicaSet>::namespaced(client.clone(), "default")
        .get("rs")
        .await
        .unwrap();
    rs.metadata.uid.unwrap()
}

async fn setup(client: &Client, nodes: usize, pods_per_node: usize, pod_cpu: &str, pending: usize) {
    let uid = owner(client).await;
    create_all(
        client,
        setup_objects(&uid, nodes, pods_per_node, pod_cpu, pending),
    )
    .await;
    if pending > 0 {
        mark_unschedulable(client, pending).await;
    }
}

fn setup_objects(
    owner_uid: &str,
    nodes: usize,
    pods_per_node: usize,
    pod_cpu: &str,
    pending: usize,
) -> Vec<Value> {
    let templates: Vec<Value> = GROUPS
        .iter()
        .map(|g| json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": g, "labels": {"kwok-nodegroup": g},
            "annotations": {"cluster-autoscaler.kwok.nodegroup/max-count": "100000"}},
            "status": {"capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"}, "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}}))
        .collect();
    let mut out = vec![
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kwok-provider-config", "namespace": "kube-system"},
            "data": {"config": "readNodesFrom: configmap\nnodegroups:\n  fromNodeLabelKey: kwok-nodegroup\nnodes:\n  skipTaint: true\nconfigmap:\n  name: kwok-provider-templates\n"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kwok-provider-templates", "namespace": "kube-system"},
            "data": {"templates": json!({"apiVersion": "v1", "kind": "List", "items": templates}).to_string()}}),
    ];
    let owner = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": owner_uid, "controller": true}]);
    let ready = json!([{"type": "Ready", "status": "True", "reason": "KubeletReady"}]);
    for i in 0..nodes {
        let g = GROUPS[i % 3];
        let name = format!("{g}-n{i}");
        out.push(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kwok-nodegroup": g, "kubernetes.io/hostname": name},
                "annotations": {"kwok.x-k8s.io/node": "fake", "cluster-autoscaler.kwok.nodegroup/name": g}},
            "spec": {"providerID": format!("kwok:{name}")},
            "status": {"capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"}, "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                "conditions": ready}}));
        for k in 0..pods_per_node {
            out.push(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("p-{i}-{k}"), "namespace": "default", "labels": {"app": "load"}, "ownerReferences": owner},
                "spec": {"nodeName": name, "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": pod_cpu, "memory": "1Gi"}}}]},
                "status": {"phase": "Running"}}));
        }
    }
    for k in 0..pending {
        out.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("pending-{k}"), "namespace": "default", "labels": {"app": "load"}, "ownerReferences": owner,
                "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes are available"}]}}));
    }
    out
}

async fn autoscaler(client: Client) -> Autoscaler {
    autoscaler::inprocess::kwok(client, simclock::Clock::new(), &[])
        .await
        .unwrap()
        .autoscaler
}

/// The loop phases' total time, from the `function_duration_seconds` sums.
fn print_phases(a: &Autoscaler) {
    for line in a.metrics.encode().lines() {
        let phase = line
            .strip_prefix("cluster_autoscaler_function_duration_seconds_sum{function=\"")
            .and_then(|rest| rest.split_once("\"} "));
        if let Some((f, v)) = phase {
            println!(
                "  {f:<24} {:>8.1} ms",
                v.parse::<f64>().unwrap_or(0.0) * 1000.0
            );
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn idle(nodes: usize) {
    let api = apiserver::ApiServer::start(simclock::Clock::new()).unwrap();
    let client = api.client();
    setup(&client, nodes, 30, "1", 0).await;
    let mut a = autoscaler(client).await;
    a.run_once().await.unwrap();
    let mut times: Vec<Duration> = (0..10).map(|_| Duration::ZERO).collect();
    for t in times.iter_mut() {
        let start = Instant::now();
        a.run_once().await.unwrap();
        *t = start.elapsed();
    }
    times.sort();
    let d = a.decisions.lock().unwrap().clone();
    println!(
        "idle loop, {nodes} nodes x 30 pods: median {:.1} ms, max {:.1} ms (scale-up {:?}, {} unneeded)",
        ms(times[5]),
        ms(times[9]),
        d.scale_up,
        d.unneeded.len()
    );
}

async fn scale_up(nodes: usize) {
    let api = apiserver::ApiServer::start(simclock::Clock::new()).unwrap();
    let client = api.client();
    setup(&client, nodes, 30, "1", 0).await;
    let mut a = autoscaler(client.clone()).await;
    // Steady state first: the cache is warm when pods become pending.
    a.run_once().await.unwrap();
    let uid = Api::<k8s_openapi::api::apps::v1::ReplicaSet>::namespaced(client.clone(), "default")
        .get("rs")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let pending: Vec<Value> = setup_objects(&uid, 0, 0, "1", 30_000)
        .into_iter()
        .filter(|o| o["kind"] == "Pod")
        .collect();
    create_all(&client, pending).await;
    mark_unschedulable(&client, 30_000).await;
    // Past the 2 s young-pod wait, and every watch event delivered.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let start = Instant::now();
    a.run_once().await.unwrap();
    let took = start.elapsed();
    let d = a.decisions.lock().unwrap().clone();
    print_phases(&a);
    println!(
        "scale-up loop, {nodes} nodes x 30 pods + 30000 pending pods, 3 groups: {:.0} ms (result {:?}, options {:?}, scaled {:?})",
        ms(took),
        d.scale_up,
        d.options,
        d.scaled_up
    );
}

async fn scale_down(nodes: usize) {
    let api = apiserver::ApiServer::start(simclock::Clock::new()).unwrap();
    let client = api.client();
    setup(&client, nodes, 1, "1", 0).await;
    let mut a = autoscaler(client).await;
    let start = Instant::now();
    a.run_once().await.unwrap();
    let first = start.elapsed();
    let start = Instant::now();
    a.run_once().await.unwrap();
    let second = start.elapsed();
    let d = a.decisions.lock().unwrap().clone();
    println!(
        "scale-down loop, {nodes} underutilized nodes: {:.0} ms first, {:.0} ms next ({} unneeded, {} unremovable)",
        ms(first),
        ms(second),
        d.unneeded.len(),
        d.unremovable.len()
    );
}

async fn memory(nodes: usize) {
    let api = apiserver::ApiServer::start(simclock::Clock::new()).unwrap();
    let client = api.client();
    setup(&client, nodes, 30, "1", 0).await;
    // The API server's own cost of serving the initial lists is paid once
    // before measuring, so the growth below is the autoscaler's.
    for _ in 0..2 {
        let mut lp = kube::api::ListParams::default().limit(500);
        loop {
            let page = Api::<k8s_openapi::api::core::v1::Pod>::all(client.clone())
                .list(&lp)
                .await
                .unwrap();
            match page.metadata.continue_ {
                Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
                _ => break,
            }
        }
    }
    let before = benches::rss_mib();
    let mut a = autoscaler(client).await;
    let start = Instant::now();
    a.run_once().await.unwrap();
    let took = start.elapsed();
    let after = benches::rss_mib();
    println!(
        "memory, {nodes} nodes x 30 pods: the autoscaler adds {:.0} MiB RSS (process {:.0} MiB with the API server); first loop {:.0} ms",
        after - before,
        after,
        ms(took)
    );
}

/// The estimator alone, without and with fast path, on the same pods.
fn fastpath(pods: usize) {
    use autoscaler::scaleup::equivalence::{PodGroup, equivalence_groups};
    use autoscaler::scaleup::estimator::estimate;
    use predicates::{NodeInfo, PodInfo};
    use std::sync::Arc;
    let template = NodeInfo::new(Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "t"},
            "status": {"capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                       "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}}))
        .unwrap(),
    ));
    let pod = |name: String, owner: &str, cpu: &str| {
        PodInfo::new(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                    "uid": owner, "controller": true}]},
                "spec": {"containers": [{"name": "c", "image": "i",
                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}))
            .unwrap(),
        ))
    };
    let one: Vec<PodInfo> = (0..pods).map(|i| pod(format!("p{i}"), "a", "1")).collect();
    let two: Vec<PodInfo> = (0..pods)
        .map(|i| {
            let (owner, cpu) = if i % 2 == 0 { ("a", "1") } else { ("b", "3") };
            pod(format!("p{i}"), owner, cpu)
        })
        .collect();
    for (case, pods) in [("one group", one), ("two groups", two)] {
        let groups = equivalence_groups(&pods);
        let refs: Vec<&PodGroup> = groups.iter().collect();
        let mut snapshot = autoscaler::simulator::Snapshot::new(Vec::new());
        let mut run = |fastpath: bool| {
            let start = Instant::now();
            let est = estimate(
                &mut snapshot,
                &template,
                &refs,
                100_000,
                "t",
                Duration::from_secs(600),
                fastpath,
            );
            (est.node_count, start.elapsed())
        };
        let (plain_nodes, plain) = run(false);
        let (fast_nodes, fast) = run(true);
        println!(
            "fastpath, {} pods ({case}): {plain_nodes} nodes in {:.0} ms without, {fast_nodes} nodes in {:.0} ms with: {:.1}x faster",
            pods.len(),
            ms(plain),
            ms(fast),
            plain.as_secs_f64() / fast.as_secs_f64().max(1e-9)
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let case = args.first().cloned().unwrap_or_else(|| "all".into());
    let nodes: Option<usize> = args.get(1).and_then(|n| n.parse().ok());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        if matches!(case.as_str(), "all" | "idle") {
            idle(nodes.unwrap_or(1000)).await;
        }
        if matches!(case.as_str(), "all" | "scale-up") {
            scale_up(nodes.unwrap_or(1000)).await;
        }
        if matches!(case.as_str(), "all" | "scale-down") {
            scale_down(nodes.unwrap_or(1000)).await;
        }
        if matches!(case.as_str(), "all" | "memory") {
            memory(nodes.unwrap_or(5000)).await;
        }
        if matches!(case.as_str(), "all" | "fastpath") {
            fastpath(nodes.unwrap_or(30_000));
        }
    });
}
