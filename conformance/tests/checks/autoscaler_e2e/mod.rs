//! The autoscaler in-process on the embedded cluster, in virtual time, with
//! the kwok provider: the FAQ's promises end to end.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use autoscaler::cloudprovider::kwok::{Fault, Faults, quota_exceeded};
use autoscaler::decisions::Decisions;
use harness::cluster::Cluster;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Node};
use kube::Api;
use serde_json::{Value, json};

mod leader_election;
mod scaledown;

const MINUTE: Duration = Duration::from_secs(60);

fn template(group: &str, cpu: &str, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": group, "labels": {"kwok-nodegroup": group}, "annotations": annotations},
        "status": {"capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                   "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}})
}

fn kwok_config_maps(templates: &[Value]) -> Vec<Value> {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": templates});
    vec![
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kwok-provider-config", "namespace": "kube-system"},
            "data": {"config": "readNodesFrom: configmap\nnodegroups:\n  fromNodeLabelKey: kwok-nodegroup\nnodes:\n  skipTaint: true\nconfigmap:\n  name: kwok-provider-templates\n"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kwok-provider-templates", "namespace": "kube-system"},
            "data": {"templates": serde_json::to_string(&list).unwrap()}}),
    ]
}

fn deployment(
    name: &str,
    replicas: i32,
    cpu: &str,
    extra_spec: Value,
    annotations: Value,
) -> Value {
    let mut spec = json!({"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra_spec.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}, "annotations": annotations}, "spec": spec}}})
}

struct Running {
    cluster: Cluster,
    faults: Arc<Faults>,
    decisions: Arc<Mutex<Arc<Decisions>>>,
    _task: tokio::task::JoinHandle<()>,
}

async fn start(templates: &[Value], objects: Vec<Value>, flags: &[&str]) -> Running {
    let mut builder = Cluster::builder();
    for cm in kwok_config_maps(templates) {
        builder = builder.object(cm);
    }
    let cluster = builder.start().await.unwrap();
    for o in objects {
        cluster.create(o).await.unwrap();
    }
    let args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    let built = autoscaler::inprocess::kwok(cluster.client(), cluster.clock().clone(), &args)
        .await
        .unwrap();
    let faults = built.faults;
    let decisions = built.autoscaler.decisions.clone();
    let task = tokio::spawn(built.autoscaler.run());
    Running {
        cluster,
        faults,
        decisions,
        _task: task,
    }
}

async fn group_nodes(cluster: &Cluster, group: &str) -> Vec<Node> {
    harness::cluster::list(&cluster.client(), &format!("kwok-nodegroup={group}"))
        .await
        .unwrap()
}

async fn status(cluster: &Cluster) -> Value {
    let cm = Api::<ConfigMap>::namespaced(cluster.client(), "kube-system")
        .get("cluster-autoscaler-status")
        .await
        .unwrap();
    serde_saphyr::from_str(&cm.data.unwrap()["status"]).unwrap()
}

async fn events(cluster: &Cluster, reason: &str) -> Vec<String> {
    let mut out = Vec::new();
    for ns in ["default", "kube-system"] {
        for e in Api::<Event>::namespaced(cluster.client(), ns)
            .list(&Default::default())
            .await
            .unwrap()
            .items
        {
            if e.reason.as_deref() == Some(reason)
                && e.source.as_ref().and_then(|s| s.component.as_deref())
                    == Some("cluster-autoscaler")
            {
                out.push(e.message.unwrap_or_default());
            }
        }
    }
    out
}

#[tokio::test(start_paused = true)]
async fn pending_pods_get_exactly_the_nodes_they_need() {
    let r = start(
        &[template(
            "pool",
            "4",
            json!({"cluster-autoscaler.kwok.nodegroup/max-count": "10"}),
        )],
        vec![deployment("web", 10, "900m", json!({}), json!({}))],
        &[],
    )
    .await;
    // 3.9 CPU left on a template node (kube-proxy takes 100m): 4 pods per node, 3 nodes.
    r.cluster
        .wait_pods_running("app=web", 10, 5 * MINUTE)
        .await
        .unwrap();
    assert_eq!(group_nodes(&r.cluster, "pool").await.len(), 3);
    r.cluster.advance(MINUTE).await;
    let s = status(&r.cluster).await;
    assert_eq!(s["autoscalerStatus"], "Running");
    let g = &s["nodeGroups"][0];
    assert_eq!(g["name"], "pool");
    assert_eq!(g["health"]["cloudProviderTarget"], 3);
    assert_eq!(g["health"]["nodeCounts"]["registered"]["ready"], 3);
    let triggered = events(&r.cluster, "TriggeredScaleUp").await;
    assert!(
        triggered
            .iter()
            .any(|m| m == "pod triggered scale-up: [{pool 0->3 (max: 10)}]"),
        "{triggered:?}"
    );
    let scaled = events(&r.cluster, "ScaledUpGroup").await;
    assert!(
        scaled.contains(&"Scale-up: group pool size set to 3 instead of 0 (max: 10)".to_string()),
        "{scaled:?}"
    );
    // Nothing more is needed: no further nodes.
    r.cluster.advance(10 * MINUTE).await;
    assert_eq!(group_nodes(&r.cluster, "pool").await.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn expendable_pods_neither_trigger_scale_up_nor_block_scale_down() {
    let low = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": -100});
    let r = start(
        &[template(
            "pool",
            "4",
            json!({"cluster-autoscaler.kwok.nodegroup/desired-count": "1"}),
        )],
        vec![
            low,
            deployment(
                "filler",
                1,
                "1",
                json!({"priorityClassName": "low"}),
                json!({}),
            ),
            deployment(
                "big",
                2,
                "3",
                json!({"priorityClassName": "low"}),
                json!({}),
            ),
        ],
        &[],
    )
    .await;
    r.cluster
        .wait_pods_running("app=filler", 1, 2 * MINUTE)
        .await
        .unwrap();
    r.cluster.advance(5 * MINUTE).await;
    assert_eq!(
        group_nodes(&r.cluster, "pool").await.len(),
        1,
        "expendable pending pods trigger nothing"
    );
    // The node runs only expendable pods: it is empty for CA and goes.
    r.cluster.advance(15 * MINUTE).await;
    assert!(group_nodes(&r.cluster, "pool").await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_failed_scale_up_backs_the_group_off_and_the_next_best_group_is_used() {
    let priorities = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cluster-autoscaler-priority-expander", "namespace": "kube-system"},
        "data": {"priorities": "20:\n  - ^cheap$\n10:\n  - ^fallback$\n"}});
    let r = start(
        &[
            template("cheap", "4", json!({})),
            template("fallback", "4", json!({})),
        ],
        vec![priorities],
        &["--expander=priority"],
    )
    .await;
    r.faults.set(
        "cheap",
        Fault::IncreaseSizeFails(quota_exceeded("quota 'CPUS' exceeded")),
    );
    r.cluster
        .create(deployment("web", 2, "1", json!({}), json!({})))
        .await
        .unwrap();
    r.cluster
        .wait_pods_running("app=web", 2, 3 * MINUTE)
        .await
        .unwrap();
    assert!(group_nodes(&r.cluster, "cheap").await.is_empty());
    assert_eq!(group_nodes(&r.cluster, "fallback").await.len(), 1);
    let failed = events(&r.cluster, "FailedToScaleUpGroup").await;
    assert!(
        failed
            .iter()
            .any(|m| m.starts_with("Scale-up failed for group cheap: ")),
        "{failed:?}"
    );
    let s = status(&r.cluster).await;
    let cheap = s["nodeGroups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "cheap")
        .unwrap()
        .clone();
    assert_eq!(cheap["scaleUp"]["status"], "Backoff");
    assert_eq!(
        cheap["scaleUp"]["backoffInfo"]["errorCode"],
        "QUOTA_EXCEEDED"
    );
}

#[tokio::test(start_paused = true)]
async fn nodes_that_never_register_are_given_up_after_max_node_provision_time() {
    let r = start(&[template("ghost", "4", json!({}))], vec![], &[]).await;
    r.faults.set("ghost", Fault::NeverRegister);
    r.cluster
        .create(deployment("web", 1, "1", json!({}), json!({})))
        .await
        .unwrap();
    r.cluster.advance(MINUTE).await;
    let s = status(&r.cluster).await;
    assert_eq!(s["nodeGroups"][0]["health"]["cloudProviderTarget"], 1);
    assert_eq!(s["nodeGroups"][0]["scaleUp"]["status"], "InProgress");
    assert_eq!(
        s["nodeGroups"][0]["health"]["nodeCounts"]["unregistered"],
        1
    );
    r.cluster.advance(16 * MINUTE).await;
    let s = status(&r.cluster).await;
    let g = &s["nodeGroups"][0];
    assert_eq!(g["scaleUp"]["status"], "Backoff", "{s:?}");
    assert_eq!(g["scaleUp"]["backoffInfo"]["errorCode"], "timeout");
    // As CA 1.36: the timed-out scale-up's target is lowered again, which
    // gives up the instance that never registered, so nothing is left to
    // delete as unregistered.
    assert_eq!(g["health"]["cloudProviderTarget"], 0, "{s:?}");
    let removed = events(&r.cluster, "DeleteUnregistered").await;
    assert!(removed.is_empty(), "{removed:?}");
    assert!(
        events(&r.cluster, "ScaleUpTimedOut")
            .await
            .contains(&"Nodes added to group ghost failed to register within 15m0s".to_string())
    );
}

#[tokio::test(start_paused = true)]
async fn a_group_never_goes_above_max() {
    let r = start(
        &[template(
            "small",
            "4",
            json!({"cluster-autoscaler.kwok.nodegroup/max-count": "2"}),
        )],
        vec![deployment("web", 12, "900m", json!({}), json!({}))],
        &[],
    )
    .await;
    r.cluster
        .wait_pods_running("app=web", 8, 5 * MINUTE)
        .await
        .unwrap();
    r.cluster.advance(5 * MINUTE).await;
    assert_eq!(group_nodes(&r.cluster, "small").await.len(), 2);
    let not = events(&r.cluster, "NotTriggerScaleUp").await;
    assert!(
        not.iter()
            .any(|m| m == "pod didn't trigger scale-up: 1 max node group size reached"),
        "{not:?}"
    );
    // The decision record names the group and why.
    let d = r.decisions.lock().unwrap().clone();
    assert_eq!(
        d.scale_up,
        Some(autoscaler::scaleup::ScaleUpStatus::NoOptionsAvailable)
    );
    assert!(!d.pods.is_empty());
    assert!(
        d.pods
            .values()
            .all(|g| g.get("small").map(String::as_str) == Some("max node group size reached")),
        "{:?}",
        d.pods
    );
}

#[tokio::test(start_paused = true)]
async fn a_group_never_goes_below_min() {
    let r = start(
        &[template("floor", "4", json!({"cluster-autoscaler.kwok.nodegroup/min-count": "1", "cluster-autoscaler.kwok.nodegroup/desired-count": "3"}))],
        vec![],
        &[],
    )
    .await;
    r.cluster.wait_nodes_ready(3, 2 * MINUTE).await.unwrap();
    r.cluster.advance(30 * MINUTE).await;
    assert_eq!(
        group_nodes(&r.cluster, "floor").await.len(),
        1,
        "empty nodes go, down to min"
    );
    let node = group_nodes(&r.cluster, "floor").await[0]
        .metadata
        .name
        .clone()
        .unwrap();
    assert_eq!(
        r.decisions.lock().unwrap().unremovable.get(&node).cloned(),
        None,
        "the last node is not even a candidate"
    );
}

async fn raise_min_to(r: &Running, min: &str) {
    let api: Api<ConfigMap> = Api::namespaced(r.cluster.client(), "kube-system");
    let mut cm = api.get("kwok-provider-templates").await.unwrap();
    let t = template(
        "grow",
        "4",
        json!({"cluster-autoscaler.kwok.nodegroup/min-count": min}),
    );
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [t]});
    cm.data = Some([("templates".to_string(), list.to_string())].into());
    cm.metadata.managed_fields = None;
    api.replace("kwok-provider-templates", &Default::default(), &cm)
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn enforce_node_group_min_size_raises_a_group_to_min() {
    let r = start(
        &[template("grow", "4", json!({}))],
        vec![],
        &["--enforce-node-group-min-size"],
    )
    .await;
    r.cluster.advance(MINUTE).await;
    assert!(group_nodes(&r.cluster, "grow").await.is_empty());
    // The operator raises the minimum; refresh re-reads it.
    raise_min_to(&r, "2").await;
    r.cluster.wait_nodes_ready(2, 2 * MINUTE).await.unwrap();
    assert_eq!(group_nodes(&r.cluster, "grow").await.len(), 2);

    // Without the flag, CA never repairs a group below its min by itself.
    let r = start(&[template("grow", "4", json!({}))], vec![], &[]).await;
    raise_min_to(&r, "2").await;
    r.cluster.advance(5 * MINUTE).await;
    assert!(group_nodes(&r.cluster, "grow").await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_failed_min_size_increase_backs_off_with_the_providers_error_code() {
    // Raising a group to its min goes through the same executor as a
    // scale-up: the failure backs the group off with the provider's code.
    let r = start(
        &[template("grow", "4", json!({}))],
        vec![],
        &["--enforce-node-group-min-size"],
    )
    .await;
    r.faults.set(
        "grow",
        Fault::IncreaseSizeFails(quota_exceeded("quota 'CPUS' exceeded")),
    );
    raise_min_to(&r, "2").await;
    r.cluster.advance(2 * MINUTE).await;
    assert!(group_nodes(&r.cluster, "grow").await.is_empty());
    let s = status(&r.cluster).await;
    let grow = s["nodeGroups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "grow")
        .unwrap()
        .clone();
    assert_eq!(grow["scaleUp"]["status"], "Backoff", "{grow}");
    assert_eq!(
        grow["scaleUp"]["backoffInfo"]["errorCode"],
        "QUOTA_EXCEEDED"
    );
    let failed = events(&r.cluster, "FailedToScaleUpGroup").await;
    assert!(
        failed
            .iter()
            .any(|m| m.starts_with("Scale-up failed for group grow: ")),
        "{failed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_broken_priority_config_map_is_reported_and_ignored() {
    let priorities = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cluster-autoscaler-priority-expander", "namespace": "kube-system"},
        "data": {"priorities": "ten:\n  - ^a$\n"}});
    let r = start(
        &[template("a", "4", json!({}))],
        vec![priorities, deployment("web", 1, "1", json!({}), json!({}))],
        &["--expander=priority"],
    )
    .await;
    r.cluster
        .wait_pods_running("app=web", 1, 2 * MINUTE)
        .await
        .unwrap();
    let invalid = events(&r.cluster, "PriorityConfigMapInvalid").await;
    assert!(
        invalid.iter().any(
            |m| m.starts_with("Wrong configuration for priority expander:")
                && m.ends_with("Ignoring update.")
        ),
        "{invalid:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_broken_provider_config_stops_loops_without_deleting_nodes() {
    let r = start(
        &[template(
            "pool",
            "4",
            json!({"cluster-autoscaler.kwok.nodegroup/desired-count": "2"}),
        )],
        vec![],
        &[],
    )
    .await;
    r.cluster.wait_nodes_ready(2, 2 * MINUTE).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(r.cluster.client(), "kube-system");
    let mut cm = api.get("kwok-provider-config").await.unwrap();
    cm.data = Some([("config".to_string(), "readNodesFrom: nowhere".to_string())].into());
    cm.metadata.managed_fields = None;
    api.replace("kwok-provider-config", &Default::default(), &cm)
        .await
        .unwrap();
    // Two empty nodes would be removed after 10 minutes; a loop that cannot
    // read its configuration does nothing instead.
    r.cluster.advance(30 * MINUTE).await;
    assert_eq!(group_nodes(&r.cluster, "pool").await.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn instances_that_fail_to_be_created_back_the_group_off_and_are_deleted() {
    let priorities = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cluster-autoscaler-priority-expander", "namespace": "kube-system"},
        "data": {"priorities": "20:\n  - ^stock$\n10:\n  - ^fallback$\n"}});
    let r = start(
        &[
            template("stock", "4", json!({"testbed.cluster-autoscaler.kwok/fault": "creation-error=OutOfResource:STOCKOUT:no stock in zone a"})),
            template("fallback", "4", json!({})),
        ],
        vec![priorities],
        &["--expander=priority"],
    )
    .await;
    r.cluster
        .create(deployment("web", 1, "1", json!({}), json!({})))
        .await
        .unwrap();
    r.cluster
        .wait_pods_running("app=web", 1, 3 * MINUTE)
        .await
        .unwrap();
    assert_eq!(group_nodes(&r.cluster, "fallback").await.len(), 1);
    let failed = events(&r.cluster, "ScaleUpFailed").await;
    assert_eq!(
        failed,
        [
            "Failed adding 1 nodes to group stock due to OutOfResource.STOCKOUT; source errors: no stock in zone a"
        ]
    );
    r.cluster.advance(MINUTE).await;
    let s = status(&r.cluster).await;
    let stock = s["nodeGroups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "stock")
        .unwrap()
        .clone();
    assert_eq!(
        stock["health"]["cloudProviderTarget"], 0,
        "the failed instance was deleted"
    );
    assert_eq!(stock["scaleUp"]["status"], "Backoff");
    assert_eq!(stock["scaleUp"]["backoffInfo"]["errorCode"], "STOCKOUT");
}

fn daemonset(name: &str, cpu: &str, priority_class: Option<&str>) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"ds": name}},
            "template": {"metadata": {"labels": {"ds": name}},
                "spec": {"priorityClassName": priority_class,
                    "containers": [{"name": "c", "image": "agent", "resources": {"requests": {"cpu": cpu}}}]}}}})
}

/// Nodes a group gets from zero for 6 pods of 1 CPU on 4-CPU nodes, with a
/// DaemonSet of 1 CPU.
async fn nodes_for_six_pods(ds: Value, flags: &[&str]) -> usize {
    let r = start(
        &[template("pool", "4", json!({}))],
        vec![ds, deployment("web", 6, "1", json!({}), json!({}))],
        flags,
    )
    .await;
    r.cluster
        .wait_pods_running("app=web", 6, 5 * MINUTE)
        .await
        .unwrap();
    r.cluster.advance(MINUTE).await;
    group_nodes(&r.cluster, "pool").await.len()
}

#[tokio::test(start_paused = true)]
async fn daemonset_pods_count_on_new_nodes_when_critical_or_forced() {
    // Without the DaemonSet on the template, 3 pods fit a new node: 2 nodes.
    assert_eq!(
        nodes_for_six_pods(daemonset("agent", "1", None), &[]).await,
        2
    );
    // Counted (2 pods per new node): 3 nodes.
    assert_eq!(
        nodes_for_six_pods(daemonset("agent", "1", None), &["--force-ds"]).await,
        3
    );
    assert_eq!(
        nodes_for_six_pods(daemonset("agent", "1", Some("system-node-critical")), &[]).await,
        3
    );
}

#[tokio::test(start_paused = true)]
async fn events_beyond_the_queue_are_dropped_as_client_go_drops_them() {
    use autoscaler::events::{EventReason, EventRecorder, EventType, MAX_QUEUED_EVENTS, ObjectRef};
    let cluster = Cluster::builder().start().await.unwrap();
    let status_cm = ObjectRef::config_map("kube-system", "cluster-autoscaler-status");
    let recorder = EventRecorder::new(
        cluster.client(),
        cluster.clock().clone(),
        false,
        status_cm,
        true,
    );
    // 1,500 pods each trigger a scale-up in one loop, with no await in
    // between: the queue takes 1,000, the rest are dropped.
    let extra = 500;
    for i in 0..MAX_QUEUED_EVENTS + extra {
        let pod = ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: "default".into(),
            name: format!("p{i}"),
            uid: format!("uid-{i}"),
        };
        recorder.record(
            &pod,
            EventType::Normal,
            EventReason::TriggeredScaleUp,
            "pod triggered scale-up: [{g 0->1 (max: 10)}]".into(),
        );
    }
    assert_eq!(recorder.dropped(), extra as u64);
    cluster.advance(MINUTE).await;
    assert_eq!(
        events(&cluster, "TriggeredScaleUp").await.len(),
        MAX_QUEUED_EVENTS
    );
}

#[tokio::test(start_paused = true)]
async fn with_frequent_loops_new_pods_wait_only_until_they_are_not_new() {
    let r = start(
        &[template(
            "pool",
            "4",
            json!({"cluster-autoscaler.kwok.nodegroup/max-count": "10"}),
        )],
        Vec::new(),
        &["--frequent-loops-enabled=true"],
    )
    .await;
    r.cluster.advance(Duration::from_secs(15)).await;
    let created = r.cluster.clock().now();
    r.cluster
        .create(deployment("web", 8, "900m", json!({}), json!({})))
        .await
        .unwrap();
    // The pods are marked unschedulable at once, so the first loop finds
    // them all under 2 s old and waits; the next one starts when they are
    // 2 s old, not at the 10 s timer.
    let requested = r
        .cluster
        .wait_until("a node of pool", MINUTE, |client| async move {
            let nodes = Api::<Node>::all(client)
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            if nodes.items.is_empty() {
                Err("no node".into())
            } else {
                Ok(())
            }
        })
        .await
        .map(|()| r.cluster.clock().now());
    let waited = requested.unwrap().duration_since(created).unwrap();
    assert!(
        waited < Duration::from_secs(5),
        "the scale-up came {waited:?} after the pods"
    );
    assert_eq!(group_nodes(&r.cluster, "pool").await.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn with_frequent_loops_a_pod_bound_while_nodes_are_upcoming_starts_a_loop() {
    let r = start(
        &[template("ghost", "4", json!({}))],
        Vec::new(),
        &["--frequent-loops-enabled=true", "--scan-interval=1m"],
    )
    .await;
    // The scale-up's node never registers: it stays upcoming.
    r.faults.set("ghost", Fault::NeverRegister);
    r.cluster
        .create(deployment("web", 1, "1", json!({}), json!({})))
        .await
        .unwrap();
    // A pod no scheduler here serves: unbound and never marked.
    r.cluster
        .create(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "elsewhere", "namespace": "default"},
            "spec": {"schedulerName": "other-scheduler",
                "containers": [{"name": "c", "image": "i"}]}}))
        .await
        .unwrap();
    r.cluster.advance(Duration::from_secs(20)).await;
    let s = status(&r.cluster).await;
    assert_eq!(s["nodeGroups"][0]["health"]["cloudProviderTarget"], 1);
    let before = r.decisions.lock().unwrap().time.clone();
    r.cluster.advance(Duration::from_secs(5)).await;
    assert_eq!(
        r.decisions.lock().unwrap().time,
        before,
        "no loop before the 1 min timer without a trigger"
    );
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "elsewhere", "namespace": "default"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "some-node"}});
    Api::<k8s_openapi::api::core::v1::Pod>::namespaced(r.cluster.client(), "default")
        .create_subresource::<_, Value>("binding", "elsewhere", &Default::default(), &binding)
        .await
        .unwrap();
    r.cluster.advance(Duration::from_secs(1)).await;
    let after = r.decisions.lock().unwrap().time.clone();
    assert!(
        after > before,
        "the bind started a loop: {before} then {after}"
    );
}
