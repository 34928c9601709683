//! What the controller shares with the tasks it starts (jobs, the lease
//! task): the client, clock, settings and IP pool, and the messages those
//! tasks send back.

use std::sync::Mutex;

use apimachinery::json::Lookup;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::DynamicObject;
use kube::runtime::watcher::Event;
use serde_json::Value;
use simclock::Clock;
use tokio::sync::mpsc;

use super::config::Config;
use super::ippool::IpPool;
use super::raw_pod::RawPod;

/// The controller's client, clock, settings and IP pool, shared with its
/// jobs and lease task.
pub(super) struct Shared {
    pub(super) client: Client,
    pub(super) clock: Clock,
    pub(super) config: Config,
    pub(super) ips: Mutex<IpPool>,
    /// Objects fed back to the controller task.
    pub(super) feedback: mpsc::UnboundedSender<Change>,
}

/// One input of the controller task.
pub(super) enum Change {
    Pod(Box<Event<RawPod>>),
    Node(Box<Event<Node>>),
    Stage(Box<Event<DynamicObject>>),
    /// The lease task's verdict on a node.
    Lease {
        node: String,
        held: bool,
    },
    /// An object to run through stage selection again (`immediateNextStage`,
    /// pods relisted after a lease was taken back).
    Reevaluate(Box<Value>),
}

/// Messages to the lease task.
pub(super) enum LeaseMsg {
    Manage { node: String, uid: String },
    Forget(String),
}

/// `Kind namespace/name` of an object, for logs.
pub(super) fn describe(obj: &Value) -> String {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("object");
    let ns = obj.lookup("/metadata/namespace").and_then(Value::as_str);
    let name = obj
        .lookup("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    match ns {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}
