//! kube-controller-manager's resourceclaim controller: ResourceClaims for
//! pods that ask for one from a ResourceClaimTemplate, and the end of a
//! claim's use.
//!
//! - A pod (not finished, not being deleted) whose `spec.resourceClaims`
//!   entry names a template and has no `status.resourceClaimStatuses`
//!   entry gets a claim made from the template: `generateName
//!   <pod>-<entry>-`, the template's labels and annotations plus
//!   `resource.kubernetes.io/pod-claim-name: <entry>`, the template's
//!   spec, owned by the pod (controller); a claim it already made (owned by
//!   the pod, with that annotation) is reused. The pod's status then lists
//!   it. A missing template is a `FailedResourceClaimCreation` warning on
//!   the pod.
//! - A claim's `status.reservedFor` loses the pods that are gone or
//!   finished; with no consumer left, its allocation is cleared
//!   (deallocation). A claim made for a finished pod and used by no one is
//!   deleted (the garbage collector deletes those of deleted pods).
//!
//! Cleanup waits until the pod and claim watches have both listed, so a
//! claim seen before its pod is not mistaken for an orphan.

use std::collections::{BTreeMap, HashMap, HashSet};

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use simclock::Clock;

use crate::slim_pod::{BarePod, into_pod_event};

/// The annotation naming the pod's claim entry a generated claim is for.
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";

enum Change {
    Pod(Box<Event<Pod>>),
    Claim(Event<DynamicObject>),
    Template(Event<DynamicObject>),
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("resource.k8s.io", "v1", kind),
        plural,
    )
}

fn claims_resource() -> ApiResource {
    resource("ResourceClaim", "resourceclaims")
}

fn key_of(ns: Option<&str>, name: &str) -> String {
    format!("{}/{name}", ns.unwrap_or("default"))
}

/// The controller.
pub struct ResourceClaimController {
    client: Client,
    clock: Clock,
    pods: HashMap<String, Pod>,
    claims: HashMap<String, Value>,
    templates: HashMap<String, Value>,
    /// Claims created for (pod uid, entry) whose watch event has not come.
    made: HashMap<(String, String), String>,
    /// Claims by (owner pod uid, entry), from the watch.
    owned: HashMap<(String, String), String>,
    /// Pods changed since the last reconcile.
    dirty: HashSet<String>,
    /// A pod went or finished, or a claim changed, since the last release.
    release: bool,
    /// Pod and claim watches that have listed.
    synced: HashSet<&'static str>,
}

impl ResourceClaimController {
    /// A controller talking to the API server through `client`.
    pub fn new(client: Client, clock: Clock) -> Self {
        Self {
            client,
            clock,
            pods: HashMap::new(),
            claims: HashMap::new(),
            templates: HashMap::new(),
            made: HashMap::new(),
            owned: HashMap::new(),
            dirty: HashSet::new(),
            release: true,
            synced: HashSet::new(),
        }
    }

    /// Runs until the watches end.
    pub async fn run(mut self) {
        let pods: BoxStream<'static, Change> = watcher::watcher(
            Api::<BarePod>::all(self.client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .filter_map(|e| async move { e.ok().map(|e| Change::Pod(Box::new(into_pod_event(e)))) })
        .boxed();
        let dynamic = |r: ApiResource, wrap: fn(Event<DynamicObject>) -> Change| {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &r);
            watcher::watcher(api, watcher::Config::default())
                .default_backoff()
                .filter_map(move |e| async move { e.ok().map(wrap) })
                .boxed()
        };
        let claims = dynamic(claims_resource(), Change::Claim);
        let templates = dynamic(
            resource("ResourceClaimTemplate", "resourceclaimtemplates"),
            Change::Template,
        );
        let mut changes = futures::stream::select_all([pods, claims, templates]);
        while let Some(change) = changes.next().await {
            self.apply(change);
            while let Some(Some(c)) = futures::FutureExt::now_or_never(changes.next()) {
                self.apply(c);
            }
            self.reconcile().await;
        }
    }

    fn apply(&mut self, change: Change) {
        match change {
            Change::Pod(ev) => match *ev {
                Event::Apply(p) | Event::InitApply(p) => {
                    let key = key_of(p.metadata.namespace.as_deref(), &p.name_any());
                    // Only a pod that references claims makes claims or
                    // is in a claim's reservedFor: the others (most, at
                    // scale) are not kept.
                    if !predicates::dynamicresources::has_claims(&p) {
                        self.pods.remove(&key);
                        return;
                    }
                    self.release |= is_finished(&p);
                    self.dirty.insert(key.clone());
                    self.pods.insert(key, p);
                }
                Event::Delete(p) => {
                    self.pods
                        .remove(&key_of(p.metadata.namespace.as_deref(), &p.name_any()));
                    self.release = true;
                }
                Event::InitDone => {
                    self.synced.insert("pods");
                }
                Event::Init => {}
            },
            Change::Claim(ev) => {
                self.release = true;
                match ev {
                    Event::Apply(o) | Event::InitApply(o) => {
                        let key = key_of(o.metadata.namespace.as_deref(), &o.name_any());
                        let value = serde_json::to_value(&o).unwrap_or(Value::Null);
                        if let Some(owner) = owner_entry(&value) {
                            self.owned.insert(owner, o.name_any());
                        }
                        self.claims.insert(key, value);
                    }
                    Event::Delete(o) => {
                        let key = key_of(o.metadata.namespace.as_deref(), &o.name_any());
                        if let Some(old) = self.claims.remove(&key)
                            && let Some(owner) = owner_entry(&old)
                        {
                            self.owned.remove(&owner);
                        }
                    }
                    Event::InitDone => {
                        self.synced.insert("claims");
                    }
                    Event::Init => {}
                }
            }
            Change::Template(ev) => match ev {
                Event::Apply(o) | Event::InitApply(o) => {
                    let key = key_of(o.metadata.namespace.as_deref(), &o.name_any());
                    self.templates
                        .insert(key, serde_json::to_value(&o).unwrap_or(Value::Null));
                }
                Event::Delete(o) => {
                    self.templates
                        .remove(&key_of(o.metadata.namespace.as_deref(), &o.name_any()));
                }
                Event::Init | Event::InitDone => {}
            },
        }
    }

    async fn reconcile(&mut self) {
        let dirty = std::mem::take(&mut self.dirty);
        let pods: Vec<Pod> = dirty
            .iter()
            .filter_map(|k| self.pods.get(k))
            .filter(|p| wants_template_claims(p))
            .cloned()
            .collect();
        for p in pods {
            self.make_claims(&p).await;
        }
        if self.synced.len() == 2 && std::mem::take(&mut self.release) {
            self.release_claims().await;
        }
    }

    /// Makes the pod's missing template claims and lists them in its status.
    async fn make_claims(&mut self, pod: &Pod) {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.name_any();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut statuses: BTreeMap<String, String> = pod
            .status
            .iter()
            .flat_map(|s| s.resource_claim_statuses.iter().flatten())
            .filter_map(|s| Some((s.name.clone(), s.resource_claim_name.clone()?)))
            .collect();
        let before = statuses.len();
        let entries = pod
            .spec
            .iter()
            .flat_map(|s| s.resource_claims.iter().flatten());
        for e in entries {
            let Some(template) = &e.resource_claim_template_name else {
                continue;
            };
            if statuses.contains_key(&e.name) {
                continue;
            }
            let existing = self
                .owned_claim(&uid, &e.name)
                .or_else(|| self.made.get(&(uid.clone(), e.name.clone())).cloned());
            let claim = match existing {
                Some(c) => c,
                None => match self.create_claim(pod, &e.name, template).await {
                    Ok(c) => c,
                    Err(message) => {
                        let message = format!("PodResourceClaim {}: {message}", e.name);
                        self.warn(pod, &message).await;
                        continue;
                    }
                },
            };
            statuses.insert(e.name.clone(), claim);
        }
        if statuses.len() == before {
            return;
        }
        let list: Vec<Value> = statuses
            .iter()
            .map(|(n, c)| json!({"name": n, "resourceClaimName": c}))
            .collect();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let patch = Patch::Merge(json!({"status": {"resourceClaimStatuses": list}}));
        if let Err(e) = api
            .patch_status(&name, &PatchParams::default(), &patch)
            .await
        {
            tracing::debug!("resourceclaim: pod {ns}/{name} status: {e}");
        }
    }

    /// The name of a claim the pod already owns for its entry.
    fn owned_claim(&self, pod_uid: &str, entry: &str) -> Option<String> {
        self.claims.values().find_map(|c| {
            let owned = c["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|o| {
                    o.iter()
                        .any(|r| r["uid"] == pod_uid && r["controller"] == true)
                });
            let for_entry = c["metadata"]["annotations"][POD_CLAIM_NAME_ANNOTATION] == entry;
            (owned && for_entry).then(|| c["metadata"]["name"].as_str().unwrap_or("").to_string())
        })
    }

    /// Creates the claim of `entry` from `template`; its name, or why not.
    async fn create_claim(
        &mut self,
        pod: &Pod,
        entry: &str,
        template: &str,
    ) -> Result<String, String> {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let Some(t) = self.templates.get(&key_of(Some(&ns), template)) else {
            return Err(format!(
                "resource claim template {template:?}: resourceclaimtemplate.resource.k8s.io {template:?} not found"
            ));
        };
        let pod_name = pod.name_any();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut annotations = t["spec"]["metadata"]["annotations"].clone();
        if !annotations.is_object() {
            annotations = json!({});
        }
        annotations[POD_CLAIM_NAME_ANNOTATION] = json!(entry);
        let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"generateName": generate_name(&pod_name, entry), "namespace": ns,
                "labels": t["spec"]["metadata"]["labels"], "annotations": annotations,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name,
                    "uid": uid, "controller": true, "blockOwnerDeletion": true}]},
            "spec": t["spec"]["spec"]});
        let obj: DynamicObject = serde_json::from_value(claim).map_err(|e| e.to_string())?;
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &ns, &claims_resource());
        let made = api
            .create(&PostParams::default(), &obj)
            .await
            .map_err(|e| e.to_string())?;
        let name = made.name_any();
        self.made.insert((uid, entry.to_string()), name.clone());
        Ok(name)
    }

    /// Drops gone and finished pods from `reservedFor`, deallocates
    /// unused claims, deletes unused claims of finished pods.
    async fn release_claims(&mut self) {
        let live: HashMap<String, bool> = self
            .pods
            .values()
            .map(|p| (p.metadata.uid.clone().unwrap_or_default(), is_finished(p)))
            .collect();
        let mut writes = Vec::new();
        let mut deletes = Vec::new();
        for (key, c) in &self.claims {
            let reserved = c["status"]["reservedFor"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let kept: Vec<Value> = reserved
                .iter()
                .filter(|r| {
                    let uid = r["uid"].as_str().unwrap_or("");
                    r["resource"] != "pods" || live.get(uid) == Some(&false)
                })
                .cloned()
                .collect();
            let allocated = !c["status"]["allocation"].is_null();
            if kept.len() != reserved.len() || (kept.is_empty() && allocated) {
                let status = if kept.is_empty() {
                    json!({"reservedFor": null, "allocation": null})
                } else {
                    json!({"reservedFor": kept})
                };
                writes.push((key.clone(), status));
            }
            let owner_finished = c["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["kind"] == "Pod" && r["controller"] == true)
                .any(|r| live.get(r["uid"].as_str().unwrap_or("")) == Some(&true));
            if owner_finished && kept.is_empty() {
                deletes.push(key.clone());
            }
        }
        for (key, status) in writes {
            let (ns, name) = key.split_once('/').unwrap_or(("default", &key));
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), ns, &claims_resource());
            let patch = Patch::Merge(json!({"status": status}));
            if let Err(e) = api
                .patch_status(name, &PatchParams::default(), &patch)
                .await
            {
                tracing::debug!("resourceclaim: releasing claim {key}: {e}");
            }
        }
        for key in deletes {
            let (ns, name) = key.split_once('/').unwrap_or(("default", &key));
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client.clone(), ns, &claims_resource());
            if let Err(e) = api.delete(name, &DeleteParams::default()).await {
                tracing::debug!("resourceclaim: deleting claim {key}: {e}");
            }
        }
    }

    /// A `FailedResourceClaimCreation` warning on the pod.
    async fn warn(&self, pod: &Pod, message: &str) {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.name_any();
        let now = self.clock.rfc3339();
        let event = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": format!("{name}."), "namespace": ns},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name,
                "namespace": ns, "uid": pod.metadata.uid},
            "type": "Warning", "reason": "FailedResourceClaimCreation", "message": message,
            "source": {"component": "resource_claim"},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1});
        let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(self.client.clone(), &ns);
        if let Ok(ev) = serde_json::from_value(event)
            && let Err(e) = api.create(&PostParams::default(), &ev).await
        {
            tracing::debug!("resourceclaim: event on {ns}/{name}: {e}");
        }
    }
}

/// The (pod uid, entry) a claim was made for: its controller pod and its
/// `pod-claim-name` annotation.
fn owner_entry(claim: &Value) -> Option<(String, String)> {
    let entry = claim["metadata"]["annotations"][POD_CLAIM_NAME_ANNOTATION].as_str()?;
    let owner = claim["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["kind"] == "Pod" && r["controller"] == true)?;
    Some((owner["uid"].as_str()?.to_string(), entry.to_string()))
}

/// A pod the controller makes claims for: one with a template entry, not
/// finished, not being deleted.
fn wants_template_claims(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && !is_finished(pod)
        && pod
            .spec
            .iter()
            .flat_map(|s| s.resource_claims.iter().flatten())
            .any(|c| c.resource_claim_template_name.is_some())
}

fn is_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// `<pod>-<entry>-`, both cut in proportion when longer than 57
/// characters together (the API server adds 5 random characters).
fn generate_name(pod: &str, entry: &str) -> String {
    const MAX: usize = 57;
    let (mut p, mut e) = (pod.len(), entry.len());
    if p + e + 1 > MAX {
        let budget = MAX - 1;
        p = (budget * p / (p + e)).max(1);
        e = budget - p;
    }
    let cut = |s: &str, n: usize| s.chars().take(n).collect::<String>();
    format!("{}-{}-", cut(pod, p), cut(entry, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_fit_the_limit() {
        assert_eq!(generate_name("pod", "gpu"), "pod-gpu-");
        let long = generate_name(&"p".repeat(60), &"c".repeat(20));
        assert!(long.len() <= 59, "{long}");
        assert!(long.starts_with("ppp") && long.ends_with("c-"));
    }
}
