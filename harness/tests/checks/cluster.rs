//! The embedded cluster end to end, in virtual time: scheduler, workload
//! controllers and kwok working through the API server.

use std::collections::BTreeMap;
use std::time::Duration;

use harness::cluster::{Cluster, NodeTemplate, list, node_ready};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use serde_json::{Value, json};

const MINUTE: Duration = Duration::from_secs(60);

fn deployment(name: &str, replicas: i32, cpu: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}]}}}
    })
}

fn pod(name: &str, cpu: &str, priority_class: Option<&str>) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {"priorityClassName": priority_class,
            "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}]}
    })
}

/// A DaemonSet "agent" of pods labelled `app=agent`.
fn agent_daemonset() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "c", "image": "agent"}]}}}
    })
}

fn nodes_of(pods: &[Pod]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for p in pods {
        *m.entry(p.spec.as_ref().unwrap().node_name.clone().unwrap())
            .or_insert(0) += 1;
    }
    m
}

#[tokio::test(start_paused = true)]
async fn a_deployment_spreads_over_the_nodes_and_runs() {
    let cluster = Cluster::builder()
        .nodes(3, &NodeTemplate::new("node", "4", "16Gi"))
        .object(deployment("web", 10, "100m"))
        .start()
        .await
        .unwrap();
    cluster.wait_nodes_ready(3, MINUTE).await.unwrap();
    let pods = cluster
        .wait_pods_running("app=web", 10, MINUTE)
        .await
        .unwrap();
    assert_eq!(pods.len(), 10);
    let spread = nodes_of(&pods);
    assert_eq!(spread.len(), 3, "{spread:?}");
    assert!(spread.values().all(|n| *n >= 3), "{spread:?}");
    for p in &pods {
        let ip = p.status.as_ref().unwrap().pod_ip.clone().unwrap();
        assert!(ip.starts_with("10.0.0."), "{ip}");
    }
}

/// kube-controller-manager's `burstReplicas`: one sync of a ReplicaSet
/// creates at most 500 pods, so a Deployment of 1,200 replicas is filled
/// over three syncs, and its ReplicaSet's status says 500, then 1,000,
/// then 1,200 pods (each sync writes what it counts).
#[tokio::test(start_paused = true)]
async fn a_large_replicaset_is_filled_500_pods_a_sync() {
    use futures::StreamExt;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use kube::runtime::watcher;

    let cluster = Cluster::builder().start().await.unwrap();
    let sets: Api<ReplicaSet> = Api::namespaced(cluster.client(), "default");
    let mut counts = Vec::new();
    let mut changes = watcher::watcher(sets, watcher::Config::default()).boxed();
    cluster.create(deployment("big", 1200, "1")).await.unwrap();
    tokio::time::timeout(MINUTE, async {
        while let Some(Ok(ev)) = changes.next().await {
            if let watcher::Event::Apply(rs) = ev {
                let n = rs.status.map_or(0, |s| s.replicas);
                if counts.last() != Some(&n) {
                    counts.push(n);
                }
                if n == 1200 {
                    break;
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the ReplicaSet never counted 1200 pods: {counts:?}"));
    // Whether the watch saw the ReplicaSet before its first status
    // depends on when the watch started: a 0 first is not a sync's count.
    counts.retain(|n| *n != 0);
    assert_eq!(counts, [500, 1000, 1200]);
    let pods = list::<Pod>(&cluster.client(), "app=big").await.unwrap();
    assert_eq!(pods.len(), 1200);
}

#[tokio::test(start_paused = true)]
async fn pods_of_a_deleted_node_are_collected_and_replaced() {
    let cluster = Cluster::builder()
        .nodes(2, &NodeTemplate::new("node", "4", "16Gi"))
        .object(deployment("web", 4, "100m"))
        .start()
        .await
        .unwrap();
    cluster.wait_nodes_ready(2, MINUTE).await.unwrap();
    let pods = cluster
        .wait_pods_running("app=web", 4, MINUTE)
        .await
        .unwrap();
    let gone = pods[0].spec.as_ref().unwrap().node_name.clone().unwrap();
    Api::<Node>::all(cluster.client())
        .delete(&gone, &Default::default())
        .await
        .unwrap();
    cluster.wait_node_gone(&gone, MINUTE).await.unwrap();
    let pods = cluster
        .wait_until("the pods to run on the other node", MINUTE, |client| {
            let gone = gone.clone();
            async move {
                let pods: Vec<Pod> = list(&client, "app=web").await.map_err(|e| e.to_string())?;
                let moved = pods.iter().all(|p| {
                    p.spec
                        .as_ref()
                        .unwrap()
                        .node_name
                        .as_deref()
                        .is_some_and(|n| n != gone)
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                });
                if pods.len() == 4 && moved {
                    Ok(pods)
                } else {
                    Err(format!("{:?}", nodes_of_bound(&pods)))
                }
            }
        })
        .await
        .unwrap();
    assert_eq!(nodes_of(&pods).len(), 1, "{:?}", nodes_of(&pods));
}

fn nodes_of_bound(pods: &[Pod]) -> Vec<Option<String>> {
    pods.iter()
        .map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .collect()
}

fn condition(p: &Pod, type_: &str) -> Option<(String, String, String)> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

/// The pod `name` of `default`, once the scheduler has marked it
/// `PodScheduled=False` with reason `Unschedulable` (within a minute).
async fn marked_unschedulable(cluster: &Cluster, name: &'static str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    cluster
        .wait_until(
            &format!("pod {name} is marked Unschedulable"),
            MINUTE,
            |_| {
                let pods = pods.clone();
                async move {
                    let p = pods.get(name).await.map_err(|e| e.to_string())?;
                    match condition(&p, "PodScheduled") {
                        Some((s, r, _)) if s == "False" && r == "Unschedulable" => Ok(p),
                        other => Err(format!("{other:?}")),
                    }
                }
            },
        )
        .await
        .unwrap()
}

/// The events of `default` from `default-scheduler`, oldest first.
async fn scheduler_events(cluster: &Cluster) -> Vec<k8s_openapi::api::core::v1::Event> {
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(cluster.client(), "default");
    let mut listed = events.list(&Default::default()).await.unwrap().items;
    listed.sort_by_key(|e| e.first_timestamp.clone().map(|t| t.0));
    listed
        .into_iter()
        .filter(|e| {
            e.source.as_ref().and_then(|s| s.component.as_deref()) == Some("default-scheduler")
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn an_unschedulable_pod_waits_then_binds_when_a_big_node_appears() {
    let tainted = NodeTemplate {
        taints: vec![json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"})],
        ..NodeTemplate::new("gpu", "8", "16Gi")
    };
    let cluster = Cluster::builder()
        .nodes(2, &NodeTemplate::new("small", "1", "4Gi"))
        .nodes(1, &tainted)
        .object(pod("big", "3", None))
        .start()
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let p = marked_unschedulable(&cluster, "big").await;
    let (_, _, message) = condition(&p, "PodScheduled").unwrap();
    assert_eq!(
        message,
        "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu. \
         no new claims to deallocate, preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, \
         2 No preemption victims found for incoming pod."
    );
    // Nothing changes for a while: it stays pending.
    cluster.advance(5 * MINUTE).await;
    assert!(
        pods.get("big")
            .await
            .unwrap()
            .spec
            .unwrap()
            .node_name
            .is_none()
    );

    // Another node it does not fit: a new message, and, as with
    // kube-scheduler, the condition keeps the time it became False.
    let since = |p: &Pod| {
        let c = p.status.as_ref().unwrap().conditions.as_ref().unwrap();
        let c = c.iter().find(|c| c.type_ == "PodScheduled").unwrap();
        c.last_transition_time.clone().unwrap()
    };
    cluster
        .create(NodeTemplate::new("small", "1", "4Gi").node(2))
        .await
        .unwrap();
    let remarked = cluster
        .wait_until("pod big is marked again", MINUTE, |_| {
            let pods = pods.clone();
            async move {
                let p = pods.get("big").await.map_err(|e| e.to_string())?;
                match condition(&p, "PodScheduled") {
                    Some((_, _, m)) if m.starts_with("0/4 nodes") => Ok(p),
                    other => Err(format!("{other:?}")),
                }
            }
        })
        .await
        .unwrap();
    assert_eq!(since(&remarked), since(&p));
    let (_, _, message4) = condition(&remarked, "PodScheduled").unwrap();

    cluster
        .create(NodeTemplate::new("large", "8", "32Gi").node(0))
        .await
        .unwrap();
    let running = cluster
        .wait_pods_running("app=big", 1, Duration::from_secs(15))
        .await
        .unwrap();
    assert_eq!(
        running[0].spec.as_ref().unwrap().node_name.as_deref(),
        Some("large-0")
    );
    // The scheduler's events, as `kubectl describe pod` shows them: the
    // two failures fold into one series (client-go's recorder keys it on
    // the pod, type and reason, not the message), which keeps the first
    // message and counts 2; the condition has the latest.
    assert!(message4.starts_with("0/4 nodes"));
    let mine: Vec<(String, String, Option<i32>)> = scheduler_events(&cluster)
        .await
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some("big"))
        .map(|e| {
            let (reason, text) = (e.reason.unwrap_or_default(), e.message.unwrap_or_default());
            (reason, text, e.count)
        })
        .collect();
    assert_eq!(
        mine,
        [
            ("FailedScheduling".to_string(), message, Some(2)),
            (
                "Scheduled".to_string(),
                "Successfully assigned default/big to large-0".to_string(),
                Some(1)
            ),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn without_scheduler_events_pods_are_placed_and_no_event_is_written() {
    let cluster = Cluster::builder()
        .without_scheduler_events()
        .nodes(1, &NodeTemplate::new("small", "1", "4Gi"))
        .object(pod("fits", "500m", None))
        .object(pod("big", "3", None))
        .start()
        .await
        .unwrap();
    cluster
        .wait_pods_running("app=fits", 1, MINUTE)
        .await
        .unwrap();
    marked_unschedulable(&cluster, "big").await;
    // Past the recorder's six-minute series: anything queued is written.
    cluster.advance(10 * MINUTE).await;
    let from_scheduler: Vec<String> = scheduler_events(&cluster)
        .await
        .into_iter()
        .map(|e| e.reason.unwrap_or_default())
        .collect();
    assert!(from_scheduler.is_empty(), "{from_scheduler:?}");
}

#[tokio::test(start_paused = true)]
async fn a_high_priority_pod_preempts_a_low_priority_one() {
    let cluster = Cluster::builder()
        .priority_class("low", 10)
        .priority_class("high", 1000)
        .nodes(1, &NodeTemplate::new("node", "2", "8Gi"))
        .object(pod("victim", "1500m", Some("low")))
        .start()
        .await
        .unwrap();
    cluster
        .wait_pods_running("app=victim", 1, MINUTE)
        .await
        .unwrap();
    cluster.create(pod("vip", "1", Some("high"))).await.unwrap();
    let running = cluster
        .wait_pods_running("app=vip", 1, MINUTE)
        .await
        .unwrap();
    assert_eq!(
        running[0].spec.as_ref().unwrap().node_name.as_deref(),
        Some("node-0")
    );
    let victims = list::<Pod>(&cluster.client(), "app=victim").await.unwrap();
    assert!(victims.is_empty(), "the victim is gone: {victims:?}");
}

/// The room a preemption makes is kept for the preemptor: the victim's
/// replacement (created at once by its ReplicaSet) does not take it.
#[tokio::test(start_paused = true)]
async fn a_preempted_deployment_pod_does_not_take_back_the_room() {
    let mut low = deployment("low", 1, "1500m");
    low["spec"]["template"]["spec"]["priorityClassName"] = json!("low");
    let cluster = Cluster::builder()
        .priority_class("low", 10)
        .priority_class("high", 1000)
        .nodes(1, &NodeTemplate::new("node", "2", "8Gi"))
        .object(low)
        .start()
        .await
        .unwrap();
    cluster
        .wait_pods_running("app=low", 1, MINUTE)
        .await
        .unwrap();
    cluster.create(pod("vip", "1", Some("high"))).await.unwrap();
    let running = cluster
        .wait_pods_running("app=vip", 1, MINUTE)
        .await
        .unwrap();
    assert_eq!(
        running[0].spec.as_ref().unwrap().node_name.as_deref(),
        Some("node-0")
    );
    let low = list::<Pod>(&cluster.client(), "app=low").await.unwrap();
    assert!(
        low.iter()
            .all(|p| p.spec.as_ref().unwrap().node_name.is_none()),
        "the replacement stays pending: {low:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_daemonset_runs_on_every_node_including_new_ones() {
    let tainted = NodeTemplate {
        taints: vec![json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})],
        ..NodeTemplate::new("cordoned", "4", "8Gi")
    };
    let cluster = Cluster::builder()
        .nodes(2, &NodeTemplate::new("node", "4", "8Gi"))
        .nodes(1, &tainted)
        .object(agent_daemonset())
        .start()
        .await
        .unwrap();
    let pods = cluster
        .wait_pods_running("app=agent", 3, MINUTE)
        .await
        .unwrap();
    assert_eq!(
        nodes_of(&pods).len(),
        3,
        "the DaemonSet tolerates the unschedulable taint"
    );
    cluster
        .create(NodeTemplate::new("late", "4", "8Gi").node(0))
        .await
        .unwrap();
    let pods = cluster
        .wait_pods_running("app=agent", 4, MINUTE)
        .await
        .unwrap();
    assert!(nodes_of(&pods).contains_key("late-0"));
}

/// A DaemonSet's sync reads again only the nodes that changed: a daemon
/// pod deleted is made again on its node, a node gone leaves the count,
/// and a new pod template (a node selector) is applied on every node.
#[tokio::test(start_paused = true)]
async fn a_daemonset_follows_its_pods_its_nodes_and_its_template() {
    let labelled = NodeTemplate {
        labels: BTreeMap::from([("tier".to_string(), "edge".to_string())]),
        ..NodeTemplate::new("edge", "4", "8Gi")
    };
    let cluster = Cluster::builder()
        .nodes(3, &NodeTemplate::new("node", "4", "8Gi"))
        .nodes(1, &labelled)
        .object(agent_daemonset())
        .start()
        .await
        .unwrap();
    let client = cluster.client();
    let pods = cluster
        .wait_pods_running("app=agent", 4, MINUTE)
        .await
        .unwrap();
    let on_node_1 = pods
        .iter()
        .find(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some("node-1"))
        .unwrap();
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.delete(
        on_node_1.metadata.name.as_deref().unwrap(),
        &kube::api::DeleteParams::default().grace_period(0),
    )
    .await
    .unwrap();
    tokio::time::sleep(MINUTE).await;
    let pods = cluster
        .wait_pods_running("app=agent", 4, MINUTE)
        .await
        .unwrap();
    assert_eq!(nodes_of(&pods).get("node-1"), Some(&1), "made again");
    assert!(
        pods.iter()
            .all(|p| p.metadata.uid != on_node_1.metadata.uid),
        "a new pod, not the deleted one"
    );
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .delete("node-2", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    let sets: Api<k8s_openapi::api::apps::v1::DaemonSet> = Api::namespaced(client, "default");
    cluster
        .wait_until("the DaemonSet counts 3 nodes", MINUTE, |_| {
            let sets = sets.clone();
            async move {
                let ds = sets.get("agent").await.map_err(|e| e.to_string())?;
                let desired = ds.status.map(|s| s.desired_number_scheduled);
                (desired == Some(3))
                    .then_some(())
                    .ok_or(format!("desired {desired:?}"))
            }
        })
        .await
        .unwrap();
    let select = json!({"spec": {"template": {"spec": {"nodeSelector": {"tier": "edge"}}}}});
    sets.patch(
        "agent",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(select),
    )
    .await
    .unwrap();
    cluster
        .wait_until(
            "the daemon pods run on edge-0 only",
            MINUTE,
            |c| async move {
                let pods = list::<Pod>(&c, "app=agent")
                    .await
                    .map_err(|e| e.to_string())?;
                let on = nodes_of_bound(&pods);
                (on == vec![Some("edge-0".to_string())])
                    .then_some(())
                    .ok_or(format!("on {on:?}"))
            },
        )
        .await
        .unwrap();
}

/// As the DaemonSet controller's `NodeShouldRunDaemonPod`: a NoSchedule
/// taint the pod does not tolerate (the autoscaler's ToBeDeleted taint)
/// stops new daemon pods but keeps the running one; a NoExecute one
/// removes it.
#[tokio::test(start_paused = true)]
async fn a_noschedule_taint_keeps_a_running_daemon_pod_and_noexecute_removes_it() {
    let cluster = Cluster::builder()
        .nodes(1, &NodeTemplate::new("node", "4", "8Gi"))
        .object(agent_daemonset())
        .start()
        .await
        .unwrap();
    let before = cluster
        .wait_pods_running("app=agent", 1, MINUTE)
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());
    let taint = |effect: &str| json!({"spec": {"taints": [{"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": effect}]}});
    let patch = kube::api::Patch::Merge(taint("NoSchedule"));
    nodes
        .patch("node-0", &kube::api::PatchParams::default(), &patch)
        .await
        .unwrap();
    tokio::time::sleep(MINUTE).await;
    let after = list::<Pod>(&cluster.client(), "app=agent").await.unwrap();
    assert_eq!(
        after
            .iter()
            .map(|p| p.metadata.uid.clone())
            .collect::<Vec<_>>(),
        vec![before[0].metadata.uid.clone()],
        "the running daemon pod stays on a NoSchedule-tainted node"
    );
    let patch = kube::api::Patch::Merge(taint("NoExecute"));
    nodes
        .patch("node-0", &kube::api::PatchParams::default(), &patch)
        .await
        .unwrap();
    cluster
        .wait_until("the daemon pod is gone", MINUTE, |c| async move {
            let pods = list::<Pod>(&c, "app=agent")
                .await
                .map_err(|e| e.to_string())?;
            if pods.is_empty() {
                Ok(())
            } else {
                Err(format!("{} pods", pods.len()))
            }
        })
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_jobs_pods_complete() {
    let cluster = Cluster::builder()
        .nodes(2, &NodeTemplate::default())
        .object(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "batch", "namespace": "default"},
            "spec": {"completions": 3, "parallelism": 2,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
        }))
        .start()
        .await
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(cluster.client(), "default");
    let job = cluster
        .wait_until("job batch is Complete", MINUTE, |_| {
            let jobs = jobs.clone();
            async move {
                let j = jobs.get("batch").await.map_err(|e| e.to_string())?;
                let status = j.status.clone().unwrap_or_default();
                if status
                    .conditions
                    .iter()
                    .flatten()
                    .any(|c| c.type_ == "Complete" && c.status == "True")
                {
                    Ok(j)
                } else {
                    Err(format!("{status:?}"))
                }
            }
        })
        .await
        .unwrap();
    assert_eq!(job.status.unwrap().succeeded, Some(3));
    let pods = list::<Pod>(&cluster.client(), "batch.kubernetes.io/job-name=batch")
        .await
        .unwrap();
    assert_eq!(pods.len(), 3);
    assert!(
        pods.iter()
            .all(|p| p.status.as_ref().unwrap().phase.as_deref() == Some("Succeeded"))
    );
}

const NODE_FAILS_LATER: &str = r#"
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: testbed-node-not-ready
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchLabels: {testbed.example/fail: "true"}
    matchExpressions:
    - {key: .status.phase, operator: In, values: [Running]}
  weight: 10000
  delay:
    durationMilliseconds: 120000
  next:
    statusTemplate: |
      conditions:
      - type: Ready
        status: "False"
        reason: NodeFailed
        message: node failed
        lastHeartbeatTime: {{ Now }}
"#;

#[tokio::test(start_paused = true)]
async fn a_node_made_not_ready_by_a_stage_stays_not_ready() {
    let failing = NodeTemplate {
        labels: [("testbed.example/fail".to_string(), "true".to_string())].into(),
        ..NodeTemplate::new("failing", "4", "8Gi")
    };
    let cluster = Cluster::builder()
        .stages(NODE_FAILS_LATER)
        .nodes(1, &NodeTemplate::new("healthy", "4", "8Gi"))
        .nodes(1, &failing)
        .start()
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());
    // node-initialize first (the failing stage needs phase Running).
    cluster.wait_nodes_ready(2, MINUTE).await.unwrap();
    cluster.advance(3 * MINUTE).await;
    let failed = nodes.get("failing-0").await.unwrap();
    assert!(!node_ready(&failed), "{:?}", failed.status);
    cluster.advance(30 * MINUTE).await;
    assert!(
        !node_ready(&nodes.get("failing-0").await.unwrap()),
        "still NotReady"
    );
    assert!(node_ready(&nodes.get("healthy-0").await.unwrap()));
}

async fn assignment(seed_pods: usize) -> BTreeMap<String, String> {
    let cluster = Cluster::builder()
        .nodes(4, &NodeTemplate::new("node", "2", "8Gi"))
        .object(deployment("a", i32::try_from(seed_pods).unwrap(), "300m"))
        .object(deployment("b", 5, "700m"))
        .start()
        .await
        .unwrap();
    let mut pods = cluster
        .wait_pods_running("app in (a,b)", seed_pods + 5, MINUTE)
        .await
        .unwrap();
    pods.sort_by_key(|p| p.metadata.name.clone());
    // Pod names are random (generateName): compare per-app node multisets.
    let mut out = BTreeMap::new();
    for p in pods {
        let app = p.metadata.labels.unwrap()["app"].clone();
        let node = p.spec.unwrap().node_name.unwrap();
        out.entry(format!("{app}@{node}"))
            .and_modify(|n: &mut String| n.push('+'))
            .or_insert_with(|| "+".into());
    }
    out
}

#[tokio::test(start_paused = true)]
async fn the_same_scenario_ends_in_the_same_state() {
    let first = assignment(7).await;
    let second = assignment(7).await;
    assert_eq!(first, second);
}

#[tokio::test(start_paused = true)]
async fn a_statefulset_has_ordered_names_and_recreates_an_evicted_pod() {
    let cluster = Cluster::builder()
        .nodes(2, &NodeTemplate::default())
        .object(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}},
                    "spec": {"containers": [{"name": "c", "image": "postgres"}]}}}
        }))
        .start()
        .await
        .unwrap();
    let pods = cluster
        .wait_pods_running("app=db", 3, MINUTE)
        .await
        .unwrap();
    let mut names: Vec<String> = pods
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["db-0", "db-1", "db-2"]);
    let old_uid = pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("db-1"))
        .unwrap()
        .metadata
        .uid
        .clone();

    let api: Api<Pod> = Api::namespaced(cluster.client(), "default");
    api.evict("db-1", &Default::default()).await.unwrap();
    let back = cluster
        .wait_until("db-1 is recreated and Running", MINUTE, |_| {
            let api = api.clone();
            let old_uid = old_uid.clone();
            async move {
                let p = api.get("db-1").await.map_err(|e| e.to_string())?;
                if p.metadata.uid != old_uid && harness::cluster::pod_running(&p) {
                    Ok(p)
                } else {
                    Err(format!(
                        "uid {:?} phase {:?}",
                        p.metadata.uid,
                        p.status.and_then(|s| s.phase)
                    ))
                }
            }
        })
        .await
        .unwrap();
    assert_eq!(back.spec.unwrap().hostname.as_deref(), Some("db-1"));
}
