//! What CA tells the world (docs/reference/ca-rules.md §6, §7): the status ConfigMap in
//! upstream's YAML schema, and events with CA's reasons, messages and
//! five-minute deduplication.

use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::clusterstate::{ClusterStateRegistry, NodeCounts};

/// The annotation holding the status time.
pub const LAST_UPDATED: &str = "cluster-autoscaler.kubernetes.io/last-updated";

/// Formats a time as Go's `2006-01-02 15:04:05.999999999 -0700 MST` in UTC:
/// trailing zeros of the fraction removed, the dot too when it is zero.
pub fn go_time(t: SystemTime) -> String {
    let ts = simclock::to_timestamp(t);
    let base = ts.strftime("%Y-%m-%d %H:%M:%S").to_string();
    let nanos = ts.subsec_nanosecond();
    let frac = if nanos == 0 {
        String::new()
    } else {
        format!(".{nanos:09}").trim_end_matches('0').to_string()
    };
    format!("{base}{frac} +0000 UTC")
}

fn rfc3339(t: Option<SystemTime>) -> Value {
    t.map_or(Value::Null, |t| json!(simclock::format_rfc3339(t)))
}

fn counts(c: &NodeCounts) -> Value {
    let mut registered = json!({
        "total": c.registered, "ready": c.ready, "notStarted": c.not_started, "suspended": 0,
        "unready": {"total": c.unready, "resourceUnready": c.resource_unready},
    });
    if c.being_deleted > 0 {
        registered["beingDeleted"] = json!(c.being_deleted);
    }
    json!({"registered": registered, "longUnregistered": c.long_unregistered, "unregistered": c.unregistered})
}

/// Remembers when each status last changed (`lastTransitionTime`).
#[derive(Debug, Default)]
struct Transitions {
    last: HashMap<String, (String, SystemTime)>,
}

impl Transitions {
    fn at(&mut self, key: &str, status: &str, now: SystemTime) -> SystemTime {
        match self.last.get(key) {
            Some((s, t)) if s == status => *t,
            _ => {
                self.last.insert(key.to_string(), (status.to_string(), now));
                now
            }
        }
    }
}

/// Writes the status ConfigMap.
pub struct StatusWriter {
    client: Client,
    namespace: String,
    name: String,
    enabled: bool,
    transitions: Transitions,
}

/// Per-group scale-down candidates and when the unneeded list was computed.
#[derive(Debug, Clone, Default)]
pub struct ScaleDownSummary {
    /// Candidates per group.
    pub candidates: BTreeMap<String, usize>,
    /// Last computation.
    pub probed: Option<SystemTime>,
}

impl StatusWriter {
    /// `--write-status-configmap`, `--namespace`, `--status-config-map-name`.
    pub fn new(client: Client, namespace: &str, name: &str, enabled: bool) -> Self {
        Self {
            client,
            namespace: namespace.to_string(),
            name: name.to_string(),
            enabled,
            transitions: Transitions::default(),
        }
    }

    /// The startup form (`Initializing`), with an optional message.
    pub fn initializing(now: SystemTime, message: Option<&str>) -> Value {
        let empty = json!({"lastProbeTime": null, "lastTransitionTime": null});
        let mut v = json!({
            "autoscalerStatus": "Initializing",
            "clusterWide": {
                "health": {"lastProbeTime": null, "lastTransitionTime": null, "nodeCounts": counts(&NodeCounts::default())},
                "scaleDown": empty, "scaleUp": empty,
            },
            "time": go_time(now),
        });
        if let Some(m) = message {
            v["message"] = json!(m);
        }
        v
    }

    /// The full status after a loop.
    pub fn running(
        &mut self,
        registry: &ClusterStateRegistry,
        scale_down: &ScaleDownSummary,
        now: SystemTime,
    ) -> Value {
        let mut groups = Vec::new();
        let mut any_in_progress = false;
        for (id, g) in registry.groups() {
            let health = if g.healthy { "Healthy" } else { "Unhealthy" };
            let backoff = registry.backed_off(id, now);
            let scale_up = if registry.is_scaling_up(id) && g.upcoming > 0 {
                "InProgress"
            } else if !g.healthy {
                "Unhealthy"
            } else if backoff.is_some() {
                "Backoff"
            } else {
                "NoActivity"
            };
            any_in_progress |= scale_up == "InProgress";
            let candidates = scale_down.candidates.get(id).copied().unwrap_or(0);
            let sd_status = if candidates > 0 {
                "CandidatesPresent"
            } else {
                "NoCandidates"
            };
            let backoff_info = backoff.map_or(
                json!({}),
                |b| json!({"errorCode": b.code, "errorMessage": b.message}),
            );
            let mut sd = json!({
                "status": sd_status,
                "lastProbeTime": rfc3339(scale_down.probed),
                "lastTransitionTime": rfc3339(Some(self.transitions.at(&format!("{id}/scaleDown"), sd_status, scale_down.probed.unwrap_or(now)))),
            });
            if candidates > 0 {
                sd["candidates"] = json!(candidates);
            }
            groups.push(json!({
                "name": id,
                "health": {
                    "status": health,
                    "nodeCounts": counts(&g.counts),
                    "cloudProviderTarget": g.target,
                    "minSize": g.group.min_size(),
                    "maxSize": g.group.max_size(),
                    "lastProbeTime": rfc3339(Some(now)),
                    "lastTransitionTime": rfc3339(Some(self.transitions.at(&format!("{id}/health"), health, now))),
                },
                "scaleUp": {
                    "status": scale_up,
                    "backoffInfo": backoff_info,
                    "lastProbeTime": rfc3339(Some(now)),
                    "lastTransitionTime": rfc3339(Some(self.transitions.at(&format!("{id}/scaleUp"), scale_up, now))),
                },
                "scaleDown": sd,
            }));
        }
        let health = if registry.is_healthy() {
            "Healthy"
        } else {
            "Unhealthy"
        };
        let scale_up = if any_in_progress {
            "InProgress"
        } else {
            "NoActivity"
        };
        let total: usize = scale_down.candidates.values().sum();
        let sd_status = if total > 0 {
            "CandidatesPresent"
        } else {
            "NoCandidates"
        };
        let mut cluster_sd = json!({
            "status": sd_status,
            "lastProbeTime": rfc3339(scale_down.probed),
            "lastTransitionTime": rfc3339(Some(self.transitions.at("cluster/scaleDown", sd_status, scale_down.probed.unwrap_or(now)))),
        });
        if total > 0 {
            cluster_sd["candidates"] = json!(total);
        }
        let mut v = json!({
            "autoscalerStatus": "Running",
            "clusterWide": {
                "health": {
                    "status": health,
                    "nodeCounts": counts(registry.totals()),
                    "lastProbeTime": rfc3339(Some(now)),
                    "lastTransitionTime": rfc3339(Some(self.transitions.at("cluster/health", health, now))),
                },
                "scaleUp": {
                    "status": scale_up,
                    "lastProbeTime": rfc3339(Some(now)),
                    "lastTransitionTime": rfc3339(Some(self.transitions.at("cluster/scaleUp", scale_up, now))),
                },
                "scaleDown": cluster_sd,
            },
            "time": go_time(now),
        });
        if !groups.is_empty() {
            v["nodeGroups"] = json!(groups);
        }
        v
    }

    /// Writes a status (GET, then update or create); failures are logged
    /// and retried next loop.
    pub async fn write(&self, status: &Value) {
        if !self.enabled {
            return;
        }
        let time = status
            .get("time")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let text = match serde_saphyr::to_string(status) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!("serialising the status ConfigMap: {e}");
                return;
            }
        };
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        let result = match api.get_opt(&self.name).await {
            Ok(Some(mut cm)) => {
                cm.data
                    .get_or_insert_with(Default::default)
                    .insert("status".into(), text);
                cm.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(LAST_UPDATED.into(), time);
                cm.metadata.managed_fields = None;
                api.replace(&self.name, &PostParams::default(), &cm)
                    .await
                    .map(|_| ())
            }
            Ok(None) => {
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": self.name, "namespace": self.namespace, "annotations": {LAST_UPDATED: time}},
                    "data": {"status": text},
                }))
                .unwrap_or_default();
                api.create(&PostParams::default(), &cm).await.map(|_| ())
            }
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            tracing::warn!(
                "writing status ConfigMap {}/{}: {e}",
                self.namespace,
                self.name
            );
        }
    }

    /// Deletes the ConfigMap (graceful shutdown).
    pub async fn delete(&self) {
        if !self.enabled {
            return;
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        if let Err(e) = api.delete(&self.name, &DeleteParams::default()).await {
            tracing::warn!(
                "deleting status ConfigMap {}/{}: {e}",
                self.namespace,
                self.name
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::time::Duration;

    #[test]
    fn go_time_format() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_nanos(1_785_406_542_123_456_789);
        assert_eq!(go_time(t), "2026-07-30 10:15:42.123456789 +0000 UTC");
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_785_406_542_500);
        assert_eq!(go_time(t), "2026-07-30 10:15:42.5 +0000 UTC");
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_785_406_542);
        assert_eq!(go_time(t), "2026-07-30 10:15:42 +0000 UTC");
    }

    #[test]
    fn the_startup_form_has_null_times() {
        let v =
            StatusWriter::initializing(SystemTime::UNIX_EPOCH, Some("Cluster has no ready nodes."));
        assert_eq!(v["autoscalerStatus"], "Initializing");
        assert!(v["clusterWide"]["scaleUp"]["lastProbeTime"].is_null());
        assert_eq!(v["message"], "Cluster has no ready nodes.");
        let yaml = serde_saphyr::to_string(&v).unwrap();
        assert!(yaml.contains("autoscalerStatus: Initializing"), "{yaml}");
        assert!(
            yaml.find("autoscalerStatus").unwrap() < yaml.find("clusterWide").unwrap(),
            "keys sorted"
        );
    }

    #[test]
    fn transitions_keep_their_time_while_the_status_holds() {
        let mut t = Transitions::default();
        let t0 = SystemTime::UNIX_EPOCH;
        let t1 = t0 + Duration::from_secs(10);
        assert_eq!(t.at("x", "Healthy", t0), t0);
        assert_eq!(t.at("x", "Healthy", t1), t0);
        assert_eq!(t.at("x", "Unhealthy", t1), t1);
    }
}
