//! The suite's node groups in Cluster API mode: each declared group
//! becomes a `KwokMachineTemplate` and a `MachineDeployment` of one
//! `Cluster`, which the testbed's CAPI controller turns into Machines and
//! kwok Nodes, and which the autoscaler under test reaches with
//! `--cloud-provider=clusterapi`.
//!
//! The group's nodes carry the same `kwok-nodegroup=<name>` label as in
//! kwok mode, so every step that picks or counts a group's nodes works
//! unchanged. What the kwok provider reads from its template node, the
//! MachineDeployment says with the size and capacity annotations of the
//! Cluster API proposal "Opt-in Autoscaling from Zero"
//! ([`ZeroCapacity`] says where a group advertises its capacity).

use harness::cluster::Cluster;
use harness::controllers::capi::{
    TEMPLATE_KIND, cluster_manifest, machine_deployment_manifest, resource, template_manifest,
};
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use serde_json::{Map, Value, json};

use crate::world::groups::GroupSpec;
pub use crate::world::groups::ZeroCapacity;

/// The namespace of the suite's Cluster API objects.
pub const NAMESPACE: &str = "default";

/// The name of the suite's `Cluster`.
pub const CLUSTER: &str = "testbed";

/// The min size annotation of a MachineDeployment.
pub const MIN_SIZE: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";

/// The max size annotation of a MachineDeployment.
pub const MAX_SIZE: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";

/// The prefix of the scale-from-zero capacity annotations.
pub const CAPACITY: &str = "capacity.cluster-autoscaler.kubernetes.io/";

/// The node group's id as the clusterapi provider names it
/// (`MachineDeployment/<namespace>/<name>`).
pub fn group_id(name: &str) -> String {
    format!("MachineDeployment/{NAMESPACE}/{name}")
}

/// The `Cluster` the groups belong to.
pub fn cluster() -> Value {
    cluster_manifest(NAMESPACE, CLUSTER)
}

/// The objects of a group: its template, then its MachineDeployment.
pub fn group_objects(g: &GroupSpec) -> [Value; 2] {
    [template(g), machine_deployment(g)]
}

/// Writes the groups' templates again (labels or taints changed): nodes
/// made from then on follow them.
pub async fn update_templates(cluster: &Cluster, groups: &[GroupSpec]) -> Result<(), String> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(cluster.client(), NAMESPACE, &resource(TEMPLATE_KIND));
    for g in groups {
        let mut current = api
            .get(&g.name)
            .await
            .map_err(|e| format!("reading KwokMachineTemplate {NAMESPACE}/{}: {e}", g.name))?;
        current.data["spec"] = template(g)["spec"].clone();
        api.replace(&g.name, &PostParams::default(), &current)
            .await
            .map_err(|e| format!("updating KwokMachineTemplate {NAMESPACE}/{}: {e}", g.name))?;
    }
    Ok(())
}

/// The group's nodes' capacity (CPU, memory, pods and extra resources).
fn capacity(g: &GroupSpec) -> Map<String, Value> {
    let mut capacity = g.resources.clone();
    capacity.insert("cpu".into(), json!(g.cpu));
    capacity.insert("memory".into(), json!(g.memory));
    capacity.insert("pods".into(), json!("110"));
    capacity
}

/// The group's node labels (its own and `kwok-nodegroup`).
fn labels(g: &GroupSpec) -> Map<String, Value> {
    let mut labels = g.labels.clone();
    labels.insert("kwok-nodegroup".into(), json!(g.name));
    labels
}

/// The group's `KwokMachineTemplate`, with `status.capacity` when the
/// group advertises it there.
pub fn template(g: &GroupSpec) -> Value {
    let mut t = template_manifest(
        NAMESPACE,
        &g.name,
        Value::Object(capacity(g)),
        Value::Object(labels(g)),
        json!(g.taints),
    );
    if let Some(d) = &g.devices {
        t["spec"]["template"]["spec"]["annotations"] = Value::Object(d.annotations());
    }
    if matches!(
        g.zero_capacity,
        ZeroCapacity::TemplateStatus | ZeroCapacity::Both
    ) {
        t["status"] = json!({"capacity": capacity(g),
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"}});
    }
    t
}

/// The group's `MachineDeployment`: its starting replicas, its size
/// annotations, its capacity annotations when the group advertises them
/// there, then the scenario's own annotations (which win).
pub fn machine_deployment(g: &GroupSpec) -> Value {
    let mut annotations = Map::new();
    annotations.insert(MIN_SIZE.into(), json!(g.min.to_string()));
    annotations.insert(MAX_SIZE.into(), json!(g.max.to_string()));
    if matches!(
        g.zero_capacity,
        ZeroCapacity::Annotations | ZeroCapacity::Both
    ) {
        for (k, v) in capacity_annotations(g) {
            annotations.insert(format!("{CAPACITY}{k}"), json!(v));
        }
    }
    annotations.extend(g.machine_deployment_annotations.clone());
    machine_deployment_manifest(
        NAMESPACE,
        &g.name,
        CLUSTER,
        g.initial.max(g.min),
        &g.name,
        Value::Object(annotations),
    )
}

/// The capacity annotations of a group, without their prefix: `cpu`,
/// `memory`, `maxPods`, `labels` (`k=v,...`), `taints`
/// (`key=value:Effect,...`) and, for an extended resource, `gpu-type` and
/// `gpu-count`.
fn capacity_annotations(g: &GroupSpec) -> Vec<(String, String)> {
    let mut out = vec![
        ("cpu".to_string(), g.cpu.clone()),
        ("memory".to_string(), g.memory.clone()),
        ("maxPods".to_string(), "110".to_string()),
    ];
    let labels: Vec<String> = labels(g)
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    out.push(("labels".into(), labels.join(",")));
    let taints: Vec<String> = g
        .taints
        .iter()
        .map(|t| {
            let text = |f: &str| t.get(f).and_then(Value::as_str).unwrap_or_default();
            match text("value") {
                "" => format!("{}:{}", text("key"), text("effect")),
                v => format!("{}={v}:{}", text("key"), text("effect")),
            }
        })
        .collect();
    if !taints.is_empty() {
        out.push(("taints".into(), taints.join(",")));
    }
    if let Some(d) = &g.devices {
        // Upstream's scale from zero with DRA: one slice of `gpu-count`
        // devices of the `dra-driver`.
        out.push(("dra-driver".into(), d.driver.clone()));
        out.push(("gpu-count".into(), d.count.to_string()));
    } else if let Some((resource, count)) = g.resources.iter().next() {
        out.push(("gpu-type".into(), resource.clone()));
        out.push((
            "gpu-count".into(),
            count.as_str().unwrap_or_default().to_string(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu_group() -> GroupSpec {
        let mut g = GroupSpec::new("gpu", "8", "32Gi", 0, 3);
        g.labels.insert("team".into(), json!("ml"));
        g.taints
            .push(json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}));
        g.resources.insert("nvidia.com/gpu".into(), json!("2"));
        g
    }

    #[test]
    fn annotations_carry_size_capacity_labels_taints_and_gpus() {
        let md = machine_deployment(&gpu_group());
        let a = &md["metadata"]["annotations"];
        assert_eq!(a[MIN_SIZE], "0");
        assert_eq!(a[MAX_SIZE], "3");
        assert_eq!(a[format!("{CAPACITY}cpu")], "8");
        assert_eq!(a[format!("{CAPACITY}memory")], "32Gi");
        assert_eq!(a[format!("{CAPACITY}labels")], "kwok-nodegroup=gpu,team=ml");
        assert_eq!(a[format!("{CAPACITY}taints")], "dedicated=gpu:NoSchedule");
        assert_eq!(a[format!("{CAPACITY}gpu-type")], "nvidia.com/gpu");
        assert_eq!(a[format!("{CAPACITY}gpu-count")], "2");
        assert_eq!(md["spec"]["replicas"], 0);
        assert!(template(&gpu_group()).get("status").is_none());
    }

    #[test]
    fn template_status_only_leaves_the_annotations_out() {
        let mut g = gpu_group();
        g.zero_capacity = ZeroCapacity::TemplateStatus;
        let md = machine_deployment(&g);
        let a = md["metadata"]["annotations"].as_object().unwrap();
        assert!(a.keys().all(|k| !k.starts_with(CAPACITY)), "{a:?}");
        let t = template(&g);
        assert_eq!(t["status"]["capacity"]["cpu"], "8");
        assert_eq!(t["status"]["capacity"]["nvidia.com/gpu"], "2");
    }

    #[test]
    fn the_scenarios_annotations_win() {
        let mut g = gpu_group();
        g.machine_deployment_annotations
            .insert(format!("{CAPACITY}cpu"), json!("2"));
        let md = machine_deployment(&g);
        assert_eq!(md["metadata"]["annotations"][format!("{CAPACITY}cpu")], "2");
    }
}
