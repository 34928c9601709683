//! The scheduler's DynamicResources state: DeviceClasses, ResourceClaims
//! and ResourceSlices (`resource.k8s.io/v1`) from watches, node-local
//! slices attached to their nodes, and the claims' status writes of
//! kube-scheduler's Reserve and PreBind: the allocation the filter found
//! and the pod in `status.reservedFor`, written before the pod is bound.
//! Between the pass that allocates and the watch that brings the write
//! back, the allocation is held in memory (in flight), so the next pods do
//! not take the same devices. A pod whose claims do not exist yet is not
//! tried (PreEnqueue): it stays Pending without a condition.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use predicates::NodeInfo;
use predicates::dynamicresources::api::{
    ConsumerReference, DeviceClass, ResourceClaim, ResourceSlice,
};
use predicates::dynamicresources::{ClaimRefusal, DraObjects};
use serde_json::json;

/// A watch event of a DRA kind.
pub(super) enum DraEvent {
    Class(Event<DynamicObject>),
    Claim(Event<DynamicObject>),
    Slice(Event<DynamicObject>),
}

/// `resource.k8s.io/v1` `kind`.
fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("resource.k8s.io", "v1", kind),
        plural,
    )
}

/// The watches of the DRA kinds.
pub(super) fn watches<C>(client: &Client, wrap: fn(DraEvent) -> C) -> Vec<BoxStream<'static, C>>
where
    C: Send + 'static,
{
    let watch = |kind: &str, plural: &str, ev: fn(Event<DynamicObject>) -> DraEvent| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource(kind, plural));
        watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .filter_map(move |e| async move { e.ok().map(|e| wrap(ev(e))) })
            .boxed()
    };
    vec![
        watch("DeviceClass", "deviceclasses", DraEvent::Class),
        watch("ResourceClaim", "resourceclaims", DraEvent::Claim),
        watch("ResourceSlice", "resourceslices", DraEvent::Slice),
    ]
}

/// An object of `kind` as the allocator reads it.
fn decode<T: serde::de::DeserializeOwned>(o: &DynamicObject) -> Option<T> {
    let value = serde_json::to_value(o).ok()?;
    match serde_json::from_value(value) {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::debug!("scheduler: undecodable {:?}: {e}", o.metadata.name);
            None
        }
    }
}

/// One claim's status write before a pod is bound.
#[derive(Debug, Clone)]
pub(super) struct ClaimWrite {
    /// The claim, with its new status.
    claim: Arc<ResourceClaim>,
    /// The claim as it was (restored when the pod is not bound).
    before: Arc<ResourceClaim>,
    /// The pod, as its entry in `status.reservedFor`.
    consumer: ConsumerReference,
}

/// The DRA objects the scheduler knows.
#[derive(Debug, Default)]
pub(super) struct DraState {
    /// Classes, claims (with in-flight allocations) and shared slices.
    pub objects: DraObjects,
    /// Slices by name.
    slices: HashMap<String, Arc<ResourceSlice>>,
}

impl DraState {
    /// Applies a watch event; node-local slices go to their node.
    pub(super) fn apply(&mut self, ev: DraEvent, nodes: &mut BTreeMap<String, NodeInfo>) {
        match ev {
            DraEvent::Class(Event::Apply(o) | Event::InitApply(o)) => {
                if let Some(c) = decode::<DeviceClass>(&o) {
                    self.objects
                        .classes
                        .insert(c.metadata.name.clone(), Arc::new(c));
                }
            }
            DraEvent::Class(Event::Delete(o)) => {
                self.objects
                    .classes
                    .remove(o.metadata.name.as_deref().unwrap_or(""));
            }
            DraEvent::Claim(Event::Apply(o) | Event::InitApply(o)) => {
                if let Some(c) = decode::<ResourceClaim>(&o) {
                    self.objects.insert_claim(Arc::new(c));
                }
            }
            DraEvent::Claim(Event::Delete(o)) => {
                let ns = o.metadata.namespace.as_deref().unwrap_or("default");
                let name = o.metadata.name.as_deref().unwrap_or("");
                self.objects.remove_claim(&format!("{ns}/{name}"));
            }
            DraEvent::Slice(Event::Apply(o) | Event::InitApply(o)) => {
                if let Some(s) = decode::<ResourceSlice>(&o) {
                    self.slices.insert(s.metadata.name.clone(), Arc::new(s));
                    self.attach(nodes);
                }
            }
            DraEvent::Slice(Event::Delete(o)) => {
                self.slices.remove(o.metadata.name.as_deref().unwrap_or(""));
                self.attach(nodes);
            }
            DraEvent::Class(_) | DraEvent::Claim(_) | DraEvent::Slice(_) => {}
        }
    }

    /// Gives every node its local slices, and keeps the others shared.
    fn attach(&mut self, nodes: &mut BTreeMap<String, NodeInfo>) {
        let mut local: HashMap<&str, Vec<Arc<ResourceSlice>>> = HashMap::new();
        let mut shared = Vec::new();
        for s in self.slices.values() {
            match s.spec.node_name.as_deref() {
                Some(n) if !n.is_empty() => local.entry(n).or_default().push(s.clone()),
                _ => shared.push(s.clone()),
            }
        }
        for (name, info) in nodes.iter_mut() {
            let mut slices = local.remove(name.as_str()).unwrap_or_default();
            slices.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            info.slices = slices;
        }
        shared.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        self.objects.shared_slices = shared;
    }

    /// PreEnqueue: why the pod may not be tried yet (a claim not created,
    /// missing or being deleted), if so.
    pub(super) fn waiting_for_claims(&self, pod: &Pod) -> Option<ClaimRefusal> {
        if !predicates::dynamicresources::has_claims(pod) {
            return None;
        }
        match self.objects.claims_of(pod) {
            Err(
                r @ (ClaimRefusal::NotCreatedYet(_)
                | ClaimRefusal::NotFound(_)
                | ClaimRefusal::BeingDeleted(_)),
            ) => Some(r),
            _ => None,
        }
    }

    /// The local slices of a node that has just appeared.
    pub(super) fn slices_of(&self, node: &str) -> Vec<Arc<ResourceSlice>> {
        let mut out: Vec<Arc<ResourceSlice>> = self
            .slices
            .values()
            .filter(|s| s.spec.node_name.as_deref() == Some(node))
            .cloned()
            .collect();
        out.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        out
    }

    /// Reserve: allocates the pod's unallocated claims on `node` (the
    /// filter found they fit) and reserves every claim for the pod, in
    /// memory; the writes PreBind makes.
    pub(super) fn reserve(
        &mut self,
        pod: &Pod,
        node: &NodeInfo,
    ) -> Result<Vec<ClaimWrite>, ClaimRefusal> {
        let allocations: HashMap<String, _> =
            self.objects.allocate(pod, node)?.into_iter().collect();
        let consumer = ConsumerReference {
            api_group: String::new(),
            resource: "pods".into(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        };
        let mut writes = Vec::new();
        for (_, before) in self.objects.claims_of(pod)? {
            let mut claim = (*before).clone();
            if let Some(a) = allocations.get(&claim.key()) {
                claim.status.allocation = Some(a.clone());
            }
            if !claim.reserved_for(&consumer.uid) {
                claim.status.reserved_for.push(consumer.clone());
            } else if !allocations.contains_key(&claim.key()) {
                continue;
            }
            let claim = Arc::new(claim);
            self.objects.insert_claim(claim.clone());
            writes.push(ClaimWrite {
                claim,
                before,
                consumer: consumer.clone(),
            });
        }
        Ok(writes)
    }
}

impl DraState {
    /// Unreserve: the claims as they were before [`Self::reserve`].
    pub(super) fn unreserve(&mut self, writes: &[ClaimWrite]) {
        for w in writes {
            self.objects.insert_claim(w.before.clone());
        }
    }
}

/// PreBind: writes the claims' allocations and reservations (the status
/// subresource); false when one fails (the pod is not bound).
///
/// As kube-scheduler's `bindClaim`, each write starts from the claim as
/// stored and adds this pod to `status.reservedFor` (and the allocation,
/// if the claim has none yet), sent with the stored resource version and
/// tried again on a conflict: pods sharing a claim are bound by tasks of
/// their own, and a write of the whole list as the pass saw it could
/// land after a later one and drop its pod.
pub(super) async fn prebind(client: &Client, writes: &[ClaimWrite]) -> bool {
    /// client-go's `retry.DefaultRetry`: five tries.
    const TRIES: usize = 5;
    let api_resource = resource("ResourceClaim", "resourceclaims");
    for w in writes {
        let c = &w.claim;
        let ns = c.metadata.namespace.as_deref().unwrap_or("default");
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &api_resource);
        let mut tries = 0;
        loop {
            tries += 1;
            match reserve_in_store(&api, w).await {
                Ok(()) => break,
                Err(kube::Error::Api(e)) if e.code == 409 && tries < TRIES => {}
                Err(e) => {
                    tracing::debug!("add allocation and reservation to claim {}: {e}", c.key());
                    return false;
                }
            }
        }
    }
    true
}

/// One try of a PreBind write: the stored claim with `w`'s allocation
/// (unless it has one) and `w`'s pod among its consumers, replaced at the
/// stored resource version.
async fn reserve_in_store(api: &Api<DynamicObject>, w: &ClaimWrite) -> Result<(), kube::Error> {
    let name = &w.claim.metadata.name;
    let mut stored = api.get_status(name).await?;
    let status = stored
        .data
        .as_object_mut()
        .map(|o| o.entry("status").or_insert_with(|| json!({})));
    let Some(serde_json::Value::Object(status)) = status else {
        return Err(kube::Error::Service(
            format!("claim {}: its status is not an object", w.claim.key()).into(),
        ));
    };
    let ours = json!(w.claim.status.allocation);
    match status.get("allocation").filter(|a| !a.is_null()) {
        None => {
            status.insert("allocation".into(), ours);
        }
        // As kube-scheduler: a claim allocated other devices meanwhile
        // fails the binding (the pod is tried again), never takes the pod
        // onto devices it was not given.
        Some(stored) if devices(stored) != devices(&ours) && !ours.is_null() => {
            return Err(kube::Error::Service(
                format!(
                    "claim {} was allocated other devices meanwhile",
                    w.claim.key()
                )
                .into(),
            ));
        }
        Some(_) => {}
    }
    let consumers = status.entry("reservedFor").or_insert_with(|| json!([]));
    if !consumers.is_array() {
        *consumers = json!([]);
    }
    if let Some(list) = consumers.as_array_mut()
        && !list.iter().any(|r| r["uid"] == w.consumer.uid.as_str())
    {
        list.push(json!(w.consumer));
    }
    api.replace_status(name, &PostParams::default(), &stored)
        .await
        .map(drop)
}

/// An allocation's devices, as (driver, pool, device), sorted.
fn devices(allocation: &serde_json::Value) -> Vec<(String, String, String)> {
    let field = |r: &serde_json::Value, k: &str| r[k].as_str().unwrap_or_default().to_string();
    let mut out: Vec<_> = allocation["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| (field(r, "driver"), field(r, "pool"), field(r, "device")))
        .collect();
    out.sort();
    out
}

/// What the DynamicResources PostFilter says of a pod no node fits, before
/// preemption's part of the message: `no new claims to deallocate` for a
/// pod without claims or one PreFilter turned away, else `still not
/// schedulable` (kube-scheduler would first deallocate a claim allocated
/// on a node the pod cannot use; the testbed does not).
pub(super) fn post_filter_message(pod: &Pod, fit: &predicates::FitError) -> &'static str {
    let refused_before_filter = fit
        .failures
        .iter()
        .flat_map(|(_, reasons)| reasons)
        .any(|r| matches!(r, predicates::Reason::Dra(d) if d.every_node()));
    if !predicates::dynamicresources::has_claims(pod) || refused_before_filter {
        "no new claims to deallocate"
    } else {
        "still not schedulable"
    }
}
