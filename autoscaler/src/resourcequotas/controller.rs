//! The CapacityQuota controller (`--capacity-quotas-enabled`, upstream's
//! `resourcequotas/capacityquota` reconciler): each loop, every quota is
//! validated (`cluster-autoscaler.kubernetes.io/valid`, CA 1.37's name for
//! 1.36's `Valid`), the spec's generation it read is recorded
//! (`status.observedGeneration`), and a valid one gets `status.used` (for each
//! resource it limits, the sum over the nodes its selector matches of
//! their capacity; `nodes` counts them) and `Reconciled`. A status is
//! written only when it changed. Upstream reconciles on the quota's and
//! the nodes' events; ours at the start of each loop, before scale-up
//! reads the valid quotas ([`super::Quota`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ListParams;
use kube::{Api, Client};

use super::quota::Quota;
use super::types::{CapacityQuota, QuotaCondition, QuotaResources};
use crate::crd::api_message;

/// The controller.
pub struct QuotaController {
    client: Client,
    clock: simclock::Clock,
}

impl QuotaController {
    /// A controller writing with `client`.
    pub fn new(client: Client, clock: simclock::Clock) -> Self {
        Self { client, clock }
    }

    /// Reconciles every quota against `nodes`; returns the valid ones, as
    /// scale-up enforces them (upstream's `CapacityQuotasProvider`).
    pub async fn reconcile(&self, nodes: &[Arc<Node>]) -> Vec<Quota> {
        let quotas = match Api::<CapacityQuota>::all(self.client.clone())
            .list(&ListParams::default())
            .await
        {
            Ok(l) => l.items,
            Err(e) => {
                tracing::warn!("Failed to list CapacityQuotas: {}", api_message(&e));
                return Vec::new();
            }
        };
        let now = self.clock.now();
        let mut valid = Vec::new();
        for original in quotas {
            let mut q = original.clone();
            q.observe_generation();
            match Quota::from_capacity_quota(&q) {
                Err(e) => {
                    QuotaCondition::Invalid(e.to_string()).set(&mut q, now);
                    QuotaCondition::NotReconciled("Validation failed".into()).set(&mut q, now);
                }
                Ok(quota) => {
                    QuotaCondition::Valid.set(&mut q, now);
                    let used = quota.usage(nodes);
                    q.status.get_or_insert_with(Default::default).used = Some(QuotaResources {
                        resources: used
                            .into_iter()
                            .map(|(k, v)| {
                                let text = render(&k, v);
                                (k, Quantity(text))
                            })
                            .collect::<BTreeMap<_, _>>(),
                    });
                    QuotaCondition::Reconciled.set(&mut q, now);
                    valid.push(quota);
                }
            }
            if q.status != original.status {
                self.write_status(&q).await;
            }
        }
        valid
    }

    async fn write_status(&self, q: &CapacityQuota) {
        if let Err(e) = crate::crd::replace_status(&Api::all(self.client.clone()), q).await {
            tracing::warn!(
                "Failed to update the status of CapacityQuota {}: {e}",
                q.name()
            );
        }
    }
}

/// A used amount as the API server would print the sum of the nodes'
/// capacities: memory-like amounts with the largest binary suffix that
/// divides them (`32Gi`), counts and cores plain.
fn render(resource: &str, v: i64) -> String {
    let binary = resource.contains("memory")
        || resource.contains("storage")
        || resource.starts_with("hugepages-");
    if binary && v != 0 {
        for (suffix, unit) in [
            ("Ti", 1i64 << 40),
            ("Gi", 1 << 30),
            ("Mi", 1 << 20),
            ("Ki", 1 << 10),
        ] {
            if v % unit == 0 {
                return format!("{}{suffix}", v / unit);
            }
        }
    }
    v.to_string()
}
