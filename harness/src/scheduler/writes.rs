//! A pass's writes: bindings (with their claims' PreBind writes) and
//! `PodScheduled=False` conditions, `CONCURRENCY` at a time, each write a
//! task of its own (kube-scheduler binds and updates pods from goroutines
//! of their own). The in-memory API server does a request's work in the
//! task that awaits it, so writes awaited inside the scheduler's task
//! would put the API server's work for every pass on one thread; as tasks
//! they run on any of the runtime's threads. The pass still waits for its
//! writes before the next one starts.

use futures::StreamExt;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use simclock::Clock;

use super::{Bind, Mark, dra, events};

/// How many bindings, and how many status patches, are in flight at once.
const CONCURRENCY: usize = 32;

/// What the writes need, owned (cheap to clone).
#[derive(Clone)]
pub(super) struct Writer {
    client: Client,
    clock: Clock,
    events: events::Recorder,
}

impl Writer {
    /// A writer through `client`, stamping events with `clock`.
    pub(super) fn new(client: Client, clock: Clock) -> Self {
        Self {
            events: events::Recorder::new(client.clone()),
            client,
            clock,
        }
    }

    /// Binds a pass's pods and returns the binds that failed.
    pub(super) async fn binds(&self, binds: Vec<Bind>) -> Vec<Bind> {
        futures::stream::iter(binds)
            .map(|b| {
                let w = self.clone();
                tokio::spawn(simclock::busy::timed("scheduler", async move {
                    if dra::prebind(&w.client, &b.claims).await && w.bind(&b.key, &b.node).await {
                        let message = format!("Successfully assigned {} to {}", b.key, b.node);
                        w.event(&b.entry.pod, "Normal", "Scheduled", message);
                        None
                    } else {
                        Some(b)
                    }
                }))
            })
            .buffer_unordered(CONCURRENCY)
            .filter_map(|done| async move {
                match done {
                    Ok(failed) => failed,
                    Err(e) => {
                        tracing::warn!("scheduler: a binding task failed: {e}");
                        None
                    }
                }
            })
            .collect()
            .await
    }

    /// Writes a pass's `PodScheduled=False` conditions, each with its
    /// `FailedScheduling` event.
    pub(super) async fn marks(&self, marks: Vec<Mark>) {
        futures::stream::iter(marks)
            .map(|m| {
                let w = self.clone();
                tokio::spawn(simclock::busy::timed("scheduler", async move {
                    w.mark(m).await;
                }))
            })
            .buffer_unordered(CONCURRENCY)
            .for_each(|done| async move {
                if let Err(e) = done {
                    tracing::warn!("scheduler: a status task failed: {e}");
                }
            })
            .await;
    }

    /// Records a core/v1 Event from `default-scheduler` on a pod, stamped
    /// now and written in the background ([`events`]): events never hold
    /// up scheduling.
    fn event(
        &self,
        pod: &k8s_openapi::api::core::v1::Pod,
        type_: &'static str,
        reason: &'static str,
        message: String,
    ) {
        self.events
            .record(pod, type_, reason, message, self.clock.rfc3339());
    }

    async fn bind(&self, key: &str, node: &str) -> bool {
        let (ns, name) = key.split_once('/').unwrap_or(("default", key));
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": ns},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}
        });
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(self.client.clone(), ns);
        match api
            .create_subresource::<_, serde_json::Value>(
                "binding",
                name,
                &PostParams::default(),
                &binding,
            )
            .await
        {
            Ok(_) => true,
            Err(e) => {
                tracing::debug!("binding pod {ns}/{name} to node {node} failed: {e}");
                false
            }
        }
    }

    async fn mark(&self, m: Mark) {
        let (ns, name) = m.key.split_once('/').unwrap_or(("default", &m.key));
        self.event(&m.pod, "Warning", "FailedScheduling", m.message.clone());
        // As kube-scheduler: a new message keeps the time the condition
        // last changed status.
        let since = m
            .pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
            .filter(|c| c.status == "False")
            .and_then(|c| c.last_transition_time.as_ref())
            .map_or_else(|| self.clock.rfc3339(), |t| t.0.to_string());
        let mut status = json!({"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": m.reason.as_str(),
            "message": m.message, "lastProbeTime": null,
            "lastTransitionTime": since,
        }]});
        if let Some(n) = &m.nominated {
            status["nominatedNodeName"] = json!(n);
        }
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(self.client.clone(), ns);
        let patch = Patch::Strategic(json!({"status": status}));
        if let Err(e) = api
            .patch_status(name, &PatchParams::default(), &patch)
            .await
        {
            tracing::debug!("marking pod {} unschedulable failed: {e}", m.key);
        }
    }
}
