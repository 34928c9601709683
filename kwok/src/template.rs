//! Status templates. Upstream kwok renders Go `text/template` with Sprig;
//! this crate supports a documented subset:
//!
//! - plain YAML with `{{ Now }}`, `{{ StartTime }}`, `{{ NodeIP }}`,
//!   `{{ NodeName }}` and `{{ .path.to.field }}` substitutions (a missing
//!   field renders as `null`);
//! - three whole-status functions, which the built-in stages use:
//!   `{{ KwokNodeStatus }}` (node-initialize and the heartbeat: the five
//!   conditions, addresses, capacity defaults, nodeInfo, `phase: Running`),
//!   `{{ KwokPodReady }}` (pod-ready: conditions, container statuses, host
//!   and pod IPs, `phase: Running`) and `{{ KwokPodComplete }}`
//!   (pod-complete). An upstream template that calls `NodeConditions` is
//!   read as `KwokNodeStatus`, one that calls `PodIPWith` as `KwokPodReady`,
//!   so copies of the shipped stages keep working.
//!
//! Anything else inside `{{ }}` is rejected when the stage is loaded.

use std::time::SystemTime;

use apimachinery::json::Lookup;
use serde_json::{Value, json};

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub enum Template {
    /// The node status of `node-initialize`.
    NodeStatus,
    /// The pod status of `pod-ready`.
    PodReady,
    /// The pod status of `pod-complete`.
    PodComplete,
    /// YAML text with substitutions.
    Text(Vec<Piece>),
}

/// Part of a text template.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// Literal text.
    Literal(String),
    /// `{{ Now }}`.
    Now,
    /// `{{ StartTime }}`.
    StartTime,
    /// `{{ NodeIP }}`.
    NodeIp,
    /// `{{ NodeName }}`.
    NodeName,
    /// `{{ .a.b }}`.
    Field(Vec<String>),
}

/// A template outside the subset.
#[derive(Debug, thiserror::Error)]
#[error(
    "unsupported template action {{{{{action}}}}}: only Now, StartTime, NodeIP, NodeName, .field paths, KwokNodeStatus, KwokPodReady and KwokPodComplete are supported"
)]
pub struct TemplateError {
    action: String,
}

/// What rendering needs besides the object.
pub struct Context<'a> {
    /// Now, from the controller's clock.
    pub now: SystemTime,
    /// When the controller started.
    pub start: SystemTime,
    /// `--node-ip`.
    pub node_ip: &'a str,
    /// `--node-name`.
    pub node_name: &'a str,
    /// `--node-port` (0: not set).
    pub node_port: u16,
    /// For pods: the node they are bound to.
    pub node: Option<&'a Value>,
    /// For pods: an allocated pod IP.
    pub pod_ip: Option<String>,
}

impl Template {
    /// Parses a template.
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        if text.contains("KwokNodeStatus") || text.contains("NodeConditions") {
            return Ok(Self::NodeStatus);
        }
        if text.contains("KwokPodReady") || text.contains("PodIPWith") {
            return Ok(Self::PodReady);
        }
        if text.contains("KwokPodComplete") {
            return Ok(Self::PodComplete);
        }
        let mut pieces = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            pieces.push(Piece::Literal(rest[..start].to_string()));
            let end = rest[start..].find("}}").ok_or_else(|| TemplateError {
                action: rest[start..].chars().take(20).collect(),
            })? + start;
            let action = rest[start + 2..end].trim().trim_matches('-').trim();
            pieces.push(match action {
                "Now" => Piece::Now,
                "StartTime" => Piece::StartTime,
                "NodeIP" => Piece::NodeIp,
                "NodeName" => Piece::NodeName,
                a if a.starts_with('.') && !a.contains(' ') => Piece::Field(
                    a[1..]
                        .split('.')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect(),
                ),
                a => {
                    return Err(TemplateError {
                        action: a.to_string(),
                    });
                }
            });
            rest = &rest[end + 2..];
        }
        pieces.push(Piece::Literal(rest.to_string()));
        Ok(Self::Text(pieces))
    }

    /// Renders the status for `obj`.
    pub fn render(&self, obj: &Value, ctx: &Context<'_>) -> Result<Value, String> {
        let now = simclock::format_rfc3339(ctx.now);
        match self {
            Self::NodeStatus => Ok(node_status(obj, ctx, &now)),
            Self::PodReady => Ok(pod_ready(obj, ctx, &now)),
            Self::PodComplete => Ok(pod_complete(obj, &now)),
            Self::Text(pieces) => {
                let mut out = String::new();
                for p in pieces {
                    match p {
                        Piece::Literal(s) => out.push_str(s),
                        Piece::Now => out.push_str(&now),
                        Piece::StartTime => out.push_str(&simclock::format_rfc3339(ctx.start)),
                        Piece::NodeIp => out.push_str(ctx.node_ip),
                        Piece::NodeName => out.push_str(ctx.node_name),
                        Piece::Field(path) => {
                            let v = path
                                .iter()
                                .fold(obj, |v, k| v.get(k).unwrap_or(&Value::Null));
                            out.push_str(&serde_json::to_string(v).unwrap_or_default());
                        }
                    }
                }
                serde_saphyr::from_str::<Value>(&out)
                    .map_err(|e| format!("rendered template is not YAML: {e}"))
            }
        }
    }
}

fn node_conditions(obj: &Value, now: &str) -> Value {
    let transition = obj
        .lookup("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .unwrap_or(now);
    let cond = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": transition})
    };
    json!([
        cond(
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status"
        ),
        cond(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available"
        ),
        cond(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure"
        ),
        cond(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available"
        ),
        cond(
            "NetworkUnavailable",
            "False",
            "RouteCreated",
            "RouteController created a route"
        ),
    ])
}

fn node_status(obj: &Value, ctx: &Context<'_>, now: &str) -> Value {
    let status = obj.get("status").cloned().unwrap_or(json!({}));
    let mut out = json!({"conditions": node_conditions(obj, now), "phase": "Running"});
    let mut addresses = status
        .get("addresses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let has = |t: &str, a: &[Value]| {
        a.iter()
            .any(|x| x.get("type").and_then(Value::as_str) == Some(t))
    };
    if !has("InternalIP", &addresses) && !ctx.node_ip.is_empty() {
        addresses.push(json!({"type": "InternalIP", "address": ctx.node_ip}));
    }
    if !has("Hostname", &addresses) && !ctx.node_name.is_empty() {
        addresses.push(json!({"type": "Hostname", "address": ctx.node_name}));
    }
    if !addresses.is_empty() {
        out["addresses"] = Value::Array(addresses);
    }
    let defaults = json!({"cpu": "1k", "memory": "1Ti", "pods": "1M"});
    for field in ["allocatable", "capacity"] {
        out[field] = status
            .get(field)
            .filter(|v| v.as_object().is_some_and(|m| !m.is_empty()))
            .cloned()
            .unwrap_or_else(|| defaults.clone());
    }
    let version = format!("kwok-v{}", env!("CARGO_PKG_VERSION"));
    let info = status.get("nodeInfo").cloned().unwrap_or(json!({}));
    let keep = |k: &str, d: &str| {
        info.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or(d)
            .to_string()
    };
    if ctx.node_port != 0 {
        out["daemonEndpoints"] = json!({"kubeletEndpoint": {"Port": ctx.node_port}});
    }
    out["nodeInfo"] = json!({
        "architecture": keep("architecture", "amd64"),
        "operatingSystem": keep("operatingSystem", "linux"),
        "containerRuntimeVersion": keep("containerRuntimeVersion", &version),
        "kernelVersion": keep("kernelVersion", &version),
        "kubeProxyVersion": keep("kubeProxyVersion", &version),
        "kubeletVersion": keep("kubeletVersion", &version),
        "bootID": keep("bootID", ""), "machineID": keep("machineID", ""),
        "osImage": keep("osImage", ""), "systemUUID": keep("systemUUID", ""),
    });
    out
}

/// The node's host IPs: InternalIP addresses, then ExternalIP ones.
fn host_ips(node: Option<&Value>, fallback: &str) -> Vec<String> {
    let addresses = node
        .and_then(|n| n.lookup("/status/addresses"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut ips: Vec<String> = ["InternalIP", "ExternalIP"]
        .iter()
        .flat_map(|t| {
            addresses
                .iter()
                .filter(move |a| a.get("type").and_then(Value::as_str) == Some(*t))
                .filter_map(|a| a.get("address").and_then(Value::as_str).map(str::to_string))
        })
        .collect();
    if ips.is_empty() && !fallback.is_empty() {
        ips.push(fallback.to_string());
    }
    ips.truncate(1);
    ips
}

fn pod_ready(obj: &Value, ctx: &Context<'_>, now: &str) -> Value {
    let no_spec = json!({});
    let spec = obj.get("spec").unwrap_or(&no_spec);
    let cond = |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": now});
    let mut conditions = vec![cond("Initialized"), cond("Ready"), cond("ContainersReady")];
    for gate in spec
        .get("readinessGates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(t) = gate.get("conditionType").and_then(Value::as_str) {
            conditions.push(cond(t));
        }
    }
    let containers: Vec<Value> = spec
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            json!({"name": c.get("name"), "image": c.get("image"), "ready": true, "restartCount": 0,
                   "state": {"running": {"startedAt": now}}})
        })
        .collect();
    let inits: Vec<Value> = spec
        .get("initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
                json!({"name": c.get("name"), "image": c.get("image"), "ready": true, "started": true, "restartCount": 0,
                       "state": {"running": {"startedAt": now}}})
            } else {
                json!({"name": c.get("name"), "image": c.get("image"), "ready": true, "restartCount": 0,
                       "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}})
            }
        })
        .collect();
    let hosts = host_ips(ctx.node, ctx.node_ip);
    let host_network = spec
        .get("hostNetwork")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let pod_ip = if host_network {
        hosts.first().cloned()
    } else {
        ctx.pod_ip.clone()
    };
    let mut out = json!({
        "conditions": conditions,
        "containerStatuses": containers,
        "initContainerStatuses": if inits.is_empty() { Value::Null } else { Value::Array(inits) },
        "phase": "Running",
        "startTime": now,
    });
    if let Some(h) = hosts.first() {
        out["hostIP"] = json!(h);
        out["hostIPs"] = json!([{"ip": h}]);
    }
    if let Some(ip) = pod_ip {
        out["podIP"] = json!(ip);
        out["podIPs"] = json!([{"ip": ip}]);
    }
    out
}

fn pod_complete(obj: &Value, now: &str) -> Value {
    let containers: Vec<Value> = obj
        .lookup("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            json!({"name": c.get("name"), "image": c.get("image"), "ready": false, "started": false, "restartCount": 0,
                   "state": {"running": null, "terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}})
        })
        .collect();
    let cond = |t: &str| json!({"type": t, "status": "False", "reason": "PodCompleted", "lastTransitionTime": now});
    json!({"containerStatuses": containers, "phase": "Succeeded", "conditions": [cond("Ready"), cond("ContainersReady")]})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(node: Option<&Value>) -> Context<'_> {
        Context {
            now: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000),
            start: SystemTime::UNIX_EPOCH,
            node_ip: "",
            node_name: "",
            node_port: 0,
            node,
            pod_ip: Some("10.0.0.1".into()),
        }
    }

    #[test]
    fn text_templates_substitute_the_subset() {
        let t = Template::parse("conditions:\n- type: Ready\n  status: \"False\"\n  reason: {{ .metadata.annotations.why }}\n  lastHeartbeatTime: {{ Now }}\n").unwrap();
        let v = t
            .render(
                &json!({"metadata": {"annotations": {"why": "Broken"}}}),
                &ctx(None),
            )
            .unwrap();
        assert_eq!(
            v,
            json!({"conditions": [{"type": "Ready", "status": "False", "reason": "Broken", "lastHeartbeatTime": "2023-11-14T22:13:20Z"}]})
        );
        let err = Template::parse("{{ range .spec.containers }}x{{ end }}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("range .spec.containers"), "{err}");
    }

    #[test]
    fn node_status_keeps_capacity_and_fills_defaults() {
        let node = json!({"metadata": {"creationTimestamp": "2023-01-01T00:00:00Z"}, "status": {"capacity": {"cpu": "4"}}});
        let v = Template::NodeStatus.render(&node, &ctx(None)).unwrap();
        assert_eq!(v["capacity"], json!({"cpu": "4"}));
        assert_eq!(
            v["allocatable"],
            json!({"cpu": "1k", "memory": "1Ti", "pods": "1M"})
        );
        assert_eq!(v["conditions"][0]["reason"], "KubeletReady");
        assert_eq!(
            v["conditions"][0]["lastTransitionTime"],
            "2023-01-01T00:00:00Z"
        );
        assert_eq!(v["phase"], "Running");
    }

    #[test]
    fn pod_ready_uses_the_node_address_and_allocated_ip() {
        let node =
            json!({"status": {"addresses": [{"type": "InternalIP", "address": "192.168.0.5"}]}});
        let pod = json!({"spec": {"containers": [{"name": "c", "image": "nginx"}], "readinessGates": [{"conditionType": "x/y"}]}});
        let v = Template::PodReady.render(&pod, &ctx(Some(&node))).unwrap();
        assert_eq!(v["hostIP"], "192.168.0.5");
        assert_eq!(v["podIP"], "10.0.0.1");
        assert_eq!(v["containerStatuses"][0]["ready"], true);
        assert_eq!(v["conditions"].as_array().unwrap().len(), 4);
        assert_eq!(v["initContainerStatuses"], Value::Null);
    }
}
