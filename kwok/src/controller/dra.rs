//! The fake DRA driver: kwok nodes have no kubelet plugin to publish their
//! devices, so a managed node says what it has in the annotation
//! [`DRA_DEVICES_ANNOTATION`], and the controller publishes them as
//! `resource.k8s.io/v1` ResourceSlices, as a driver's kubelet plugin
//! would: one slice per driver, named `<node>-<driver>`, local to the node
//! (`spec.nodeName`), in a pool named after the node (generation 1, one
//! slice), owned by the Node (the garbage collector deletes it with the
//! node). The annotation is a JSON list of device groups:
//!
//! ```json
//! [{"driver": "gpu.example.com", "name": "gpu", "count": 2,
//!   "attributes": {"model": {"string": "a100"}},
//!   "capacity": {"memory": {"value": "40Gi"}}}]
//! ```
//!
//! `count` devices named `<name>-<i>` (`name` defaults to `device`, `count`
//! to 1), each with the group's attributes (API form: `int`, `bool`,
//! `string` or `version`) and capacities. Groups of one driver share its
//! slice. A changed annotation republishes (the pool's generation goes up);
//! a malformed one is logged against the node and publishes nothing.
//! Because node groups' template nodes carry the annotation, nodes an
//! autoscaler adds publish the same devices.
//!
//! A real driver's kubelet plugin publishes some time after the node is
//! up; [`DRA_PUBLISH_DELAY_ANNOTATION`] (a Go duration such as `2m`) makes
//! the fake driver wait that long before a node's first publication.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, ResourceExt};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::shared::Shared;

/// The node annotation listing the devices the fake driver publishes.
pub const DRA_DEVICES_ANNOTATION: &str = "kwok.x-k8s.io/dra-devices";

/// The node annotation delaying the fake driver's first publication of
/// the node's devices (a Go duration).
pub const DRA_PUBLISH_DELAY_ANNOTATION: &str = "kwok.x-k8s.io/dra-publish-delay";

/// One group of alike devices.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DeviceGroup {
    /// The driver publishing them.
    pub driver: String,
    /// The devices' name prefix (`<name>-<i>`).
    #[serde(default = "default_name")]
    pub name: String,
    /// How many.
    #[serde(default = "one")]
    pub count: usize,
    /// Attributes, in the API's form.
    #[serde(default)]
    pub attributes: Map<String, Value>,
    /// Capacities, in the API's form.
    #[serde(default)]
    pub capacity: Map<String, Value>,
}

fn default_name() -> String {
    "device".into()
}

fn one() -> usize {
    1
}

/// The device groups of an annotation value.
pub fn parse(annotation: &str) -> Result<Vec<DeviceGroup>, String> {
    serde_json::from_str(annotation).map_err(|e| e.to_string())
}

/// The slices a node with these device groups publishes, by driver.
pub fn slices(node: &str, node_uid: &str, groups: &[DeviceGroup], generation: i64) -> Vec<Value> {
    let mut by_driver: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for g in groups {
        let devices = by_driver.entry(g.driver.as_str()).or_default();
        for i in 0..g.count {
            devices.push(json!({"name": format!("{}-{i}", g.name),
                "attributes": g.attributes, "capacity": g.capacity}));
        }
    }
    by_driver
        .into_iter()
        .map(|(driver, devices)| {
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": format!("{node}-{driver}"),
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node,
                        "uid": node_uid, "controller": true}]},
                "spec": {"driver": driver, "nodeName": node,
                    "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                    "devices": devices}})
        })
        .collect()
}

fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceSlice"),
        "resourceslices",
    )
}

/// Publishes (creates or replaces) the node's slices for `annotation`,
/// after `delay`.
pub(super) async fn publish(
    shared: Arc<Shared>,
    node: String,
    uid: String,
    annotation: String,
    delay: std::time::Duration,
) {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let groups = match parse(&annotation) {
        Ok(g) => g,
        Err(e) => {
            tracing::warn!(
                "node {node}: annotation {DRA_DEVICES_ANNOTATION} is not a device list: {e}"
            );
            return;
        }
    };
    let api: Api<DynamicObject> = Api::all_with(shared.client.clone(), &resource());
    for slice in slices(&node, &uid, &groups, 1) {
        let name = slice["metadata"]["name"].as_str().unwrap_or("").to_string();
        let result = match api.get_opt(&name).await {
            Ok(Some(old)) => {
                let generation = old.data["spec"]["pool"]["generation"].as_i64().unwrap_or(0) + 1;
                let mut new = slices(&node, &uid, &groups, generation)
                    .into_iter()
                    .find(|s| s["metadata"]["name"] == name.as_str())
                    .unwrap_or(slice);
                new["metadata"]["resourceVersion"] = json!(old.resource_version());
                match serde_json::from_value::<DynamicObject>(new) {
                    Ok(obj) => api
                        .replace(&name, &PostParams::default(), &obj)
                        .await
                        .map(|_| ()),
                    Err(e) => Err(kube::Error::SerdeError(e)),
                }
            }
            Ok(None) => match serde_json::from_value::<DynamicObject>(slice) {
                Ok(obj) => api.create(&PostParams::default(), &obj).await.map(|_| ()),
                Err(e) => Err(kube::Error::SerdeError(e)),
            },
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            tracing::warn!("node {node}: publishing ResourceSlice {name}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn groups_of_one_driver_share_a_slice_local_to_the_node() {
        let groups = parse(
            r#"[{"driver": "gpu.example.com", "name": "gpu", "count": 2,
                 "attributes": {"model": {"string": "a100"}}, "capacity": {"memory": {"value": "40Gi"}}},
                {"driver": "gpu.example.com", "name": "mig"},
                {"driver": "nic.example.com"}]"#,
        )
        .unwrap();
        let s = slices("n1", "u1", &groups, 1);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0]["metadata"]["name"], "n1-gpu.example.com");
        assert_eq!(s[0]["spec"]["nodeName"], "n1");
        assert_eq!(
            s[0]["spec"]["pool"],
            json!({"name": "n1", "generation": 1, "resourceSliceCount": 1})
        );
        let names: Vec<&str> = s[0]["spec"]["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["gpu-0", "gpu-1", "mig-0"]);
        assert_eq!(
            s[0]["spec"]["devices"][0]["attributes"]["model"]["string"],
            "a100"
        );
        assert_eq!(s[1]["spec"]["devices"][0]["name"], "device-0");
        assert_eq!(s[1]["metadata"]["ownerReferences"][0]["uid"], "u1");
    }

    #[test]
    fn a_malformed_annotation_is_refused() {
        assert!(parse("gpu=2").is_err());
        assert!(parse(r#"[{"count": 2}]"#).is_err(), "no driver");
        assert!(parse(r#"[{"driver": "d", "colour": "red"}]"#).is_err());
    }
}
