//! The step library. Cluster shape and autoscaler flags are `Given`s;
//! workloads and the passing of time are `When`s; every `Then` reads the
//! cluster or the autoscaler's published records and says what it saw when
//! it fails.

use std::time::Duration;

use cucumber::{given, then, when};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};
use kube::Api;
use serde_json::{Value, json};

use autoscaler::core::Decisions;

use crate::world::{CaWorld, GroupSpec, StepResult};

const MINUTE: Duration = Duration::from_secs(60);

// ---- Given: cluster shape and flags ----

#[given(
    regex = r#"^a node group "(\S+)" of nodes with (\S+) CPU and (\S+) memory, min (\d+) and max (\d+)$"#
)]
fn node_group(w: &mut CaWorld, name: String, cpu: String, memory: String, min: usize, max: usize) {
    w.groups.push(GroupSpec::new(&name, &cpu, &memory, min, max));
}

#[given(regex = r#"^the node group "(\S+)" starts with (\d+) nodes?$"#)]
fn starts_with(w: &mut CaWorld, name: String, count: usize) -> StepResult {
    let g = w
        .groups
        .iter_mut()
        .find(|g| g.name == name)
        .ok_or_else(|| format!("no node group {name:?} declared"))?;
    g.initial = count;
    Ok(())
}

#[given(regex = r#"^the autoscaler runs with "(.*)"$"#)]
fn autoscaler_flags(w: &mut CaWorld, flags: String) {
    w.flags.extend(flags.split_whitespace().map(str::to_string));
}

// ---- Given/When: workloads ----

fn deployment(name: &str, replicas: usize, cpu: &str, extra: Value, annotations: Value) -> Value {
    let mut spec = json!({"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}, "annotations": annotations}, "spec": spec}}})
}

#[given(regex = r#"^a deployment "(\S+)" of (\d+) pods? requesting (\S+) CPU$"#)]
#[when(regex = r#"^a deployment "(\S+)" of (\d+) pods? requesting (\S+) CPU is created$"#)]
async fn a_deployment(w: &mut CaWorld, name: String, replicas: usize, cpu: String) -> StepResult {
    w.create(deployment(&name, replicas, &cpu, json!({}), json!({})))
        .await
}

#[given(
    regex = r#"^a deployment "(\S+)" of (\d+) pods? requesting (\S+) CPU annotated "(\S+)=(\S*)"$"#
)]
async fn an_annotated_deployment(
    w: &mut CaWorld,
    name: String,
    replicas: usize,
    cpu: String,
    key: String,
    value: String,
) -> StepResult {
    w.create(deployment(
        &name,
        replicas,
        &cpu,
        json!({}),
        json!({ key: value }),
    ))
    .await
}

#[given(
    regex = r#"^a deployment "(\S+)" of (\d+) pods? requesting (\S+) CPU on node group "(\S+)"$"#
)]
async fn a_pinned_deployment(
    w: &mut CaWorld,
    name: String,
    replicas: usize,
    cpu: String,
    group: String,
) -> StepResult {
    w.create(deployment(
        &name,
        replicas,
        &cpu,
        json!({"nodeSelector": {"kwok-nodegroup": group}}),
        json!({}),
    ))
    .await
}

// ---- When: time ----

#[when(regex = r"^(\d+) minutes? pass(?:es)?$")]
async fn minutes_pass(w: &mut CaWorld, minutes: u64) -> StepResult {
    w.pass(Duration::from_secs(60 * minutes)).await
}

#[when(regex = r"^(\d+) seconds? pass(?:es)?$")]
async fn seconds_pass(w: &mut CaWorld, seconds: u64) -> StepResult {
    w.pass(Duration::from_secs(seconds)).await
}

#[when(regex = r"^(\d+) minutes? and (\d+) seconds? pass$")]
async fn minutes_and_seconds_pass(w: &mut CaWorld, minutes: u64, seconds: u64) -> StepResult {
    w.pass(Duration::from_secs(60 * minutes + seconds)).await
}

#[when(regex = r#"^the autoscaler finds a node of "(\S+)" unneeded$"#)]
async fn finds_unneeded(w: &mut CaWorld, group: String) -> StepResult {
    let names = node_names(w, &group).await?;
    let found = watch_decisions(w, 300, |d| d.unneeded.keys().any(|n| names.contains(n))).await?;
    found.map_err(|d| {
        format!(
            "no node of {group} became unneeded in 5 minutes; unremovable: {:?}",
            d.unremovable
        )
    })
}

/// The names of a group's nodes.
async fn node_names(w: &mut CaWorld, group: &str) -> Result<Vec<String>, String> {
    Ok(w.group_nodes(group)
        .await?
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect())
}

/// Advances one second at a time, for up to `seconds`, until the
/// autoscaler's decision record satisfies `check`; `Err` holds the last
/// record seen.
async fn watch_decisions(
    w: &mut CaWorld,
    seconds: u32,
    check: impl Fn(&Decisions) -> bool,
) -> Result<Result<(), Decisions>, String> {
    let r = w.running().await?;
    for _ in 0..seconds {
        let d = r.decisions().await?;
        if check(&d) {
            return Ok(Ok(()));
        }
        r.pass(Duration::from_secs(1)).await?;
    }
    Ok(Err(r.decisions().await?))
}

// ---- Then: the cluster ----

#[then(regex = r#"^all (\d+) pods of "(\S+)" are running within (\d+) minutes?$"#)]
async fn pods_running(w: &mut CaWorld, count: usize, app: String, minutes: u64) -> StepResult {
    let r = w.running().await?;
    let timeout = r.real(MINUTE * u32::try_from(minutes).unwrap_or(u32::MAX));
    r.cluster
        .wait_pods_running(&format!("app={app}"), count, timeout)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[then(regex = r#"^the node group "(\S+)" has (\d+) nodes?$"#)]
async fn group_has(w: &mut CaWorld, group: String, count: usize) -> StepResult {
    let nodes = w.group_nodes(&group).await?;
    if nodes.len() == count {
        return Ok(());
    }
    let names: Vec<String> = nodes.into_iter().filter_map(|n| n.metadata.name).collect();
    Err(format!(
        "node group {group} has {} nodes, want {count}: {names:?}",
        names.len()
    ))
}

#[then(regex = r#"^the node group "(\S+)" reaches (\d+) nodes? within (\d+) minutes?$"#)]
async fn group_reaches(w: &mut CaWorld, group: String, count: usize, minutes: u64) -> StepResult {
    for _ in 0..(minutes * 12) {
        if w.group_nodes(&group).await?.len() == count {
            return Ok(());
        }
        w.pass(Duration::from_secs(5)).await?;
    }
    group_has(w, group, count).await
}

async fn pod_events(w: &mut CaWorld, app: &str, reason: &str) -> Result<Vec<String>, String> {
    let r = w.running().await?;
    let client = r.cluster.client();
    let pods: Vec<String> = harness::cluster::list::<Pod>(&client, &format!("app={app}"))
        .await?
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    let events = Api::<Event>::namespaced(client, "default")
        .list(&Default::default())
        .await
        .map_err(|e| e.to_string())?;
    Ok(events
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| {
            e.involved_object
                .name
                .as_ref()
                .is_some_and(|n| pods.contains(n))
        })
        .filter_map(|e| e.message)
        .collect())
}

#[then(regex = r#"^the pods of "(\S+)" get a "(\S+)" event saying "(.*)"$"#)]
async fn pods_get_event(
    w: &mut CaWorld,
    app: String,
    reason: String,
    message: String,
) -> StepResult {
    let seen = pod_events(w, &app, &reason).await?;
    if seen.contains(&message) {
        return Ok(());
    }
    Err(format!(
        "no {reason} event {message:?} on the pods of {app}; seen: {seen:?}"
    ))
}

#[then(regex = r#"^the status ConfigMap shows node group "(\S+)" with scale-up status "(\S+)"$"#)]
async fn status_scale_up(w: &mut CaWorld, group: String, want: String) -> StepResult {
    let r = w.running().await?;
    let cm = Api::<ConfigMap>::namespaced(r.cluster.client(), "kube-system")
        .get("cluster-autoscaler-status")
        .await
        .map_err(|e| format!("reading the status ConfigMap: {e}"))?;
    let text = cm
        .data
        .and_then(|d| d.get("status").cloned())
        .ok_or("the status ConfigMap has no status key")?;
    let status: Value =
        serde_saphyr::from_str(&text).map_err(|e| format!("the status is not YAML: {e}"))?;
    let got = status["nodeGroups"]
        .as_array()
        .and_then(|gs| gs.iter().find(|g| g["name"] == group.as_str()))
        .map(|g| g["scaleUp"]["status"].clone())
        .ok_or_else(|| format!("node group {group} is not in the status: {text}"))?;
    if got == want.as_str() {
        Ok(())
    } else {
        Err(format!(
            "node group {group} scale-up status is {got}, want {want}"
        ))
    }
}

#[then(regex = r#"^the autoscaler keeps the node of "(\S+)" because of "(\S+)"$"#)]
async fn kept_because(w: &mut CaWorld, group: String, reason: String) -> StepResult {
    let names = node_names(w, &group).await?;
    // Nodes found unremovable are rechecked every 5 minutes: watch a window.
    let found = watch_decisions(w, 360, |d| {
        names.iter().any(|n| {
            d.unremovable
                .get(n)
                .is_some_and(|why| why.contains(&reason))
        })
    })
    .await?;
    found.map_err(|d| {
        format!(
            "no node of {group} kept because of {reason}; decisions: {:?}",
            d.unremovable
        )
    })
}

// ---- Priorities and replicas ----

#[given(regex = r#"^a priority class "(\S+)" with value (-?\d+)$"#)]
async fn priority_class(w: &mut CaWorld, name: String, value: i32) -> StepResult {
    w.create(json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}))
        .await
}

#[given(
    regex = r#"^a deployment "(\S+)" of (\d+) pods? requesting (\S+) CPU with priority class "(\S+)"$"#
)]
#[when(
    regex = r#"^a deployment "(\S+)" of (\d+) pods? requesting (\S+) CPU with priority class "(\S+)" is created$"#
)]
async fn a_prioritized_deployment(
    w: &mut CaWorld,
    name: String,
    replicas: usize,
    cpu: String,
    class: String,
) -> StepResult {
    w.create(deployment(
        &name,
        replicas,
        &cpu,
        json!({"priorityClassName": class}),
        json!({}),
    ))
    .await
}

#[when(regex = r#"^the deployment "(\S+)" is scaled to (\d+) pods?$"#)]
async fn scale_deployment(w: &mut CaWorld, name: String, replicas: i32) -> StepResult {
    let r = w.running().await?;
    let api: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(r.cluster.client(), "default");
    api.patch(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .map(|_| ())
    .map_err(|e| format!("scaling deployment {name}: {e}"))
}

#[then(regex = r#"^the node group "(\S+)" keeps (\d+) nodes? for (\d+) minutes$"#)]
async fn group_keeps(w: &mut CaWorld, group: String, count: usize, minutes: u64) -> StepResult {
    for _ in 0..minutes {
        let n = w.group_nodes(&group).await?.len();
        if n != count {
            return Err(format!(
                "node group {group} has {n} nodes, want it to stay at {count}"
            ));
        }
        w.pass(MINUTE).await?;
    }
    group_has(w, group, count).await
}
