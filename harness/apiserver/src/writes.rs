//! The writes of the clients under test, in the order they reached the
//! store, each with the client that made it: what a scenario reads to tell
//! which of two autoscaler replicas acted, and when. (kube-apiserver's audit
//! log, reduced to that.)
//!
//! A client under test is named by how it reaches the server: an in-memory
//! client by the name given to [`crate::ApiServer::client_under_test_named`],
//! a client over TLS by the endpoint it was served on (each autoscaler
//! binary of a scenario gets an endpoint of its own). Reads are not kept,
//! nor writes a fault answered instead of the store; writes the store
//! refused (a conflict, a validation error) are kept as attempts.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::rbac::Attributes;

/// The most writes kept; older ones are dropped first (a long `testbed up`
/// does not grow without bound).
pub const KEPT: usize = 100_000;

/// One write.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    /// When it reached the store (the server's clock).
    pub at: SystemTime,
    /// The client that made it.
    pub client: Arc<str>,
    /// `create`, `update`, `patch`, `delete` or `deletecollection`.
    pub verb: &'static str,
    /// The resource, with its subresource (`pods/eviction`, `nodes`).
    pub resource: String,
    /// Namespace (`""` for cluster scope).
    pub namespace: String,
    /// Object name (`""` for a create, whose name is in the body).
    pub name: String,
    /// Whether the store took it (a 2xx answer); else an attempt refused.
    pub done: bool,
}

/// The log of writes.
#[derive(Debug, Default)]
pub struct Writes {
    log: Mutex<VecDeque<Write>>,
}

impl Writes {
    /// Records a request of `client` if it writes (read `at` then), and
    /// whether the store took it.
    pub fn record(
        &self,
        client: &Arc<str>,
        attrs: &Attributes,
        at: impl FnOnce() -> SystemTime,
        done: bool,
    ) {
        if !matches!(
            attrs.verb,
            "create" | "update" | "patch" | "delete" | "deletecollection"
        ) {
            return;
        }
        let resource = match &attrs.subresource {
            Some(s) => format!("{}/{s}", attrs.resource),
            None => attrs.resource.clone(),
        };
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() == KEPT {
            log.pop_front();
        }
        log.push_back(Write {
            at: at(),
            client: client.clone(),
            verb: attrs.verb,
            resource,
            namespace: attrs.namespace.clone(),
            name: attrs.name.clone(),
            done,
        });
    }

    /// Every write kept, oldest first.
    pub fn all(&self) -> Vec<Write> {
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        log.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn attrs(verb: &'static str, sub: Option<&str>) -> Attributes {
        Attributes {
            verb,
            group: String::new(),
            resource: "pods".into(),
            subresource: sub.map(str::to_string),
            namespace: "default".into(),
            name: "web-1".into(),
        }
    }

    #[test]
    fn only_writes_are_kept_in_order_with_their_client() {
        let w = Writes::default();
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let t = SystemTime::UNIX_EPOCH;
        w.record(&a, &attrs("get", None), || t, true);
        w.record(&a, &attrs("watch", None), || t, true);
        w.record(&a, &attrs("create", Some("eviction")), || t, false);
        w.record(&b, &attrs("delete", None), || t, true);
        let all = w.all();
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(
            (&*all[0].client, all[0].resource.as_str()),
            ("a", "pods/eviction")
        );
        assert!(!all[0].done);
        assert_eq!((&*all[1].client, all[1].verb), ("b", "delete"));
    }

    #[test]
    fn the_oldest_writes_go_first_past_the_limit() {
        let w = Writes::default();
        let a: Arc<str> = "a".into();
        for _ in 0..KEPT + 2 {
            w.record(&a, &attrs("patch", None), || SystemTime::UNIX_EPOCH, true);
        }
        assert_eq!(w.all().len(), KEPT);
    }
}
