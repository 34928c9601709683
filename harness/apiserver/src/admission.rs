//! What a real API server does to an object between the request and the
//! store: defaulting, the admission plugins that schedulers and autoscalers
//! rely on (Priority, DefaultTolerationSeconds, job selectors, namespace
//! lifecycle), validation with field causes, and normalisation of built-in
//! objects through their typed k8s-openapi form (which drops unknown fields,
//! or rejects them under `fieldValidation=Strict`).

use apimachinery::json::Lookup;
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::{GroupResource, ResourceDef};
use apimachinery::labels::LabelSelector;
use apimachinery::validation::{is_dns_label, is_dns_subdomain, validate_key, validate_value};

/// `system-node-critical` priority value.
pub const SYSTEM_NODE_CRITICAL: i64 = 2_000_001_000;
/// `system-cluster-critical` priority value.
pub const SYSTEM_CLUSTER_CRITICAL: i64 = 2_000_000_000;
/// Highest value a user-defined PriorityClass may have.
const HIGHEST_USER_PRIORITY: i64 = 1_000_000_000;
/// DefaultTolerationSeconds admission: not-ready / unreachable toleration.
const DEFAULT_TOLERATION_SECONDS: i64 = 300;

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.lookup(ptr).and_then(Value::as_str)
}

/// Name of an object for error messages.
pub fn name_of(v: &Value) -> String {
    str_at(v, "/metadata/name")
        .or_else(|| str_at(v, "/metadata/generateName"))
        .unwrap_or("")
        .to_string()
}

fn obj_mut<'a>(v: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    obj_at(v, &[key])
}

/// The object at `path`, made (or replacing a non-object) on the way.
fn obj_at<'a>(v: &'a mut Value, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut cur = v;
    for key in path {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Value::Object(m) = cur else {
            unreachable!("made an object above")
        };
        cur = m.entry(key.to_string()).or_insert(json!({}));
    }
    if !cur.is_object() {
        *cur = json!({});
    }
    match cur {
        Value::Object(m) => m,
        _ => unreachable!("made an object above"),
    }
}

fn set_default(m: &mut Map<String, Value>, key: &str, value: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.into(), value);
    }
}

/// What admission reads from the rest of the API server. The server
/// implements it, so that admission depends on no server internals.
pub trait AdmissionContext {
    /// Allocates the next service cluster IP.
    fn allocate_cluster_ip(&self) -> String;
    /// (value, preemptionPolicy) of a PriorityClass.
    fn priority_class(&self, name: &str) -> Option<(i64, String)>;
    /// (name, value, preemptionPolicy) of the PriorityClass marked `globalDefault`.
    fn global_default_priority_class(&self) -> Option<(String, i64, String)>;
    /// Whether a built-in API serves this group and resource.
    fn serves_builtin(&self, gr: &GroupResource) -> bool;
    /// The server's time, RFC 3339.
    fn now_rfc3339(&self) -> String;
    /// The ResourceQuotas of `namespace` that limit the count of pods, as
    /// (name, hard limit), and the pods counted against them: those not
    /// Succeeded or Failed.
    fn pod_quotas(&self, namespace: &str) -> (Vec<(String, i64)>, i64);
}

/// Runs defaulting, admission and validation for a create.
pub fn admit_create(
    server: &dyn AdmissionContext,
    def: &ResourceDef,
    obj: &mut Value,
) -> ApiResult<()> {
    if def.kind != "CSINode" {
        quantities_to_strings(obj);
    }
    validate_metadata(def, obj)?;
    crate::limits::validate_sizes(def, obj)?;
    let name = name_of(obj);
    match (def.group.as_str(), def.resource.as_str()) {
        ("", "pods") => {
            default_pod_spec(obj_mut(obj, "spec"), true);
            admit_pod_priority(server, def, obj)?;
            add_default_tolerations(obj_mut(obj, "spec"));
            validate_pod_spec(def, &name, obj.get("spec"), "spec", true)?;
            admit_pod_quota(server, def, &name, obj)?;
            let qos = qos_class(obj.get("spec").unwrap_or(&Value::Null));
            let status = obj_mut(obj, "status");
            set_default(status, "phase", json!("Pending"));
            status.insert("qosClass".into(), json!(qos));
        }
        ("", "namespaces") => {
            obj_mut(obj, "spec").insert("finalizers".into(), json!(["kubernetes"]));
            obj_mut(obj, "status").insert("phase".into(), json!("Active"));
            obj_at(obj, &["metadata", "labels"])
                .insert("kubernetes.io/metadata.name".into(), json!(name));
        }
        ("", "services") => default_service(server, def, &name, obj)?,
        ("", "secrets") => set_default(
            obj.as_object_mut()
                .ok_or_else(|| ApiError::bad_request("not an object"))?,
            "type",
            json!("Opaque"),
        ),
        ("", "replicationcontrollers") => {
            let spec = obj_mut(obj, "spec");
            set_default(spec, "replicas", json!(1));
            set_default(spec, "minReadySeconds", json!(0));
            default_template(spec, true);
        }
        ("apps", "deployments") => {
            let spec = obj_mut(obj, "spec");
            set_default(spec, "replicas", json!(1));
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(spec, "progressDeadlineSeconds", json!(600));
            set_default(
                spec,
                "strategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
            );
            default_template(spec, true);
            validate_workload(def, &name, obj)?;
        }
        ("apps", "replicasets") => {
            let spec = obj_mut(obj, "spec");
            set_default(spec, "replicas", json!(1));
            default_template(spec, true);
            validate_workload(def, &name, obj)?;
        }
        ("apps", "statefulsets") => {
            let spec = obj_mut(obj, "spec");
            set_default(spec, "replicas", json!(1));
            set_default(spec, "podManagementPolicy", json!("OrderedReady"));
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
            set_default(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
            default_template(spec, true);
            validate_workload(def, &name, obj)?;
        }
        ("apps", "daemonsets") => {
            let spec = obj_mut(obj, "spec");
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
            default_template(spec, true);
            validate_workload(def, &name, obj)?;
        }
        ("batch", "jobs") => default_job(def, &name, obj)?,
        ("policy", "poddisruptionbudgets")
            if obj.lookup("/spec/minAvailable").is_some()
                && obj.lookup("/spec/maxUnavailable").is_some() =>
        {
            return Err(ApiError::invalid(
                &def.group,
                &def.kind,
                &name,
                vec![Cause::invalid(
                    "spec",
                    "",
                    "minAvailable and maxUnavailable cannot be both set",
                )],
            ));
        }
        ("scheduling.k8s.io", "priorityclasses") => admit_priority_class(server, def, &name, obj)?,
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            admit_crd(server, def, &name, obj)?
        }
        ("resource.k8s.io", _) => crate::dra::admit(def, &name, obj, None)?,
        _ => {}
    }
    Ok(())
}

/// Runs validation for an update of `old` into `new` (the main resource).
pub fn admit_update(def: &ResourceDef, old: &Value, new: &mut Value) -> ApiResult<()> {
    if def.kind != "CSINode" {
        quantities_to_strings(new);
    }
    validate_metadata(def, new)?;
    crate::limits::validate_sizes(def, new)?;
    let name = name_of(new);
    let forbid = |field: &str, why: &str| {
        ApiError::invalid(
            &def.group,
            &def.kind,
            &name,
            vec![Cause::forbidden(field, why)],
        )
    };
    match (def.group.as_str(), def.resource.as_str()) {
        ("", "pods") => {
            if old.lookup("/spec/nodeName") != new.lookup("/spec/nodeName") {
                return Err(forbid(
                    "spec.nodeName",
                    "pod updates may not change spec.nodeName; use the binding subresource",
                ));
            }
            let strip = |v: &Value| {
                let mut s = v.get("spec").cloned().unwrap_or(Value::Null);
                for list in ["containers", "initContainers"] {
                    if let Some(cs) = s.get_mut(list).and_then(Value::as_array_mut) {
                        for c in cs {
                            if let Some(c) = c.as_object_mut() {
                                c.remove("image");
                            }
                        }
                    }
                }
                if let Some(m) = s.as_object_mut() {
                    for f in [
                        "activeDeadlineSeconds",
                        "tolerations",
                        "terminationGracePeriodSeconds",
                        "schedulingGates",
                    ] {
                        m.remove(f);
                    }
                }
                s
            };
            if strip(old) != strip(new) {
                return Err(forbid(
                    "spec",
                    "pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
                ));
            }
        }
        ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets") => {
            if old.lookup("/spec/selector") != new.lookup("/spec/selector") {
                return Err(forbid("spec.selector", "field is immutable"));
            }
            validate_workload(def, &name, new)?;
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            check_crd_schemas(def, &name, new)?
        }
        ("scheduling.k8s.io", "priorityclasses") if old.get("value") != new.get("value") => {
            return Err(forbid("value", "may not be changed in an update."));
        }
        ("resource.k8s.io", _) => crate::dra::admit(def, &name, new, Some(old))?,
        _ => {}
    }
    Ok(())
}

/// Kubernetes accepts numeric quantities (`cpu: 1`); the typed form wants
/// strings. (Not for CSINodes: their drivers' `allocatable` is a count.)
fn quantities_to_strings(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                let is_quantity_map = matches!(
                    k.as_str(),
                    "requests"
                        | "limits"
                        | "capacity"
                        | "allocatable"
                        | "overhead"
                        | "hard"
                        | "used"
                );
                if is_quantity_map && let Value::Object(q) = child {
                    for qv in q.values_mut() {
                        if let Value::Number(n) = qv {
                            *qv = Value::String(n.to_string());
                        }
                    }
                }
                quantities_to_strings(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(quantities_to_strings),
        _ => {}
    }
}

fn validate_metadata(def: &ResourceDef, obj: &Value) -> ApiResult<()> {
    let name = name_of(obj);
    let mut causes = Vec::new();
    if let Some(n) = str_at(obj, "/metadata/name") {
        let ok = match def.resource.as_str() {
            "namespaces" | "services" => is_dns_label(n),
            _ => is_dns_subdomain(n),
        };
        if !ok {
            causes.push(Cause::invalid(
                "metadata.name",
                n,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            ));
        }
    }
    if let Some(labels) = obj.lookup("/metadata/labels") {
        match labels {
            Value::Object(m) => {
                for (k, v) in m {
                    if let Err(e) = validate_key(k) {
                        causes.push(Cause::invalid("metadata.labels", k, e));
                    }
                    match v.as_str() {
                        Some(s) => {
                            if let Err(e) = validate_value(s) {
                                causes.push(Cause::invalid("metadata.labels", s, e));
                            }
                        }
                        None => causes.push(Cause::invalid(
                            format!("metadata.labels[{k}]"),
                            &v.to_string(),
                            "must be a string",
                        )),
                    }
                }
            }
            Value::Null => {}
            other => causes.push(Cause::invalid(
                "metadata.labels",
                &other.to_string(),
                "must be a map of strings",
            )),
        }
    }
    if let Some(Value::Object(m)) = obj.lookup("/metadata/annotations") {
        for (k, v) in m {
            if let Err(e) = validate_key(k) {
                causes.push(Cause::invalid("metadata.annotations", k, e));
            }
            if !v.is_string() {
                causes.push(Cause::invalid(
                    format!("metadata.annotations[{k}]"),
                    &v.to_string(),
                    "must be a string",
                ));
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&def.group, &def.kind, &name, causes))
    }
}

/// Defaults of a pod spec (pods and templates).
fn default_pod_spec(spec: &mut Map<String, Value>, restart_always: bool) {
    if restart_always {
        set_default(spec, "restartPolicy", json!("Always"));
    }
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "enableServiceLinks", json!(true));
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(cs)) = spec.get_mut(list) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
                set_default(c, "terminationMessagePolicy", json!("File"));
                let image = c.get("image").and_then(Value::as_str).unwrap_or("");
                let last = image.rsplit('/').next().unwrap_or("");
                let latest = !last.contains(':') || last.ends_with(":latest");
                let policy = if latest && !image.contains('@') {
                    "Always"
                } else {
                    "IfNotPresent"
                };
                set_default(c, "imagePullPolicy", json!(policy));
                let res = c.entry("resources").or_insert(json!({}));
                // Limits without requests: requests default to the limits.
                if let Some(limits) = res.get("limits").and_then(Value::as_object).cloned()
                    && let Some(r) = res.as_object_mut()
                {
                    let req = r.entry("requests").or_insert(json!({}));
                    if let Some(req) = req.as_object_mut() {
                        for (k, v) in limits {
                            req.entry(k).or_insert(v);
                        }
                    }
                }
                if let Some(Value::Array(ports)) = c.get_mut("ports") {
                    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                        set_default(p, "protocol", json!("TCP"));
                    }
                }
            }
        }
    }
}

fn default_template(spec: &mut Map<String, Value>, restart_always: bool) {
    if let Some(Value::Object(t)) = spec.get_mut("template")
        && let Some(Value::Object(ps)) = t.get_mut("spec")
    {
        default_pod_spec(ps, restart_always);
    }
}

fn validate_pod_spec(
    def: &ResourceDef,
    name: &str,
    spec: Option<&Value>,
    path: &str,
    need_image: bool,
) -> ApiResult<()> {
    let mut causes = Vec::new();
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array);
    match containers {
        None => causes.push(Cause::required(format!("{path}.containers"))),
        Some(cs) if cs.is_empty() => causes.push(Cause::required(format!("{path}.containers"))),
        Some(_) => {}
    }
    let mut seen = Vec::new();
    for list in ["initContainers", "containers"] {
        let Some(cs) = spec.and_then(|s| s.get(list)).and_then(Value::as_array) else {
            continue;
        };
        for (i, c) in cs.iter().enumerate() {
            let p = format!("{path}.{list}[{i}]");
            match c.get("name").and_then(Value::as_str) {
                None | Some("") => causes.push(Cause::required(format!("{p}.name"))),
                Some(n) if !is_dns_label(n) => causes.push(Cause::invalid(
                    format!("{p}.name"),
                    n,
                    "a lowercase RFC 1123 label is required",
                )),
                Some(n) if seen.contains(&n) => causes.push(Cause {
                    reason: "FieldValueDuplicate",
                    message: format!("Duplicate value: {n:?}"),
                    field: format!("{p}.name"),
                }),
                Some(n) => seen.push(n),
            }
            if need_image
                && c.get("image")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
            {
                causes.push(Cause::required(format!("{p}.image")));
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&def.group, &def.kind, name, causes))
    }
}

/// Selector present, template labels matching it, and a valid pod template.
fn validate_workload(def: &ResourceDef, name: &str, obj: &Value) -> ApiResult<()> {
    let invalid = |c: Cause| ApiError::invalid(&def.group, &def.kind, name, vec![c]);
    let Some(sel) = obj.lookup("/spec/selector").filter(|s| !s.is_null()) else {
        return Err(invalid(Cause::required("spec.selector")));
    };
    let selector = LabelSelector::from_value(Some(sel))
        .map_err(|e| invalid(Cause::invalid("spec.selector", "", e)))?;
    if selector.is_everything() {
        return Err(invalid(Cause::invalid(
            "spec.selector",
            "{}",
            "empty selector is invalid for deployment",
        )));
    }
    let labels = obj
        .lookup("/spec/template/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default();
    if !selector.matches(&labels) {
        return Err(invalid(Cause::invalid(
            "spec.template.metadata.labels",
            &format!("{labels:?}"),
            "`selector` does not match template `labels`",
        )));
    }
    validate_pod_spec(
        def,
        name,
        obj.lookup("/spec/template/spec"),
        "spec.template.spec",
        true,
    )
}

fn default_job(def: &ResourceDef, name: &str, obj: &mut Value) -> ApiResult<()> {
    let uid = str_at(obj, "/metadata/uid").unwrap_or("").to_string();
    let manual = obj
        .lookup("/spec/manualSelector")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let spec = obj_mut(obj, "spec");
    if spec.get("completions").is_none_or(Value::is_null)
        && spec.get("parallelism").is_none_or(Value::is_null)
    {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    set_default(spec, "parallelism", json!(1));
    set_default(spec, "backoffLimit", json!(6));
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    set_default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
    default_template(spec, false);
    if !manual {
        // The Job admission generates a unique selector from the job's uid.
        spec.insert(
            "selector".into(),
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
        );
        let labels = obj_at(obj, &["spec", "template", "metadata", "labels"]);
        labels.insert("batch.kubernetes.io/controller-uid".into(), json!(uid));
        labels.insert("controller-uid".into(), json!(uid));
        labels.insert("batch.kubernetes.io/job-name".into(), json!(name));
        labels.insert("job-name".into(), json!(name));
    }
    let restart = str_at(obj, "/spec/template/spec/restartPolicy");
    if !matches!(restart, Some("OnFailure" | "Never")) {
        return Err(ApiError::invalid(
            &def.group,
            &def.kind,
            name,
            vec![Cause {
                reason: "FieldValueRequired",
                message: "Required value: valid values: \"OnFailure\", \"Never\"".into(),
                field: "spec.template.spec.restartPolicy".into(),
            }],
        ));
    }
    validate_workload(def, name, obj)
}

fn default_service(
    server: &dyn AdmissionContext,
    def: &ResourceDef,
    name: &str,
    obj: &mut Value,
) -> ApiResult<()> {
    let spec = obj_mut(obj, "spec");
    set_default(spec, "type", json!("ClusterIP"));
    set_default(spec, "sessionAffinity", json!("None"));
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();
    if ty != "ExternalName" {
        if spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            let ip = server.allocate_cluster_ip();
            spec.insert("clusterIP".into(), json!(ip));
        }
        let ip = spec.get("clusterIP").cloned().unwrap_or(Value::Null);
        set_default(spec, "clusterIPs", json!([ip]));
        set_default(spec, "ipFamilies", json!(["IPv4"]));
        set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
    match spec.get_mut("ports") {
        Some(Value::Array(ports)) if !ports.is_empty() => {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                set_default(p, "protocol", json!("TCP"));
                if let Some(port) = p.get("port").cloned() {
                    set_default(p, "targetPort", port);
                }
            }
        }
        _ if headless || ty == "ExternalName" => {}
        _ => {
            return Err(ApiError::invalid(
                &def.group,
                &def.kind,
                name,
                vec![Cause::required("spec.ports")],
            ));
        }
    }
    Ok(())
}

fn admit_priority_class(
    server: &dyn AdmissionContext,
    def: &ResourceDef,
    name: &str,
    obj: &mut Value,
) -> ApiResult<()> {
    let Some(value) = obj.get("value").and_then(Value::as_i64) else {
        return Err(ApiError::invalid(
            &def.group,
            &def.kind,
            name,
            vec![Cause::required("value")],
        ));
    };
    if value > HIGHEST_USER_PRIORITY && !name.starts_with("system-") {
        return Err(ApiError::forbidden(
            &def.group,
            &def.resource,
            name,
            format!("maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"),
        ));
    }
    if let Some(m) = obj.as_object_mut() {
        set_default(m, "preemptionPolicy", json!("PreemptLowerPriority"));
    }
    if obj.get("globalDefault").and_then(Value::as_bool) == Some(true)
        && let Some(existing) = server.global_default_priority_class()
        && existing.0 != name
    {
        return Err(ApiError::forbidden(
            &def.group,
            &def.resource,
            name,
            format!(
                "PriorityClass {} is already marked as default. Only one default can exist",
                existing.0
            ),
        ));
    }
    Ok(())
}

/// Priority admission: resolve `priorityClassName` (or the global default).
fn admit_pod_priority(
    server: &dyn AdmissionContext,
    def: &ResourceDef,
    obj: &mut Value,
) -> ApiResult<()> {
    let name = name_of(obj);
    let class = str_at(obj, "/spec/priorityClassName").map(str::to_string);
    let (class_name, value, policy) = match class.as_deref() {
        Some(c) if !c.is_empty() => match server.priority_class(c) {
            Some((v, p)) => (Some(c.to_string()), v, p),
            None => {
                return Err(ApiError::forbidden(
                    &def.group,
                    &def.resource,
                    &name,
                    format!("no PriorityClass with name {c} was found"),
                ));
            }
        },
        _ => match server.global_default_priority_class() {
            Some((n, v, p)) => (Some(n), v, p),
            None => (None, 0, "PreemptLowerPriority".to_string()),
        },
    };
    let spec = obj_mut(obj, "spec");
    if let Some(given) = spec.get("priority").and_then(Value::as_i64)
        && given != value
    {
        return Err(ApiError::forbidden(
            &def.group,
            &def.resource,
            &name,
            format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name"
            ),
        ));
    }
    if let Some(c) = class_name {
        spec.insert("priorityClassName".into(), json!(c));
    }
    spec.insert("priority".into(), json!(value));
    set_default(spec, "preemptionPolicy", json!(policy));
    Ok(())
}

/// ResourceQuota admission, for the count of pods (`pods` or
/// `count/pods` in `spec.hard`): a pod that would take a namespace past a
/// quota's limit is refused, as kube-apiserver's quota admission refuses
/// it (other quota resources are not enforced here).
fn admit_pod_quota(
    server: &dyn AdmissionContext,
    def: &ResourceDef,
    name: &str,
    obj: &Value,
) -> ApiResult<()> {
    let namespace = str_at(obj, "/metadata/namespace").unwrap_or("default");
    let (quotas, used) = server.pod_quotas(namespace);
    let mut exceeded: Vec<&(String, i64)> =
        quotas.iter().filter(|(_, hard)| used + 1 > *hard).collect();
    exceeded.sort();
    let Some((quota, hard)) = exceeded.first() else {
        return Ok(());
    };
    Err(ApiError::forbidden(
        &def.group,
        &def.resource,
        name,
        format!(
            "exceeded quota: {quota}, requested: pods=1, used: pods={used}, limited: pods={hard}"
        ),
    ))
}

/// DefaultTolerationSeconds: tolerate not-ready and unreachable for 300 s.
fn add_default_tolerations(spec: &mut Map<String, Value>) {
    let tolerations = spec.entry("tolerations").or_insert(json!([]));
    let Some(list) = tolerations.as_array_mut() else {
        return;
    };
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = list.iter().any(|t| {
            let k = t.get("key").and_then(Value::as_str);
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
            let op = t.get("operator").and_then(Value::as_str).unwrap_or("Equal");
            (k == Some(key) || (k.is_none_or(str::is_empty) && op == "Exists"))
                && (effect.is_empty() || effect == "NoExecute")
        });
        if !tolerated {
            list.push(json!({
                "key": key, "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS
            }));
        }
    }
}

/// The pod's QoS class, as `kubectl describe` and the kubelet compute it.
pub fn qos_class(spec: &Value) -> &'static str {
    let mut any = false;
    let mut guaranteed = true;
    for list in ["initContainers", "containers"] {
        for c in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let req = c.lookup("/resources/requests").and_then(Value::as_object);
            let lim = c.lookup("/resources/limits").and_then(Value::as_object);
            if req.is_some_and(|m| !m.is_empty()) || lim.is_some_and(|m| !m.is_empty()) {
                any = true;
            }
            for r in ["cpu", "memory"] {
                let l = lim.and_then(|m| m.get(r));
                let q = req.and_then(|m| m.get(r)).or(l);
                if l.is_none() || q != l {
                    guaranteed = false;
                }
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// A CRD's schemas and validation rules must compile, on create and on
/// update (kube-apiserver's CRD validation).
fn check_crd_schemas(def: &ResourceDef, name: &str, obj: &Value) -> ApiResult<()> {
    crate::crd::CrdValidation::compile(obj)
        .map(|_| ())
        .map_err(|causes| ApiError::invalid(&def.group, &def.kind, name, causes))
}

fn admit_crd(
    server: &dyn AdmissionContext,
    def: &ResourceDef,
    name: &str,
    obj: &mut Value,
) -> ApiResult<()> {
    let invalid = |c: Cause| ApiError::invalid(&def.group, &def.kind, name, vec![c]);
    let res =
        crate::registry::crd_resource(obj).map_err(|e| invalid(Cause::invalid("spec", "", e)))?;
    check_crd_schemas(def, name, obj)?;
    let expected = format!("{}.{}", res.resource, res.group);
    if name != expected {
        return Err(invalid(Cause::invalid(
            "metadata.name",
            name,
            format!("must be spec.names.plural+\".\"+spec.group ({expected})"),
        )));
    }
    if server.serves_builtin(&GroupResource::new(&res.group, &res.resource)) {
        return Err(invalid(Cause::invalid(
            "spec.group",
            &res.group,
            "the group/resource is served by a built-in API",
        )));
    }
    let now = server.now_rfc3339();
    let accepted = obj.lookup("/spec/names").cloned().unwrap_or(Value::Null);
    let status = obj_mut(obj, "status");
    status.insert("acceptedNames".into(), accepted);
    status.insert("storedVersions".into(), json!([res.versions[0]]));
    status.insert(
        "conditions".into(),
        json!([
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now}
        ]),
    );
    Ok(())
}
