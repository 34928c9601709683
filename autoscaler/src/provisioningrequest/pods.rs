//! The pods of a ProvisioningRequest (upstream's `provisioningrequest/pods`):
//! `count` copies of each pod set's template, made as a controller makes its
//! pods, named `<request>-<set>-<index>`, owned by the request and annotated
//! with it, so that the simulation places them like real pods.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use predicates::PodInfo;

use super::types::{CLASS_ANNOTATION, CONSUME_ANNOTATION, ProvisioningRequest, WithTemplates};

/// Why the pods of a request cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodsError {
    /// Templates the pod sets name do not exist (upstream's message).
    #[error(
        "missing pod templates, {referenced} pod templates were referenced, {} templates were missing: {}",
        missing.len(),
        missing.join(",")
    )]
    MissingTemplates {
        /// How many pod sets name a template.
        referenced: usize,
        /// The names not found.
        missing: Vec<String>,
    },
}

/// The pods of `req` (upstream's `PodsForProvisioningRequest`).
pub fn pods_for(req: &WithTemplates) -> Result<Vec<PodInfo>, PodsError> {
    let pr = &req.pr;
    let sets = &pr.spec.pod_sets;
    if sets.len() != req.templates.len() {
        let found: Vec<&str> = req
            .templates
            .iter()
            .filter_map(|t| t.metadata.name.as_deref())
            .collect();
        return Err(PodsError::MissingTemplates {
            referenced: sets.len(),
            missing: sets
                .iter()
                .map(|s| s.pod_template_ref.name.clone())
                .filter(|n| !found.contains(&n.as_str()))
                .collect(),
        });
    }
    let mut pods = Vec::new();
    for (i, (set, template)) in sets.iter().zip(&req.templates).enumerate() {
        let spec = template.template.as_ref();
        for j in 0..set.count.max(0) {
            let meta = spec.and_then(|t| t.metadata.as_ref());
            let pod = pod(
                pr,
                meta,
                spec.and_then(|t| t.spec.clone()).unwrap_or_default(),
                i,
                j,
            );
            pods.push(PodInfo::new(Arc::new(pod)));
        }
    }
    Ok(pods)
}

/// One pod of pod set `i`, copy `j`.
fn pod(
    pr: &ProvisioningRequest,
    meta: Option<&ObjectMeta>,
    spec: PodSpec,
    i: usize,
    j: i32,
) -> Pod {
    let generate_name = format!("{}-", pr.name());
    let name = format!("{generate_name}{i}-{j}");
    let namespace = pr.namespace().to_string();
    let mut annotations: BTreeMap<String, String> =
        meta.and_then(|m| m.annotations.clone()).unwrap_or_default();
    annotations.insert(CONSUME_ANNOTATION.into(), pr.name().into());
    annotations.insert(
        CLASS_ANNOTATION.into(),
        pr.spec.provisioning_class_name.clone(),
    );
    Pod {
        metadata: ObjectMeta {
            uid: Some(format!("{namespace}/{name}")),
            name: Some(name),
            generate_name: Some(generate_name),
            namespace: Some(namespace),
            labels: meta.and_then(|m| m.labels.clone()),
            annotations: Some(annotations),
            finalizers: meta.and_then(|m| m.finalizers.clone()),
            creation_timestamp: pr.metadata.creation_timestamp.clone(),
            owner_references: Some(vec![OwnerReference {
                api_version: pr
                    .api_version
                    .clone()
                    .unwrap_or_else(|| "autoscaling.x-k8s.io/v1".into()),
                kind: pr
                    .kind
                    .clone()
                    .unwrap_or_else(|| "ProvisioningRequest".into()),
                name: pr.name().into(),
                uid: pr.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(defaulted(spec)),
        status: None,
    }
}

/// The API server's defaults that change scheduling: a container with
/// limits and no request for a resource requests its limit.
pub(crate) fn defaulted(mut spec: PodSpec) -> PodSpec {
    let containers = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten());
    for c in containers {
        let Some(r) = c.resources.as_mut() else {
            continue;
        };
        let Some(limits) = r.limits.clone() else {
            continue;
        };
        let requests = r.requests.get_or_insert_with(BTreeMap::new);
        for (k, v) in limits {
            requests.entry(k).or_insert(v);
        }
    }
    spec
}
