//! Discovery (`/api`, `/apis`, group versions, `/version`) and the subset
//! of OpenAPI v3 that kubectl reads to learn that the server validates
//! fields itself (`fieldValidation` on PATCH), so `kubectl apply` works
//! without `--validate=false`. `/openapi/v2` answers 404, which kubectl
//! treats as "no schema" and then builds strategic merge patches from its
//! compiled-in types, as it does against any server without a v2 schema.

use serde_json::{Value, json};

use crate::registry::{Registry, ResourceDef, api_version};

/// The Kubernetes version this server reports.
pub const MAJOR: &str = "1";
/// Minor version (the API version of the workspace's k8s-openapi feature).
pub const MINOR: &str = "33";

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": MAJOR, "minor": MINOR, "gitVersion": format!("v{MAJOR}.{MINOR}.0-testbed"),
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24.0", "compiler": "gc",
        "platform": format!("{}/{}", std::env::consts::OS, if cfg!(target_arch = "x86_64") { "amd64" } else { std::env::consts::ARCH }),
    })
}

/// `/api`.
pub fn core_versions(addr: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}],
    })
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": api_version(name, v), "version": v}))
        .collect();
    json!({"name": name, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

/// `/apis`.
pub fn groups(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| group_json(&g, &vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`.
pub fn group(reg: &Registry, name: &str) -> Option<Value> {
    reg.groups()
        .into_iter()
        .find(|(g, _)| g == name && !g.is_empty())
        .map(|(g, vs)| {
            let mut v = group_json(&g, &vs);
            v["kind"] = json!("APIGroup");
            v["apiVersion"] = json!("v1");
            v
        })
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn resources_of(d: &ResourceDef) -> Vec<Value> {
    if d.create_only {
        return vec![
            json!({"name": d.resource, "singularName": d.singular, "namespaced": d.namespaced, "kind": d.kind, "verbs": ["create"]}),
        ];
    }
    let mut main = json!({
        "name": d.resource, "singularName": d.singular, "namespaced": d.namespaced, "kind": d.kind, "verbs": VERBS,
    });
    if !d.short_names.is_empty() {
        main["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        main["categories"] = json!(d.categories);
    }
    let mut out = vec![main];
    let sub = |name: &str, kind: &str, group: Option<(&str, &str)>, verbs: &[&str]| {
        let mut v = json!({"name": format!("{}/{name}", d.resource), "singularName": "", "namespaced": d.namespaced, "kind": kind, "verbs": verbs});
        if let Some((g, ver)) = group {
            v["group"] = json!(g);
            v["version"] = json!(ver);
        }
        v
    };
    if d.status {
        out.push(sub("status", &d.kind, None, &["get", "patch", "update"]));
    }
    if d.scale.is_some() {
        out.push(sub(
            "scale",
            "Scale",
            Some(("autoscaling", "v1")),
            &["get", "patch", "update"],
        ));
    }
    if d.group.is_empty() && d.resource == "pods" {
        out.push(sub("binding", "Binding", None, &["create"]));
        out.push(sub(
            "eviction",
            "Eviction",
            Some(("policy", "v1")),
            &["create"],
        ));
    }
    if d.group.is_empty() && d.resource == "namespaces" {
        out.push(sub("finalize", "Namespace", None, &["update"]));
    }
    out
}

/// `/api/v1` or `/apis/{group}/{version}`.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs: Vec<_> = reg
        .all()
        .into_iter()
        .filter(|d| d.group == group && d.versions.iter().any(|v| v == version))
        .collect();
    if defs.is_empty() {
        return None;
    }
    let resources: Vec<Value> = defs.iter().flat_map(|d| resources_of(d)).collect();
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": api_version(group, version),
        "resources": resources,
    }))
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn hash_of(reg: &Registry, group: &str, version: &str) -> String {
    // Changes when the set of resources of the group version changes (CRDs).
    let names: Vec<String> = reg
        .all()
        .iter()
        .filter(|d| d.group == group && d.versions.iter().any(|v| v == version))
        .map(|d| format!("{}:{}:{}", d.resource, d.kind, d.namespaced))
        .collect();
    let mut h: u64 = 0xcbf29ce484222325;
    for b in names.join(",").bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
    }
    format!("{h:016X}")
}

/// `/openapi/v3`: the group versions and where their documents are.
pub fn openapi_v3_root(reg: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    for (g, vs) in reg.groups() {
        for v in vs {
            let p = gv_path(&g, &v);
            paths.insert(p.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", hash_of(reg, &g, &v))}));
        }
    }
    json!({"paths": paths})
}

/// `/openapi/v3/{api/v1 | apis/g/v}`: a PATCH operation per kind that
/// declares the `fieldValidation` parameter and its GroupVersionKind. The
/// create-only kinds (the access reviews) have one too: kubectl looks for
/// the parameter on PATCH operations only, and without one falls back to
/// `/openapi/v2` and refuses `kubectl create -f` of them.
pub fn openapi_v3_group(reg: &Registry, path: &str) -> Option<Value> {
    let (group, version) = match path.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => (String::new(), v.to_string()),
        ["apis", g, v] => (g.to_string(), v.to_string()),
        _ => return None,
    };
    let defs: Vec<_> = reg
        .all()
        .into_iter()
        .filter(|d| d.group == group && d.versions.contains(&version))
        .collect();
    if defs.is_empty() {
        return None;
    }
    let mut paths = serde_json::Map::new();
    for d in defs {
        let prefix = format!("/{}", gv_path(&group, &version));
        let p = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", d.resource)
        } else {
            format!("{prefix}/{}/{{name}}", d.resource)
        };
        let gvk = json!({"group": group, "version": version, "kind": d.kind});
        paths.insert(
            p,
            json!({
                "patch": {
                    "operationId": format!("patch{}", d.kind),
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": gvk,
                    "parameters": [
                        {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
                        {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
                        {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
                        {"name": "force", "in": "query", "schema": {"type": "boolean"}}
                    ],
                    "responses": {"200": {"description": "OK"}}
                }
            }),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (testbed)", "version": format!("v{MAJOR}.{MINOR}.0")},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}
