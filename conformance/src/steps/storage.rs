//! Volumes: CSI drivers on the nodes (with how many volumes each attaches),
//! StorageClasses, and pods that each claim a volume of their own.

use cucumber::{given, when};
use serde_json::json;

use super::workloads::PodShape;
use crate::csi::CsiDriver;
use crate::world::{CaWorld, StepResult};

/// Every node, existing or new, gets a CSINode listing the driver with
/// `allocatable.count` = N ([`crate::csi`]).
#[given(regex = r#"^every node runs the CSI driver "(\S+)" attaching at most (\d+) volumes?$"#)]
fn csi_driver(w: &mut CaWorld, name: String, max_volumes: i32) -> StepResult {
    if w.running.is_some() {
        return Err("declare CSI drivers before the cluster starts".into());
    }
    w.csi_drivers.push(CsiDriver { name, max_volumes });
    Ok(())
}

#[given(regex = r#"^a storage class "(\S+)" provisioned by "(\S+)"$"#)]
async fn storage_class(w: &mut CaWorld, name: String, provisioner: String) -> StepResult {
    w.create(
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name}, "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer"}),
    )
    .await
}

/// N bare pods `<name>-<i>` (label `app: <name>`), each with its own
/// PersistentVolumeClaim `<name>-<i>` of the class, unbound (the class
/// binds on first consumer; nothing provisions in the testbed).
#[when(
    regex = r#"^(\d+) pods "(\S+)" requesting (\S+) CPU, each with a volume of class "(\S+)", are created$"#
)]
async fn pods_with_volumes(
    w: &mut CaWorld,
    count: usize,
    name: String,
    cpu: String,
    class: String,
) -> StepResult {
    let shape = PodShape::new(&name, &cpu, "")?;
    for i in 1..=count {
        let claim = format!("{name}-{i}");
        w.create(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": shape.namespace},
            "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}))
            .await?;
        let mut pod = shape.template();
        pod["apiVersion"] = json!("v1");
        pod["kind"] = json!("Pod");
        pod["metadata"]["name"] = json!(claim);
        pod["metadata"]["namespace"] = json!(shape.namespace);
        pod["spec"]["volumes"] =
            json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]);
        w.create(pod).await?;
    }
    Ok(())
}
