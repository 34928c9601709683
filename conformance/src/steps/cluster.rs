//! Cluster shape, faults, autoscaler flags and restarts, and changes to
//! nodes while the cluster runs.

use cucumber::gherkin::Step;
use cucumber::{given, when};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::{parse_taint, quoted_list};
use crate::world::{CaWorld, GroupSpec, NOT_READY_LABEL, StepResult};

/// The template annotation through which the kwok provider injects faults.
const FAULT: &str = autoscaler::cloudprovider::kwok::FAULT_ANNOTATION;

/// The taint the node lifecycle controller puts on NotReady nodes.
const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

#[given(
    regex = r#"^a node group "(\S+)" of nodes with (\S+) CPU and (\S+) memory, min (\d+) and max (\d+)$"#
)]
fn node_group(w: &mut CaWorld, name: String, cpu: String, memory: String, min: usize, max: usize) {
    w.groups
        .push(GroupSpec::new(&name, &cpu, &memory, min, max));
}

#[given(
    regex = r#"^node groups (".*") of nodes with (\S+) CPU and (\S+) memory, min (\d+) and max (\d+)$"#
)]
fn node_groups(
    w: &mut CaWorld,
    names: String,
    cpu: String,
    memory: String,
    min: usize,
    max: usize,
) {
    for name in quoted_list(&names) {
        w.groups
            .push(GroupSpec::new(&name, &cpu, &memory, min, max));
    }
}

#[given(regex = r#"^the node group "(\S+)" starts with (\d+) nodes?$"#)]
fn starts_with(w: &mut CaWorld, name: String, count: usize) -> StepResult {
    w.group_mut(&name)?.initial = count;
    Ok(())
}

#[given(regex = r#"^the nodes of "(\S+)" are labeled "([^"=]+)=([^"]*)"$"#)]
fn labeled(w: &mut CaWorld, name: String, key: String, value: String) -> StepResult {
    w.group_mut(&name)?.labels.insert(key, json!(value));
    Ok(())
}

#[given(regex = r#"^the nodes of "(\S+)" are in zone "(\S+)"$"#)]
fn in_zone(w: &mut CaWorld, name: String, zone: String) -> StepResult {
    let g = w.group_mut(&name)?;
    g.labels
        .insert("topology.kubernetes.io/zone".into(), json!(zone));
    Ok(())
}

#[given(regex = r#"^the nodes of "(\S+)" have the taint "([^"]+)"$"#)]
fn tainted(w: &mut CaWorld, name: String, taint: String) -> StepResult {
    let t = parse_taint(&taint)?;
    w.group_mut(&name)?.taints.push(t);
    Ok(())
}

#[given(regex = r#"^the nodes of "(\S+)" have (\d+) "(\S+)"$"#)]
fn extra_resource(w: &mut CaWorld, name: String, count: u64, resource: String) -> StepResult {
    w.group_mut(&name)?
        .resources
        .insert(resource, json!(count.to_string()));
    Ok(())
}

#[given(regex = r#"^the autoscaler runs with "(.*)"$"#)]
fn autoscaler_flags(w: &mut CaWorld, flags: String) {
    w.flags.extend(flags.split_whitespace().map(str::to_string));
}

/// `--scheduler-config-file`: the doc string, written to a file of the
/// scenario's.
#[given(regex = r"^the autoscaler runs with the scheduler configuration:?$")]
fn scheduler_configuration(w: &mut CaWorld, step: &Step) -> StepResult {
    let text = step
        .docstring
        .as_deref()
        .ok_or("this step needs the KubeSchedulerConfiguration as a YAML doc string")?;
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!(
        "ca-scheduler-config-{}-{n}.yaml",
        std::process::id()
    ));
    std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    w.flags
        .push(format!("--scheduler-config-file={}", path.display()));
    Ok(())
}

/// Ours alone: with `--very-new-pods-wait=false` (and frequent loops) our
/// autoscaler does not wait, as upstream does, until the oldest pending
/// pod is 2 s old (`autoscaler::scaleup::new_pods`). Sets both flags.
#[given("the autoscaler runs with frequent loops, without upstream's wait for very new pods")]
fn frequent_loops_without_new_pod_wait(w: &mut CaWorld) {
    w.extensions.record(
        "scale-up without upstream's 2 s wait for very new pods (ours, with --frequent-loops-enabled)",
    );
    w.flags.push("--frequent-loops-enabled".into());
    w.flags.push("--very-new-pods-wait=false".into());
}

#[when("the autoscaler restarts")]
async fn restart(w: &mut CaWorld) -> StepResult {
    w.running().await?.restart().await
}

// ---- Faults ----

async fn set_fault(w: &mut CaWorld, group: &str, fault: Option<&str>) -> StepResult {
    w.extensions
        .record("the kwok provider's fault annotation (our provider only)");
    if w.provider() != crate::world::Provider::Kwok {
        return Err(format!(
            "faults are injected through the kwok provider's templates; node groups of {} have none",
            w.provider().flag()
        ));
    }
    let g = w.group_mut(group)?;
    match fault {
        Some(f) => g.annotations.insert(FAULT.into(), json!(f)),
        None => g.annotations.remove(FAULT),
    };
    w.update_templates().await
}

#[given(regex = r#"^scale-ups of "(\S+)" fail with a quota error$"#)]
#[when(regex = r#"^scale-ups of "(\S+)" fail with a quota error$"#)]
async fn quota_error(w: &mut CaWorld, group: String) -> StepResult {
    set_fault(
        w,
        &group,
        Some("creation-error=OutOfResource:QUOTA_EXCEEDED:Quota 'CPUS' exceeded"),
    )
    .await
}

#[given(regex = r#"^the cloud provider refuses to scale up "(\S+)"$"#)]
#[when(regex = r#"^the cloud provider refuses to scale up "(\S+)"$"#)]
async fn refuses(w: &mut CaWorld, group: String) -> StepResult {
    set_fault(
        w,
        &group,
        Some("increase-size-error=Other:API_ERROR:the cloud API refused the request"),
    )
    .await
}

#[given(regex = r#"^the cloud provider refuses to delete nodes of "(\S+)"$"#)]
#[when(regex = r#"^the cloud provider refuses to delete nodes of "(\S+)"$"#)]
async fn refuses_delete(w: &mut CaWorld, group: String) -> StepResult {
    set_fault(
        w,
        &group,
        Some("delete-error=the cloud API refused to delete the instance"),
    )
    .await
}

#[given(regex = r#"^new nodes of "(\S+)" never register$"#)]
#[when(regex = r#"^new nodes of "(\S+)" never register$"#)]
async fn never_register(w: &mut CaWorld, group: String) -> StepResult {
    set_fault(w, &group, Some("never-register")).await
}

#[when(regex = r#"^the faults of "(\S+)" are cleared$"#)]
async fn clear_faults(w: &mut CaWorld, group: String) -> StepResult {
    w.group_mut(&group)?.labels.remove(NOT_READY_LABEL);
    set_fault(w, &group, None).await
}

#[given(regex = r#"^new nodes of "(\S+)" never become ready$"#)]
#[when(regex = r#"^new nodes of "(\S+)" never become ready$"#)]
async fn never_ready(w: &mut CaWorld, group: String) -> StepResult {
    w.group_mut(&group)?
        .labels
        .insert(NOT_READY_LABEL.into(), json!("true"));
    w.update_templates().await
}

// ---- Nodes at runtime ----

async fn patch_nodes(
    w: &mut CaWorld,
    group: &str,
    how_many: Option<usize>,
    patch: Value,
) -> StepResult {
    let nodes = w.group_nodes(group).await?;
    if nodes.is_empty() {
        return Err(format!("node group {group} has no nodes"));
    }
    let r = w.running().await?;
    let api = Api::<Node>::all(r.cluster.client());
    for n in nodes.iter().take(how_many.unwrap_or(usize::MAX)) {
        let name = n.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("patching node {name}: {e}"))?;
    }
    Ok(())
}

#[given(regex = r#"^the nodes of "(\S+)" are annotated "([^"=]+)=([^"]*)"$"#)]
#[when(regex = r#"^the nodes of "(\S+)" are annotated "([^"=]+)=([^"]*)"$"#)]
async fn annotate_nodes(w: &mut CaWorld, group: String, key: String, value: String) -> StepResult {
    patch_nodes(
        w,
        &group,
        None,
        json!({"metadata": {"annotations": {key: value}}}),
    )
    .await
}

/// An annotation on a group's template node (the kwok provider's
/// templates ConfigMap), read by the provider on its next refresh.
#[given(regex = r#"^the template of "(\S+)" is annotated "([^"=]+)=([^"]*)"$"#)]
#[when(regex = r#"^the template of "(\S+)" is annotated "([^"=]+)=([^"]*)"$"#)]
async fn annotate_template(
    w: &mut CaWorld,
    group: String,
    key: String,
    value: String,
) -> StepResult {
    if w.provider() != crate::world::Provider::Kwok {
        return Err(format!(
            "templates are the kwok provider's; node groups of {} have none",
            w.provider().flag()
        ));
    }
    w.group_mut(&group)?.annotations.insert(key, json!(value));
    w.update_templates().await
}

#[when(regex = r#"^(\d+) nodes? of "(\S+)" becomes? NotReady$"#)]
async fn become_not_ready(w: &mut CaWorld, count: usize, group: String) -> StepResult {
    patch_nodes(
        w,
        &group,
        Some(count),
        json!({"metadata": {"labels": {NOT_READY_LABEL: "true"}}}),
    )
    .await?;
    // kwok reports them NotReady at once; the step ends when it has.
    for _ in 0..12 {
        let not_ready = w
            .group_nodes(&group)
            .await?
            .iter()
            .filter(|n| !harness::cluster::node_ready(n))
            .count();
        if not_ready >= count {
            return Ok(());
        }
        w.pass(std::time::Duration::from_secs(5)).await?;
    }
    Err(format!(
        "{count} nodes of {group} were labelled {NOT_READY_LABEL}, but kwok did not report them NotReady within a minute"
    ))
}

/// Nodes made NotReady come back: the label goes, and with it the
/// `node.kubernetes.io/not-ready` taint, as the node lifecycle controller
/// lifts it once the kubelet reports Ready again (kwok then does).
#[when(regex = r#"^the NotReady nodes of "(\S+)" become Ready again$"#)]
async fn become_ready_again(w: &mut CaWorld, group: String) -> StepResult {
    let nodes = w.group_nodes(&group).await?;
    let r = w.running().await?;
    let api = Api::<Node>::all(r.cluster.client());
    let mut back = 0;
    for n in &nodes {
        let labelled = n
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(NOT_READY_LABEL));
        if !labelled {
            continue;
        }
        let name = n.metadata.name.clone().unwrap_or_default();
        let taints: Vec<_> = n
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t.key != NOT_READY_TAINT)
            .collect();
        let patch = json!({
            "metadata": {"labels": {NOT_READY_LABEL: null}},
            "spec": {"taints": taints},
        });
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("making node {name} Ready again: {e}"))?;
        back += 1;
    }
    if back == 0 {
        return Err(format!("node group {group} has no NotReady node"));
    }
    Ok(())
}

#[when(regex = r#"^the nodes of "(\S+)" get the taint "([^"]+)"$"#)]
async fn taint_nodes(w: &mut CaWorld, group: String, taint: String) -> StepResult {
    let t = parse_taint(&taint)?;
    patch_nodes(w, &group, None, json!({"spec": {"taints": [t]}})).await
}

#[when(regex = r#"^(\d+) nodes? of "(\S+)" (?:is|are) deleted$"#)]
async fn delete_nodes(w: &mut CaWorld, count: usize, group: String) -> StepResult {
    let nodes = w.group_nodes(&group).await?;
    let r = w.running().await?;
    let api = Api::<Node>::all(r.cluster.client());
    for n in nodes.iter().take(count) {
        let name = n.metadata.name.clone().unwrap_or_default();
        api.delete(&name, &DeleteParams::default())
            .await
            .map_err(|e| format!("deleting node {name}: {e}"))?;
    }
    Ok(())
}

/// A pod pinned to the group makes the autoscaler add a node there (the
/// usual way to grow a group from outside); waits until the node is Ready.
#[when(regex = r#"^a filler pod brings up a node of "(\S+)"$"#)]
async fn filler_pod(w: &mut CaWorld, group: String) -> StepResult {
    let before = w.group_nodes(&group).await?.len();
    w.create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("filler-{group}"), "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": format!("filler-{group}")}},
            "template": {"metadata": {"labels": {"app": format!("filler-{group}")}},
                "spec": {"nodeSelector": {"kwok-nodegroup": group},
                    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]}}}}))
        .await?;
    let r = w.running().await?;
    let timeout = r.real(super::minutes(5));
    r.cluster
        .wait_pods_running(&format!("app=filler-{group}"), 1, timeout)
        .await
        .map_err(|e| format!("bringing up a node of {group}: {e}"))?;
    let after = w.group_nodes(&group).await?.len();
    if after > before {
        Ok(())
    } else {
        Err(format!(
            "the filler pod runs, but node group {group} did not grow ({before} nodes)"
        ))
    }
}
