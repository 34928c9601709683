//! The resources the server serves: the built-in table and CRDs registered
//! at run time. One [`ResourceDef`] per (group, resource); discovery, routing,
//! selectable fields, subresources and printing all read it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;

use crate::crd::CrdValidation;

/// Identifies a resource's storage: API group and plural resource name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    /// API group (`""` for core).
    pub group: String,
    /// Plural resource name (`pods`).
    pub resource: String,
}

impl GroupResource {
    /// Makes a group/resource.
    pub fn new(group: &str, resource: &str) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

impl std::fmt::Display for GroupResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}", self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// Where a resource's `scale` subresource reads and writes.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleSpec {
    /// JSON path of the desired replicas (`.spec.replicas`).
    pub spec_replicas: String,
    /// JSON path of the observed replicas (`.status.replicas`).
    pub status_replicas: String,
    /// JSON path of the label selector string or object, if any.
    pub label_selector: Option<String>,
}

/// A printer column of a CRD (`additionalPrinterColumns`).
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// OpenAPI type (`string`, `integer`, `date`, ...).
    pub type_: String,
    /// JSON path (`.spec.replicas`).
    pub json_path: String,
}

/// Everything the server knows about one resource.
#[derive(Debug, Clone)]
pub struct ResourceDef {
    /// API group (`""` for core).
    pub group: String,
    /// Served versions; the first is the preferred (storage) version.
    pub versions: Vec<String>,
    /// Plural name.
    pub resource: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names (`po`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Has a `status` subresource.
    pub status: bool,
    /// Has a `scale` subresource.
    pub scale: Option<ScaleSpec>,
    /// Only `create` is served (bindings).
    pub create_only: bool,
    /// Defined by a CustomResourceDefinition.
    pub custom: bool,
    /// Fields usable in field selectors, with the value used when absent.
    pub fields: Vec<(&'static str, &'static str)>,
    /// CRD printer columns.
    pub printer_columns: Vec<PrinterColumn>,
    /// A CRD's schemas and rules, per version (set when the CRD is registered).
    pub validation: Option<Arc<CrdValidation>>,
}

impl ResourceDef {
    /// The group/resource key.
    pub fn gr(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.resource)
    }

    /// `apiVersion` of the preferred version.
    pub fn api_version(&self) -> String {
        api_version(&self.group, &self.versions[0])
    }

    /// The selectable field paths, in table order.
    pub fn field_names(&self) -> Vec<&'static str> {
        self.fields.iter().map(|(f, _)| *f).collect()
    }

    /// Extracts the selectable field values of an object, aligned with `fields`.
    pub fn field_values(&self, obj: &Value) -> Vec<String> {
        self.fields
            .iter()
            .map(|(path, default)| match lookup(obj, path) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ => (*default).to_string(),
            })
            .collect()
    }
}

/// `group/version`, or `version` for the core group.
pub fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// Reads a dotted path (`spec.nodeName`) from a JSON object.
pub fn lookup<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path.trim_start_matches('.')
        .split('.')
        .try_fold(obj, |v, k| v.get(k))
}

const META_FIELDS: [(&str, &str); 2] = [("metadata.name", ""), ("metadata.namespace", "")];

struct Builtin {
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    status: bool,
    scale: bool,
    fields: &'static [(&'static str, &'static str)],
}

/// A built-in resource of the group its table is under, served as `v1`.
const fn r(
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    status: bool,
) -> Builtin {
    Builtin {
        resource,
        kind,
        namespaced,
        short,
        status,
        scale: false,
        fields: &[],
    }
}

const POD_FIELDS: &[(&str, &str)] = &[
    ("spec.nodeName", ""),
    ("spec.restartPolicy", ""),
    ("spec.schedulerName", ""),
    ("spec.serviceAccountName", ""),
    ("spec.hostNetwork", "false"),
    ("status.phase", ""),
    ("status.podIP", ""),
    ("status.nominatedNodeName", ""),
];
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("involvedObject.kind", ""),
    ("involvedObject.namespace", ""),
    ("involvedObject.name", ""),
    ("involvedObject.uid", ""),
    ("involvedObject.apiVersion", ""),
    ("involvedObject.resourceVersion", ""),
    ("involvedObject.fieldPath", ""),
    ("reason", ""),
    ("reportingComponent", ""),
    ("source", ""),
    ("type", ""),
];
const EVENTS_K8S_FIELDS: &[(&str, &str)] = &[
    ("regarding.kind", ""),
    ("regarding.namespace", ""),
    ("regarding.name", ""),
    ("regarding.uid", ""),
    ("reason", ""),
    ("reportingController", ""),
    ("type", ""),
];

/// The built-in resources by API group, in discovery order. (The tables
/// are kept one resource a line, as a table reads best.)
#[rustfmt::skip]
const BUILTINS: &[(&str, &[Builtin])] = &[
    ("", CORE),
    ("apps", APPS),
    ("batch", &[r("jobs", "Job", true, &[], true).fields(&[("status.successful", "0")])]),
    ("policy", &[r("poddisruptionbudgets", "PodDisruptionBudget", true, &["pdb"], true)]),
    ("coordination.k8s.io", &[r("leases", "Lease", true, &[], false)]),
    ("rbac.authorization.k8s.io", RBAC),
    ("events.k8s.io", &[r("events", "Event", true, &["ev"], false).fields(EVENTS_K8S_FIELDS)]),
    ("scheduling.k8s.io", &[r("priorityclasses", "PriorityClass", false, &["pc"], false)]),
    ("storage.k8s.io", STORAGE),
    // Dynamic resource allocation (resource.k8s.io/v1, Kubernetes 1.34):
    // kube-scheduler's framework and upstream CA watch these.
    ("resource.k8s.io", RESOURCE),
    ("apiextensions.k8s.io", &[
        r("customresourcedefinitions", "CustomResourceDefinition", false, &["crd", "crds"], true),
    ]),
];

/// The core group (`v1`).
#[rustfmt::skip]
const CORE: &[Builtin] = &[
    r("namespaces", "Namespace", false, &["ns"], true).fields(&[("status.phase", "")]),
    r("nodes", "Node", false, &["no"], true).fields(&[("spec.unschedulable", "false")]),
    r("pods", "Pod", true, &["po"], true).fields(POD_FIELDS),
    r("services", "Service", true, &["svc"], true),
    r("endpoints", "Endpoints", true, &["ep"], false),
    r("configmaps", "ConfigMap", true, &["cm"], false),
    r("secrets", "Secret", true, &[], false).fields(&[("type", "")]),
    r("events", "Event", true, &["ev"], false).fields(EVENT_FIELDS),
    r("serviceaccounts", "ServiceAccount", true, &["sa"], false),
    r("persistentvolumes", "PersistentVolume", false, &["pv"], true),
    r("persistentvolumeclaims", "PersistentVolumeClaim", true, &["pvc"], true),
    r("replicationcontrollers", "ReplicationController", true, &["rc"], true)
        .scaled()
        .fields(&[("status.replicas", "0")]),
    r("podtemplates", "PodTemplate", true, &[], false),
    r("resourcequotas", "ResourceQuota", true, &["quota"], true),
];

/// `apps`.
#[rustfmt::skip]
const APPS: &[Builtin] = &[
    r("deployments", "Deployment", true, &["deploy"], true).scaled(),
    r("replicasets", "ReplicaSet", true, &["rs"], true)
        .scaled()
        .fields(&[("status.replicas", "0")]),
    r("statefulsets", "StatefulSet", true, &["sts"], true).scaled(),
    r("daemonsets", "DaemonSet", true, &["ds"], true),
    r("controllerrevisions", "ControllerRevision", true, &[], false),
];

/// `rbac.authorization.k8s.io`.
#[rustfmt::skip]
const RBAC: &[Builtin] = &[
    r("roles", "Role", true, &[], false),
    r("rolebindings", "RoleBinding", true, &[], false),
    r("clusterroles", "ClusterRole", false, &[], false),
    r("clusterrolebindings", "ClusterRoleBinding", false, &[], false),
];

/// `storage.k8s.io`.
#[rustfmt::skip]
const STORAGE: &[Builtin] = &[
    r("storageclasses", "StorageClass", false, &["sc"], false),
    r("csinodes", "CSINode", false, &[], false),
    r("csidrivers", "CSIDriver", false, &[], false),
    r("csistoragecapacities", "CSIStorageCapacity", true, &[], false),
    r("volumeattachments", "VolumeAttachment", false, &[], true),
];

/// `resource.k8s.io`.
#[rustfmt::skip]
const RESOURCE: &[Builtin] = &[
    r("deviceclasses", "DeviceClass", false, &[], false),
    r("resourceclaims", "ResourceClaim", true, &[], true),
    r("resourceclaimtemplates", "ResourceClaimTemplate", true, &[], false),
    r("resourceslices", "ResourceSlice", false, &[], false),
];

impl Builtin {
    const fn scaled(mut self) -> Self {
        self.scale = true;
        self
    }
    const fn fields(mut self, f: &'static [(&'static str, &'static str)]) -> Self {
        self.fields = f;
        self
    }
    fn def(&self, group: &str) -> ResourceDef {
        let mut fields: Vec<(&'static str, &'static str)> = META_FIELDS.to_vec();
        fields.extend_from_slice(self.fields);
        ResourceDef {
            group: group.into(),
            versions: vec!["v1".into()],
            resource: self.resource.into(),
            singular: self.kind.to_lowercase(),
            kind: self.kind.into(),
            namespaced: self.namespaced,
            short_names: self.short.iter().map(|s| s.to_string()).collect(),
            categories: if matches!(
                self.resource,
                "pods"
                    | "services"
                    | "deployments"
                    | "replicasets"
                    | "statefulsets"
                    | "daemonsets"
                    | "jobs"
                    | "replicationcontrollers"
            ) {
                vec!["all".into()]
            } else {
                vec![]
            },
            status: self.status,
            scale: self.scale.then(|| ScaleSpec {
                spec_replicas: ".spec.replicas".into(),
                status_replicas: ".status.replicas".into(),
                label_selector: Some(".spec.selector".into()),
            }),
            create_only: false,
            custom: false,
            fields,
            printer_columns: vec![],
            validation: None,
        }
    }
}

/// The create-only resources (they store nothing), by group: core/v1
/// `bindings`, and the reviews answered from RBAC (`crate::rbac::review`).
#[rustfmt::skip]
const CREATE_ONLY: &[(&str, &str, &str, bool)] = &[
    ("", "bindings", "Binding", true),
    ("authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview", false),
    ("authorization.k8s.io", "localsubjectaccessreviews", "LocalSubjectAccessReview", true),
    ("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview", false),
    ("authorization.k8s.io", "selfsubjectrulesreviews", "SelfSubjectRulesReview", false),
    ("authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview", false),
];

/// A create-only resource of `group`/v1, listed in discovery.
fn create_only_def(group: &str, resource: &str, kind: &str, namespaced: bool) -> ResourceDef {
    ResourceDef {
        group: group.into(),
        versions: vec!["v1".into()],
        resource: resource.into(),
        singular: kind.to_lowercase(),
        kind: kind.into(),
        namespaced,
        short_names: vec![],
        categories: vec![],
        status: false,
        scale: None,
        create_only: true,
        custom: false,
        fields: META_FIELDS.to_vec(),
        printer_columns: vec![],
        validation: None,
    }
}

/// The set of served resources. Built-ins are fixed; CRDs come and go.
#[derive(Debug, Default)]
pub struct Registry {
    defs: RwLock<HashMap<GroupResource, Arc<ResourceDef>>>,
}

impl Registry {
    /// A registry with every built-in resource.
    pub fn with_builtins() -> Self {
        let r = Registry::default();
        for (group, resources) in BUILTINS {
            for b in *resources {
                r.insert(b.def(group));
            }
        }
        for (group, resource, kind, namespaced) in CREATE_ONLY {
            r.insert(create_only_def(group, resource, kind, *namespaced));
        }
        r
    }

    /// Adds or replaces a resource.
    pub fn insert(&self, def: ResourceDef) {
        let mut defs = self.defs.write().unwrap_or_else(|e| e.into_inner());
        defs.insert(def.gr(), Arc::new(def));
    }

    /// Removes a (custom) resource.
    pub fn remove(&self, gr: &GroupResource) {
        let mut defs = self.defs.write().unwrap_or_else(|e| e.into_inner());
        defs.remove(gr);
    }

    /// Looks a resource up by group, version and plural name.
    pub fn get(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceDef>> {
        let defs = self.defs.read().unwrap_or_else(|e| e.into_inner());
        defs.get(&GroupResource::new(group, resource))
            .filter(|d| d.versions.iter().any(|v| v == version))
            .cloned()
    }

    /// Looks a resource up by group and plural name, any version.
    pub fn by_gr(&self, gr: &GroupResource) -> Option<Arc<ResourceDef>> {
        let defs = self.defs.read().unwrap_or_else(|e| e.into_inner());
        defs.get(gr).cloned()
    }

    /// Looks a resource up by group and kind.
    pub fn by_kind(&self, group: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        let defs = self.defs.read().unwrap_or_else(|e| e.into_inner());
        defs.values()
            .find(|d| d.group == group && d.kind == kind && !d.create_only)
            .cloned()
    }

    /// Every resource, sorted by group then name.
    pub fn all(&self) -> Vec<Arc<ResourceDef>> {
        let defs = self.defs.read().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = defs.values().cloned().collect();
        v.sort_by(|a, b| (&a.group, &a.resource).cmp(&(&b.group, &b.resource)));
        v
    }

    /// Served groups with their versions, core first, then in registration-stable order.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for d in self.all() {
            match out.iter_mut().find(|(g, _)| *g == d.group) {
                Some((_, vs)) => {
                    for v in &d.versions {
                        if !vs.contains(v) {
                            vs.push(v.clone());
                        }
                    }
                }
                None => out.push((d.group.clone(), d.versions.clone())),
            }
        }
        out
    }
}

/// Builds the resource of a CRD (`apiextensions.k8s.io/v1` object).
pub fn crd_resource(crd: &Value) -> Result<ResourceDef, String> {
    let spec = crd.get("spec").ok_or("spec is required")?;
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .ok_or("spec.group is required")?;
    let names = spec.get("names").ok_or("spec.names is required")?;
    let plural = names
        .get("plural")
        .and_then(Value::as_str)
        .ok_or("spec.names.plural is required")?;
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("spec.names.kind is required")?;
    let singular = names
        .get("singular")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let scope = spec
        .get("scope")
        .and_then(Value::as_str)
        .ok_or("spec.scope is required")?;
    let namespaced = match scope {
        "Namespaced" => true,
        "Cluster" => false,
        other => {
            return Err(format!(
                "spec.scope: Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
            ));
        }
    };
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or("spec.versions is required")?;
    if versions.is_empty() {
        return Err("spec.versions must have at least one version".into());
    }
    let served: Vec<&Value> = versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(false))
        .collect();
    // The storage version is preferred; then the others in order.
    let mut names_v: Vec<String> = Vec::new();
    if let Some(storage) = served
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool).unwrap_or(false))
        && let Some(n) = storage.get("name").and_then(Value::as_str)
    {
        names_v.push(n.to_string());
    }
    for v in &served {
        if let Some(n) = v.get("name").and_then(Value::as_str)
            && !names_v.iter().any(|x| x == n)
        {
            names_v.push(n.to_string());
        }
    }
    if names_v.is_empty() {
        return Err("spec.versions: at least one version must be served".into());
    }
    let preferred = served
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(names_v[0].as_str()))
        .copied()
        .unwrap_or(&versions[0]);
    let subresources = preferred.get("subresources");
    let status = subresources.and_then(|s| s.get("status")).is_some();
    let scale = subresources
        .and_then(|s| s.get("scale"))
        .map(|s| ScaleSpec {
            spec_replicas: s
                .get("specReplicasPath")
                .and_then(Value::as_str)
                .unwrap_or(".spec.replicas")
                .into(),
            status_replicas: s
                .get("statusReplicasPath")
                .and_then(Value::as_str)
                .unwrap_or(".status.replicas")
                .into(),
            label_selector: s
                .get("labelSelectorPath")
                .and_then(Value::as_str)
                .map(str::to_string),
        });
    let printer_columns = preferred
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(|cols| {
            cols.iter()
                .filter_map(|c| {
                    Some(PrinterColumn {
                        name: c.get("name")?.as_str()?.to_string(),
                        type_: c
                            .get("type")
                            .and_then(Value::as_str)
                            .unwrap_or("string")
                            .to_string(),
                        json_path: c.get("jsonPath")?.as_str()?.to_string(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let strings = |key: &str| -> Vec<String> {
        names
            .get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    Ok(ResourceDef {
        group: group.into(),
        versions: names_v,
        resource: plural.into(),
        singular,
        kind: kind.into(),
        namespaced,
        short_names: strings("shortNames"),
        categories: strings("categories"),
        status,
        scale,
        create_only: false,
        custom: true,
        fields: META_FIELDS.to_vec(),
        printer_columns,
        validation: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builtins_are_registered() {
        let r = Registry::with_builtins();
        let pods = r.get("", "v1", "pods").expect("pods");
        assert_eq!(pods.kind, "Pod");
        assert!(pods.namespaced && pods.status);
        assert!(
            r.get("apps", "v1", "deployments")
                .and_then(|d| d.scale.clone())
                .is_some()
        );
        assert!(r.get("apps", "v2", "deployments").is_none());
        assert_eq!(r.groups()[0].0, "");
    }

    #[test]
    fn crd_resource_reads_names_scope_and_subresources() {
        let crd = json!({
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1alpha1", "served": true, "storage": false},
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}}}
                ]
            }
        });
        let d = crd_resource(&crd).unwrap();
        assert_eq!(d.versions, vec!["v1", "v1alpha1"]);
        assert!(d.status);
        assert_eq!(d.scale.unwrap().spec_replicas, ".spec.size");
        assert_eq!(d.singular, "widget");
        assert!(crd_resource(&json!({"spec": {"group": "g", "scope": "Galaxy", "names": {"plural": "a", "kind": "A"}, "versions": []}})).is_err());
    }
}
