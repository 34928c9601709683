//! The buffer controller (`--capacity-buffer-controller-enabled`,
//! upstream's `capacitybuffer/controller`): each loop it translates every
//! buffer of a served strategy into its status: the managed PodTemplate
//! `capacitybuffer-<name>-pod-template` (owned by the buffer), its
//! generation, the replicas, `ReadyForProvisioning`; then the namespace's
//! ResourceQuotas cut the replicas (`LimitedByQuotas`). Buffers are handled
//! per namespace, oldest first (then by name), as upstream's allocator
//! reserves quota in that order. A status is written only when it changed.
//!
//! Upstream runs the controller on its own informers' events; ours runs at
//! the start of each loop, before the fake pods are made, so a buffer
//! created between two loops is provisioned by the next one.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Pod, PodTemplate, PodTemplateSpec, ResourceQuota};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use predicates::quantity::parse_milli;

use super::translators::{
    ReplicasError, Resolver, TranslationError, number_of_pods, scalable_source,
};
use super::types::{ACTIVE_CAPACITY, BufferCondition, CapacityBuffer, LocalObjectRef};
use crate::cache::ClusterCache;
use crate::crd::api_message;

/// Why a buffer is not ready for provisioning (rendered as the message of
/// its `ReadyForProvisioning=False` condition, after upstream's prefix).
#[derive(Debug, thiserror::Error)]
pub enum BufferError {
    /// The PodTemplate the buffer names cannot be read.
    #[error("capacity buffer client can't get pod template: {}", api_message(.source))]
    GetTemplate {
        /// The template's namespace.
        namespace: String,
        /// The template's name.
        name: String,
        /// The server's error.
        source: kube::Error,
    },
    /// The named PodTemplate gives no pod.
    #[error("failed to create fake pod: {0}")]
    FakePod(#[source] TranslationError),
    /// The scalable object gives no pod.
    #[error(transparent)]
    Scalable(TranslationError),
    /// The managed PodTemplate cannot be read, created or replaced.
    #[error("failed to create or update managed pod template: {}", api_message(.source))]
    ManagedTemplate {
        /// The template's namespace.
        namespace: String,
        /// The template's name.
        name: String,
        /// The server's error.
        source: kube::Error,
    },
    /// The number of replicas cannot be computed.
    #[error("couldn't get number of replicas for buffer: {0}")]
    Replicas(#[source] ReplicasError),
}

/// The controller.
pub struct BufferController {
    client: Client,
    cache: Arc<ClusterCache>,
    clock: simclock::Clock,
    resolver: Resolver,
}

/// The longest buffer name kept in a managed template's name (253 less
/// the prefix and the suffix).
const MAX_NAME_IN_TEMPLATE: usize = 253 - 15 - 13;

/// The name of the PodTemplate the controller manages for `buffer`.
pub fn managed_template_name(buffer: &str) -> String {
    let cut: String = buffer.chars().take(MAX_NAME_IN_TEMPLATE).collect();
    format!("capacitybuffer-{cut}-pod-template")
}

impl BufferController {
    /// A controller; `dry_run` is `--capacity-buffer-pod-dry-run-enabled`.
    pub fn new(
        client: Client,
        cache: Arc<ClusterCache>,
        clock: simclock::Clock,
        dry_run: bool,
    ) -> Self {
        let resolver = if dry_run {
            Resolver::DryRun(client.clone())
        } else {
            Resolver::Defaulting
        };
        Self {
            client,
            cache,
            clock,
            resolver,
        }
    }

    /// Reconciles every buffer; a failure is logged with the buffer it
    /// concerns and the others go on.
    pub async fn reconcile(&self) {
        let buffers = match Api::<CapacityBuffer>::all(self.client.clone())
            .list(&ListParams::default())
            .await
        {
            Ok(l) => l.items,
            Err(e) => {
                tracing::warn!("capacity buffer controller: failed to list CapacityBuffers: {e}");
                return;
            }
        };
        let mut by_namespace: BTreeMap<String, Vec<CapacityBuffer>> = BTreeMap::new();
        for b in buffers
            .into_iter()
            .filter(CapacityBuffer::spec_strategy_served)
        {
            by_namespace
                .entry(b.namespace().to_string())
                .or_default()
                .push(b);
        }
        for (namespace, mut buffers) in by_namespace {
            buffers.sort_by(|a, b| {
                let created =
                    |x: &CapacityBuffer| x.metadata.creation_timestamp.as_ref().map(|t| t.0);
                created(a)
                    .cmp(&created(b))
                    .then_with(|| a.name().cmp(b.name()))
            });
            self.reconcile_namespace(&namespace, buffers).await;
        }
    }

    async fn reconcile_namespace(&self, namespace: &str, buffers: Vec<CapacityBuffer>) {
        let now = self.clock.now();
        let mut translated = Vec::with_capacity(buffers.len());
        for original in buffers {
            let mut b = original.clone();
            let pod = self.translate(&mut b, now).await;
            translated.push((original, b, pod));
        }
        self.allocate_quotas(namespace, &mut translated, now).await;
        for (original, b, _) in translated {
            if original.status != b.status {
                self.write_status(&b).await;
            }
        }
    }

    /// Translates one buffer: status ref, generation, replicas and
    /// `ReadyForProvisioning`; the pod the fake pods will copy, when ready.
    async fn translate(&self, b: &mut CapacityBuffer, now: SystemTime) -> Option<Pod> {
        let source = if let Some(r) = b.spec.pod_template_ref.clone() {
            match self.get_template(b.namespace(), &r.name).await {
                Ok(t) => self
                    .resolver
                    .resolve(b.namespace(), &t.template.unwrap_or_default())
                    .await
                    .map(|pod| (pod, None))
                    .map_err(BufferError::FakePod),
                Err(e) => Err(e),
            }
        } else if let Some(s) = b.spec.scalable_ref.clone() {
            scalable_source(&self.client, &self.cache, &self.resolver, b.namespace(), &s)
                .await
                .map(|s| (s.pod, s.replicas))
                .map_err(BufferError::Scalable)
        } else {
            return None;
        };
        let (pod, scalable_replicas) = match source {
            Ok(s) => s,
            Err(e) => {
                not_ready(b, None, None, &e, now);
                return None;
            }
        };
        let managed = match self.ensure_managed_template(b, &pod).await {
            Ok(t) => t,
            Err(e) => {
                not_ready(b, None, None, &e, now);
                return None;
            }
        };
        let name = managed.metadata.name.clone().unwrap_or_default();
        let generation = managed.metadata.generation;
        let template_pod = super::translators::pod_from_template(
            &managed.template.unwrap_or_default(),
            b.namespace(),
        );
        match number_of_pods(b, &template_pod, scalable_replicas) {
            Ok(n) => {
                let strategy = strategy(b);
                let status = b.status.get_or_insert_with(Default::default);
                status.pod_template_ref = Some(LocalObjectRef { name });
                status.pod_template_generation = generation;
                status.replicas = Some(n);
                status.provisioning_strategy = strategy;
                BufferCondition::Ready.set(b, now);
                Some(template_pod)
            }
            Err(e) => {
                not_ready(b, Some(name), generation, &BufferError::Replicas(e), now);
                None
            }
        }
    }

    async fn get_template(&self, namespace: &str, name: &str) -> Result<PodTemplate, BufferError> {
        Api::<PodTemplate>::namespaced(self.client.clone(), namespace)
            .get(name)
            .await
            .map_err(|source| BufferError::GetTemplate {
                namespace: namespace.to_string(),
                name: name.to_string(),
                source,
            })
    }

    /// Creates or updates the managed PodTemplate of `b` from `pod`
    /// (labels, annotations and spec, without the service account token
    /// volume); returns it as stored.
    async fn ensure_managed_template(
        &self,
        b: &CapacityBuffer,
        pod: &Pod,
    ) -> Result<PodTemplate, BufferError> {
        let name = managed_template_name(b.name());
        let mut spec = pod.spec.clone();
        if let Some(s) = spec.as_mut() {
            clean_up_service_account_volume(s);
        }
        let template = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: pod.metadata.labels.clone(),
                annotations: pod.metadata.annotations.clone(),
                ..ObjectMeta::default()
            }),
            spec,
        };
        let owner = OwnerReference {
            api_version: <CapacityBuffer as k8s_openapi::Resource>::API_VERSION.into(),
            kind: <CapacityBuffer as k8s_openapi::Resource>::KIND.into(),
            name: b.name().into(),
            uid: b.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: None,
        };
        let api = Api::<PodTemplate>::namespaced(self.client.clone(), b.namespace());
        let pp = PostParams {
            dry_run: false,
            field_manager: Some("cluster-autoscaler".into()),
        };
        let failed = |source| BufferError::ManagedTemplate {
            namespace: b.namespace().to_string(),
            name: name.clone(),
            source,
        };
        match api.get_opt(&name).await.map_err(failed)? {
            None => api
                .create(
                    &pp,
                    &PodTemplate {
                        metadata: ObjectMeta {
                            name: Some(name.clone()),
                            namespace: Some(b.namespace().into()),
                            owner_references: Some(vec![owner]),
                            ..ObjectMeta::default()
                        },
                        template: Some(template),
                    },
                )
                .await
                .map_err(failed),
            Some(mut existing) => {
                let same_owner = existing
                    .metadata
                    .owner_references
                    .as_ref()
                    .is_some_and(|o| o.contains(&owner));
                if same_template(existing.template.as_ref(), &template) && same_owner {
                    return Ok(existing);
                }
                existing.template = Some(template);
                existing.metadata.owner_references = Some(vec![owner]);
                api.replace(&name, &pp, &existing).await.map_err(failed)
            }
        }
    }

    /// The namespace's ResourceQuotas cut the replicas of the translated
    /// buffers, oldest first (upstream's `resourceQuotaAllocator`).
    async fn allocate_quotas(
        &self,
        namespace: &str,
        buffers: &mut [(CapacityBuffer, CapacityBuffer, Option<Pod>)],
        now: SystemTime,
    ) {
        let quotas = match Api::<ResourceQuota>::namespaced(self.client.clone(), namespace)
            .list(&ListParams::default())
            .await
        {
            Ok(l) => l.items,
            Err(e) => {
                tracing::warn!(
                    "resourceQuotaAllocator: Failed to list resource quotas, error: {}",
                    api_message(&e)
                );
                return;
            }
        };
        let mut reserved: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        for (_, b, pod) in buffers.iter_mut() {
            let (Some(pod), Some(current)) =
                (pod.as_ref(), b.status.as_ref().and_then(|s| s.replicas))
            else {
                continue;
            };
            let requests = quota_requests(pod);
            if requests.is_empty() {
                continue;
            }
            let mut allowed = current;
            let mut blocking = Vec::new();
            let mut matching = Vec::new();
            for q in &quotas {
                if !pod_matches_scopes(pod, q) {
                    continue;
                }
                let qname = q.metadata.name.clone().unwrap_or_default();
                let max = max_replicas(q, &requests, reserved.get(&qname));
                if max < current {
                    blocking.push(qname.clone());
                }
                allowed = allowed.min(max);
                matching.push(qname);
            }
            if allowed < current {
                if let Some(s) = b.status.as_mut() {
                    s.replicas = Some(allowed);
                }
                BufferCondition::LimitedByQuotas(current, allowed, blocking).set(b, now);
            } else {
                BufferCondition::NotLimitedByQuotas.set(b, now);
            }
            if allowed > 0 {
                for q in matching {
                    let r = reserved.entry(q).or_default();
                    for (k, v) in &requests {
                        *r.entry(k.clone()).or_default() += v * i64::from(allowed);
                    }
                }
            }
        }
    }

    async fn write_status(&self, b: &CapacityBuffer) {
        if let Err(e) =
            crate::crd::replace_status(&Api::namespaced(self.client.clone(), b.namespace()), b)
                .await
        {
            tracing::warn!(
                "capacity buffer controller: failed to update the status of CapacityBuffer {}: {e}",
                b.key()
            );
        }
    }
}

/// `ReadyForProvisioning=False` with the status refs given (upstream's
/// `SetBufferAsNotReadyForProvisioning`).
fn not_ready(
    b: &mut CapacityBuffer,
    template: Option<String>,
    generation: Option<i64>,
    err: &BufferError,
    now: SystemTime,
) {
    let strategy = strategy(b);
    let status = b.status.get_or_insert_with(Default::default);
    status.pod_template_ref = template.map(|name| LocalObjectRef { name });
    status.pod_template_generation = generation;
    status.replicas = None;
    status.provisioning_strategy = strategy;
    BufferCondition::NotReady(Some(err.to_string())).set(b, now);
}

/// The spec's strategy as the status carries it (`""` is the default).
fn strategy(b: &CapacityBuffer) -> Option<String> {
    b.spec.provisioning_strategy.as_deref().map(|s| {
        if s.is_empty() {
            ACTIVE_CAPACITY.to_string()
        } else {
            s.to_string()
        }
    })
}

/// Drops the service account token volume and its mounts (named
/// `kube-api-access-*`), which a dry-run create adds.
fn clean_up_service_account_volume(spec: &mut k8s_openapi::api::core::v1::PodSpec) {
    const PREFIX: &str = "kube-api-access-";
    if let Some(v) = spec.volumes.as_mut() {
        v.retain(|v| !v.name.starts_with(PREFIX));
    }
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        if let Some(m) = c.volume_mounts.as_mut() {
            m.retain(|m| !m.name.starts_with(PREFIX));
        }
    }
}

/// Whether two templates are the same, as the server stores them.
fn same_template(stored: Option<&PodTemplateSpec>, want: &PodTemplateSpec) -> bool {
    let norm = |t: &PodTemplateSpec| {
        let mut v = serde_json::to_value(t).unwrap_or_default();
        strip_empty(&mut v);
        v
    };
    stored.is_some_and(|s| norm(s) == norm(want))
}

/// Removes empty maps, arrays and nulls (a template that went through the
/// server may carry `{}` where ours has nothing).
fn strip_empty(v: &mut serde_json::Value) {
    if let serde_json::Value::Object(m) = v {
        for x in m.values_mut() {
            strip_empty(x);
        }
        m.retain(|_, x| match x {
            serde_json::Value::Null => false,
            serde_json::Value::Object(o) => !o.is_empty(),
            serde_json::Value::Array(a) => !a.is_empty(),
            _ => true,
        });
    } else if let serde_json::Value::Array(a) = v {
        a.iter_mut().for_each(strip_empty);
    }
}

/// A pod's requests, in milli-units, keyed both `cpu` and `requests.cpu`
/// (a ResourceQuota may name either).
fn quota_requests(pod: &Pod) -> BTreeMap<String, i64> {
    let r = predicates::resources::pod_requests(pod);
    let mut out = BTreeMap::new();
    let mut put = |k: &str, v: i64| {
        if v > 0 {
            out.insert(k.to_string(), v);
            out.insert(format!("requests.{k}"), v);
        }
    };
    put("cpu", r.milli_cpu);
    put("memory", r.memory.saturating_mul(1000));
    put(
        "ephemeral-storage",
        r.ephemeral_storage.saturating_mul(1000),
    );
    for (k, v) in &r.scalar {
        put(k, v.saturating_mul(1000));
    }
    out
}

/// How many pods of `requests` the quota still has room for, after what
/// earlier buffers of this pass reserved.
fn max_replicas(
    q: &ResourceQuota,
    requests: &BTreeMap<String, i64>,
    reserved: Option<&BTreeMap<String, i64>>,
) -> i32 {
    let Some(status) = q.status.as_ref() else {
        return i32::MAX;
    };
    let mut max = i64::MAX;
    for (name, hard) in status.hard.iter().flatten() {
        let Some(&request) = requests.get(name) else {
            continue;
        };
        let used = status
            .used
            .as_ref()
            .and_then(|u| u.get(name))
            .and_then(|q| parse_milli(&q.0))
            .unwrap_or(0);
        let held = reserved.and_then(|r| r.get(name)).copied().unwrap_or(0);
        let available = parse_milli(&hard.0).unwrap_or(0) - used - held;
        max = max.min(if available < 0 {
            0
        } else {
            available / request
        });
    }
    i32::try_from(max).unwrap_or(i32::MAX)
}

/// Whether the pod falls under every scope of the quota (upstream's
/// `podMatchesQuotaScope`).
fn pod_matches_scopes(pod: &Pod, q: &ResourceQuota) -> bool {
    let Some(spec) = q.spec.as_ref() else {
        return true;
    };
    let spec_pod = pod.spec.as_ref();
    let best_effort = {
        let r = predicates::resources::pod_requests(pod);
        r.milli_cpu == 0 && r.memory == 0
    };
    let priority_class = spec_pod.and_then(|s| s.priority_class_name.clone());
    let scope_holds = |scope: &str, op: &str, values: &[String]| -> bool {
        match scope {
            "NotTerminating" => true,
            "Terminating" => false,
            "BestEffort" => best_effort,
            "NotBestEffort" => !best_effort,
            "PriorityClass" => match op {
                "Exists" => priority_class.is_some(),
                "DoesNotExist" => priority_class.is_none(),
                "In" => priority_class.as_ref().is_some_and(|p| values.contains(p)),
                "NotIn" => !priority_class.as_ref().is_some_and(|p| values.contains(p)),
                _ => false,
            },
            _ => false,
        }
    };
    let scopes_hold = spec
        .scopes
        .iter()
        .flatten()
        .all(|s| scope_holds(s, "Exists", &[]));
    let selectors_hold = spec
        .scope_selector
        .as_ref()
        .and_then(|s| s.match_expressions.as_ref())
        .into_iter()
        .flatten()
        .all(|e| {
            scope_holds(
                &e.scope_name,
                &e.operator,
                e.values.as_deref().unwrap_or(&[]),
            )
        });
    scopes_hold && selectors_hold
}
