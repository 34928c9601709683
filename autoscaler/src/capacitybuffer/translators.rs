//! From a buffer's spec to its pod and replicas (upstream's
//! `capacitybuffer/translators` and `fakepods` resolvers): the template
//! (a PodTemplate, or the pods and template of a scalable object), the pod
//! it resolves to (a server-side dry-run create, or local defaulting), and
//! how many of them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, Client};
use predicates::quantity::parse_milli;
use predicates::resources::pod_requests;

use super::types::{CapacityBuffer, ScalableRef};
use crate::cache::ClusterCache;
use crate::crd::api_message;
use apimachinery::labels::{LabelSelector, SelectorError};

/// Why the number of replicas of a buffer cannot be computed (upstream's
/// texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicasError {
    /// Neither `replicas`, `percentage` (with a scalable object) nor `limits`.
    #[error("replicas, percentage and limits are not defined")]
    NotDefined,
    /// `limits` names no resource the pod requests.
    #[error("resources in configured limits not found in the pod template")]
    LimitsNotInTemplate,
}

/// Why a buffer's template or scalable object gives no pod (rendered as
/// upstream words it: the server's message where the server refused).
#[derive(Debug, thiserror::Error)]
pub enum TranslationError {
    /// The server refused the dry-run create of a template's pod.
    #[error("{}", api_message(.source))]
    DryRun {
        /// The namespace of the pod.
        namespace: String,
        /// The template's name (empty when it has none).
        template: String,
        /// The server's error.
        source: kube::Error,
    },
    /// The scale subresource's selector does not parse.
    #[error("{source}")]
    Selector {
        /// The selector.
        selector: String,
        /// The parser's error.
        source: SelectorError,
    },
    /// The newest pod of a scalable object cannot be read.
    #[error("{}", api_message(.source))]
    GetPod {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
        /// The server's error.
        source: kube::Error,
    },
    /// The API group of a scalable object cannot be discovered.
    #[error("{}", api_message(.source))]
    Discovery {
        /// The API group.
        group: String,
        /// The server's error.
        source: kube::Error,
    },
    /// The API group serves no such kind.
    #[error("no kind {kind} in group {group:?}")]
    UnknownKind {
        /// The API group.
        group: String,
        /// The kind.
        kind: String,
    },
    /// The scale subresource of a scalable object cannot be read.
    #[error("{}", api_message(.source))]
    GetScale {
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
        /// The server's error.
        source: kube::Error,
    },
    /// The scale subresource is not a `Scale`.
    #[error("{source}")]
    DecodeScale {
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
        /// The decoder's error.
        source: serde_json::Error,
    },
    /// The kind has no pod template CA knows of.
    #[error("kind {group}/{kind} is not supported to use pod template")]
    Unsupported {
        /// The API group.
        group: String,
        /// The kind.
        kind: String,
    },
    /// The scalable object cannot be read.
    #[error("failed to get Deployment: {}", api_message(.source))]
    GetObject {
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
        /// The server's error.
        source: kube::Error,
    },
    /// The scalable object's `spec.template` is not a pod template.
    #[error("{source}")]
    DecodeTemplate {
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
        /// The decoder's error.
        source: serde_json::Error,
    },
    /// The scalable object's template gives no pod.
    #[error("failed to resolve pod spec: {source}")]
    ResolvePod {
        /// The object's name.
        name: String,
        /// Why.
        source: Box<TranslationError>,
    },
    /// No live pod, and the object's own template gives none.
    #[error("failed to resolve scalable object: {source}")]
    ScalableObject {
        /// The object's name.
        name: String,
        /// Why the object's template gives no pod.
        source: Box<TranslationError>,
    },
    /// Reading the live pod failed, and the object's own template gives
    /// no pod either.
    #[error("failed to resolve live pod: {live}, failed to resolve scalable object: {source}")]
    LiveAndScalableObject {
        /// The object's name.
        name: String,
        /// Why no live pod was found.
        live: Box<TranslationError>,
        /// Why the object's template gives no pod.
        source: Box<TranslationError>,
    },
}

/// How many fake pods a buffer asks for (upstream's
/// `getBufferNumberOfPods`, as CA 1.37 fixed it): the larger of `replicas`
/// and `percentage` of the scalable object's replicas (rounded up), capped
/// by as many pods as fit in `limits`; `limits` alone when neither is set.
/// CA 1.36 took the least of the three and rounded the percentage down.
pub fn number_of_pods(
    buffer: &CapacityBuffer,
    pod: &Pod,
    scalable_replicas: Option<i32>,
) -> Result<i32, ReplicasError> {
    let spec = &buffer.spec;
    let asked = spec.replicas.map(|r| i64::from(r.max(0)));
    let share = match (spec.percentage, scalable_replicas) {
        (Some(p), Some(total)) => Some(percentage_of(p, total)),
        _ => None,
    };
    let wanted = match (asked, share) {
        (Some(a), Some(s)) => Some(a.max(s)),
        (a, s) => a.or(s),
    };
    let n = match (&spec.limits, wanted) {
        (Some(limits), Some(w)) => w.min(fit_in_limits(pod, limits)?),
        (Some(limits), None) => fit_in_limits(pod, limits)?,
        (None, Some(w)) => w,
        (None, None) => return Err(ReplicasError::NotDefined),
    };
    Ok(i32::try_from(n).unwrap_or(i32::MAX))
}

/// `percentage` of `total` replicas, rounded up; none when either is not
/// positive.
fn percentage_of(percentage: i32, total: i32) -> i64 {
    if percentage <= 0 || total <= 0 {
        return 0;
    }
    (i64::from(percentage) * i64::from(total) + 99) / 100
}

/// How many pods fit in `limits`: per resource both request and limit,
/// the limit over the request, rounded down; the least.
fn fit_in_limits(
    pod: &Pod,
    limits: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> Result<i64, ReplicasError> {
    let requests = pod_requests(pod);
    let mut fit: Option<i64> = None;
    for (name, limit) in limits {
        let request = match name.as_str() {
            "cpu" => requests.milli_cpu,
            "memory" => requests.memory.saturating_mul(1000),
            "ephemeral-storage" => requests.ephemeral_storage.saturating_mul(1000),
            other => requests
                .scalar
                .get(other)
                .copied()
                .unwrap_or(0)
                .saturating_mul(1000),
        };
        if request <= 0 {
            continue;
        }
        let limit = parse_milli(&limit.0).unwrap_or(0);
        let n = limit / request;
        fit = Some(fit.map_or(n, |f| f.min(n)));
    }
    fit.ok_or(ReplicasError::LimitsNotInTemplate)
}

/// The pod a template makes (upstream's `GetPodFromTemplate`).
pub fn pod_from_template(template: &PodTemplateSpec, namespace: &str) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            namespace: Some(namespace.into()),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// How a template becomes the pod the buffer's fake pods copy
/// (`--capacity-buffer-pod-dry-run-enabled`).
#[derive(Clone)]
pub enum Resolver {
    /// A server-side dry-run create: admission, defaulting and webhooks
    /// run, nothing is stored (needs `create` on pods).
    DryRun(Client),
    /// Locally: a container's limit is its request where it has none.
    Defaulting,
}

impl Resolver {
    /// The pod `template` resolves to in `namespace`.
    pub async fn resolve(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
    ) -> Result<Pod, TranslationError> {
        let mut pod = pod_from_template(template, namespace);
        match self {
            Self::Defaulting => {
                pod.spec = pod.spec.map(crate::provisioningrequest::pods::defaulted);
                Ok(pod)
            }
            Self::DryRun(client) => {
                pod.metadata.generate_name = Some("fake-pod-".into());
                let pp = PostParams {
                    dry_run: true,
                    field_manager: Some("cluster-autoscaler".into()),
                };
                Api::<Pod>::namespaced(client.clone(), namespace)
                    .create(&pp, &pod)
                    .await
                    .map_err(|source| {
                        let name = template
                            .metadata
                            .as_ref()
                            .and_then(|m| m.name.clone())
                            .unwrap_or_default();
                        let e = TranslationError::DryRun {
                            namespace: namespace.to_string(),
                            template: name.clone(),
                            source,
                        };
                        tracing::error!(
                            "Failed to create dry-run pod for template {namespace}/{name}: {e}"
                        );
                        e
                    })
            }
        }
    }
}

/// What a scalable object gives a buffer: a pod and its replicas.
pub struct ScalableSource {
    /// The pod the fake pods copy.
    pub pod: Pod,
    /// The object's replicas (the base of `percentage`).
    pub replicas: Option<i32>,
}

/// The built-in kinds with a pod template (upstream's resolvers, keyed
/// `apiGroup-Kind`): their API resource and whether their replicas are
/// `spec.parallelism` (a Job).
fn builtin(sref: &ScalableRef) -> Option<(ApiResource, bool)> {
    use k8s_openapi::api::{apps::v1 as apps, batch::v1 as batch, core::v1 as core};
    Some(match (sref.api_group.as_str(), sref.kind.as_str()) {
        ("apps", "Deployment") => (ApiResource::erase::<apps::Deployment>(&()), false),
        ("apps", "ReplicaSet") => (ApiResource::erase::<apps::ReplicaSet>(&()), false),
        ("apps", "StatefulSet") => (ApiResource::erase::<apps::StatefulSet>(&()), false),
        ("" | "core", "ReplicationController") => (
            ApiResource::erase::<core::ReplicationController>(&()),
            false,
        ),
        ("batch", "Job") => (ApiResource::erase::<batch::Job>(&()), true),
        _ => return None,
    })
}

/// The pod and replicas of a scalable object (upstream's scalable-objects
/// translator): through its scale subresource, the newest of the pods its
/// selector matches, with the scale's replicas; with no such pod (or no
/// scale), the built-in kind's own template and replicas, resolved.
pub async fn scalable_source(
    client: &Client,
    cache: &ClusterCache,
    resolver: &Resolver,
    namespace: &str,
    sref: &ScalableRef,
) -> Result<ScalableSource, TranslationError> {
    let live = match scale_of(client, namespace, sref).await {
        Ok((selector, replicas)) => match newest_pod(client, cache, namespace, &selector).await {
            Ok(Some(pod)) => return Ok(ScalableSource { pod, replicas }),
            Ok(None) => None,
            Err(e) => Some(e),
        },
        Err(e) => Some(e),
    };
    if let Some(e) = &live {
        tracing::error!(
            "capacity buffer scalable objects translator: failed to resolve live pod: {e}"
        );
    }
    let own = own_template(client, resolver, namespace, sref).await;
    match (own, live) {
        (Ok(s), _) => Ok(s),
        (Err(e), Some(l)) => Err(TranslationError::LiveAndScalableObject {
            name: sref.name.clone(),
            live: Box::new(l),
            source: Box::new(e),
        }),
        (Err(e), None) => Err(TranslationError::ScalableObject {
            name: sref.name.clone(),
            source: Box::new(e),
        }),
    }
}

/// The newest pod `selector` matches in `namespace` (its node cleared):
/// found in the cache, which keeps pods without their containers, then
/// read whole (listing a large workload's pods each loop would cost a
/// list of them all).
async fn newest_pod(
    client: &Client,
    cache: &ClusterCache,
    namespace: &str,
    selector: &str,
) -> Result<Option<Pod>, TranslationError> {
    if selector.is_empty() {
        return Ok(None);
    }
    let selector = LabelSelector::parse(selector).map_err(|source| TranslationError::Selector {
        selector: selector.to_string(),
        source,
    })?;
    let newest = {
        let state = cache.read();
        state
            .pods
            .values()
            .filter(|p| p.namespace() == namespace && selector.matches(p.labels()))
            .max_by_key(|p| {
                (
                    p.pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    p.pod.metadata.name.clone(),
                )
            })
            .and_then(|p| p.pod.metadata.name.clone())
    };
    let Some(name) = newest else {
        return Ok(None);
    };
    let pod = Api::<Pod>::namespaced(client.clone(), namespace)
        .get_opt(&name)
        .await
        .map_err(|source| TranslationError::GetPod {
            namespace: namespace.to_string(),
            name: name.clone(),
            source,
        })?;
    Ok(pod.map(|mut p| {
        if let Some(s) = p.spec.as_mut() {
            s.node_name = None;
        }
        p
    }))
}

/// The selector and replicas of the object's scale subresource.
async fn scale_of(
    client: &Client,
    namespace: &str,
    sref: &ScalableRef,
) -> Result<(String, Option<i32>), TranslationError> {
    let ar = match builtin(sref) {
        Some((ar, _)) => ar,
        None => {
            let group = kube::discovery::group(client, &sref.api_group)
                .await
                .map_err(|source| TranslationError::Discovery {
                    group: sref.api_group.clone(),
                    source,
                })?;
            let (ar, _) = group.recommended_kind(&sref.kind).ok_or_else(|| {
                TranslationError::UnknownKind {
                    group: sref.api_group.clone(),
                    kind: sref.kind.clone(),
                }
            })?;
            ar
        }
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
    let object = api
        .get_subresource("scale", &sref.name)
        .await
        .map_err(|source| TranslationError::GetScale {
            namespace: namespace.to_string(),
            name: sref.name.clone(),
            source,
        })?;
    let scale: k8s_openapi::api::autoscaling::v1::Scale = serde_json::to_value(object)
        .and_then(serde_json::from_value)
        .map_err(|source| TranslationError::DecodeScale {
            namespace: namespace.to_string(),
            name: sref.name.clone(),
            source,
        })?;
    let status = scale.status.unwrap_or_default();
    Ok((status.selector.unwrap_or_default(), Some(status.replicas)))
}

/// A built-in kind's `spec.template` (resolved) and replicas.
async fn own_template(
    client: &Client,
    resolver: &Resolver,
    namespace: &str,
    sref: &ScalableRef,
) -> Result<ScalableSource, TranslationError> {
    let Some((ar, parallelism)) = builtin(sref) else {
        return Err(TranslationError::Unsupported {
            group: sref.api_group.clone(),
            kind: sref.kind.clone(),
        });
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
    let obj = api
        .get(&sref.name)
        .await
        .map_err(|source| TranslationError::GetObject {
            namespace: namespace.to_string(),
            name: sref.name.clone(),
            source,
        })?;
    let spec = obj.data.get("spec").cloned().unwrap_or_default();
    let template: PodTemplateSpec = spec
        .get("template")
        .cloned()
        .map(serde_json::from_value)
        .transpose()
        .map_err(|source| TranslationError::DecodeTemplate {
            namespace: namespace.to_string(),
            name: sref.name.clone(),
            source,
        })?
        .unwrap_or_default();
    let field = if parallelism {
        "parallelism"
    } else {
        "replicas"
    };
    let replicas = spec
        .get(field)
        .and_then(serde_json::Value::as_i64)
        .map(|r| i32::try_from(r).unwrap_or(i32::MAX))
        .or(Some(1));
    let pod =
        resolver
            .resolve(namespace, &template)
            .await
            .map_err(|e| TranslationError::ResolvePod {
                name: sref.name.clone(),
                source: Box::new(e),
            })?;
    Ok(ScalableSource { pod, replicas })
}
