//! The embedded API server at the scale of the SLO scenarios: 1,000 nodes
//! and 30,000 pods created through `kube::Client` over the in-memory
//! service, listed, and watched by 10 watchers.
//!
//! Run: `cargo bench -p benches --bench apiserver`. Besides criterion's
//! statistics for list and watch latency, the run prints one summary table
//! (create throughput, list time, watch delivery latency, resident memory)
//! and the cost of CRD validation: CapacityBuffers (upstream CA 1.37's
//! CRD: structural schema, defaults and two CEL rules) created against the
//! same objects under a schema that validates nothing, in one run.

use std::time::{Duration, Instant};

use apiserver::ApiServer;
use criterion::{Criterion, criterion_group};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use simclock::Clock;

const NODES: usize = 1_000;
const PODS: usize = 30_000;
const WATCHERS: usize = 10;
const CONCURRENCY: usize = 64;

fn node(i: usize) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": format!("node-{i:04}"), "labels": {"kubernetes.io/hostname": format!("node-{i:04}"), "pool": "default"}},
        "status": {"capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"}, "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}
    }))
    .expect("node")
}

fn pod(i: usize) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("pod-{i:05}"), "labels": {"app": format!("app-{}", i % 100)}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9",
                                  "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}
    }))
    .expect("pod")
}

/// Creates `count` objects made by `make`, `CONCURRENCY` requests at a time.
async fn create_all<K>(api: &Api<K>, count: usize, make: fn(usize) -> K) -> Duration
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let t = Instant::now();
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &make(i)).await }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("objects created");
    t.elapsed()
}

async fn populate(client: &kube::Client) -> (Duration, Duration) {
    let nodes = create_all(&Api::<Node>::all(client.clone()), NODES, node).await;
    let pods = create_all(&Api::<Pod>::default_namespaced(client.clone()), PODS, pod).await;
    (nodes, pods)
}

/// Custom resources created per CRD in the validation comparison.
const CUSTOM: usize = 5_000;

/// Upstream CA 1.37's CapacityBuffer CRD; with `validate` false, the same
/// names in another group under a schema that keeps every field and checks
/// nothing (the cost of a custom resource write before schemas were applied).
fn buffer_crd(validate: bool) -> serde_json::Value {
    let mut crd: serde_json::Value = serde_json::from_str(include_str!(
        "../../harness/apiserver/tests/fixtures/crd-capacitybuffers.json"
    ))
    .expect("fixture");
    if !validate {
        crd["metadata"]["name"] = json!("capacitybuffers.plain.example.com");
        crd["spec"]["group"] = json!("plain.example.com");
        for v in crd["spec"]["versions"].as_array_mut().expect("versions") {
            v["schema"] = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
        }
    }
    crd
}

/// Creates the CRD, then `CUSTOM` CapacityBuffers; the time of the creates.
async fn custom_writes(client: &kube::Client, validate: bool) -> Duration {
    use kube::api::DynamicObject;
    use kube::core::{ApiResource, GroupVersionKind};
    let crd = buffer_crd(validate);
    let group = crd["spec"]["group"].as_str().expect("group").to_string();
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(crd).expect("crd"),
    )
    .await
    .expect("CRD created");
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group, "v1beta1", "CapacityBuffer"),
        "capacitybuffers",
    );
    let buffers: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let t = Instant::now();
    futures::stream::iter(0..CUSTOM)
        .map(|i| {
            let buffers = buffers.clone();
            let group = group.clone();
            async move {
                let b: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": format!("{group}/v1beta1"), "kind": "CapacityBuffer",
                    "metadata": {"name": format!("buffer-{i:05}")},
                    "spec": {"podTemplateRef": {"name": "template"}, "replicas": i % 7 + 1,
                             "limits": {"cpu": "4", "memory": "8Gi"}}
                }))
                .expect("buffer");
                buffers.create(&PostParams::default(), &b).await
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await
        .expect("buffers created");
    t.elapsed()
}

/// Time from a write to its event arriving at each of `WATCHERS` watchers.
async fn watch_latency(client: &kube::Client, rounds: usize) -> Vec<Duration> {
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let rv = cms
        .list(&ListParams::default().limit(1))
        .await
        .expect("list")
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut streams = Vec::new();
    for _ in 0..WATCHERS {
        streams.push(
            cms.watch(&WatchParams::default(), &rv)
                .await
                .expect("watch")
                .boxed(),
        );
    }
    let mut out = Vec::new();
    for r in 0..rounds {
        let cm: ConfigMap = serde_json::from_value(
            json!({"metadata": {"generateName": "w-"}, "data": {"r": r.to_string()}}),
        )
        .expect("cm");
        let t = Instant::now();
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("create");
        for s in streams.iter_mut() {
            match s.next().await {
                Some(Ok(WatchEvent::Added(_))) => {}
                other => panic!("unexpected watch item {other:?}"),
            }
        }
        out.push(t.elapsed());
    }
    out
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let rss_before = benches::rss_mib();
    let server = rt.block_on(async { ApiServer::start(Clock::new()).expect("server") });
    let client = rt.block_on(async { server.client() });
    let (nodes_time, pods_time) = rt.block_on(populate(&client));
    let rss_after = benches::rss_mib();

    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    // One full list through the client (deserialised into typed Pods), and server side only.
    let t = Instant::now();
    let listed = rt
        .block_on(pods.list(&ListParams::default()))
        .expect("list");
    let list_client = t.elapsed();
    assert_eq!(listed.items.len(), PODS);
    drop(listed);
    let raw = |client: kube::Client| async move {
        let req = http::Request::get("/api/v1/namespaces/default/pods")
            .body(Vec::new())
            .expect("request");
        client.request_text(req).await.expect("raw list").len()
    };
    let t = Instant::now();
    let bytes = rt.block_on(raw(client.clone()));
    let list_raw = t.elapsed();
    let mut lat = rt.block_on(watch_latency(&client, 200));
    lat.sort();
    let p50 = lat[lat.len() / 2];
    let p99 = lat[lat.len() * 99 / 100];

    println!(
        "\nembedded API server, {NODES} nodes + {PODS} pods through kube::Client (in-memory service):"
    );
    println!("| measure | value | target |");
    println!("|---|---|---|");
    println!(
        "| create {NODES} nodes | {:.2} s | - |",
        nodes_time.as_secs_f64()
    );
    println!(
        "| create {PODS} pods | {:.2} s ({:.0} pods/s) | < 10 s |",
        pods_time.as_secs_f64(),
        PODS as f64 / pods_time.as_secs_f64()
    );
    println!(
        "| list {PODS} pods, typed (server + client decode) | {:.0} ms | < 200 ms |",
        list_client.as_secs_f64() * 1e3
    );
    println!(
        "| list {PODS} pods, raw bytes ({:.1} MiB) | {:.0} ms | < 200 ms |",
        bytes as f64 / 1048576.0,
        list_raw.as_secs_f64() * 1e3
    );
    println!(
        "| write -> event at all {WATCHERS} watchers, p50 / p99 | {:.3} / {:.3} ms | < 1 ms |",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    println!(
        "| resident memory after load (process) | {:.0} MiB (+{:.0} MiB) | < 1024 MiB |",
        rss_after,
        rss_after - rss_before
    );

    // CRD validation's cost, both sides in one run on one server.
    let plain = rt.block_on(custom_writes(&client, false));
    let validated = rt.block_on(custom_writes(&client, true));
    println!("\ncustom resource writes, {CUSTOM} CapacityBuffers each:");
    println!("| CRD schema | create time | per write | target |");
    println!("|---|---|---|---|");
    println!(
        "| keeps every field, checks nothing | {:.2} s | {:.0} µs | - |",
        plain.as_secs_f64(),
        plain.as_secs_f64() * 1e6 / CUSTOM as f64
    );
    println!(
        "| upstream's (schema, defaults, 2 CEL rules) | {:.2} s | {:.0} µs | - |",
        validated.as_secs_f64(),
        validated.as_secs_f64() * 1e6 / CUSTOM as f64
    );
    println!(
        "| ratio, validated / plain | {:.2}x | | < 1.5x |",
        validated.as_secs_f64() / plain.as_secs_f64()
    );

    let mut g = c.benchmark_group("apiserver_30k_pods");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    g.bench_function("list_30k_pods_raw", |b| {
        b.iter(|| rt.block_on(raw(client.clone())))
    });
    g.bench_function("list_30k_pods_typed", |b| {
        b.iter(|| {
            rt.block_on(pods.list(&ListParams::default()))
                .expect("list")
                .items
                .len()
        })
    });
    g.bench_function("list_pods_of_one_node_by_label", |b| {
        b.iter(|| {
            rt.block_on(pods.list(&ListParams::default().labels("app=app-7")))
                .expect("list")
                .items
                .len()
        })
    });
    g.bench_function("write_to_10_watchers", |b| {
        b.iter_custom(|iters| {
            let lat = rt.block_on(watch_latency(&client, iters as usize));
            lat.iter().sum()
        })
    });
    g.finish();
    drop(client);
    drop(server);
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
