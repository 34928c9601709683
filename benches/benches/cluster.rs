//! The embedded cluster at scale, in virtual time: 1,000 fake nodes become
//! Ready and a 30,000-replica Deployment becomes Running from an empty
//! cluster. One run (it is minutes of work for criterion's ten samples);
//! prints the wall time of each phase, the process's peak memory and the
//! busy time of each component ([`simclock::busy`]: API server, scheduler,
//! controllers, kwok, and this benchmark's own observer).
//!
//! `cargo bench -p benches --bench cluster` (`-- NODES PODS` to resize).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use harness::cluster::{Cluster, NodeTemplate, pod_running};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use serde_json::json;

async fn run(nodes: usize, pods: usize) {
    let start = Instant::now();
    let template = NodeTemplate {
        pods: 110,
        ..NodeTemplate::new("node", "32", "128Gi")
    };
    let kwok = harness::kwok_config_for_scale();
    let cluster = Cluster::builder()
        .kwok_config(kwok)
        .nodes(nodes, &template)
        .start()
        .await
        .unwrap();
    let created_nodes = start.elapsed();
    cluster
        .wait_nodes_ready(nodes, Duration::from_secs(3600))
        .await
        .unwrap();
    let ready_nodes = start.elapsed();
    cluster
        .create(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "load", "namespace": "default"},
            "spec": {"replicas": pods, "selector": {"matchLabels": {"app": "load"}},
                "template": {"metadata": {"labels": {"app": "load"}},
                    "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}}
        }))
        .await
        .unwrap();
    let api: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let (mut t_created, mut t_bound) = (None, None);
    loop {
        // Paged, so the observer itself does not hold 30,000 pods at once.
        let (mut total_pods, mut bound, mut running) = (0, 0, 0);
        let mut lp = ListParams::default().labels("app=load").limit(1000);
        loop {
            let page = api.list(&lp).await.unwrap();
            total_pods += page.items.len();
            bound += page
                .items
                .iter()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
                .count();
            running += page.items.iter().filter(|p| pod_running(p)).count();
            match page.metadata.continue_ {
                Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
                _ => break,
            }
        }
        let all_len = total_pods;
        if t_created.is_none() && all_len >= pods {
            t_created = Some(start.elapsed());
        }
        if t_bound.is_none() && bound >= pods {
            t_bound = Some(start.elapsed());
        }
        if running >= pods {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let total = start.elapsed();
    let virtual_time = cluster.clock().elapsed();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "cluster bench: {nodes} nodes, {pods} pods (virtual time simulated: {:.0} s)",
        virtual_time.as_secs_f64()
    );
    println!(
        "  nodes created (API server)           {:>9.0} ms",
        ms(created_nodes)
    );
    println!(
        "  nodes Ready (kwok node-initialize)   {:>9.0} ms",
        ms(ready_nodes - created_nodes)
    );
    let created = t_created.unwrap_or(total);
    let bound = t_bound.unwrap_or(total);
    println!(
        "  all pods created (controllers)       {:>9.0} ms",
        ms(created - ready_nodes)
    );
    println!(
        "  all pods bound (scheduler)           {:>9.0} ms after creation",
        ms(bound.saturating_sub(created))
    );
    println!(
        "  all pods Running (kwok pod-ready)    {:>9.0} ms after binding",
        ms(total.saturating_sub(bound))
    );
    println!(
        "  total wall                           {:>9.0} ms",
        ms(total)
    );
    println!(
        "  peak memory (VmHWM)                  {:>9.0} MiB",
        benches::peak_rss_mib()
    );
    println!("  busy time per component (one thread; the rest is runtime and timers):");
    let mut charged = Duration::ZERO;
    for (component, busy) in simclock::busy::totals() {
        charged += busy;
        println!(
            "    {component:<12} {:>9.0} ms  {:>5.1} %",
            ms(busy),
            100.0 * busy.as_secs_f64() / total.as_secs_f64()
        );
    }
    let rest = total.saturating_sub(charged);
    println!(
        "    {:<12} {:>9.0} ms  {:>5.1} %",
        "(other)",
        ms(rest),
        100.0 * rest.as_secs_f64() / total.as_secs_f64()
    );
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let nodes = args.first().copied().unwrap_or(1000);
    let pods = args.get(1).copied().unwrap_or(30_000);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(async {
            simclock::busy::enable();
            simclock::busy::timed("benchmark", run(nodes, pods)).await
        });
}
