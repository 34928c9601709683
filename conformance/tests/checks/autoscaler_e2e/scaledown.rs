//! Scale-down on the embedded cluster: the unneeded time, pods that block
//! their node, drains, PodDisruptionBudgets, leftover taints and the
//! scale-down delays.

use super::*;

async fn unneeded_since(r: &Running, node: &str) -> Option<String> {
    r.decisions.lock().unwrap().unneeded.get(node).cloned()
}

#[tokio::test(start_paused = true)]
async fn a_node_unneeded_for_9m59s_stays_and_goes_after_10m() {
    let r = start(
        &[template(
            "pool",
            "4",
            json!({"cluster-autoscaler.kwok.nodegroup/desired-count": "2"}),
        )],
        vec![deployment("web", 1, "500m", json!({}), json!({}))],
        &[],
    )
    .await;
    r.cluster
        .wait_pods_running("app=web", 1, 2 * MINUTE)
        .await
        .unwrap();
    let nodes = group_nodes(&r.cluster, "pool").await;
    assert_eq!(nodes.len(), 2);
    let pods =
        harness::cluster::list::<k8s_openapi::api::core::v1::Pod>(&r.cluster.client(), "app=web")
            .await
            .unwrap();
    let busy = pods[0].spec.as_ref().unwrap().node_name.clone().unwrap();
    let empty = nodes
        .iter()
        .map(|n| n.metadata.name.clone().unwrap())
        .find(|n| *n != busy)
        .unwrap();
    // Wait for the first loop that finds it unneeded, at a loop boundary.
    let mut waited = Duration::ZERO;
    while unneeded_since(&r, &empty).await.is_none() {
        r.cluster.advance(Duration::from_secs(1)).await;
        waited += Duration::from_secs(1);
        assert!(
            waited < 2 * MINUTE,
            "never unneeded: {:?}",
            r.decisions.lock().unwrap()
        );
    }
    let since = r.cluster.clock().now();
    r.cluster
        .advance(10 * MINUTE - Duration::from_secs(1))
        .await;
    let still = Api::<Node>::all(r.cluster.client())
        .get_opt(&empty)
        .await
        .unwrap();
    let still = still.expect("unneeded for 9m59s: the node stays");
    assert!(
        !autoscaler::taints::has_to_be_deleted(&still),
        "not even tainted"
    );
    assert!(
        autoscaler::taints::has_taint(&still, autoscaler::taints::DELETION_CANDIDATE),
        "soft-tainted as a candidate"
    );
    r.cluster.wait_node_gone(&empty, MINUTE).await.unwrap();
    let gone_after = r.cluster.clock().now().duration_since(since).unwrap();
    assert!(
        gone_after >= 10 * MINUTE && gone_after < 10 * MINUTE + Duration::from_secs(30),
        "{gone_after:?}"
    );
    // The busy node stays: its pod has nowhere else to go.
    r.cluster.advance(15 * MINUTE).await;
    assert_eq!(group_nodes(&r.cluster, "pool").await.len(), 1);
    let removed = events(&r.cluster, "ScaleDownEmpty").await;
    assert!(
        removed.contains(&format!("Scale-down: empty node {empty} removed")),
        "{removed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pod_not_safe_to_evict_keeps_its_node() {
    let r = start(
        &[
            template(
                "a",
                "4",
                json!({"cluster-autoscaler.kwok.nodegroup/desired-count": "1"}),
            ),
            template(
                "b",
                "4",
                json!({"cluster-autoscaler.kwok.nodegroup/desired-count": "1"}),
            ),
        ],
        vec![deployment(
            "pinned",
            1,
            "100m",
            json!({"nodeSelector": {"kwok-nodegroup": "a"}}),
            json!({"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
        )],
        &[],
    )
    .await;
    r.cluster
        .wait_pods_running("app=pinned", 1, 2 * MINUTE)
        .await
        .unwrap();
    r.cluster.advance(20 * MINUTE).await;
    assert_eq!(
        group_nodes(&r.cluster, "a").await.len(),
        1,
        "the pod keeps its node"
    );
    assert!(
        group_nodes(&r.cluster, "b").await.is_empty(),
        "the empty node goes"
    );
    let node_a = group_nodes(&r.cluster, "a").await[0]
        .metadata
        .name
        .clone()
        .unwrap();
    // A node found unremovable is rechecked only after
    // --unremovable-node-recheck-timeout (5 min); loops in between record
    // it as RecentlyUnremovable. Wait for a loop that rechecked it.
    let mut reason = String::new();
    for _ in 0..40 {
        reason = r
            .decisions
            .lock()
            .unwrap()
            .unremovable
            .get(&node_a)
            .expect("node a is kept")
            .text();
        if reason != "RecentlyUnremovable" {
            break;
        }
        r.cluster.advance(Duration::from_secs(10)).await;
    }
    assert!(
        reason.starts_with("BlockedByPod: default/pinned-")
            && reason.ends_with("NotSafeToEvictAnnotation"),
        "{reason}"
    );
}

/// A group of two nodes, Ready first, then a deployment "web" of two
/// 500m pods that the scheduler spreads one per node.
async fn two_nodes_with_a_web_pod_each(objects: Vec<Value>) -> Running {
    let r = start(
        &[template(
            "pool",
            "4",
            json!({"cluster-autoscaler.kwok.nodegroup/desired-count": "2"}),
        )],
        objects,
        &[],
    )
    .await;
    // Both nodes first, so that the scheduler spreads the pods.
    r.cluster.wait_nodes_ready(2, MINUTE).await.unwrap();
    r.cluster
        .create(deployment("web", 2, "500m", json!({}), json!({})))
        .await
        .unwrap();
    r.cluster
        .wait_pods_running("app=web", 2, 2 * MINUTE)
        .await
        .unwrap();
    let pods =
        harness::cluster::list::<k8s_openapi::api::core::v1::Pod>(&r.cluster.client(), "app=web")
            .await
            .unwrap();
    let used: std::collections::BTreeSet<String> = pods
        .iter()
        .map(|p| p.spec.as_ref().unwrap().node_name.clone().unwrap())
        .collect();
    assert_eq!(used.len(), 2, "the scheduler spreads the two pods");
    r
}

#[tokio::test(start_paused = true)]
async fn an_underused_node_is_drained_and_its_pods_run_elsewhere() {
    let r = two_nodes_with_a_web_pod_each(vec![]).await;
    r.cluster.advance(13 * MINUTE).await;
    let left = group_nodes(&r.cluster, "pool").await;
    assert_eq!(left.len(), 1, "one node drained and removed");
    let survivor = left[0].metadata.name.clone().unwrap();
    let running = r
        .cluster
        .wait_pods_running("app=web", 2, MINUTE)
        .await
        .unwrap();
    assert!(
        running
            .iter()
            .all(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some(survivor.as_str()))
    );
    let removed = events(&r.cluster, "ScaleDown").await;
    assert!(
        removed
            .iter()
            .any(|m| m.starts_with("Scale-down: removing node ")
                && m.contains("pods to reschedule: web-")),
        "{removed:?}"
    );
    assert!(
        removed.iter().any(|m| m.ends_with(" removed with drain")),
        "{removed:?}"
    );
    assert!(
        removed
            .iter()
            .any(|m| m == "deleting pod for node scale down"),
        "{removed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pod_disruption_budget_stops_the_drain() {
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}}});
    let r = two_nodes_with_a_web_pod_each(vec![pdb]).await;
    r.cluster.advance(20 * MINUTE).await;
    assert_eq!(
        group_nodes(&r.cluster, "pool").await.len(),
        2,
        "no disruption allowed: both nodes stay"
    );
    // Rechecked every 5 minutes (RecentlyUnremovable in between): the
    // reason shows at the next simulation.
    let mut seen = Vec::new();
    for _ in 0..360 {
        let d = r.decisions.lock().unwrap().clone();
        let texts = d.unremovable.texts();
        if texts.values().any(|r| r.ends_with("NotEnoughPdb")) {
            return;
        }
        seen = texts.into_values().collect();
        r.cluster.advance(Duration::from_secs(1)).await;
    }
    panic!("never blocked by the budget: {seen:?}");
}

#[tokio::test(start_paused = true)]
async fn leftover_to_be_deleted_taints_are_removed_at_start() {
    let mut builder = Cluster::builder();
    for cm in kwok_config_maps(&[template("pool", "4", json!({}))]) {
        builder = builder.object(cm);
    }
    let cluster = builder.start().await.unwrap();
    let node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "pool-left", "labels": {"kwok-nodegroup": "pool"},
            "annotations": {"kwok.x-k8s.io/node": "fake", "cluster-autoscaler.kwok.nodegroup/name": "pool"}},
        "spec": {"providerID": "kwok:pool-left", "taints": [{"key": "ToBeDeletedByClusterAutoscaler", "value": "1700000000", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}, "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}});
    cluster.create(node).await.unwrap();
    cluster.wait_nodes_ready(1, MINUTE).await.unwrap();
    let client = cluster.client();
    let mut a = autoscaler::inprocess::kwok(client.clone(), cluster.clock().clone(), &[])
        .await
        .unwrap()
        .autoscaler;
    a.run_once().await.unwrap();
    let n = Api::<Node>::all(client).get("pool-left").await.unwrap();
    assert!(!autoscaler::taints::has_to_be_deleted(&n));
    cluster.advance(Duration::from_secs(1)).await;
    let cleaned = events(&cluster, "ClusterAutoscalerCleanup").await;
    assert_eq!(
        cleaned,
        ["removed ToBeDeletedByClusterAutoscaler taint from node pool-left"]
    );
}

/// Group a scales up; group b has an empty node. With a long
/// --scale-down-delay-after-add, b's node waits for it globally, but not
/// with --scale-down-delay-type-local.
async fn empty_node_of_b_after(minutes: u32, flags: &[&str]) -> usize {
    let r = start(
        &[
            template(
                "a",
                "4",
                json!({"cluster-autoscaler.kwok.nodegroup/desired-count": "1"}),
            ),
            template(
                "b",
                "4",
                json!({"cluster-autoscaler.kwok.nodegroup/desired-count": "1"}),
            ),
        ],
        vec![],
        flags,
    )
    .await;
    r.cluster.wait_nodes_ready(2, MINUTE).await.unwrap();
    r.cluster
        .create(deployment(
            "web",
            2,
            "3",
            json!({"nodeSelector": {"kwok-nodegroup": "a"}}),
            json!({}),
        ))
        .await
        .unwrap();
    r.cluster
        .wait_pods_running("app=web", 2, 3 * MINUTE)
        .await
        .unwrap();
    assert_eq!(group_nodes(&r.cluster, "a").await.len(), 2, "a scaled up");
    r.cluster.advance(minutes * MINUTE).await;
    group_nodes(&r.cluster, "b").await.len()
}

#[tokio::test(start_paused = true)]
async fn scale_down_delays_are_global_unless_local() {
    assert_eq!(
        empty_node_of_b_after(15, &["--scale-down-delay-after-add=30m"]).await,
        1,
        "global delay holds b"
    );
    assert_eq!(
        empty_node_of_b_after(
            15,
            &[
                "--scale-down-delay-after-add=30m",
                "--scale-down-delay-type-local"
            ]
        )
        .await,
        0,
        "only a is delayed"
    );
}
