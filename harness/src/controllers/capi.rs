//! Cluster API in the embedded cluster: the part of CAPI's core controllers
//! that node autoscaling sees, and a kwok infrastructure provider.
//!
//! - CRDs ([`crds`]): `Cluster`, `MachineDeployment`, `MachineSet` and
//!   `Machine` in `cluster.x-k8s.io/v1beta1` (MachineDeployment and
//!   MachineSet with the `scale` subresource, as CAPI serves them), and
//!   `KwokMachineTemplate` in `infrastructure.cluster.x-k8s.io/v1alpha1`,
//!   the infrastructure template kind whose `spec.template.spec` describes
//!   the node (`capacity`, `labels`, `taints`) and whose `status.capacity`
//!   and `status.nodeInfo` a test sets (the opt-in scale-from-zero contract;
//!   the CRD has no status subresource, so a manifest may carry it).
//! - The controller ([`CapiController`]): a MachineDeployment owns one
//!   MachineSet with its replicas and template; a MachineSet creates and
//!   deletes Machines to match its replicas, deleting first the Machines
//!   annotated [`DELETE_MACHINE_ANNOTATION`], then those without a node,
//!   then the newest; a Machine gets a kwok Node named after it, built from
//!   its infrastructure template, with `spec.providerID`
//!   `kwok://<machine>`, and reports `status.nodeRef` and its phase; a
//!   deleted Machine (it carries a finalizer) deletes its Node first.
//!
//! One task watches the five kinds and Nodes, keeps a cache and, after each
//! batch of changes, reconciles everything (these clusters have tens to
//! hundreds of Machines). Objects it creates go into the cache at once, so
//! a pass never creates twice what the watch has not delivered yet.

use std::collections::BTreeMap;

use futures::{FutureExt, StreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::Node;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use simclock::Clock;

/// Cluster API's group.
pub const GROUP: &str = "cluster.x-k8s.io";
/// The version served.
pub const VERSION: &str = "v1beta1";
/// The infrastructure group.
pub const INFRA_GROUP: &str = "infrastructure.cluster.x-k8s.io";
/// The kwok infrastructure template's version.
pub const INFRA_VERSION: &str = "v1alpha1";
/// The kwok infrastructure template's kind.
pub const TEMPLATE_KIND: &str = "KwokMachineTemplate";
/// A Machine annotated so is deleted first when its set shrinks.
pub const DELETE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/delete-machine";
/// The Machine finalizer: the Node goes before the Machine.
pub const MACHINE_FINALIZER: &str = "machine.cluster.x-k8s.io";
/// Label: the cluster an object belongs to.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// Label: the MachineDeployment of a MachineSet or Machine.
pub const DEPLOYMENT_NAME_LABEL: &str = "cluster.x-k8s.io/deployment-name";
/// Label: the MachineSet of a Machine.
pub const SET_NAME_LABEL: &str = "cluster.x-k8s.io/set-name";
/// Node annotation: the Machine of a Node.
pub const MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/machine";
/// The providerID prefix of the kwok infrastructure provider.
pub const PROVIDER_ID_PREFIX: &str = "kwok://";

/// Label prefixes CAPI copies from a Machine's labels to its Node.
const NODE_LABEL_PREFIXES: [&str; 3] = [
    "node.cluster.x-k8s.io/",
    "node-role.kubernetes.io/",
    "node-restriction.kubernetes.io/",
];

fn crd(group: &str, version: &str, kind: &str, plural: &str, scale: bool, status: bool) -> Value {
    let mut subresources = serde_json::Map::new();
    if status {
        subresources.insert("status".into(), json!({}));
    }
    if scale {
        subresources.insert(
            "scale".into(),
            json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                   "labelSelectorPath": ".status.selector"}),
        );
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                      "listKind": format!("{kind}List")},
            "versions": [{"name": version, "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": subresources}]}
    })
}

/// The CRDs: Cluster API's four kinds and the kwok infrastructure template.
pub fn crds() -> Vec<Value> {
    vec![
        crd(GROUP, VERSION, "Cluster", "clusters", false, true),
        crd(
            GROUP,
            VERSION,
            "MachineDeployment",
            "machinedeployments",
            true,
            true,
        ),
        crd(GROUP, VERSION, "MachineSet", "machinesets", true, true),
        crd(GROUP, VERSION, "Machine", "machines", false, true),
        crd(
            INFRA_GROUP,
            INFRA_VERSION,
            TEMPLATE_KIND,
            "kwokmachinetemplates",
            false,
            false,
        ),
    ]
}

/// The API resource of one of the kinds.
pub fn resource(kind: &str) -> ApiResource {
    let (group, version, plural) = match kind {
        TEMPLATE_KIND => (
            INFRA_GROUP,
            INFRA_VERSION,
            "kwokmachinetemplates".to_string(),
        ),
        _ => (GROUP, VERSION, format!("{}s", kind.to_lowercase())),
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Deployment,
    Set,
    Machine,
    Template,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Deployment => "MachineDeployment",
            Self::Set => "MachineSet",
            Self::Machine => "Machine",
            Self::Template => TEMPLATE_KIND,
        }
    }
}

enum Change {
    Object(Kind, Box<Event<DynamicObject>>),
    Node(Box<Event<Node>>),
}

type Objects = BTreeMap<String, DynamicObject>;

fn key(o: &DynamicObject) -> String {
    format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())
}

fn ns(o: &DynamicObject) -> String {
    o.namespace().unwrap_or_else(|| "default".into())
}

fn replicas(o: &DynamicObject) -> usize {
    o.data
        .pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .and_then(|r| usize::try_from(r).ok())
        .unwrap_or(1)
}

fn owned_by<'a>(objects: &'a Objects, owner: &DynamicObject) -> Vec<&'a DynamicObject> {
    let Some(uid) = owner.metadata.uid.as_deref() else {
        return Vec::new();
    };
    objects
        .values()
        .filter(|o| {
            o.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == uid && r.controller == Some(true))
        })
        .collect()
}

fn owner_ref(owner: &DynamicObject, kind: Kind) -> Value {
    json!([{"apiVersion": format!("{GROUP}/{VERSION}"), "kind": kind.name(),
            "name": owner.name_any(), "uid": owner.metadata.uid, "controller": true,
            "blockOwnerDeletion": true}])
}

fn is_deleting(o: &DynamicObject) -> bool {
    o.metadata.deletion_timestamp.is_some()
}

fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The Cluster API controller task.
pub struct CapiController {
    client: Client,
    clock: Clock,
    deployments: Objects,
    sets: Objects,
    machines: Objects,
    templates: Objects,
    nodes: BTreeMap<String, Node>,
}

impl CapiController {
    /// A controller talking to the API server through `client`.
    pub fn new(client: Client, clock: Clock) -> Self {
        Self {
            client,
            clock,
            deployments: Objects::new(),
            sets: Objects::new(),
            machines: Objects::new(),
            templates: Objects::new(),
            nodes: BTreeMap::new(),
        }
    }

    fn api(&self, kind: Kind, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &resource(kind.name()))
    }

    /// Watches and reconciles until the task is dropped.
    pub async fn run(mut self) {
        let watch = |kind: Kind| -> BoxStream<'static, Change> {
            let api: Api<DynamicObject> =
                Api::all_with(self.client.clone(), &resource(kind.name()));
            watcher::watcher(api, watcher::Config::default())
                .default_backoff()
                .filter_map(
                    move |e| async move { e.ok().map(|e| Change::Object(kind, Box::new(e))) },
                )
                .boxed()
        };
        let nodes = watcher::watcher(
            Api::<Node>::all(self.client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .filter_map(|e| async move { e.ok().map(|e| Change::Node(Box::new(e))) })
        .boxed();
        let mut changes = futures::stream::select_all([
            nodes,
            watch(Kind::Deployment),
            watch(Kind::Set),
            watch(Kind::Machine),
            watch(Kind::Template),
        ]);
        while let Some(change) = changes.next().await {
            self.apply(change);
            while let Some(Some(c)) = changes.next().now_or_never() {
                self.apply(c);
            }
            self.reconcile().await;
        }
    }

    fn apply(&mut self, change: Change) {
        match change {
            Change::Object(kind, ev) => {
                let map = match kind {
                    Kind::Deployment => &mut self.deployments,
                    Kind::Set => &mut self.sets,
                    Kind::Machine => &mut self.machines,
                    Kind::Template => &mut self.templates,
                };
                match *ev {
                    Event::Apply(o) | Event::InitApply(o) => {
                        map.insert(key(&o), o);
                    }
                    Event::Delete(o) => {
                        map.remove(&key(&o));
                    }
                    _ => {}
                }
            }
            Change::Node(ev) => match *ev {
                Event::Apply(n) | Event::InitApply(n) => {
                    self.nodes.insert(n.name_any(), n);
                }
                Event::Delete(n) => {
                    self.nodes.remove(&n.name_any());
                }
                _ => {}
            },
        }
    }

    async fn reconcile(&mut self) {
        let deployments: Vec<DynamicObject> = self.deployments.values().cloned().collect();
        for md in deployments.iter().filter(|o| !is_deleting(o)) {
            if let Err(e) = self.sync_deployment(md).await {
                tracing::warn!("capi: MachineDeployment {}: {e}", key(md));
            }
        }
        let sets: Vec<DynamicObject> = self.sets.values().cloned().collect();
        for ms in sets.iter().filter(|o| !is_deleting(o)) {
            if let Err(e) = self.sync_set(ms).await {
                tracing::warn!("capi: MachineSet {}: {e}", key(ms));
            }
        }
        let machines: Vec<DynamicObject> = self.machines.values().cloned().collect();
        for m in &machines {
            if let Err(e) = self.sync_machine(m).await {
                tracing::warn!("capi: Machine {}: {e}", key(m));
            }
        }
    }

    /// One MachineSet with the deployment's replicas and template; the
    /// deployment's status sums its sets'.
    async fn sync_deployment(&mut self, md: &DynamicObject) -> Result<(), kube::Error> {
        let name = md.name_any();
        let namespace = ns(md);
        let want = replicas(md);
        let template = md
            .data
            .pointer("/spec/template")
            .cloned()
            .unwrap_or(json!({}));
        let cluster = md
            .data
            .pointer("/spec/clusterName")
            .cloned()
            .unwrap_or(json!(""));
        let sets: Vec<DynamicObject> = owned_by(&self.sets, md).into_iter().cloned().collect();
        match sets.first() {
            None => {
                let set_name = format!("{name}-{}", apimachinery::rand::suffix(5));
                let mut labels = template
                    .pointer("/metadata/labels")
                    .cloned()
                    .unwrap_or(json!({}));
                labels[DEPLOYMENT_NAME_LABEL] = json!(name);
                labels[CLUSTER_NAME_LABEL] = cluster.clone();
                let mut set_template = template.clone();
                set_template["metadata"]["labels"] = labels.clone();
                let ms = json!({
                    "apiVersion": format!("{GROUP}/{VERSION}"), "kind": "MachineSet",
                    "metadata": {"name": set_name, "namespace": namespace, "labels": labels,
                        "ownerReferences": owner_ref(md, Kind::Deployment)},
                    "spec": {"clusterName": cluster, "replicas": want,
                        "selector": {"matchLabels": {DEPLOYMENT_NAME_LABEL: name, CLUSTER_NAME_LABEL: cluster}},
                        "template": set_template},
                });
                let ms: DynamicObject =
                    serde_json::from_value(ms).map_err(kube::Error::SerdeError)?;
                let created = self
                    .api(Kind::Set, &namespace)
                    .create(&PostParams::default(), &ms)
                    .await?;
                self.sets.insert(key(&created), created);
            }
            Some(ms) => {
                let infra = |o: &Value| o.pointer("/spec/infrastructureRef").cloned();
                let set_template = ms
                    .data
                    .pointer("/spec/template")
                    .cloned()
                    .unwrap_or(json!({}));
                let mut patch = json!({});
                if replicas(ms) != want {
                    patch["spec"]["replicas"] = json!(want);
                }
                if infra(&set_template) != infra(&template) {
                    patch["spec"]["template"]["spec"]["infrastructureRef"] =
                        infra(&template).unwrap_or(Value::Null);
                }
                if patch != json!({}) {
                    let updated = self
                        .api(Kind::Set, &namespace)
                        .patch(
                            &ms.name_any(),
                            &PatchParams::default(),
                            &Patch::Merge(&patch),
                        )
                        .await?;
                    self.sets.insert(key(&updated), updated);
                }
            }
        }
        let sets: Vec<&DynamicObject> = owned_by(&self.sets, md);
        let sum = |path: &str| -> u64 {
            sets.iter()
                .filter_map(|s| s.data.pointer(path).and_then(Value::as_u64))
                .sum()
        };
        let status = json!({
            "replicas": sum("/status/replicas"),
            "readyReplicas": sum("/status/readyReplicas"),
            "availableReplicas": sum("/status/availableReplicas"),
            "selector": format!("{DEPLOYMENT_NAME_LABEL}={name},{CLUSTER_NAME_LABEL}={}", cluster.as_str().unwrap_or("")),
            "phase": if sum("/status/readyReplicas") == want as u64 { "Running" } else { "ScalingUp" },
        });
        self.write_status(Kind::Deployment, md, status).await
    }

    async fn write_status(
        &mut self,
        kind: Kind,
        o: &DynamicObject,
        status: Value,
    ) -> Result<(), kube::Error> {
        let current = o.data.get("status").cloned().unwrap_or(Value::Null);
        let changed = status
            .as_object()
            .into_iter()
            .flatten()
            .any(|(k, v)| current.get(k) != Some(v));
        if !changed {
            return Ok(());
        }
        let updated = self
            .api(kind, &ns(o))
            .patch_status(
                &o.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await?;
        let map = match kind {
            Kind::Deployment => &mut self.deployments,
            Kind::Set => &mut self.sets,
            Kind::Machine => &mut self.machines,
            Kind::Template => &mut self.templates,
        };
        map.insert(key(&updated), updated);
        Ok(())
    }

    /// Machines to match the set's replicas.
    async fn sync_set(&mut self, ms: &DynamicObject) -> Result<(), kube::Error> {
        let name = ms.name_any();
        let namespace = ns(ms);
        let want = replicas(ms);
        let mut machines: Vec<DynamicObject> = owned_by(&self.machines, ms)
            .into_iter()
            .filter(|m| !is_deleting(m))
            .cloned()
            .collect();
        if machines.len() < want {
            let template = ms
                .data
                .pointer("/spec/template")
                .cloned()
                .unwrap_or(json!({}));
            let cluster = ms
                .data
                .pointer("/spec/clusterName")
                .cloned()
                .unwrap_or(json!(""));
            for _ in machines.len()..want {
                let machine_name = format!("{name}-{}", apimachinery::rand::suffix(5));
                let mut labels = template
                    .pointer("/metadata/labels")
                    .cloned()
                    .unwrap_or(json!({}));
                labels[SET_NAME_LABEL] = json!(name);
                labels[CLUSTER_NAME_LABEL] = cluster.clone();
                let mut spec = template.get("spec").cloned().unwrap_or(json!({}));
                spec["clusterName"] = cluster.clone();
                let m = json!({
                    "apiVersion": format!("{GROUP}/{VERSION}"), "kind": "Machine",
                    "metadata": {"name": machine_name, "namespace": namespace, "labels": labels,
                        "finalizers": [MACHINE_FINALIZER],
                        "ownerReferences": owner_ref(ms, Kind::Set)},
                    "spec": spec,
                });
                let m: DynamicObject =
                    serde_json::from_value(m).map_err(kube::Error::SerdeError)?;
                let created = self
                    .api(Kind::Machine, &namespace)
                    .create(&PostParams::default(), &m)
                    .await?;
                self.machines.insert(key(&created), created);
            }
        } else if machines.len() > want {
            // CAPI's deletion order: annotated first, then Machines
            // without a node, then the newest.
            machines.sort_by_key(|m| {
                let annotated = m.annotations().contains_key(DELETE_MACHINE_ANNOTATION);
                let no_node = m.data.pointer("/status/nodeRef").is_none();
                (
                    !annotated,
                    !no_node,
                    std::cmp::Reverse(m.metadata.creation_timestamp.clone()),
                )
            });
            let excess = machines.len() - want;
            for m in machines.iter().take(excess) {
                match self
                    .api(Kind::Machine, &namespace)
                    .delete(&m.name_any(), &DeleteParams::default())
                    .await
                {
                    Ok(deleted) => {
                        if let Some(o) = deleted.left() {
                            self.machines.insert(key(&o), o);
                        }
                    }
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let machines: Vec<&DynamicObject> = owned_by(&self.machines, ms);
        let ready = machines
            .iter()
            .filter(|m| m.data.pointer("/status/phase").and_then(Value::as_str) == Some("Running"))
            .count();
        let cluster = ms
            .data
            .pointer("/spec/clusterName")
            .and_then(Value::as_str)
            .unwrap_or("");
        let deployment = ms.labels().get(DEPLOYMENT_NAME_LABEL).cloned();
        let selector = match deployment {
            Some(d) => format!("{DEPLOYMENT_NAME_LABEL}={d},{CLUSTER_NAME_LABEL}={cluster}"),
            None => format!("{SET_NAME_LABEL}={name},{CLUSTER_NAME_LABEL}={cluster}"),
        };
        let status = json!({"replicas": machines.len(), "readyReplicas": ready,
            "availableReplicas": ready, "fullyLabeledReplicas": machines.len(), "selector": selector});
        self.write_status(Kind::Set, ms, status).await
    }

    /// A Node for the Machine, or the Node gone before the Machine.
    async fn sync_machine(&mut self, m: &DynamicObject) -> Result<(), kube::Error> {
        let name = m.name_any();
        let namespace = ns(m);
        let nodes: Api<Node> = Api::all(self.client.clone());
        if is_deleting(m) {
            if m.data.pointer("/status/phase").and_then(Value::as_str) != Some("Deleting") {
                self.write_status(Kind::Machine, m, json!({"phase": "Deleting"}))
                    .await?;
            }
            if self.nodes.contains_key(&name) {
                match nodes.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
                self.nodes.remove(&name);
            }
            let finalizers: Vec<String> = m
                .finalizers()
                .iter()
                .filter(|f| f.as_str() != MACHINE_FINALIZER)
                .cloned()
                .collect();
            if finalizers.len() != m.finalizers().len() {
                let patch = json!({"metadata": {"finalizers": finalizers,
                    "resourceVersion": m.metadata.resource_version}});
                match self
                    .api(Kind::Machine, &namespace)
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) | Err(kube::Error::Api(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            return Ok(());
        }
        let provider_id = format!("{PROVIDER_ID_PREFIX}{name}");
        match self.nodes.get(&name) {
            None => {
                if m.data.pointer("/status/nodeRef").is_some() {
                    // The Node went away under the Machine: CAPI's
                    // Machine then reports it failed.
                    return self
                        .write_status(
                            Kind::Machine,
                            m,
                            json!({"phase": "Failed", "failureReason": "NodeDeleted",
                                   "failureMessage": format!("node {name} was deleted")}),
                        )
                        .await;
                }
                let Some(node) = self.node_for(m, &provider_id) else {
                    return self
                        .write_status(Kind::Machine, m, json!({"phase": "Provisioning"}))
                        .await;
                };
                let node: Node = serde_json::from_value(node).map_err(kube::Error::SerdeError)?;
                let created = match nodes.create(&PostParams::default(), &node).await {
                    Ok(n) => n,
                    Err(kube::Error::Api(e)) if e.code == 409 => return Ok(()),
                    Err(e) => return Err(e),
                };
                self.nodes.insert(name.clone(), created);
                if m.data.pointer("/spec/providerID").and_then(Value::as_str)
                    != Some(provider_id.as_str())
                {
                    let updated = self
                        .api(Kind::Machine, &namespace)
                        .patch(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(json!({"spec": {"providerID": provider_id}})),
                        )
                        .await?;
                    self.machines.insert(key(&updated), updated.clone());
                    return self.sync_status(&updated).await;
                }
                self.sync_status(m).await
            }
            Some(_) => self.sync_status(m).await,
        }
    }

    async fn sync_status(&mut self, m: &DynamicObject) -> Result<(), kube::Error> {
        let name = m.name_any();
        let Some(node) = self.nodes.get(&name) else {
            return Ok(());
        };
        let phase = if node_ready(node) {
            "Running"
        } else {
            "Provisioned"
        };
        let status = json!({"phase": phase,
            "nodeRef": {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node.metadata.uid},
            "lastUpdated": self.clock.rfc3339()});
        let current_phase = m.data.pointer("/status/phase").and_then(Value::as_str);
        if current_phase == Some(phase) && m.data.pointer("/status/nodeRef").is_some() {
            return Ok(());
        }
        self.write_status(Kind::Machine, m, status).await
    }

    /// The Node of a Machine from its infrastructure template, or `None`
    /// while the template does not exist.
    fn node_for(&self, m: &DynamicObject, provider_id: &str) -> Option<Value> {
        let infra = m.data.pointer("/spec/infrastructureRef")?;
        let template_name = infra.get("name").and_then(Value::as_str)?;
        let template_ns = infra
            .get("namespace")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| ns(m));
        let template = self
            .templates
            .get(&format!("{template_ns}/{template_name}"))?;
        let spec = template
            .data
            .pointer("/spec/template/spec")
            .cloned()
            .unwrap_or(json!({}));
        let name = m.name_any();
        let mut labels = spec.get("labels").cloned().unwrap_or(json!({}));
        for (k, v) in [
            ("kubernetes.io/hostname", name.as_str()),
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
        ] {
            if labels.get(k).is_none() {
                labels[k] = json!(v);
            }
        }
        for (k, v) in m.labels() {
            if NODE_LABEL_PREFIXES.iter().any(|p| k.starts_with(p)) {
                labels[k] = json!(v);
            }
        }
        let mut capacity = spec.get("capacity").cloned().unwrap_or(json!({}));
        for (k, v) in [("cpu", "2"), ("memory", "4Gi"), ("pods", "110")] {
            if capacity.get(k).is_none() {
                capacity[k] = json!(v);
            }
        }
        let cluster = m
            .data
            .pointer("/spec/clusterName")
            .cloned()
            .unwrap_or(json!(""));
        let owner = m
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true));
        let mut annotations = spec.get("annotations").cloned().unwrap_or(json!({}));
        for (k, v) in [
            (kwok::NODE_ANNOTATION, json!("fake")),
            (MACHINE_ANNOTATION, json!(name)),
            ("cluster.x-k8s.io/cluster-name", cluster),
            ("cluster.x-k8s.io/cluster-namespace", json!(ns(m))),
            (
                "cluster.x-k8s.io/owner-kind",
                json!(owner.map(|o| o.kind.clone())),
            ),
            (
                "cluster.x-k8s.io/owner-name",
                json!(owner.map(|o| o.name.clone())),
            ),
        ] {
            annotations[k] = v;
        }
        Some(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {"providerID": provider_id, "taints": spec.get("taints").cloned().unwrap_or(json!([]))},
            "status": {"capacity": capacity, "allocatable": capacity},
        }))
    }
}

/// A `Cluster` object (the suite's node groups belong to one).
pub fn cluster_manifest(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": format!("{GROUP}/{VERSION}"), "kind": "Cluster",
        "metadata": {"name": name, "namespace": namespace}, "spec": {}})
}

/// A `KwokMachineTemplate` whose machines' nodes have this `capacity`
/// (`{"cpu": "4", "memory": "16Gi", ...}`), `labels` and `taints` (Node
/// taint objects); `spec.template.spec.annotations`, when the caller adds
/// them, go on the nodes too (kwok's `dra-devices`). Its status is left
/// for the caller to set.
pub fn template_manifest(
    namespace: &str,
    name: &str,
    capacity: Value,
    labels: Value,
    taints: Value,
) -> Value {
    json!({"apiVersion": format!("{INFRA_GROUP}/{INFRA_VERSION}"), "kind": TEMPLATE_KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"template": {"spec": {"capacity": capacity, "labels": labels, "taints": taints}}}})
}

/// A `MachineDeployment` of `replicas` machines of cluster `cluster` made
/// from the `KwokMachineTemplate` `template`, with these annotations (the
/// autoscaler's size and capacity annotations).
pub fn machine_deployment_manifest(
    namespace: &str,
    name: &str,
    cluster: &str,
    replicas: usize,
    template: &str,
    annotations: Value,
) -> Value {
    json!({"apiVersion": format!("{GROUP}/{VERSION}"), "kind": "MachineDeployment",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations,
            "labels": {CLUSTER_NAME_LABEL: cluster}},
        "spec": {"clusterName": cluster, "replicas": replicas,
            "selector": {"matchLabels": {DEPLOYMENT_NAME_LABEL: name, CLUSTER_NAME_LABEL: cluster}},
            "template": {"metadata": {"labels": {DEPLOYMENT_NAME_LABEL: name, CLUSTER_NAME_LABEL: cluster}},
                "spec": {"clusterName": cluster, "version": "v1.33.0",
                    "bootstrap": {"dataSecretName": ""},
                    "infrastructureRef": {"apiVersion": format!("{INFRA_GROUP}/{INFRA_VERSION}"),
                        "kind": TEMPLATE_KIND, "name": template, "namespace": namespace}}}}})
}
