//! Reading and writing ProvisioningRequests (upstream's `provreqclient`):
//! reads come from the autoscaler's cache (the requests and the
//! `PodTemplate`s, both watched); status writes are PUTs of the `status`
//! subresource in JSON (CRDs speak no protobuf), and what the server returns
//! goes into the cache at once, so the next write in the same loop carries
//! the new `resourceVersion`.

use std::sync::Arc;

use kube::api::DeleteParams;
use kube::{Api, Client};

use super::types::{ProvisioningRequest, WithTemplates};
use crate::cache::{ClusterCache, State};

/// The ProvisioningRequest client.
#[derive(Clone)]
pub struct ProvReqClient {
    client: Client,
    cache: Arc<ClusterCache>,
}

impl ProvReqClient {
    /// A client reading from `cache` and writing with `client`.
    pub fn new(client: Client, cache: Arc<ClusterCache>) -> Self {
        Self { client, cache }
    }

    /// Every request with its templates, oldest first (then by key): the
    /// order in which requests are served. (Upstream lists them in its
    /// informer's order, which is no order.)
    pub fn list(&self) -> Vec<WithTemplates> {
        let state = self.cache.read();
        let mut out: Vec<WithTemplates> = state
            .provisioning_requests
            .values()
            .map(|pr| with_templates(&state, pr))
            .collect();
        out.sort_by(|a, b| {
            let created = |w: &WithTemplates| w.pr.metadata.creation_timestamp.clone().map(|t| t.0);
            created(a)
                .cmp(&created(b))
                .then_with(|| a.pr.key().cmp(&b.pr.key()))
        });
        out
    }

    /// The request `namespace/name` with its templates, if cached.
    pub fn get(&self, namespace: &str, name: &str) -> Option<WithTemplates> {
        let state = self.cache.read();
        let pr = state
            .provisioning_requests
            .get(&format!("{namespace}/{name}"))?;
        Some(with_templates(&state, pr))
    }

    fn api(&self, pr: &ProvisioningRequest) -> Api<ProvisioningRequest> {
        Api::namespaced(self.client.clone(), pr.namespace())
    }

    /// Writes `pr`'s status (upstream's `UpdateProvisioningRequest`); the
    /// object the server returns replaces the cached one.
    pub async fn update_status(
        &self,
        pr: &ProvisioningRequest,
    ) -> Result<(), crate::crd::StatusError> {
        let updated = crate::crd::replace_status(&self.api(pr), pr).await?;
        tracing::debug!("Updated ProvisioningRequest {}", updated.key());
        self.cache.write().put_provisioning_request(updated);
        Ok(())
    }

    /// Deletes `pr` (upstream's `DeleteProvisioningRequest`).
    pub async fn delete(&self, pr: &ProvisioningRequest) -> Result<(), kube::Error> {
        self.api(pr)
            .delete(pr.name(), &DeleteParams::default())
            .await
            .map(|_| ())
    }
}

/// A cached request with the cached templates its pod sets name, in their
/// order (a missing one left out, as upstream's client does).
fn with_templates(state: &State, pr: &ProvisioningRequest) -> WithTemplates {
    WithTemplates {
        templates: pr
            .spec
            .pod_sets
            .iter()
            .filter_map(|s| {
                let key = format!("{}/{}", pr.namespace(), s.pod_template_ref.name);
                state.pod_templates.get(&key).cloned()
            })
            .collect(),
        pr: pr.clone(),
    }
}
