//! Taints (docs/reference/ca-rules.md §1.3, §1.4): the two CA writes
//! (`ToBeDeletedByClusterAutoscaler`, `DeletionCandidateOfClusterAutoscaler`),
//! the startup and status taints it reads, and which taints are stripped
//! from template nodes.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::PostParams;
use kube::{Api, Client};

/// The hard taint put on nodes being deleted (NoSchedule, value = unix time).
pub const TO_BE_DELETED: &str = "ToBeDeletedByClusterAutoscaler";
/// The soft taint put on unneeded nodes (PreferNoSchedule).
pub const DELETION_CANDIDATE: &str = "DeletionCandidateOfClusterAutoscaler";

const STARTUP_PREFIX: &str = "startup-taint.cluster-autoscaler.kubernetes.io/";
const IGNORE_PREFIX: &str = "ignore-taint.cluster-autoscaler.kubernetes.io/";
const STATUS_PREFIX: &str = "status-taint.cluster-autoscaler.kubernetes.io/";

/// Taints that describe transient node conditions, stripped from templates.
const CONDITION_TAINTS: [&str; 11] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/network-unavailable",
    "node.kubernetes.io/pid-pressure",
    "node.cloudprovider.kubernetes.io/uninitialized",
    "node.cloudprovider.kubernetes.io/shutdown",
    "cloud.google.com/impending-node-termination",
    "NodeWithImpairedVolumes",
];

/// The startup and status taints configured by flags.
#[derive(Debug, Clone, Default)]
pub struct TaintConfig {
    /// `--startup-taint` and `--ignore-taint` keys.
    pub startup: Vec<String>,
    /// `--startup-taint-prefix` prefixes.
    pub startup_prefixes: Vec<String>,
    /// `--status-taint` keys.
    pub status: Vec<String>,
}

impl TaintConfig {
    /// A startup taint makes a Ready node count as not ready.
    pub fn is_startup_taint(&self, key: &str) -> bool {
        key.starts_with(STARTUP_PREFIX)
            || key.starts_with(IGNORE_PREFIX)
            || self.startup.iter().any(|k| k == key)
            || self
                .startup_prefixes
                .iter()
                .any(|p| key.starts_with(p.as_str()))
    }

    /// A status taint leaves the node ready.
    pub fn is_status_taint(&self, key: &str) -> bool {
        key.starts_with(STATUS_PREFIX) || self.status.iter().any(|k| k == key)
    }

    /// Whether a template keeps this taint (new nodes are assumed not to
    /// carry startup, status, condition or CA taints).
    pub fn keep_on_template(&self, key: &str) -> bool {
        !(self.is_startup_taint(key)
            || self.is_status_taint(key)
            || CONDITION_TAINTS.contains(&key)
            || key == TO_BE_DELETED
            || key == DELETION_CANDIDATE)
    }
}

/// The `type` label of `node_taints_count` for a taint key (docs/reference/ca-rules.md §1.4).
pub fn metric_type(key: &str, cfg: &TaintConfig) -> String {
    if key.starts_with(IGNORE_PREFIX) {
        return IGNORE_PREFIX.to_string();
    }
    if key == TO_BE_DELETED || key == DELETION_CANDIDATE || CONDITION_TAINTS.contains(&key) {
        return key.to_string();
    }
    if cfg.is_startup_taint(key) {
        return "startup-taint".into();
    }
    if cfg.is_status_taint(key) {
        return "status-taint".into();
    }
    "other".into()
}

/// The taint's value parsed as a unix time.
pub fn taint_time(node: &Node, key: &str) -> Option<SystemTime> {
    node.spec
        .as_ref()?
        .taints
        .as_ref()?
        .iter()
        .find(|t| t.key == key)?
        .value
        .as_deref()?
        .parse::<u64>()
        .ok()
        .map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs(s))
}

/// Whether the node carries the ToBeDeleted taint.
pub fn has_to_be_deleted(node: &Node) -> bool {
    has_taint(node, TO_BE_DELETED)
}

/// Whether the node carries a taint with this key.
pub fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == key))
}

/// A node is being deleted while its ToBeDeleted taint is less than 5
/// minutes old (docs/reference/ca-rules.md §1.3).
pub fn being_deleted(node: &Node, now: SystemTime) -> bool {
    taint_time(node, TO_BE_DELETED).is_some_and(|t| t + Duration::from_secs(300) > now)
}

fn unix(now: SystemTime) -> String {
    now.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        .to_string()
}

/// Adds a taint by updating the node: read, append if missing, update;
/// on 409 retry every 750 ms for up to 5 s. `cordon` also sets
/// `spec.unschedulable`.
pub async fn add(
    client: &Client,
    node: &str,
    key: &str,
    effect: &str,
    now: SystemTime,
    cordon: bool,
) -> Result<(), kube::Error> {
    update_with_retry(client, node, |n| {
        let spec = n.spec.get_or_insert_with(Default::default);
        let taints = spec.taints.get_or_insert_with(Vec::new);
        let mut changed = false;
        if !taints.iter().any(|t| t.key == key) {
            taints.push(Taint {
                key: key.to_string(),
                value: Some(unix(now)),
                effect: effect.to_string(),
                time_added: None,
            });
            changed = true;
        }
        if cordon && spec.unschedulable != Some(true) {
            spec.unschedulable = Some(true);
            changed = true;
        }
        changed
    })
    .await
}

/// Removes every taint with the key (and uncordons when asked).
pub async fn remove(
    client: &Client,
    node: &str,
    key: &str,
    uncordon: bool,
) -> Result<bool, kube::Error> {
    let mut removed = false;
    update_with_retry(client, node, |n| {
        let spec = n.spec.get_or_insert_with(Default::default);
        let before = spec.taints.as_ref().map_or(0, Vec::len);
        if let Some(ts) = spec.taints.as_mut() {
            ts.retain(|t| t.key != key);
        }
        removed = spec.taints.as_ref().map_or(0, Vec::len) != before;
        let mut changed = removed;
        if uncordon && removed && spec.unschedulable == Some(true) {
            spec.unschedulable = None;
            changed = true;
        }
        changed
    })
    .await?;
    Ok(removed)
}

async fn update_with_retry(
    client: &Client,
    node: &str,
    mut change: impl FnMut(&mut Node) -> bool,
) -> Result<(), kube::Error> {
    let api: Api<Node> = Api::all(client.clone());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let mut n = api.get(node).await?;
        if !change(&mut n) {
            return Ok(());
        }
        match api.replace(node, &PostParams::default(), &n).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(750)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn taint_classes() {
        let cfg = TaintConfig {
            startup: vec!["cni-not-ready".into()],
            startup_prefixes: vec!["example.com/boot-".into()],
            status: vec!["example.com/degraded".into()],
        };
        assert!(cfg.is_startup_taint("startup-taint.cluster-autoscaler.kubernetes.io/x"));
        assert!(cfg.is_startup_taint("ignore-taint.cluster-autoscaler.kubernetes.io/x"));
        assert!(cfg.is_startup_taint("cni-not-ready"));
        assert!(cfg.is_startup_taint("example.com/boot-disk"));
        assert!(!cfg.is_startup_taint("example.com/degraded"));
        assert!(cfg.is_status_taint("example.com/degraded"));
        assert!(cfg.is_status_taint("status-taint.cluster-autoscaler.kubernetes.io/y"));
        assert!(cfg.keep_on_template("dedicated"));
        for k in [
            TO_BE_DELETED,
            DELETION_CANDIDATE,
            "node.kubernetes.io/not-ready",
            "cni-not-ready",
            "example.com/degraded",
        ] {
            assert!(!cfg.keep_on_template(k), "{k}");
        }
    }

    #[test]
    fn metric_types() {
        let cfg = TaintConfig::default();
        assert_eq!(
            metric_type("ignore-taint.cluster-autoscaler.kubernetes.io/x", &cfg),
            IGNORE_PREFIX
        );
        assert_eq!(metric_type(TO_BE_DELETED, &cfg), TO_BE_DELETED);
        assert_eq!(
            metric_type("node.kubernetes.io/not-ready", &cfg),
            "node.kubernetes.io/not-ready"
        );
        assert_eq!(
            metric_type("startup-taint.cluster-autoscaler.kubernetes.io/x", &cfg),
            "startup-taint"
        );
        assert_eq!(
            metric_type("status-taint.cluster-autoscaler.kubernetes.io/x", &cfg),
            "status-taint"
        );
        assert_eq!(metric_type("dedicated", &cfg), "other");
    }

    #[test]
    fn being_deleted_lasts_five_minutes() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let node = |v: &str| -> Node {
            serde_json::from_value(serde_json::json!({"spec": {"taints": [{"key": TO_BE_DELETED, "value": v, "effect": "NoSchedule"}]}})).unwrap()
        };
        assert!(being_deleted(&node("1799999900"), now));
        assert!(!being_deleted(&node("1799999600"), now));
        assert!(!being_deleted(&node("not-a-time"), now));
        assert!(has_to_be_deleted(&node("x")));
    }
}
