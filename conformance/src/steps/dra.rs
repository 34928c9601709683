//! Dynamic resource allocation: devices on a group's nodes (kwok's fake
//! DRA driver; in Cluster API mode also the `dra-driver` and `gpu-count`
//! annotations for scale from zero), DeviceClasses, ResourceClaims and
//! their templates, and where the cluster allocated the claims. Pods ask
//! for devices through the workload clauses `with a claim for N "class"
//! devices`, `with the claim template "t"` and `sharing the claim "c"`.

use std::collections::BTreeMap;

use cucumber::{given, then, when};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::world::groups::Devices;
use crate::world::{CaWorld, StepResult};

/// A claim's or a template's spec: `count` devices of `class`, with a CEL
/// selector when given.
fn claim_spec(count: i64, class: &str, selector: Option<&str>) -> Value {
    let mut exactly = json!({"deviceClassName": class, "count": count});
    if let Some(s) = selector {
        exactly["selectors"] = json!([{"cel": {"expression": s}}]);
    }
    json!({"devices": {"requests": [{"name": "devices", "exactly": exactly}]}})
}

/// A ResourceClaimTemplate `name` of `count` devices of `class`.
pub(super) fn claim_template(
    name: &str,
    namespace: &str,
    count: i64,
    class: &str,
    selector: Option<&str>,
) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": claim_spec(count, class, selector)}})
}

#[given(regex = r#"^a device class "(\S+)" for the driver "(\S+)"$"#)]
async fn device_class(w: &mut CaWorld, name: String, driver: String) -> StepResult {
    w.create(
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{driver}'")}}]}}),
    )
    .await
}

/// Each node of the group (existing and new) publishes `count` devices of
/// the driver, named `device-<i>`, with the `model` attribute when given.
#[given(
    regex = r#"^the nodes of "(\S+)" have (\d+) devices? of the driver "(\S+)"(?: of model "(\S+)")?$"#
)]
fn node_devices(
    w: &mut CaWorld,
    group: String,
    count: usize,
    driver: String,
    model: String,
) -> StepResult {
    if w.running.is_some() {
        return Err("declare a group's devices before the cluster starts".into());
    }
    w.group_mut(&group)?.devices = Some(Devices {
        driver,
        count,
        model: (!model.is_empty()).then_some(model),
        publish_delay: None,
    });
    Ok(())
}

/// Kwok's fake driver publishes the devices of each node of the group
/// this long (scenario time) after the node starts, as a driver's kubelet
/// plugin that is slow to start.
#[given(
    regex = r#"^the DRA driver of the nodes of "(\S+)" publishes their devices (\d+) minutes? after they start$"#
)]
fn publish_delay(w: &mut CaWorld, group: String, delay: u64) -> StepResult {
    if w.running.is_some() {
        return Err("declare a group's devices before the cluster starts".into());
    }
    let devices =
        w.group_mut(&group)?.devices.as_mut().ok_or_else(|| {
            format!("the nodes of {group:?} have no devices yet: declare them first")
        })?;
    // Kwok runs on the cluster's clock: real time against a binary.
    let scenario = std::time::Duration::from_secs(60 * delay);
    devices.publish_delay = Some(scenario.div_f64(crate::world::time_scale()));
    Ok(())
}

#[given(regex = r#"^a claim "(\S+)" for (\d+) "(\S+)" devices?(?: selecting (.+))?$"#)]
async fn claim(
    w: &mut CaWorld,
    name: String,
    count: i64,
    class: String,
    selector: String,
) -> StepResult {
    let selector = (!selector.is_empty()).then_some(selector.as_str());
    w.create(
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": claim_spec(count, &class, selector)}),
    )
    .await
}

#[given(regex = r#"^a claim template "(\S+)" for (\d+) "(\S+)" devices?(?: selecting (.+))?$"#)]
async fn template(
    w: &mut CaWorld,
    name: String,
    count: i64,
    class: String,
    selector: String,
) -> StepResult {
    let selector = (!selector.is_empty()).then_some(selector.as_str());
    w.create(claim_template(&name, "default", count, &class, selector))
        .await
}

/// The API server refuses the template (a selector that does not
/// compile, say) with a message containing `saying`.
#[then(
    regex = r#"^the API server refuses a claim template "(\S+)" for (\d+) "(\S+)" devices?, saying "([^"]*)", selecting (.+)$"#
)]
async fn template_refused(
    w: &mut CaWorld,
    name: String,
    count: i64,
    class: String,
    saying: String,
    selector: String,
) -> StepResult {
    // The cluster runs (it starts here if need be): the API server answers.
    w.running().await?;
    match w
        .create(claim_template(
            &name,
            "default",
            count,
            &class,
            Some(&selector),
        ))
        .await
    {
        Ok(()) => Err(format!("the claim template {name} was accepted")),
        Err(e) if e.contains(&saying) => Ok(()),
        Err(e) => Err(format!("refused, but not saying {saying:?}: {e}")),
    }
}

/// One node of the group (the first by name) changes the devices its
/// driver publishes: `count` of the group's devices (same driver and
/// model) instead. Kwok's fake driver republishes them (the pool's next
/// generation).
#[when(regex = r#"^a node of "(\S+)" publishes (\d+) of its devices? instead$"#)]
async fn node_publishes_fewer(w: &mut CaWorld, group: String, count: usize) -> StepResult {
    let devices = w
        .groups
        .iter()
        .find(|g| g.name == group)
        .and_then(|g| g.devices.clone())
        .ok_or_else(|| format!("the nodes of {group:?} have no devices"))?;
    let mut nodes = w.group_nodes(&group).await?;
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let name = nodes
        .first()
        .and_then(|n| n.metadata.name.clone())
        .ok_or_else(|| format!("the node group {group:?} has no node"))?;
    let annotation = Devices { count, ..devices }.annotation();
    let patch = json!({"metadata": {"annotations": {kwok::DRA_DEVICES_ANNOTATION: annotation}}});
    let api: Api<Node> = Api::all(w.running().await?.cluster.client());
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| format!("patching node {name}: {e}"))?;
    Ok(())
}

/// The kwok provider's templates ConfigMap (in the cluster) gives the
/// group's template the devices annotation kwok's fake driver reads; our
/// kwok provider makes the template's slices of it.
#[then(regex = r#"^the kwok template of "(\S+)" declares (\d+) devices? of the driver "(\S+)"$"#)]
async fn kwok_template_devices(
    w: &mut CaWorld,
    group: String,
    count: usize,
    driver: String,
) -> StepResult {
    let r = w.running().await?;
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(r.cluster.client(), "kube-system");
    let cm = api
        .get(crate::world::TEMPLATES_CONFIG_MAP)
        .await
        .map_err(|e| format!("reading the kwok provider's templates: {e}"))?;
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get("templates"))
        .ok_or("the templates ConfigMap has no templates")?;
    let list: Value =
        serde_json::from_str(text).map_err(|e| format!("the templates are not JSON: {e}"))?;
    let template = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["metadata"]["labels"]["kwok-nodegroup"] == group.as_str())
        .ok_or_else(|| format!("no template for {group}"))?;
    let annotation = template["metadata"]["annotations"][kwok::DRA_DEVICES_ANNOTATION]
        .as_str()
        .ok_or_else(|| format!("the template of {group} declares no devices"))?;
    let groups = kwok::controller::dra::parse(annotation)?;
    let declared: usize = groups
        .iter()
        .filter(|g| g.driver == driver)
        .map(|g| g.count)
        .sum();
    if declared == count {
        Ok(())
    } else {
        Err(format!(
            "the template of {group} declares {declared} devices of {driver}: {annotation}"
        ))
    }
}

fn claims_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceClaim"),
        "resourceclaims",
    )
}

/// Every running pod of the app has its claims allocated to its own node,
/// reserved for it, and that node is one of the group's.
#[then(regex = r#"^the claims of the pods of "(\S+)" are allocated on nodes of "(\S+)"$"#)]
async fn claims_allocated(w: &mut CaWorld, app: String, group: String) -> StepResult {
    let r = w.running().await?;
    let client = r.cluster.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let claims: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &claims_resource());
    let nodes: Api<Node> = Api::all(client);
    let groups: BTreeMap<String, String> = nodes
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing nodes: {e}"))?
        .items
        .into_iter()
        .filter_map(|n| {
            let g = n.metadata.labels.as_ref()?.get("kwok-nodegroup")?.clone();
            Some((n.metadata.name?, g))
        })
        .collect();
    let list = pods
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .map_err(|e| format!("listing pods of {app}: {e}"))?;
    if list.items.is_empty() {
        return Err(format!("no pods of {app}"));
    }
    for p in list.items {
        let name = p.metadata.name.clone().unwrap_or_default();
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let node = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .ok_or_else(|| format!("pod {name} is not bound"))?;
        if groups.get(&node) != Some(&group) {
            return Err(format!("pod {name} runs on {node}, not a node of {group}"));
        }
        for claim_name in pod_claim_names(&p) {
            let c = claims
                .get(&claim_name)
                .await
                .map_err(|e| format!("claim {claim_name} of pod {name}: {e}"))?;
            let status = &c.data["status"];
            let on = status
                .pointer("/allocation/nodeSelector/nodeSelectorTerms/0/matchFields/0/values/0")
                .and_then(Value::as_str);
            if on != Some(node.as_str()) {
                return Err(format!(
                    "claim {claim_name} of pod {name} (on {node}) is allocated on {on:?}: {status}"
                ));
            }
            let reserved = status["reservedFor"]
                .as_array()
                .is_some_and(|r| r.iter().any(|c| c["uid"] == uid.as_str()));
            if !reserved {
                return Err(format!(
                    "claim {claim_name} is not reserved for pod {name}: {status}"
                ));
            }
        }
    }
    Ok(())
}

/// The names of a pod's claims (by name, or made from its template).
fn pod_claim_names(p: &Pod) -> Vec<String> {
    let statuses = p
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.clone())
        .unwrap_or_default();
    p.spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
        .filter_map(|c| {
            c.resource_claim_name.clone().or_else(|| {
                statuses
                    .iter()
                    .find(|s| s.name == c.name)
                    .and_then(|s| s.resource_claim_name.clone())
            })
        })
        .collect()
}
