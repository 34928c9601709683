//! Jobs: a Stage's delay has passed, so its actions run (patches rendered
//! from templates, deletions, events), retried while the API server is
//! unavailable. Jobs run as their own tasks and never touch the state.

use std::time::{Duration, SystemTime};

use apimachinery::json::Lookup;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::shared::{Change, Shared, describe};
use crate::stage::{Action, Compiled, PatchType};
use crate::template::{Context, Template};

/// Whether kwok retries a failed call: connection errors, timeouts, 429
/// and 503 (docs/reference/kwok-rules.md §1.3 step 6).
pub(super) fn retriable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => matches!(s.code, 429 | 503 | 504) || s.reason == "ServerTimeout",
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Runs a stage's actions; a retriable failure waits (1 s, doubling, 20 %
/// jitter, at most 32 min) and resumes at the failed action; any other
/// failure drops the job (the next watch event re-evaluates the object).
pub(super) async fn run_job(shared: &Shared, stage: &Compiled, obj: Value, node: Option<&Value>) {
    let mut from = 0;
    let mut backoff = Duration::from_secs(1);
    loop {
        match perform(shared, stage, &obj, node, from).await {
            Ok(patched) => {
                if stage.immediate_next_stage()
                    && let Some(obj) = patched
                {
                    let _ = shared.feedback.send(Change::Reevaluate(Box::new(obj)));
                }
                return;
            }
            Err((step, e)) if retriable(&e) => {
                tracing::debug!(
                    "kwok stage {} on {}: {e}; retrying in {backoff:?}",
                    stage.name(),
                    describe(&obj)
                );
                let jitter = backoff.mul_f64(fastrand::f64() * 0.2);
                tokio::time::sleep(backoff + jitter).await;
                backoff = (backoff * 2).min(Duration::from_secs(32 * 60));
                from = step;
            }
            Err((_, e)) => {
                tracing::debug!("kwok stage {} on {}: {e}", stage.name(), describe(&obj));
                return;
            }
        }
    }
}

/// Runs the actions from index `from`. Returns the last patched object, or
/// the index of the failed action with its error. After a delete, only
/// events are still recorded (as upstream does).
pub(super) async fn perform(
    shared: &Shared,
    stage: &Compiled,
    obj: &Value,
    node: Option<&Value>,
    from: usize,
) -> Result<Option<Value>, (usize, kube::Error)> {
    let target = Target::of(shared, stage.kind(), obj);
    let mut deleted = false;
    let mut patched = None;
    let actions = stage.actions();
    for (i, action) in actions.iter().enumerate().skip(from) {
        let fail = |e| (i, e);
        // The object a patch answers with is read only when a later patch
        // of the stage compares against it or the stage feeds it back.
        let read = stage.immediate_next_stage()
            || actions[i + 1..]
                .iter()
                .any(|a| matches!(a, Action::Patch { .. }));
        match action {
            Action::Event(ev) => {
                record_event(shared, obj, &ev.type_, &ev.reason, &ev.message).await;
            }
            _ if deleted => {}
            Action::Finalizers(f) => {
                let current: Vec<String> = obj
                    .lookup("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                let mut wanted: Vec<String> = if f.empty {
                    Vec::new()
                } else {
                    current
                        .iter()
                        .filter(|c| !f.remove.iter().any(|r| &r.value == *c))
                        .cloned()
                        .collect()
                };
                for a in &f.add {
                    if !wanted.contains(&a.value) {
                        wanted.push(a.value.clone());
                    }
                }
                if wanted != current {
                    let list = if wanted.is_empty() {
                        Value::Null
                    } else {
                        json!(wanted)
                    };
                    let patch = Patch::Merge(json!({"metadata": {"finalizers": list}}));
                    patched = target.patch(None, &patch, read).await.map_err(fail)?;
                }
            }
            Action::Patch {
                template,
                subresource,
                root,
                patch_type,
            } => {
                let rendered = render(shared, template, obj, node).map_err(fail)?;
                let current = patched.as_ref().unwrap_or(obj);
                if *patch_type != PatchType::Json {
                    let body = match root {
                        Some(root) => json!({ root.as_str(): &rendered }),
                        None => rendered.clone(),
                    };
                    if contained(&body, current, *patch_type == PatchType::Strategic) {
                        // Upstream skips patches that would not change the object.
                        continue;
                    }
                }
                let patch = build_patch(rendered, root.as_deref(), *patch_type).map_err(fail)?;
                patched = target
                    .patch(subresource.as_deref(), &patch, read)
                    .await
                    .map_err(fail)?;
            }
            Action::Delete => {
                let dp = DeleteParams::default().grace_period(0);
                match target.delete(&dp).await {
                    Ok(()) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err((i, e)),
                }
                deleted = true;
                patched = None;
            }
        }
    }
    Ok(patched)
}

/// Whether applying `patch` to `obj` would leave it unchanged: every field
/// of the patch is already there with the same value (`null` meaning
/// absent). In a strategic merge a list entry only has to be contained in
/// some entry of the object's list (entries merge by key); in a JSON merge
/// lists are replaced, so they must be equal.
pub(super) fn contained(patch: &Value, obj: &Value, strategic: bool) -> bool {
    match (patch, obj) {
        (Value::Object(p), Value::Object(o)) => p.iter().all(|(k, pv)| match o.get(k) {
            Some(ov) => contained(pv, ov, strategic),
            None => pv.is_null(),
        }),
        (Value::Array(p), Value::Array(o)) if strategic => p
            .iter()
            .all(|pe| o.iter().any(|oe| contained(pe, oe, strategic))),
        (Value::String(p), Value::String(o)) => {
            // Timestamps are stored with one-second precision.
            p == o
                || simclock::parse_rfc3339(p)
                    .zip(simclock::parse_rfc3339(o))
                    .is_some_and(|(a, b)| a == b)
        }
        (Value::Number(p), Value::Number(o)) => p.as_f64() == o.as_f64(),
        (p, o) => p == o,
    }
}

/// The API object a job acts on.
pub(super) struct Target {
    pub(super) api: Api<DynamicObject>,
    pub(super) name: String,
}

impl Target {
    pub(super) fn of(shared: &Shared, kind: &str, obj: &Value) -> Self {
        let name = obj
            .lookup("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let client = shared.client.clone();
        let api = if kind == "Pod" {
            let ns = obj
                .lookup("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("default");
            Api::namespaced_with(client, ns, &ApiResource::erase::<Pod>(&()))
        } else {
            Api::all_with(client, &ApiResource::erase::<Node>(&()))
        };
        Self { api, name }
    }

    /// Patches the object; with `read`, returns what the API server
    /// answers (read straight into a `Value`, what the stages work on, not
    /// through a `DynamicObject`), else only checks that it succeeded:
    /// decoding every answer was a good part of kwok's work in a burst.
    pub(super) async fn patch(
        &self,
        subresource: Option<&str>,
        patch: &Patch<Value>,
        read: bool,
    ) -> Result<Option<Value>, kube::Error> {
        let pp = PatchParams::default();
        let request = kube::core::Request::new(self.api.resource_url());
        let req = match subresource {
            Some(sub) => request.patch_subresource(sub, &self.name, &pp, patch),
            None => request.patch(&self.name, &pp, patch),
        }
        .map_err(kube::Error::BuildRequest)?;
        let client = self.api.clone().into_client();
        if read {
            client.request::<Value>(req).await.map(Some)
        } else {
            client.request_text(req).await.map(|_| None)
        }
    }

    /// Deletes the object; what the API server answers is not decoded.
    pub(super) async fn delete(&self, dp: &DeleteParams) -> Result<(), kube::Error> {
        let req = kube::core::Request::new(self.api.resource_url())
            .delete(&self.name, dp)
            .map_err(kube::Error::BuildRequest)?;
        let client = self.api.clone().into_client();
        client.request_text(req).await.map(drop)
    }
}

pub(super) fn render(
    shared: &Shared,
    template: &Template,
    obj: &Value,
    node: Option<&Value>,
) -> Result<Value, kube::Error> {
    let needs_ip = *template == Template::PodReady && obj.lookup("/status/podIP").is_none();
    let pod_ip = if needs_ip {
        shared
            .ips
            .lock()
            .ok()
            .map(|mut ips| ips.allocate(&shared.config.cidr))
    } else {
        obj.lookup("/status/podIP")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let ctx = Context {
        now: shared.clock.now(),
        start: SystemTime::UNIX_EPOCH,
        node_ip: &shared.config.node_ip,
        node_name: &shared.config.node_name,
        node_port: shared.config.node_port,
        node,
        pod_ip,
    };
    template.render(obj, &ctx).map_err(|e| {
        kube::Error::Service(format!("rendering the template of {}: {e}", describe(obj)).into())
    })
}

/// Wraps a rendered document under `root` (a JSON patch gets `/root`
/// prefixed to its paths) and builds the patch.
pub(super) fn build_patch(
    rendered: Value,
    root: Option<&str>,
    patch_type: PatchType,
) -> Result<Patch<Value>, kube::Error> {
    let bad = |m: String| kube::Error::Service(m.into());
    match patch_type {
        PatchType::Json => {
            let mut ops = match rendered {
                Value::Array(ops) => ops,
                other => {
                    return Err(bad(format!(
                        "a json patch template must render a list of operations, got {other}"
                    )));
                }
            };
            if let Some(root) = root {
                for op in &mut ops {
                    for field in ["path", "from"] {
                        if let Some(p) = op.get(field).and_then(Value::as_str) {
                            op[field] = json!(format!("/{root}{p}"));
                        }
                    }
                }
            }
            let ops: json_patch::Patch = serde_json::from_value(Value::Array(ops))
                .map_err(|e| bad(format!("invalid json patch: {e}")))?;
            Ok(Patch::Json(ops))
        }
        PatchType::Merge | PatchType::Strategic => {
            let body = match root {
                Some(root) => json!({ root: rendered }),
                None => rendered,
            };
            Ok(if patch_type == PatchType::Merge {
                Patch::Merge(body)
            } else {
                Patch::Strategic(body)
            })
        }
    }
}

pub(super) async fn record_event(
    shared: &Shared,
    obj: &Value,
    type_: &str,
    reason: &str,
    message: &str,
) {
    let ns = obj
        .lookup("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let now = shared.clock.rfc3339();
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": format!("{}.", obj.lookup("/metadata/name").and_then(Value::as_str).unwrap_or("x")), "namespace": ns},
        "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "name": obj.lookup("/metadata/name"), "namespace": obj.lookup("/metadata/namespace"), "uid": obj.lookup("/metadata/uid")},
        "type": type_, "reason": reason, "message": message,
        "source": {"component": "kwok_controller"},
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    });
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(shared.client.clone(), ns);
    match serde_json::from_value(event) {
        Ok(ev) => {
            if let Err(e) = api.create(&PostParams::default(), &ev).await {
                tracing::debug!("recording event {reason}: {e}");
            }
        }
        Err(e) => tracing::debug!("building event {reason}: {e}"),
    }
}
