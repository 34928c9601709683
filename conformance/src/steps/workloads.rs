//! Workloads: deployments, bare pods and DaemonSets shaped by clauses,
//! PDBs, priority classes, the priority expander's ConfigMap, a pods
//! quota, scaling, and any object written out as YAML.
//!
//! A pod's shape is a CPU request followed by clauses, in any order:
//! ` on node group "g"` (nodeSelector), ` requiring node group "g"`
//! (required node affinity), ` preferring node group "g"` (preferred node
//! affinity), ` on nodes labeled "k=v"` (nodeSelector),
//! ` annotated "k=v"`, ` with priority class
//! "p"`, ` with host port 8080`, ` with pod anti-affinity`, ` tolerating
//! "k=v:NoSchedule"`, ` with an emptyDir volume "v"`, ` with a hostPath
//! volume "v"`, ` in namespace "ns"`, ` with scheduler "s"`, ` and 2Gi
//! memory`, ` and 1 "nvidia.com/gpu"`, ` with a pod-scale-up-delay of 2
//! minutes`, ` taking 2 minutes to terminate` (its grace period, which
//! kwok then honours). Every pod is labelled `app=<name>`.

use std::sync::LazyLock;

use cucumber::gherkin::Step;
use cucumber::{given, when};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use regex::Regex;
use serde_json::{Map, Value, json};

use super::parse_taint;
use crate::world::{self, CaWorld, StepResult};

/// A pod template under construction.
pub(super) struct PodShape {
    pub(super) namespace: String,
    labels: Map<String, Value>,
    annotations: Map<String, Value>,
    spec: Map<String, Value>,
    requests: Map<String, Value>,
    container: Map<String, Value>,
    /// `spec.resourceClaims` entries (each container uses them all).
    claims: Vec<Value>,
    /// Objects the pods need first (a ResourceClaimTemplate).
    prerequisites: Vec<Value>,
}

static CLAUSES: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    [
        ("on node group", r#"^ on node group "([^"]+)""#),
        (
            "requiring node group",
            r#"^ requiring node group "([^"]+)""#,
        ),
        (
            "preferring node group",
            r#"^ preferring node group "([^"]+)""#,
        ),
        (
            "on nodes labeled",
            r#"^ on nodes labeled "([^"=]+)=([^"]*)""#,
        ),
        ("annotated", r#"^ annotated "([^"=]+)=([^"]*)""#),
        ("priority class", r#"^ with priority class "([^"]+)""#),
        ("host port", r"^ with host port (\d+)"),
        ("anti-affinity", r"^ with pod anti-affinity"),
        ("tolerating", r#"^ tolerating "([^"]+)""#),
        (
            "volume",
            r#"^ with an? (emptyDir|hostPath) volume "([^"]+)""#,
        ),
        ("namespace", r#"^ in namespace "([^"]+)""#),
        ("scheduler", r#"^ with scheduler "([^"]+)""#),
        ("memory", r"^ and (\S+) memory"),
        (
            "device claim",
            r#"^ with a claim for (\d+) "([^"]+)" devices?"#,
        ),
        ("claim template", r#"^ with the claim template "([^"]+)""#),
        ("shared claim", r#"^ sharing the claim "([^"]+)""#),
        ("resource", r#"^ and (\d+) "([^"]+)""#),
        (
            "scale-up delay",
            r"^ with a pod-scale-up-delay of (\d+) minutes?",
        ),
        (
            "termination",
            r"^ taking (\d+) (seconds?|minutes?) to terminate",
        ),
    ]
    .into_iter()
    .filter_map(|(name, re)| Regex::new(re).ok().map(|r| (name, r)))
    .collect()
});

impl PodShape {
    pub(super) fn new(app: &str, cpu: &str, clauses: &str) -> Result<Self, String> {
        let mut shape = Self {
            namespace: "default".into(),
            labels: Map::from_iter([("app".to_string(), json!(app))]),
            annotations: Map::new(),
            spec: Map::new(),
            requests: Map::from_iter([
                ("cpu".to_string(), json!(cpu)),
                ("memory".to_string(), json!("100Mi")),
            ]),
            container: Map::new(),
            claims: Vec::new(),
            prerequisites: Vec::new(),
        };
        let mut rest = clauses;
        while !rest.is_empty() {
            let (name, caps) = CLAUSES
                .iter()
                .find_map(|(name, re)| re.captures(rest).map(|c| (*name, c)))
                .ok_or_else(|| {
                    format!(
                        "unknown pod clause {rest:?} (docs/suite/writing-scenarios.md lists the clauses)"
                    )
                })?;
            let arg = |i: usize| caps.get(i).map_or("", |m| m.as_str()).to_string();
            shape.apply(app, name, &arg(1), &arg(2))?;
            rest = &rest[caps.get(0).map_or(rest.len(), |m| m.end())..];
        }
        Ok(shape)
    }

    fn apply(&mut self, app: &str, clause: &str, a: &str, b: &str) -> StepResult {
        match clause {
            "on node group" => {
                self.spec
                    .insert("nodeSelector".into(), json!({"kwok-nodegroup": a}));
            }
            "on nodes labeled" => {
                self.spec.insert("nodeSelector".into(), json!({ a: b }));
            }
            "preferring node group" => {
                self.spec.insert("affinity".into(), json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
                    [{"weight": 100, "preference": {"matchExpressions": [{"key": "kwok-nodegroup", "operator": "In", "values": [a]}]}}]}}));
            }
            "requiring node group" => {
                self.spec.insert("affinity".into(), json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kwok-nodegroup", "operator": "In", "values": [a]}]}]}}}));
            }
            "annotated" => {
                self.annotations.insert(a.into(), json!(b));
            }
            "priority class" => {
                self.spec.insert("priorityClassName".into(), json!(a));
            }
            "host port" => {
                let port: u16 = a.parse().map_err(|e| format!("host port {a}: {e}"))?;
                self.container.insert(
                    "ports".into(),
                    json!([{"containerPort": port, "hostPort": port, "protocol": "TCP"}]),
                );
            }
            "anti-affinity" => {
                self.spec.insert("affinity".into(), json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    [{"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}]}}));
            }
            "tolerating" => {
                let mut t = parse_taint(a)?;
                t["operator"] = json!(if t.get("value").is_some() {
                    "Equal"
                } else {
                    "Exists"
                });
                let list = self.spec.entry("tolerations").or_insert_with(|| json!([]));
                if let Some(l) = list.as_array_mut() {
                    l.push(t);
                }
            }
            "volume" => {
                let source = if a == "emptyDir" {
                    json!({"name": b, "emptyDir": {}})
                } else {
                    json!({"name": b, "hostPath": {"path": format!("/data/{b}")}})
                };
                let list = self.spec.entry("volumes").or_insert_with(|| json!([]));
                if let Some(l) = list.as_array_mut() {
                    l.push(source);
                }
                let mounts = self
                    .container
                    .entry("volumeMounts")
                    .or_insert_with(|| json!([]));
                if let Some(m) = mounts.as_array_mut() {
                    m.push(json!({"name": b, "mountPath": format!("/mnt/{b}")}));
                }
            }
            "namespace" => self.namespace = world::namespace_name(a)?,
            "scheduler" => {
                self.spec.insert("schedulerName".into(), json!(a));
            }
            "memory" => {
                self.requests.insert("memory".into(), json!(a));
            }
            "resource" => {
                self.requests.insert(b.into(), json!(a));
            }
            "device claim" => {
                let template = format!("{app}-{b}");
                let count: i64 = a.parse().map_err(|e| format!("{a}: {e}"))?;
                self.prerequisites.push(super::dra::claim_template(
                    &template,
                    &self.namespace,
                    count,
                    b,
                    None,
                ));
                self.claims
                    .push(json!({"name": "devices", "resourceClaimTemplateName": template}));
            }
            "claim template" => {
                self.claims
                    .push(json!({"name": "devices", "resourceClaimTemplateName": a}));
            }
            "shared claim" => {
                self.claims
                    .push(json!({"name": "shared", "resourceClaimName": a}));
            }
            "scale-up delay" => {
                // Scenario minutes, in the autoscaler's (possibly scaled) time.
                let minutes: f64 = a.parse().map_err(|e| format!("{a}: {e}"))?;
                let secs = minutes * 60.0 / world::time_scale();
                self.annotations.insert(
                    "cluster-autoscaler.kubernetes.io/pod-scale-up-delay".into(),
                    json!(format!("{}ms", (secs * 1000.0).round())),
                );
            }
            "termination" => {
                // Scenario time, in the cluster's (possibly scaled) time.
                let n: f64 = a.parse().map_err(|e| format!("{a}: {e}"))?;
                let unit = if b.starts_with("minute") { 60.0 } else { 1.0 };
                let secs = (n * unit / world::time_scale()).ceil().max(1.0);
                self.spec
                    .insert("terminationGracePeriodSeconds".into(), json!(secs as i64));
                self.labels
                    .insert(world::GRACEFUL_TERMINATION_LABEL.into(), json!("true"));
            }
            other => return Err(format!("unhandled clause {other}")),
        }
        Ok(())
    }

    pub(super) fn template(&self) -> Value {
        let mut container = self.container.clone();
        container.insert("name".into(), json!("main"));
        container.insert("image".into(), json!("registry.k8s.io/pause:3.10"));
        let mut resources = json!({"requests": self.requests, "limits": self.extended_limits()});
        let mut spec = self.spec.clone();
        if !self.claims.is_empty() {
            let names: Vec<Value> = self
                .claims
                .iter()
                .map(|c| json!({"name": c["name"]}))
                .collect();
            resources["claims"] = json!(names);
            spec.insert("resourceClaims".into(), json!(self.claims));
        }
        container.insert("resources".into(), resources);
        spec.insert("containers".into(), json!([container]));
        json!({"metadata": {"labels": self.labels, "annotations": self.annotations}, "spec": spec})
    }

    /// Creates what the pods need first (a claim's template), unless it
    /// exists (several workloads may share one).
    pub(super) async fn create_prerequisites(&self, w: &mut CaWorld) -> StepResult {
        for o in &self.prerequisites {
            match w.create(o.clone()).await {
                Err(e) if e.contains("AlreadyExists") || e.contains("already exists") => {}
                other => other?,
            }
        }
        Ok(())
    }

    /// Extended resources need limits equal to requests.
    fn extended_limits(&self) -> Map<String, Value> {
        self.requests
            .iter()
            .filter(|(k, _)| k.contains('/'))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

// ---- Deployments, pods, DaemonSets ----

async fn create_deployment(
    w: &mut CaWorld,
    name: &str,
    replicas: usize,
    cpu: &str,
    clauses: &str,
) -> StepResult {
    let shape = PodShape::new(name, cpu, clauses)?;
    shape.create_prerequisites(w).await?;
    w.create(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": shape.namespace},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": shape.template()}}))
        .await
}

#[given(regex = r#"^a deployment "(\S+)" of (\d+) pods? requesting (\S+) CPU(.*)$"#)]
#[when(regex = r#"^a deployment "(\S+)" of (\d+) pods? requesting (\S+) CPU(.*) is created$"#)]
async fn a_deployment(
    w: &mut CaWorld,
    name: String,
    replicas: usize,
    cpu: String,
    clauses: String,
) -> StepResult {
    create_deployment(w, &name, replicas, &cpu, &clauses).await
}

async fn create_pod(w: &mut CaWorld, name: &str, cpu: &str, clauses: &str) -> StepResult {
    let shape = PodShape::new(name, cpu, clauses)?;
    shape.create_prerequisites(w).await?;
    let mut pod = shape.template();
    pod["apiVersion"] = json!("v1");
    pod["kind"] = json!("Pod");
    pod["metadata"]["name"] = json!(name);
    pod["metadata"]["namespace"] = json!(shape.namespace);
    w.create(pod).await
}

#[given(regex = r#"^a bare pod "(\S+)" requesting (\S+) CPU(.*)$"#)]
async fn a_bare_pod(w: &mut CaWorld, name: String, cpu: String, clauses: String) -> StepResult {
    create_pod(w, &name, &cpu, &clauses).await
}

#[when(regex = r#"^a bare pod "(\S+)" requesting (\S+) CPU(.*) is created$"#)]
async fn bare_pod_created(
    w: &mut CaWorld,
    name: String,
    cpu: String,
    clauses: String,
) -> StepResult {
    create_pod(w, &name, &cpu, &clauses).await
}

/// The pod's containers ended well: its phase is `Succeeded` (as kwok's
/// `pod-complete` stage writes for a Job's pods).
#[when(regex = r#"^the pod "(\S+)" completes$"#)]
async fn pod_completes(w: &mut CaWorld, name: String) -> StepResult {
    let r = w.running().await?;
    let api: Api<Pod> = Api::namespaced(r.cluster.client(), "default");
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .map_err(|e| format!("marking pod {name} Succeeded: {e}"))?;
    Ok(())
}

#[given(regex = r#"^a daemonset "(\S+)" requesting (\S+) CPU(.*)$"#)]
async fn a_daemonset(w: &mut CaWorld, name: String, cpu: String, clauses: String) -> StepResult {
    let shape = PodShape::new(&name, &cpu, &clauses)?;
    w.create(json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": shape.namespace},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": shape.template()}}))
        .await
}

#[when(regex = r#"^the deployment "(\S+)" is scaled to (\d+) pods?$"#)]
async fn scale_deployment(w: &mut CaWorld, name: String, replicas: i32) -> StepResult {
    let r = w.running().await?;
    let api: Api<Deployment> = Api::namespaced(r.cluster.client(), "default");
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .map(|_| ())
    .map_err(|e| format!("scaling deployment {name}: {e}"))
}

#[when(regex = r#"^the deployment "(\S+)" is deleted$"#)]
async fn delete_deployment(w: &mut CaWorld, name: String) -> StepResult {
    let r = w.running().await?;
    let api: Api<Deployment> = Api::namespaced(r.cluster.client(), "default");
    api.delete(&name, &DeleteParams::default())
        .await
        .map(|_| ())
        .map_err(|e| format!("deleting deployment {name}: {e}"))?;
    // The pods go with their ReplicaSet; delete them now, as kubectl would.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(r.cluster.client(), "default");
    pods.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels(&format!("app={name}")),
    )
    .await
    .map(|_| ())
    .map_err(|e| format!("deleting the pods of {name}: {e}"))
}

// ---- PDBs, priority classes, the priority expander ----

#[given(
    regex = r#"^a pod disruption budget for "(\S+)" with (minAvailable|maxUnavailable) (\d+)(?: in namespace "(\S+)")?$"#
)]
async fn a_pdb(
    w: &mut CaWorld,
    app: String,
    field: String,
    value: i32,
    namespace: String,
) -> StepResult {
    let namespace = if namespace.is_empty() {
        "default".to_string()
    } else {
        world::namespace_name(&namespace)?
    };
    w.create(
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": app, "namespace": namespace},
        "spec": {field: value, "selector": {"matchLabels": {"app": app}}}}),
    )
    .await
}

#[given(regex = r#"^a priority class "(\S+)" with value (-?\d+)$"#)]
async fn priority_class(w: &mut CaWorld, name: String, value: i32) -> StepResult {
    w.create(json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}))
        .await
}

#[given(regex = r#"^the priority expander gives priority (-?\d+) to "(.+)"$"#)]
fn expander_priority(w: &mut CaWorld, value: i64, pattern: String) -> StepResult {
    regex::Regex::new(&pattern).map_err(|e| format!("regex {pattern:?}: {e}"))?;
    w.expander_priorities
        .entry(value)
        .or_default()
        .push(pattern);
    Ok(())
}

/// A ResourceQuota of the `default` namespace on the count of pods: the
/// API server refuses the pods past it (the ReplicaSet controller then
/// creates fewer pods than its replicas).
#[given(regex = r#"^a resource quota "(\S+)" allowing (\d+) pods?$"#)]
async fn resource_quota(w: &mut CaWorld, name: String, pods: u32) -> StepResult {
    w.create(json!({"apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"hard": {"pods": pods.to_string()}}}))
        .await
}

// ---- Anything else ----

#[given(regex = r"^the following objects?:?$")]
#[when(regex = r"^the following objects? (?:is|are) created:?$")]
async fn following_objects(w: &mut CaWorld, step: &Step) -> StepResult {
    let text = step
        .docstring
        .as_deref()
        .ok_or("this step needs the objects as a YAML doc string")?;
    for (i, doc) in text.split("\n---").enumerate() {
        if doc.trim().is_empty() {
            continue;
        }
        let obj: Value =
            serde_saphyr::from_str(doc).map_err(|e| format!("YAML document {}: {e}", i + 1))?;
        w.create(obj).await?;
    }
    Ok(())
}
