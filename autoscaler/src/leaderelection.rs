//! Leader election on a Lease (`--leader-elect`, on by default): the lock
//! is `--leader-elect-resource-name` in `--namespace`; a lease is taken when
//! it is free, ours, or expired, and written with optimistic concurrency (a
//! conflicting writer wins, we retry). Renewal every
//! `--leader-elect-retry-period`; failing to renew for
//! `--leader-elect-renew-deadline` means the lease is lost, and the process
//! exits as upstream does ("lost master").

use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::PostParams;
use kube::{Api, Client};

/// Leader election settings.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    /// Lease namespace.
    pub namespace: String,
    /// Lease name.
    pub name: String,
    /// Our identity.
    pub identity: String,
    /// `--leader-elect-lease-duration`.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`.
    pub retry_period: Duration,
}

impl LeaderElection {
    /// Takes or renews the lease once; `Ok(false)` when another holder has it.
    pub async fn try_acquire_or_renew(
        &self,
        client: &Client,
        now: SystemTime,
    ) -> Result<bool, kube::Error> {
        let api: Api<Lease> = Api::namespaced(client.clone(), &self.namespace);
        let stamp = MicroTime(simclock::to_timestamp(now));
        let secs = i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = api.get_opt(&self.name).await? else {
            let lease: Lease = serde_json::from_value(serde_json::json!({
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": secs, "leaseTransitions": 0},
            }))
            .map_err(kube::Error::SerdeError)?;
            let mut lease = lease;
            if let Some(spec) = lease.spec.as_mut() {
                spec.acquire_time = Some(stamp.clone());
                spec.renew_time = Some(stamp);
            }
            return match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        if !holder.is_empty() && holder != self.identity {
            let duration = Duration::from_secs(
                u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
            );
            let renewed = spec.renew_time.as_ref().map(|t| SystemTime::from(t.0));
            if renewed.is_some_and(|r| r + duration > now) {
                return Ok(false);
            }
        }
        if holder != self.identity {
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            spec.acquire_time = Some(stamp.clone());
            spec.holder_identity = Some(self.identity.clone());
        }
        spec.lease_duration_seconds = Some(secs);
        spec.renew_time = Some(stamp);
        lease.metadata.managed_fields = None;
        match api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Waits until this process holds the lease.
    pub async fn acquire(&self, client: &Client, clock: &simclock::Clock) {
        loop {
            match self.try_acquire_or_renew(client, clock.now()).await {
                Ok(true) => {
                    tracing::info!(
                        "became leader ({}) on lease {}/{}",
                        self.identity,
                        self.namespace,
                        self.name
                    );
                    return;
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(
                    "leader election on lease {}/{}: {e}",
                    self.namespace,
                    self.name
                ),
            }
            tokio::time::sleep(self.retry_period).await;
        }
    }

    /// Renews until the lease is lost; returns why.
    pub async fn hold(&self, client: &Client, clock: &simclock::Clock) -> String {
        let mut last = clock.now();
        loop {
            tokio::time::sleep(self.retry_period).await;
            let now = clock.now();
            match self.try_acquire_or_renew(client, now).await {
                Ok(true) => last = now,
                Ok(false) => {
                    return format!(
                        "lost master: lease {}/{} is held by another process",
                        self.namespace, self.name
                    );
                }
                Err(e) => tracing::warn!("renewing lease {}/{}: {e}", self.namespace, self.name),
            }
            if now.duration_since(last).unwrap_or_default() > self.renew_deadline {
                return format!(
                    "lost master: could not renew lease {}/{} within {}",
                    self.namespace,
                    self.name,
                    simclock::format_go_duration(self.renew_deadline)
                );
            }
        }
    }
}
