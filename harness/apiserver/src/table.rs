//! Server-side printing: `meta.k8s.io/v1` Table responses for
//! `kubectl get` (and `get -w`), with the columns kubectl users know for the
//! common kinds, CRD `additionalPrinterColumns`, and Name/Age otherwise.

use std::time::SystemTime;

use apimachinery::json::Lookup;
use serde_json::{Value, json};

use crate::registry::{ResourceDef, lookup};

type Cell = fn(&Value, SystemTime) -> Value;

struct Column {
    name: &'static str,
    ty: &'static str,
    priority: u8,
    cell: Cell,
}

fn s(v: &Value, ptr: &str) -> String {
    match v.lookup(ptr) {
        Some(Value::String(x)) => x.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => String::new(),
    }
}

fn i(v: &Value, ptr: &str) -> i64 {
    v.lookup(ptr).and_then(Value::as_i64).unwrap_or(0)
}

fn or_none(x: String) -> Value {
    json!(if x.is_empty() {
        "<none>".to_string()
    } else {
        x
    })
}

/// kubectl's human duration (`duration.HumanDuration`).
pub fn human_duration(secs: i64) -> String {
    let secs = secs.max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        let s = secs % 60;
        if s == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{s}s")
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        let mm = m % 60;
        if mm == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{mm}m")
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        let hh = h % 24;
        if hh == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{hh}h")
        }
    } else if h < 24 * 365 * 2 {
        format!("{d}d")
    } else {
        format!("{}y", d / 365)
    }
}

fn age_of(v: &Value, ptr: &str, now: SystemTime) -> Value {
    match v
        .lookup(ptr)
        .and_then(Value::as_str)
        .and_then(simclock::parse_rfc3339)
    {
        Some(t) => {
            let secs = now
                .duration_since(t)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0);
            json!(human_duration(secs))
        }
        None => json!("<unknown>"),
    }
}

fn age(v: &Value, now: SystemTime) -> Value {
    age_of(v, "/metadata/creationTimestamp", now)
}

fn name(v: &Value, _: SystemTime) -> Value {
    json!(s(v, "/metadata/name"))
}

const fn col(name: &'static str, ty: &'static str, priority: u8, cell: Cell) -> Column {
    Column {
        name,
        ty,
        priority,
        cell,
    }
}

fn pod_status(v: &Value) -> String {
    if v.lookup("/metadata/deletionTimestamp").is_some() {
        return "Terminating".into();
    }
    let reason = s(v, "/status/reason");
    if !reason.is_empty() {
        return reason;
    }
    for cs in v
        .lookup("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let waiting = s(cs, "/state/waiting/reason");
        if !waiting.is_empty() {
            return waiting;
        }
        let term = s(cs, "/state/terminated/reason");
        if !term.is_empty() {
            return term;
        }
    }
    s(v, "/status/phase")
}

fn node_status(v: &Value) -> String {
    let ready = v
        .lookup("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        })
        .map(|c| match c.get("status").and_then(Value::as_str) {
            Some("True") => "Ready",
            Some("False") => "NotReady",
            _ => "Unknown",
        })
        .unwrap_or("Unknown");
    if v.lookup("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        format!("{ready},SchedulingDisabled")
    } else {
        ready.to_string()
    }
}

/// The columns of a resource's Table: Name, then those kubectl shows for
/// the kind (Events put the name last), or Age.
fn columns(def: &ResourceDef) -> Vec<Column> {
    let rest = match (def.group.as_str(), def.resource.as_str()) {
        ("", "pods") => pod_columns(),
        ("", "nodes") => node_columns(),
        ("", "namespaces") => vec![
            col("Status", "string", 0, |v, _| json!(s(v, "/status/phase"))),
            col("Age", "string", 0, age),
        ],
        ("", "services") => service_columns(),
        ("", "configmaps") => configmap_columns(),
        ("", "secrets") => secret_columns(),
        ("", "events") => return event_columns(),
        ("apps", "deployments") => deployment_columns(),
        ("apps", "replicasets") | ("", "replicationcontrollers") => replicaset_columns(),
        ("apps", "statefulsets") => statefulset_columns(),
        ("apps", "daemonsets") => daemonset_columns(),
        ("batch", "jobs") => job_columns(),
        ("policy", "poddisruptionbudgets") => pdb_columns(),
        ("scheduling.k8s.io", "priorityclasses") => priorityclass_columns(),
        ("coordination.k8s.io", "leases") => vec![
            col("Holder", "string", 0, |v, _| {
                json!(s(v, "/spec/holderIdentity"))
            }),
            col("Age", "string", 0, age),
        ],
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            vec![col("Created At", "date", 0, |v, _| {
                json!(s(v, "/metadata/creationTimestamp"))
            })]
        }
        _ => vec![col("Age", "string", 0, age)],
    };
    let mut v = vec![col("Name", "string", 0, name)];
    v.extend(rest);
    v
}

/// Pods: readiness, status, restarts, IP, node.
fn pod_columns() -> Vec<Column> {
    vec![
        col("Ready", "string", 0, |v, _| {
            let cs = v
                .lookup("/status/containerStatuses")
                .and_then(Value::as_array);
            let total = v
                .lookup("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let ready = cs.map_or(0, |c| {
                c.iter()
                    .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
                    .count()
            });
            json!(format!("{ready}/{total}"))
        }),
        col("Status", "string", 0, |v, _| json!(pod_status(v))),
        col("Restarts", "string", 0, |v, _| {
            let n: i64 = v
                .lookup("/status/containerStatuses")
                .and_then(Value::as_array)
                .map_or(0, |c| {
                    c.iter()
                        .map(|c| c.get("restartCount").and_then(Value::as_i64).unwrap_or(0))
                        .sum()
                });
            json!(n.to_string())
        }),
        col("Age", "string", 0, age),
        col("IP", "string", 1, |v, _| or_none(s(v, "/status/podIP"))),
        col("Node", "string", 1, |v, _| or_none(s(v, "/spec/nodeName"))),
        col("Nominated Node", "string", 1, |v, _| {
            or_none(s(v, "/status/nominatedNodeName"))
        }),
    ]
}

/// Nodes: status, roles, kubelet version, internal IP.
fn node_columns() -> Vec<Column> {
    vec![
        col("Status", "string", 0, |v, _| json!(node_status(v))),
        col("Roles", "string", 0, |v, _| {
            let roles: Vec<String> = v
                .lookup("/metadata/labels")
                .and_then(Value::as_object)
                .map(|m| {
                    m.keys()
                        .filter_map(|k| {
                            k.strip_prefix("node-role.kubernetes.io/")
                                .map(str::to_string)
                        })
                        .collect()
                })
                .unwrap_or_default();
            or_none(roles.join(","))
        }),
        col("Age", "string", 0, age),
        col("Version", "string", 0, |v, _| {
            json!(s(v, "/status/nodeInfo/kubeletVersion"))
        }),
        col("Internal-IP", "string", 1, |v, _| {
            let ip = v
                .lookup("/status/addresses")
                .and_then(Value::as_array)
                .and_then(|a| {
                    a.iter()
                        .find(|x| x.get("type").and_then(Value::as_str) == Some("InternalIP"))
                })
                .map(|x| s(x, "/address"))
                .unwrap_or_default();
            or_none(ip)
        }),
    ]
}

/// Services: type, IPs, ports.
fn service_columns() -> Vec<Column> {
    vec![
        col("Type", "string", 0, |v, _| json!(s(v, "/spec/type"))),
        col("Cluster-IP", "string", 0, |v, _| {
            or_none(s(v, "/spec/clusterIP"))
        }),
        col("External-IP", "string", 0, |v, _| {
            or_none(s(v, "/spec/externalName"))
        }),
        col("Port(s)", "string", 0, |v, _| {
            let ports: Vec<String> = v
                .lookup("/spec/ports")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|p| format!("{}/{}", s(p, "/port"), s(p, "/protocol")))
                        .collect()
                })
                .unwrap_or_default();
            or_none(ports.join(","))
        }),
        col("Age", "string", 0, age),
    ]
}

/// ConfigMaps: how many keys.
fn configmap_columns() -> Vec<Column> {
    vec![
        col("Data", "integer", 0, |v, _| {
            let n = v
                .get("data")
                .and_then(Value::as_object)
                .map_or(0, |m| m.len())
                + v.get("binaryData")
                    .and_then(Value::as_object)
                    .map_or(0, |m| m.len());
            json!(n)
        }),
        col("Age", "string", 0, age),
    ]
}

/// Secrets: type and how many keys.
fn secret_columns() -> Vec<Column> {
    vec![
        col("Type", "string", 0, |v, _| json!(s(v, "/type"))),
        col("Data", "integer", 0, |v, _| {
            json!(
                v.get("data")
                    .and_then(Value::as_object)
                    .map_or(0, |m| m.len())
            )
        }),
        col("Age", "string", 0, age),
    ]
}

/// Events: when, type, reason, object, message; the name last.
fn event_columns() -> Vec<Column> {
    vec![
        col("Last Seen", "string", 0, |v, now| {
            if v.lookup("/lastTimestamp").and_then(Value::as_str).is_some() {
                age_of(v, "/lastTimestamp", now)
            } else {
                age_of(v, "/eventTime", now)
            }
        }),
        col("Type", "string", 0, |v, _| json!(s(v, "/type"))),
        col("Reason", "string", 0, |v, _| json!(s(v, "/reason"))),
        col("Object", "string", 0, |v, _| {
            json!(format!(
                "{}/{}",
                s(v, "/involvedObject/kind").to_lowercase(),
                s(v, "/involvedObject/name")
            ))
        }),
        col("Message", "string", 0, |v, _| json!(s(v, "/message"))),
        col("Name", "string", 1, name),
    ]
}

/// Deployments: ready, up-to-date and available replicas.
fn deployment_columns() -> Vec<Column> {
    vec![
        col("Ready", "string", 0, |v, _| {
            json!(format!(
                "{}/{}",
                i(v, "/status/readyReplicas"),
                i(v, "/spec/replicas")
            ))
        }),
        col("Up-to-date", "integer", 0, |v, _| {
            json!(i(v, "/status/updatedReplicas"))
        }),
        col("Available", "integer", 0, |v, _| {
            json!(i(v, "/status/availableReplicas"))
        }),
        col("Age", "string", 0, age),
    ]
}

/// ReplicaSets and ReplicationControllers: desired, current and ready replicas.
fn replicaset_columns() -> Vec<Column> {
    vec![
        col("Desired", "integer", 0, |v, _| {
            json!(i(v, "/spec/replicas"))
        }),
        col("Current", "integer", 0, |v, _| {
            json!(i(v, "/status/replicas"))
        }),
        col("Ready", "integer", 0, |v, _| {
            json!(i(v, "/status/readyReplicas"))
        }),
        col("Age", "string", 0, age),
    ]
}

/// StatefulSets: ready replicas.
fn statefulset_columns() -> Vec<Column> {
    vec![
        col("Ready", "string", 0, |v, _| {
            json!(format!(
                "{}/{}",
                i(v, "/status/readyReplicas"),
                i(v, "/spec/replicas")
            ))
        }),
        col("Age", "string", 0, age),
    ]
}

/// DaemonSets: desired, current, ready, up-to-date and available pods.
fn daemonset_columns() -> Vec<Column> {
    vec![
        col("Desired", "integer", 0, |v, _| {
            json!(i(v, "/status/desiredNumberScheduled"))
        }),
        col("Current", "integer", 0, |v, _| {
            json!(i(v, "/status/currentNumberScheduled"))
        }),
        col("Ready", "integer", 0, |v, _| {
            json!(i(v, "/status/numberReady"))
        }),
        col("Up-to-date", "integer", 0, |v, _| {
            json!(i(v, "/status/updatedNumberScheduled"))
        }),
        col("Available", "integer", 0, |v, _| {
            json!(i(v, "/status/numberAvailable"))
        }),
        col("Age", "string", 0, age),
    ]
}

/// Jobs: completions.
fn job_columns() -> Vec<Column> {
    vec![
        col("Completions", "string", 0, |v, _| {
            json!(format!(
                "{}/{}",
                i(v, "/status/succeeded"),
                i(v, "/spec/completions")
            ))
        }),
        col("Age", "string", 0, age),
    ]
}

/// PodDisruptionBudgets: min available, max unavailable, allowed disruptions.
fn pdb_columns() -> Vec<Column> {
    vec![
        col("Min Available", "string", 0, |v, _| {
            json!(if s(v, "/spec/minAvailable").is_empty() {
                "N/A".into()
            } else {
                s(v, "/spec/minAvailable")
            })
        }),
        col("Max Unavailable", "string", 0, |v, _| {
            json!(if s(v, "/spec/maxUnavailable").is_empty() {
                "N/A".into()
            } else {
                s(v, "/spec/maxUnavailable")
            })
        }),
        col("Allowed Disruptions", "integer", 0, |v, _| {
            json!(i(v, "/status/disruptionsAllowed"))
        }),
        col("Age", "string", 0, age),
    ]
}

/// PriorityClasses: value, global default, preemption policy.
fn priorityclass_columns() -> Vec<Column> {
    vec![
        col("Value", "integer", 0, |v, _| json!(i(v, "/value"))),
        col("Global-Default", "boolean", 0, |v, _| {
            json!(
                v.get("globalDefault")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            )
        }),
        col("Age", "string", 0, age),
        col("PreemptionPolicy", "string", 0, |v, _| {
            json!(s(v, "/preemptionPolicy"))
        }),
    ]
}

/// Converts objects to a Table.
pub fn table(
    def: &ResourceDef,
    objects: &[Value],
    now: SystemTime,
    rv: u64,
    cont: Option<&str>,
) -> Value {
    let mut defs: Vec<Value> = Vec::new();
    let cols = columns(def);
    let custom = &def.printer_columns;
    if def.custom && !custom.is_empty() {
        defs.push(json!({"name": "Name", "type": "string", "format": "name", "description": "Name of the object", "priority": 0}));
        for c in custom {
            defs.push(json!({"name": c.name, "type": c.type_, "format": "", "description": c.json_path, "priority": 0}));
        }
    } else {
        for c in &cols {
            let format = if c.name == "Name" { "name" } else { "" };
            defs.push(json!({"name": c.name, "type": c.ty, "format": format, "description": c.name, "priority": c.priority}));
        }
    }
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let cells: Vec<Value> = if def.custom && !custom.is_empty() {
                let mut cells = vec![name(o, now)];
                for c in custom {
                    let v = lookup(o, &c.json_path).cloned().unwrap_or(Value::Null);
                    cells.push(if c.type_ == "date" {
                        v.as_str()
                            .and_then(simclock::parse_rfc3339)
                            .map(|t| {
                                json!(human_duration(
                                    now.duration_since(t)
                                        .map(|d| d.as_secs() as i64)
                                        .unwrap_or(0)
                                ))
                            })
                            .unwrap_or(v)
                    } else {
                        v
                    });
                }
                cells
            } else {
                cols.iter().map(|c| (c.cell)(o, now)).collect()
            };
            json!({
                "cells": cells,
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": o.get("metadata").cloned().unwrap_or(json!({})),
                }
            })
        })
        .collect();
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": defs,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_match_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(150), "2m30s");
        assert_eq!(human_duration(900), "15m");
        assert_eq!(human_duration(4 * 3600 + 60), "4h1m");
        assert_eq!(human_duration(30 * 3600), "30h");
        assert_eq!(human_duration(3 * 86400), "3d");
    }
}
