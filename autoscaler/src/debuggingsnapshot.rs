//! The debugging snapshot (`--debugging-snapshot-enabled`, upstream's
//! `debuggingsnapshot`): `GET /snapshotz` on `--address` waits for the
//! next loop and answers with what that loop saw, as JSON: every node of
//! its snapshot (upcoming ones included) with its pods, the template node
//! of each group, and the pending pods that turned out to fit existing or
//! upcoming nodes.
//!
//! One request at a time: the request arms the snapshotter
//! (`Listening` → `TriggerEnabled`); the next loop starts collecting
//! (`StartDataCollection`), each setter keeps what it is given, the cluster
//! nodes or the schedulable pods mark it `DataCollected`, and the loop's
//! end flushes the answer: 200 with the JSON, or 500 with the JSON's
//! `Error` "Unable to collect any data" when the loop ended before
//! collecting (an error, an unhealthy cluster). A second request meanwhile
//! gets 429; a client that goes away returns it to `Listening`. Upstream's
//! log lines are kept. Pods are as the cache keeps them, their containers
//! replaced by one that carries the pod's effective requests and host
//! ports (what the simulation used), so that the snapshot can be loaded
//! back (`testbed whatif`).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::SystemTime;

use predicates::{NodeInfo, PodInfo};
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

/// The body of a 429: another request is under way.
pub const BUSY: &str =
    "Another debugging snapshot request is being processed. Concurrent requests not supported";

/// Where the snapshotter is (upstream's `DebuggingSnapshotterState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    /// Waiting for a request.
    #[default]
    Listening,
    /// A request waits for the next loop.
    TriggerEnabled,
    /// The loop collects.
    StartDataCollection,
    /// Some data is in.
    DataCollected,
}

/// What the loop collected (upstream's `DebuggingSnapshotImpl`).
#[derive(Debug, Default)]
struct Collected {
    node_list: Option<Vec<Value>>,
    unscheduled_pods_can_be_scheduled: Option<Vec<Value>>,
    template_nodes: Option<Map<String, Value>>,
    error: Option<String>,
    start: Option<SystemTime>,
}

#[derive(Debug, Default)]
struct Inner {
    state: State,
    data: Collected,
    reply: Option<oneshot::Sender<(u16, String)>>,
}

/// The snapshotter, shared by the loop and the HTTP endpoint.
#[derive(Debug, Default)]
pub struct DebuggingSnapshotter {
    inner: Mutex<Inner>,
}

impl DebuggingSnapshotter {
    /// A snapshotter for `--debugging-snapshot-enabled`, saying so.
    pub fn enabled() -> std::sync::Arc<Self> {
        tracing::info!("Debugging Snapshot is enabled");
        std::sync::Arc::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request: waits for the next loop's end and gives its status code
    /// and body (429 at once when another request is under way, 503 when
    /// the autoscaler stops first).
    pub async fn request(&self) -> (u16, String) {
        let rx = {
            let mut inner = self.lock();
            if inner.state != State::Listening {
                tracing::error!(
                    "Debugging Snapshot is currently being processed. Another snapshot can't be processed"
                );
                return (429, BUSY.into());
            }
            tracing::info!("Received a new snapshot, that is accepted");
            let (tx, rx) = oneshot::channel();
            inner.state = State::TriggerEnabled;
            inner.reply = Some(tx);
            rx
        };
        // A client that goes away drops this future: back to listening.
        let mut guard = Abandoned(Some(self));
        let answer = rx.await;
        guard.0 = None;
        answer.unwrap_or((503, String::new()))
    }

    /// The start of a loop: an armed snapshotter starts collecting.
    pub fn start_data_collection(&self, now: SystemTime) {
        let mut inner = self.lock();
        if inner.state == State::TriggerEnabled {
            tracing::info!("Trigger Enabled for Debugging Snapshot, starting data collection");
            inner.state = State::StartDataCollection;
            inner.data = Collected {
                start: Some(now),
                ..Collected::default()
            };
        }
    }

    /// Whether this loop collects (the setters do nothing otherwise, so a
    /// loop pays for nothing when no request waits).
    pub fn collecting(&self) -> bool {
        matches!(
            self.lock().state,
            State::StartDataCollection | State::DataCollected
        )
    }

    /// The groups' template nodes.
    pub fn set_template_nodes(&self, templates: &BTreeMap<String, NodeInfo>) {
        if !self.collecting() {
            return;
        }
        tracing::debug!("TemplateNodes is being set for the debugging snapshot");
        let map = templates
            .iter()
            .map(|(id, t)| (id.clone(), cluster_node(t)))
            .collect();
        self.lock().data.template_nodes = Some(map);
    }

    /// The loop snapshot's nodes with their pods.
    pub fn set_cluster_nodes(&self, nodes: &[NodeInfo]) {
        if !self.collecting() {
            return;
        }
        tracing::debug!("NodeGroupInfo is being set for the debugging snapshot");
        let list = nodes.iter().map(cluster_node).collect();
        let mut inner = self.lock();
        inner.data.node_list = Some(list);
        inner.state = State::DataCollected;
    }

    /// The pending pods that fit existing or upcoming nodes.
    pub fn set_unscheduled_pods_can_be_scheduled(&self, pods: &[PodInfo]) {
        if pods.is_empty() || !self.collecting() {
            return;
        }
        tracing::debug!("UnscheduledPodsCanBeScheduled is being set for the debugging snapshot");
        let list = pods.iter().map(pod_value).collect();
        let mut inner = self.lock();
        inner.data.unscheduled_pods_can_be_scheduled = Some(list);
        inner.state = State::DataCollected;
    }

    /// The end of a loop: the waiting request gets its answer.
    pub fn flush(&self, now: SystemTime) {
        let mut inner = self.lock();
        match inner.state {
            State::StartDataCollection => {
                tracing::error!(
                    "No data was collected for the snapshot in this loop. So no snapshot can be generated."
                );
                inner.data.error = Some("Unable to collect any data".into());
            }
            State::DataCollected => {}
            State::Listening | State::TriggerEnabled => return,
        }
        let data = std::mem::take(&mut inner.data);
        inner.state = State::Listening;
        if let Some(tx) = inner.reply.take() {
            let _ = tx.send(answer(data, now));
        }
    }
}

/// Returns the snapshotter to listening when its request is dropped
/// unanswered.
struct Abandoned<'a>(Option<&'a DebuggingSnapshotter>);

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        let Some(s) = self.0 else {
            return;
        };
        tracing::info!("Received terminate trigger, aborting ongoing snapshot request");
        let mut inner = s.lock();
        inner.state = State::Listening;
        inner.reply = None;
        inner.data = Collected::default();
    }
}

/// The status code and JSON body of a flushed snapshot.
fn answer(data: Collected, end: SystemTime) -> (u16, String) {
    if let Some(e) = &data.error {
        tracing::error!(
            "Debugging snapshot found with error message set when GetOutputBytes() is called: {e}"
        );
    }
    tracing::info!("Debugging snapshot flush ready");
    let mut body = Map::new();
    body.insert(
        "NodeList".into(),
        data.node_list.map_or(Value::Null, Value::Array),
    );
    body.insert(
        "UnscheduledPodsCanBeScheduled".into(),
        data.unscheduled_pods_can_be_scheduled
            .map_or(Value::Null, Value::Array),
    );
    if let Some(e) = &data.error {
        body.insert("Error".into(), json!(e));
    }
    body.insert("StartTimestamp".into(), json!(go_time(data.start)));
    body.insert("EndTimestamp".into(), json!(go_time(Some(end))));
    body.insert(
        "TemplateNodes".into(),
        data.template_nodes.map_or(Value::Null, Value::Object),
    );
    let code = if data.error.is_some() { 500 } else { 200 };
    (code, Value::Object(body).to_string())
}

/// A node and its pods (upstream's `ClusterNode`; `Pods` null when none).
fn cluster_node(info: &NodeInfo) -> Value {
    let pods: Vec<Value> = info.pods.iter().map(pod_value).collect();
    json!({
        "Node": to_value(&*info.node),
        "Pods": if pods.is_empty() { Value::Null } else { Value::Array(pods) },
    })
}

/// A pod as the snapshot gives it. The cache keeps pods without their
/// containers; what the simulation read of them stands in their place:
/// one container, `requests`, with the pod's effective requests (init
/// containers and overhead counted) and its host ports, so that a reader
/// of the snapshot (the what-if) sees what the loop saw.
fn pod_value(info: &PodInfo) -> Value {
    let mut pod = to_value(&*info.pod);
    let empty = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if empty {
        let r = &info.requests;
        let mut requests = Map::new();
        requests.insert("cpu".into(), json!(format!("{}m", r.milli_cpu)));
        requests.insert("memory".into(), json!(r.memory.to_string()));
        if r.ephemeral_storage > 0 {
            requests.insert(
                "ephemeral-storage".into(),
                json!(r.ephemeral_storage.to_string()),
            );
        }
        for (name, v) in &r.scalar {
            requests.insert(name.clone(), json!(v.to_string()));
        }
        let ports: Vec<Value> = info
            .ports
            .iter()
            .map(|p| json!({"containerPort": p.port, "hostPort": p.port, "hostIP": p.ip, "protocol": p.protocol}))
            .collect();
        pod["spec"]["containers"] = json!([{"name": "requests", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": requests}, "ports": ports}]);
    }
    pod
}

fn to_value<T: serde::Serialize>(object: &T) -> Value {
    serde_json::to_value(object).unwrap_or(Value::Null)
}

/// A time as Go's `time.Time` marshals it (RFC 3339 with nanoseconds, UTC;
/// the zero time when unset).
fn go_time(t: Option<SystemTime>) -> String {
    t.and_then(|t| jiff::Timestamp::try_from(t).ok())
        .map_or_else(|| "0001-01-01T00:00:00Z".into(), |ts| ts.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn node(name: &str) -> NodeInfo {
        NodeInfo::new(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
        ))
    }

    #[tokio::test]
    async fn a_request_gets_the_next_loops_data_and_a_second_one_is_refused() {
        let s = Arc::new(DebuggingSnapshotter::default());
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        // A loop with no request collects nothing.
        s.start_data_collection(t0);
        assert!(!s.collecting());
        let waiting = tokio::spawn({
            let s = s.clone();
            async move { s.request().await }
        });
        tokio::task::yield_now().await;
        assert_eq!(s.request().await, (429, BUSY.to_string()));
        s.start_data_collection(t0);
        let mut templates = BTreeMap::new();
        templates.insert("pool".to_string(), node("template-node-for-pool"));
        s.set_template_nodes(&templates);
        s.set_cluster_nodes(&[node("n1")]);
        s.flush(t0 + Duration::from_millis(1500));
        let (code, body) = waiting.await.unwrap();
        assert_eq!(code, 200);
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["NodeList"][0]["Node"]["metadata"]["name"], "n1");
        assert_eq!(v["NodeList"][0]["Pods"], Value::Null);
        assert_eq!(v["UnscheduledPodsCanBeScheduled"], Value::Null);
        assert_eq!(
            v["TemplateNodes"]["pool"]["Node"]["metadata"]["name"],
            "template-node-for-pool"
        );
        assert_eq!(v["StartTimestamp"], "2027-01-15T08:00:00Z");
        assert_eq!(v["EndTimestamp"], "2027-01-15T08:00:01.5Z");
        assert!(v.get("Error").is_none());
        // Listening again; a loop that ends before collecting answers 500.
        let waiting = tokio::spawn({
            let s = s.clone();
            async move { s.request().await }
        });
        tokio::task::yield_now().await;
        s.start_data_collection(t0);
        s.flush(t0);
        let (code, body) = waiting.await.unwrap();
        assert_eq!(code, 500);
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["Error"], "Unable to collect any data");
    }

    #[tokio::test]
    async fn a_client_that_goes_away_frees_the_snapshotter() {
        let s = Arc::new(DebuggingSnapshotter::default());
        let waiting = tokio::spawn({
            let s = s.clone();
            async move { s.request().await }
        });
        tokio::task::yield_now().await;
        waiting.abort();
        let _ = waiting.await;
        let again = tokio::spawn({
            let s = s.clone();
            async move { s.request().await }
        });
        tokio::task::yield_now().await;
        let t0 = SystemTime::UNIX_EPOCH;
        s.start_data_collection(t0);
        s.set_cluster_nodes(&[]);
        s.flush(t0);
        assert_eq!(again.await.unwrap().0, 200);
    }
}
