//! Node groups as Cluster API MachineDeployments ([`crate::capi`]): the
//! scenario's switch to them, where each group advertises its nodes'
//! capacity for scale from zero, and its own annotations.

use cucumber::{given, then};
use harness::controllers::capi::resource;
use kube::Api;
use kube::api::DynamicObject;
use serde_json::json;

use crate::capi::{self, ZeroCapacity};
use crate::world::{CaWorld, Provider, StepResult};

#[given("node groups are Cluster API MachineDeployments")]
fn cluster_api(w: &mut CaWorld) -> StepResult {
    if w.running.is_some() {
        return Err("node groups become MachineDeployments before the cluster starts".into());
    }
    w.cluster_api = true;
    Ok(())
}

/// The declared group `name`, which must be a MachineDeployment.
fn machine_deployment<'a>(
    w: &'a mut CaWorld,
    name: &str,
) -> Result<&'a mut crate::world::GroupSpec, String> {
    if w.provider() != Provider::ClusterApi {
        return Err(format!(
            "node group {name:?} is not a MachineDeployment: say `Given node groups are Cluster API \
             MachineDeployments` or run with --cloud-provider clusterapi"
        ));
    }
    if w.running.is_some() {
        return Err(format!(
            "MachineDeployment {name:?} is changed by this step before the cluster starts only"
        ));
    }
    w.group_mut(name)
}

#[given(
    regex = r#"^the MachineDeployment "(\S+)" gives its capacity (in its annotations|in its infrastructure template's status|in its annotations and in its infrastructure template's status|nowhere)$"#
)]
fn gives_capacity(w: &mut CaWorld, name: String, place: String) -> StepResult {
    machine_deployment(w, &name)?.zero_capacity = match place.as_str() {
        "in its annotations" => ZeroCapacity::Annotations,
        "in its infrastructure template's status" => ZeroCapacity::TemplateStatus,
        "nowhere" => ZeroCapacity::Nowhere,
        _ => ZeroCapacity::Both,
    };
    Ok(())
}

#[given(regex = r#"^the MachineDeployment "(\S+)" is annotated "([^"=]+)=([^"]*)"$"#)]
fn annotated(w: &mut CaWorld, name: String, key: String, value: String) -> StepResult {
    machine_deployment(w, &name)?
        .machine_deployment_annotations
        .insert(key, json!(value));
    Ok(())
}

/// Reads `spec.replicas` of a MachineDeployment: the size the autoscaler
/// asked for through the scale subresource.
#[then(regex = r#"^the MachineDeployment "(\S+)" has (\d+) replicas?$"#)]
async fn replicas(w: &mut CaWorld, name: String, want: i64) -> StepResult {
    let r = w.running().await?;
    let api: Api<DynamicObject> = Api::namespaced_with(
        r.cluster.client(),
        capi::NAMESPACE,
        &resource("MachineDeployment"),
    );
    let md = api
        .get(&name)
        .await
        .map_err(|e| format!("reading MachineDeployment {}/{name}: {e}", capi::NAMESPACE))?;
    let got = md.data.pointer("/spec/replicas").and_then(|v| v.as_i64());
    if got == Some(want) {
        Ok(())
    } else {
        Err(format!(
            "MachineDeployment {}/{name} has spec.replicas {got:?}, want {want}",
            capi::NAMESPACE
        ))
    }
}
