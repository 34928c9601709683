//! Draining a node (docs/reference/ca-rules.md §3.6): its pods evicted through the
//! Eviction API by priority group, each eviction retried until
//! `--max-pod-eviction-time`, then waited for until they are gone.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, EvictParams};

use super::{Actuator, DeletionError, Eviction, grace_group};
use crate::events::{EventReason, EventType, ObjectRef};

/// How often a drain checks the API server for evicted pods that are
/// still there when no pod event wakes it.
const DRAIN_POLL: Duration = Duration::from_secs(5);

impl Actuator {
    fn grace_for(&self, pod: &Pod) -> (i32, i64) {
        grace_group(pod, &self.settings)
    }

    /// Evicts the pods by priority group, lowest first, and waits for each
    /// group to go before the next.
    pub(super) async fn drain(&self, node: &str, pods: &[Eviction]) -> Result<(), DeletionError> {
        let mut groups: BTreeMap<i32, (i64, Vec<Eviction>)> = BTreeMap::new();
        for (p, full) in pods {
            let (prio, grace) = self.grace_for(p);
            groups
                .entry(prio)
                .or_insert((grace, Vec::new()))
                .1
                .push((p.clone(), *full));
        }
        for (_, (group_grace, pods)) in groups {
            let deadline = tokio::time::Instant::now() + self.settings.max_pod_eviction_time;
            let mut errors = Vec::new();
            let evictions = pods
                .iter()
                .map(|(p, full)| self.evict(p.clone(), group_grace, deadline, *full));
            for (result, (p, full)) in futures::future::join_all(evictions)
                .await
                .into_iter()
                .zip(&pods)
            {
                if *full {
                    let mut progress = self.progress();
                    match result {
                        Ok(()) => progress.evicted_ok += 1,
                        Err(_) => progress.evicted_failed += 1,
                    }
                }
                if let Err(e) = result
                    && *full
                {
                    self.events.record(
                        &ObjectRef::pod(p),
                        EventType::Warning,
                        EventReason::ScaleDownFailed,
                        "failed to delete pod for ScaleDown".into(),
                    );
                    errors.push(e);
                }
            }
            if !errors.is_empty() {
                return Err(DeletionError::Drain {
                    node: node.to_string(),
                    errors,
                });
            }
            // Wait for the evicted pods to go: checked with the API server
            // when the cache no longer has them on the node (each pod event
            // wakes the wait), and at least every 5 s.
            let wait = Duration::from_secs(u64::try_from(group_grace.max(0)).unwrap_or(0) + 30);
            let until = tokio::time::Instant::now() + wait;
            let mut pod_events = self.cache.pod_events();
            let mut ask_api = true;
            loop {
                if (ask_api || self.still_in_cache(node, &pods) == 0)
                    && self.remaining(node, &pods).await == 0
                {
                    break;
                }
                if tokio::time::Instant::now() >= until {
                    return Err(DeletionError::PodsRemaining {
                        node: node.to_string(),
                    });
                }
                ask_api = match tokio::time::timeout(DRAIN_POLL, pod_events.changed()).await {
                    Ok(Ok(())) => false,
                    Ok(Err(_)) => {
                        tokio::time::sleep(DRAIN_POLL).await;
                        true
                    }
                    Err(_) => true,
                };
            }
        }
        Ok(())
    }

    async fn evict(
        &self,
        pod: Arc<Pod>,
        group_grace: i64,
        deadline: tokio::time::Instant,
        full: bool,
    ) -> Result<(), DeletionError> {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let own = pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(30);
        let grace = if group_grace <= 0 {
            own
        } else {
            own.min(group_grace)
        };
        self.events.record(
            &ObjectRef::pod(&pod),
            EventType::Normal,
            EventReason::ScaleDown,
            "deleting pod for node scale down".into(),
        );
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let params = EvictParams {
            delete_options: Some(
                DeleteParams::default().grace_period(u32::try_from(grace.max(0)).unwrap_or(0)),
            ),
            ..EvictParams::default()
        };
        loop {
            let last = match api.evict(&name, &params).await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                Err(e) => e.to_string(),
            };
            if !full || tokio::time::Instant::now() >= deadline {
                return Err(DeletionError::Eviction {
                    namespace: ns,
                    name,
                    last,
                });
            }
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
    }

    /// How many of the pods the cache still has on the node (same uid).
    fn still_in_cache(&self, node: &str, pods: &[Eviction]) -> usize {
        let state = self.cache.read();
        pods.iter()
            .filter(|(p, _)| {
                state
                    .pods
                    .get(predicates::nodeinfo::pod_key(p).as_str())
                    .is_some_and(|c| {
                        c.pod.metadata.uid == p.metadata.uid
                            && c.pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
                                == Some(node)
                    })
            })
            .count()
    }

    /// How many of the pods are still on the node (same uid, same node).
    async fn remaining(&self, node: &str, pods: &[Eviction]) -> usize {
        let mut n = 0;
        for (p, _) in pods {
            let api: Api<Pod> = Api::namespaced(
                self.client.clone(),
                p.metadata.namespace.as_deref().unwrap_or("default"),
            );
            if let Ok(Some(current)) = api.get_opt(p.metadata.name.as_deref().unwrap_or("")).await
                && current.metadata.uid == p.metadata.uid
                && current.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
            {
                n += 1;
            }
        }
        n
    }
}
