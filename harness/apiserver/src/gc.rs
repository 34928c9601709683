//! The control loops that live with the API server in a real control plane
//! and that its deletion semantics depend on: the garbage collector
//! (ownerReferences, background, foreground and orphan propagation), the
//! namespace lifecycle controller (deleting a namespace's content, then the
//! namespace) and the disruption controller's status refresh for budgets
//! whose pods changed.
//!
//! They watch the store like any controller and act through the same
//! operations as clients do; each change is handled in commit order.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use apimachinery::json::Lookup;
use apimachinery::labels::Labels;
use std::sync::{Arc, Weak};

use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::registry::GroupResource;
use crate::server::{DeleteOptions, Server, Subresource, WriteOptions};
use crate::store::{ChangeType, Stored, WatchFrom, WatchItem};

/// How many times the disruption controller's refresh lets the other
/// ready tasks run before it refreshes: a burst of pod updates (kwok
/// starting thousands of pods) then refreshes each budget a few times,
/// not once per pod, and no timer is added (virtual time does not move).
const BUDGET_REFRESH_YIELDS: usize = 16;

/// Starts the loops; they stop when the server is dropped.
pub fn spawn(server: &Arc<Server>) -> JoinHandle<()> {
    let from = WatchFrom::Version(server.store.current_rv());
    let watch = server.store.watch(None, None, from);
    let weak: Weak<Server> = Arc::downgrade(server);
    let budgets = spawn_budget_refresher(weak.clone());
    tokio::spawn(simclock::busy::timed("apiserver", async move {
        let Ok((id, mut rx, _)) = watch else {
            return;
        };
        // Each pod's labels as last seen, so that a budget a pod's labels
        // leave is refreshed too.
        let mut labels: HashMap<String, Labels> = HashMap::new();
        while let Some(item) = rx.recv().await {
            let Some(server) = weak.upgrade() else {
                break;
            };
            let WatchItem::Change(change) = item else {
                continue;
            };
            let mut dirty = BTreeMap::new();
            handle(
                &server,
                &change.gr,
                change.kind,
                &change.obj,
                &mut dirty,
                &mut labels,
            );
            // Batch what is already queued before refreshing budgets.
            while let Ok(WatchItem::Change(c)) = rx.try_recv() {
                handle(&server, &c.gr, c.kind, &c.obj, &mut dirty, &mut labels);
            }
            if !dirty.is_empty() && budgets.send(dirty).is_err() {
                break;
            }
        }
        if let Some(server) = weak.upgrade() {
            server.store.unwatch(id);
        }
    }))
}

/// The disruption controller's status refresh: what the loop found dirty,
/// gathered while the other ready tasks run ([`BUDGET_REFRESH_YIELDS`]),
/// then each budget concerned refreshed once.
fn spawn_budget_refresher(
    weak: Weak<Server>,
) -> tokio::sync::mpsc::UnboundedSender<BTreeMap<String, Changed>> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<BTreeMap<String, Changed>>();
    tokio::spawn(simclock::busy::timed("apiserver", async move {
        while let Some(first) = rx.recv().await {
            // Let the tasks that are ready (kwok, the scheduler, the
            // controllers) run first: their changes join this refresh.
            for _ in 0..BUDGET_REFRESH_YIELDS {
                tokio::task::yield_now().await;
            }
            let mut dirty = first;
            while let Ok(more) = rx.try_recv() {
                for (ns, changed) in more {
                    merge(&mut dirty, ns, changed);
                }
            }
            let Some(server) = weak.upgrade() else {
                break;
            };
            for (ns, changed) in dirty {
                let pods = match &changed {
                    Changed::Budgets => None,
                    Changed::Pods(pods) => Some(pods),
                };
                if let Err(e) = server.refresh_budgets_of(&ns, pods) {
                    tracing::warn!(namespace = %ns, error = %e, "refreshing PodDisruptionBudget status failed");
                }
            }
        }
    }));
    tx
}

/// Adds a namespace's change to what is dirty: every budget wins over
/// some, pods' label sets add up.
fn merge(dirty: &mut BTreeMap<String, Changed>, ns: String, changed: Changed) {
    match (dirty.get_mut(&ns), changed) {
        (Some(Changed::Budgets), _) => {}
        (Some(Changed::Pods(sets)), Changed::Pods(more)) => sets.extend(more),
        (_, changed) => {
            dirty.insert(ns, changed);
        }
    }
}

/// What a namespace's budgets must be refreshed for.
enum Changed {
    /// A budget changed: every budget of the namespace.
    Budgets,
    /// Pods changed, with these labels (now and before): the budgets that
    /// select any of them. A set: the pods of one workload share theirs,
    /// and a load of 300,000 pods must not compare each with every other.
    Pods(BTreeSet<Labels>),
}

fn handle(
    server: &Server,
    gr: &GroupResource,
    kind: ChangeType,
    obj: &Stored,
    dirty: &mut BTreeMap<String, Changed>,
    labels: &mut HashMap<String, Labels>,
) {
    let pods = gr.group.is_empty() && gr.resource == "pods";
    let pdbs = gr.group == "policy" && gr.resource == "poddisruptionbudgets";
    if pods && !obj.namespace.is_empty() {
        let before = if kind == ChangeType::Deleted {
            labels.remove(&obj.uid)
        } else {
            labels.insert(obj.uid.clone(), obj.labels.clone())
        };
        let entry = dirty
            .entry(obj.namespace.clone())
            .or_insert_with(|| Changed::Pods(BTreeSet::new()));
        if let Changed::Pods(sets) = entry {
            if let Some(before) = before.filter(|b| *b != obj.labels) {
                sets.insert(before);
            }
            if !sets.contains(&obj.labels) {
                sets.insert(obj.labels.clone());
            }
        }
    }
    if pdbs
        && kind != ChangeType::Deleted
        && !status_written_by_us(obj)
        && !obj.namespace.is_empty()
    {
        dirty.insert(obj.namespace.clone(), Changed::Budgets);
    }
    match kind {
        ChangeType::Deleted => {
            // Dependents whose every owner is gone are collected.
            for (dgr, (ns, name)) in server.store.dependents(&obj.uid) {
                if let Some(dep) = server.store.get(&dgr, &ns, &name)
                    && dep.owners.iter().all(|o| !server.store.uid_exists(o))
                {
                    delete(server, &dgr, &ns, &name, "Background");
                }
            }
            // Owners waiting in foreground deletion may now be unblocked.
            for owner in &obj.owners {
                if let Some((ogr, (ns, name))) = server.store.locate(owner)
                    && let Some(o) = server.store.get(&ogr, &ns, &name)
                {
                    process_deleting(server, &ogr, &o);
                }
            }
            if !obj.namespace.is_empty() {
                let nsgr = GroupResource::new("", "namespaces");
                if let Some(n) = server.store.get(&nsgr, "", &obj.namespace) {
                    process_deleting(server, &nsgr, &n);
                }
            }
        }
        ChangeType::Added | ChangeType::Modified => {
            if kind == ChangeType::Added
                && !obj.owners.is_empty()
                && obj.owners.iter().all(|o| !server.store.uid_exists(o))
            {
                delete(server, gr, &obj.namespace, &obj.name, "Background");
                return;
            }
            process_deleting(server, gr, obj);
        }
    }
}

/// A budget whose status already reflects its spec: the change was our own
/// status write and must not trigger another refresh.
fn status_written_by_us(obj: &Stored) -> bool {
    let v = obj.value();
    v.lookup("/status/observedGeneration").is_some()
        && v.lookup("/status/observedGeneration") == v.lookup("/metadata/generation")
}

fn delete(server: &Server, gr: &GroupResource, ns: &str, name: &str, policy: &str) {
    let Some(def) = server.registry.by_gr(gr) else {
        return;
    };
    let opts = DeleteOptions {
        propagation_policy: Some(policy.into()),
        ..Default::default()
    };
    match server.delete(&def, ns, name, &opts) {
        Ok(_) => {}
        Err(e) if e.code == 404 => {}
        Err(e) => {
            tracing::warn!(resource = %gr, namespace = ns, name, error = %e, "garbage collector could not delete")
        }
    }
}

fn finalizers(v: &Value) -> Vec<String> {
    v.lookup("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.finalizers` of a stored object's JSON, its strings as
/// [`finalizers`] reads them (the other fields are skipped, not parsed into
/// values).
fn stored_finalizers(json: &[u8]) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Object {
        #[serde(default)]
        metadata: Option<Metadata>,
    }
    #[derive(serde::Deserialize)]
    struct Metadata {
        #[serde(default)]
        finalizers: Option<Vec<Value>>,
    }
    serde_json::from_slice::<Object>(json)
        .ok()
        .and_then(|o| o.metadata?.finalizers)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|f| match f {
            Value::String(s) => Some(s),
            _ => None,
        })
        .collect()
}

/// Objects being deleted with `foregroundDeletion` or `orphan` finalizers,
/// and namespaces being terminated.
fn process_deleting(server: &Server, gr: &GroupResource, obj: &Stored) {
    if !obj.deleting {
        return;
    }
    if gr.group.is_empty() && gr.resource == "namespaces" {
        terminate_namespace(server, &obj.name, &obj.value());
        return;
    }
    // Most objects being deleted are pods in their grace period: their
    // finalizers are read without parsing the rest.
    let fins = stored_finalizers(&obj.json);
    if fins.iter().any(|f| f == "orphan") {
        for (dgr, (ns, name)) in server.store.dependents(&obj.uid) {
            let Some(def) = server.registry.by_gr(&dgr) else {
                continue;
            };
            let patch = json!({"metadata": {"ownerReferences": null}});
            let Some(dep) = server.store.get(&dgr, &ns, &name) else {
                continue;
            };
            let refs: Vec<Value> = dep
                .value()
                .lookup("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter(|r| r.get("uid").and_then(Value::as_str) != Some(&obj.uid))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            let body = if refs.is_empty() {
                patch
            } else {
                json!({"metadata": {"ownerReferences": refs}})
            };
            let res = server.patch(
                &def,
                &ns,
                &name,
                crate::server::PatchType::Merge,
                body.to_string().as_bytes(),
                Subresource::Main,
                &WriteOptions::default(),
                "garbage-collector",
            );
            if let Err(e) = res {
                tracing::warn!(namespace = %ns, name = %name, error = %e, "orphaning a dependent failed");
            }
        }
        remove_finalizer(server, gr, obj, "orphan");
        return;
    }
    if fins.iter().any(|f| f == "foregroundDeletion") {
        let mut blocking = false;
        for (dgr, (ns, name)) in server.store.dependents(&obj.uid) {
            let Some(dep) = server.store.get(&dgr, &ns, &name) else {
                continue;
            };
            let dv = dep.value();
            let blocks = dv
                .lookup("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|refs| {
                    refs.iter().any(|r| {
                        r.get("uid").and_then(Value::as_str) == Some(&obj.uid)
                            && r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
                    })
                });
            if dv.lookup("/metadata/deletionTimestamp").is_none() {
                delete(server, &dgr, &ns, &name, "Foreground");
            }
            // Still there after the delete call: it blocks if it says so.
            if blocks && server.store.get(&dgr, &ns, &name).is_some() {
                blocking = true;
            }
        }
        if !blocking {
            remove_finalizer(server, gr, obj, "foregroundDeletion");
        }
    }
}

fn remove_finalizer(server: &Server, gr: &GroupResource, obj: &Stored, finalizer: &str) {
    let Some(def) = server.registry.by_gr(gr) else {
        return;
    };
    let v = obj.value();
    let rest: Vec<String> = finalizers(&v)
        .into_iter()
        .filter(|f| f != finalizer)
        .collect();
    let patch = json!({"metadata": {"finalizers": rest, "resourceVersion": obj.rv.to_string()}});
    let res = server.patch(
        &def,
        &obj.namespace,
        &obj.name,
        crate::server::PatchType::Merge,
        patch.to_string().as_bytes(),
        Subresource::Main,
        &WriteOptions::default(),
        "garbage-collector",
    );
    match res {
        Ok(_) => {}
        // Changed meanwhile: the change comes back to us through the watch.
        Err(e) if e.code == 409 || e.code == 404 => {}
        Err(e) => {
            tracing::warn!(resource = %gr, name = %obj.name, error = %e, "removing finalizer {finalizer} failed")
        }
    }
}

/// Deletes everything in a terminating namespace, then finalizes it.
fn terminate_namespace(server: &Server, ns: &str, v: &Value) {
    let content = server.store.in_namespace(ns);
    if content.is_empty() {
        let has = v
            .lookup("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        if has && let Ok(def) = server.def("", "namespaces") {
            let mut body = v.clone();
            body["spec"]["finalizers"] = json!([]);
            match server.update(
                &def,
                "",
                ns,
                body,
                Subresource::Finalize,
                &WriteOptions::default(),
            ) {
                Ok(_) => {}
                Err(e) if e.code == 409 || e.code == 404 => {}
                Err(e) => {
                    tracing::warn!(namespace = ns, error = %e, "finalizing namespace failed")
                }
            }
        }
        return;
    }
    for (gr, (cns, name)) in content {
        if let Some(o) = server.store.get(&gr, &cns, &name)
            && !o.deleting
        {
            delete(server, &gr, &cns, &name, "Background");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn stored_finalizers_are_read_from_the_json() {
        let stored = json!({
            "metadata": {"name": "p", "finalizers": ["orphan", "example.com/x"]},
            "spec": {"containers": [{"name": "c"}]},
        });
        let json = serde_json::to_vec(&stored).unwrap();
        assert_eq!(stored_finalizers(&json), finalizers(&stored));
        assert_eq!(stored_finalizers(&json), ["orphan", "example.com/x"]);
        // A kind stored without a typed round trip may hold other values:
        // its strings count.
        let mixed = json!({"metadata": {"finalizers": ["orphan", 1, null, "foregroundDeletion"]}});
        let mixed_json = serde_json::to_vec(&mixed).unwrap();
        assert_eq!(stored_finalizers(&mixed_json), finalizers(&mixed));
        assert_eq!(
            stored_finalizers(&mixed_json),
            ["orphan", "foregroundDeletion"]
        );
        for none in [
            json!({"metadata": {"name": "p"}}),
            json!({"metadata": {"finalizers": null}}),
            json!({}),
        ] {
            assert!(
                stored_finalizers(&serde_json::to_vec(&none).unwrap()).is_empty(),
                "{none}"
            );
        }
    }
}
