//! The buffers' fake pods (`--capacity-buffer-pod-injection-enabled`,
//! upstream's `processors/capacitybuffer`): each loop, every buffer whose
//! status is ready for a served strategy gets `status.replicas` copies of
//! its managed PodTemplate, named `capacity-buffer-<name>-<i>`, owned by
//! the buffer, annotated `podType: capacityBufferFakePod` and safe to
//! evict. They only ever exist in the simulation: scale-up makes room for
//! those that do not fit, scale-down keeps the room they take (they must be
//! placed elsewhere before a node goes), and they are never created,
//! evicted or told of one by one (one event per buffer instead).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Pod, PodTemplate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::ListParams;
use kube::{Api, Client};
use predicates::PodInfo;

use super::types::{ACTIVE_CAPACITY, BufferCondition, CapacityBuffer, ConditionType};
use crate::crd::api_message;
use crate::events::ObjectRef;

/// The annotation that marks a buffer's fake pod, and its value.
pub const FAKE_POD_ANNOTATION: (&str, &str) = ("podType", "capacityBufferFakePod");

/// Why a buffer's managed PodTemplate cannot be read (rendered as the
/// server's message).
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The server refused the read.
    #[error("{}", api_message(.source))]
    Get {
        /// The template's namespace.
        namespace: String,
        /// The template's name.
        name: String,
        /// The server's error.
        source: kube::Error,
    },
    /// The template the buffer's status names does not exist.
    #[error("podtemplates \"{name}\" not found")]
    NotFound {
        /// The template's namespace.
        namespace: String,
        /// The template's name.
        name: String,
    },
}

/// Whether `pod` is a buffer's fake pod (upstream's
/// `IsFakeCapacityBuffersPod`).
pub fn is_fake_pod(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(FAKE_POD_ANNOTATION.0))
        .is_some_and(|v| v == FAKE_POD_ANNOTATION.1)
}

/// The fake pods of `buffer`: `replicas` copies of `template`.
pub fn make_fake_pods(
    buffer: &CapacityBuffer,
    template: &PodTemplate,
    replicas: i32,
) -> Vec<PodInfo> {
    let spec_meta = template
        .template
        .as_ref()
        .and_then(|t| t.metadata.clone())
        .unwrap_or_default();
    let spec = template.template.as_ref().and_then(|t| t.spec.clone());
    let mut annotations = spec_meta.annotations.unwrap_or_default();
    annotations.insert(FAKE_POD_ANNOTATION.0.into(), FAKE_POD_ANNOTATION.1.into());
    annotations.insert(
        crate::simulator::drainability::SAFE_TO_EVICT.into(),
        "true".into(),
    );
    let owner = OwnerReference {
        api_version: <CapacityBuffer as k8s_openapi::Resource>::API_VERSION.into(),
        kind: <CapacityBuffer as k8s_openapi::Resource>::KIND.into(),
        name: buffer.name().into(),
        uid: buffer.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    };
    let uid = buffer.metadata.uid.clone().unwrap_or_default();
    (1..=replicas.max(0))
        .map(|i| {
            let mut spec = spec.clone();
            if let Some(s) = spec.as_mut() {
                s.node_name = None;
            }
            let mut owners = template
                .metadata
                .owner_references
                .clone()
                .unwrap_or_default();
            owners.retain(|o| o.controller != Some(true));
            owners.push(owner.clone());
            PodInfo::new(Arc::new(Pod {
                metadata: ObjectMeta {
                    name: Some(format!("capacity-buffer-{}-{i}", buffer.name())),
                    namespace: Some(buffer.namespace().into()),
                    uid: Some(format!("{uid}-{i}")),
                    labels: spec_meta.labels.clone(),
                    annotations: Some(annotations.clone()),
                    owner_references: Some(owners),
                    ..ObjectMeta::default()
                },
                spec,
                status: None,
            }))
        })
        .collect()
}

/// The injection: the fake pods made at the start of a loop, for the
/// pod-list processor to add, and which buffer each belongs to, for the
/// scale-up status (upstream's `fakepods.Registry`).
pub struct BufferPodInjection {
    client: Client,
    clock: simclock::Clock,
    loop_pods: Mutex<LoopPods>,
}

/// The fake pods of one loop.
#[derive(Default)]
struct LoopPods {
    pods: Vec<PodInfo>,
    /// Pod key → the buffer (for its events).
    owners: BTreeMap<String, ObjectRef>,
}

impl BufferPodInjection {
    /// An injection writing buffer statuses with `client`.
    pub fn new(client: Client, clock: simclock::Clock) -> Self {
        Self {
            client,
            clock,
            loop_pods: Mutex::new(LoopPods::default()),
        }
    }

    /// Makes this loop's fake pods (upstream's buffer pod list processor,
    /// less the adding): lists the buffers, keeps the provisionable ones,
    /// sets `Provisioning` on each and keeps their pods.
    pub async fn prepare(&self) {
        let mut fresh = LoopPods::default();
        let buffers = match Api::<CapacityBuffer>::all(self.client.clone())
            .list(&ListParams::default())
            .await
        {
            Ok(l) => l.items,
            Err(e) => {
                tracing::warn!(
                    "Capacity buffer pod list processor: failed to list buffers: {}",
                    api_message(&e)
                );
                *self.lock() = fresh;
                return;
            }
        };
        let now = self.clock.now();
        for mut b in buffers {
            let status_strategy = b
                .status
                .as_ref()
                .and_then(|s| s.provisioning_strategy.clone());
            if status_strategy.as_deref() != Some(ACTIVE_CAPACITY) {
                continue;
            }
            if !b.is_true(ConditionType::ReadyForProvisioning)
                && !b.is_true(ConditionType::Provisioning)
            {
                continue;
            }
            let template = self.managed_template(&b).await;
            if let (Ok(Some(t)), Some(g)) = (
                &template,
                b.status.as_ref().and_then(|s| s.pod_template_generation),
            ) && t.metadata.generation != Some(g)
            {
                // The template changed since the controller read it: wait
                // for the controller.
                continue;
            }
            let status = b.status.clone().unwrap_or_default();
            let condition = match (&status.pod_template_ref, status.replicas, template) {
                (None, _, _) | (_, None, _) => BufferCondition::NotReadyForProvisioning,
                _ if !b.is_true(ConditionType::ReadyForProvisioning) => {
                    BufferCondition::NotReadyForProvisioning
                }
                (_, Some(0), _) => BufferCondition::BufferIsEmpty,
                (_, _, Err(e)) => BufferCondition::FailedToGetPodTemplate(e.to_string()),
                (Some(r), _, Ok(None)) => {
                    let missing = TemplateError::NotFound {
                        namespace: b.namespace().to_string(),
                        name: r.name.clone(),
                    };
                    BufferCondition::FailedToGetPodTemplate(missing.to_string())
                }
                (_, Some(n), Ok(Some(t))) => {
                    let pods = make_fake_pods(&b, &t, n);
                    let owner = buffer_ref(&b);
                    for p in &pods {
                        fresh.owners.insert(p.key.clone(), owner.clone());
                    }
                    fresh.pods.extend(pods);
                    BufferCondition::FakePodsInjected
                }
            };
            if condition.set(&mut b, now) {
                self.write_status(&b).await;
            }
        }
        *self.lock() = fresh;
    }

    async fn managed_template(
        &self,
        b: &CapacityBuffer,
    ) -> Result<Option<PodTemplate>, TemplateError> {
        let Some(r) = b.status.as_ref().and_then(|s| s.pod_template_ref.as_ref()) else {
            return Ok(None);
        };
        Api::<PodTemplate>::namespaced(self.client.clone(), b.namespace())
            .get_opt(&r.name)
            .await
            .map_err(|source| TemplateError::Get {
                namespace: b.namespace().to_string(),
                name: r.name.clone(),
                source,
            })
    }

    async fn write_status(&self, b: &CapacityBuffer) {
        if let Err(e) =
            crate::crd::replace_status(&Api::namespaced(self.client.clone(), b.namespace()), b)
                .await
        {
            tracing::warn!(
                "Capacity buffer pod list processor: failed to update the status of CapacityBuffer {}: {e}",
                b.key()
            );
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LoopPods> {
        self.loop_pods.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This loop's fake pods.
    pub fn pods(&self) -> Vec<PodInfo> {
        self.lock().pods.clone()
    }

    /// The buffers of these pods, each with how many of its fake pods are
    /// among them.
    pub fn buffers_of<'a>(&self, pods: impl Iterator<Item = &'a Pod>) -> Vec<(ObjectRef, usize)> {
        let lock = self.lock();
        let mut counts: BTreeMap<String, (ObjectRef, usize)> = BTreeMap::new();
        let mut seen = BTreeSet::new();
        for p in pods {
            let key = predicates::nodeinfo::pod_key(p);
            if !seen.insert(key.clone()) {
                continue;
            }
            if let Some(owner) = lock.owners.get(&key) {
                let e = counts
                    .entry(format!("{}/{}", owner.namespace, owner.name))
                    .or_insert_with(|| (owner.clone(), 0));
                e.1 += 1;
            }
        }
        counts.into_values().collect()
    }
}

/// The event reference of a buffer.
fn buffer_ref(b: &CapacityBuffer) -> ObjectRef {
    ObjectRef {
        api_version: <CapacityBuffer as k8s_openapi::Resource>::API_VERSION.into(),
        kind: <CapacityBuffer as k8s_openapi::Resource>::KIND.into(),
        namespace: b.namespace().into(),
        name: b.name().into(),
        uid: b.metadata.uid.clone().unwrap_or_default(),
    }
}
