//! A scenario's running cluster and autoscaler ([`Running`]): scenario
//! time, restarts, the leading replica, and what the autoscaler publishes.

use std::time::Duration;

use autoscaler::decisions::Decisions;
use harness::cluster::Cluster;

use super::autoscaler::{Autoscaler, start_binary, start_in_process};
use super::errors::{EndpointError, StartError};
use super::extensions::Extensions;
use super::provider::Provider;
use super::under_test::{UnderTest, under_test};
use crate::binary;
use crate::replicas::{self, Holder, check_holder_identity};

/// Why a step failed (printed by cucumber).
pub type StepResult = Result<(), String>;

/// The running cluster and autoscaler of a scenario.
pub struct Running {
    /// The cluster.
    pub cluster: Cluster,
    pub(super) autoscaler: Autoscaler,
    pub(super) started: tokio::time::Instant,
    pub(super) time_scale: f64,
    pub(super) flags: Vec<String>,
    pub(super) extensions: Extensions,
    pub(super) provider: Provider,
    /// The safety invariants' observer, when the scenario asked for it.
    pub observer: Option<crate::invariants::Observer>,
    /// The in-process autoscaler's clock (the cluster's, or skewed).
    pub(super) clock: simclock::Clock,
    /// Tasks that play parts of the cluster for the scenario (the CSI
    /// registrar), aborted with it.
    pub(super) sidecars: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.autoscaler.stop();
        for h in &self.sidecars {
            h.abort();
        }
    }
}

impl Running {
    /// The real duration of `scenario` time.
    pub fn real(&self, scenario: Duration) -> Duration {
        scenario.div_f64(self.time_scale)
    }

    /// The scenario duration of `real` time.
    pub fn scenario(&self, real: Duration) -> Duration {
        real.mul_f64(self.time_scale)
    }

    /// How long a step waits for something that should happen `within`
    /// scenario time: `within`, plus in binary mode CA's fixed real-time
    /// waits ([`binary::FIXED_REAL_WAITS`]) expressed in scenario time.
    pub fn window(&self, within: Duration) -> Duration {
        if self.time_scale == 1.0 {
            within
        } else {
            within + binary::FIXED_REAL_WAITS.mul_f64(self.time_scale)
        }
    }

    /// Scenario time since the autoscaler started.
    pub fn scenario_time(&self) -> Duration {
        self.started.elapsed().mul_f64(self.time_scale)
    }

    /// Lets `d` of scenario time pass while everything runs; fails when the
    /// autoscaler process has exited.
    pub async fn pass(&mut self, d: Duration) -> StepResult {
        tokio::time::sleep(self.real(d)).await;
        self.check_alive()
    }

    /// The autoscaler binary's log file.
    pub fn log(&self) -> Option<&std::path::Path> {
        match &self.autoscaler {
            Autoscaler::Binary(b) => Some(&b.log),
            Autoscaler::InProcess { .. } | Autoscaler::Replicas(_) => None,
        }
    }

    /// Fails with the tail of its log when the autoscaler binary exited.
    pub fn check_alive(&mut self) -> StepResult {
        self.autoscaler.exited().map_or(Ok(()), Err)
    }

    /// Stops the autoscaler and starts it again with the same flags, as a
    /// new pod of the Deployment would.
    pub async fn restart(&mut self) -> StepResult {
        self.autoscaler = match &mut self.autoscaler {
            Autoscaler::InProcess { task, .. } => {
                task.abort();
                start_in_process(&self.cluster, &self.clock, self.provider, &self.flags)
                    .await
                    .map_err(|e| e.to_string())?
            }
            Autoscaler::Binary(b) => {
                b.child
                    .kill()
                    .await
                    .map_err(|e| format!("stopping the autoscaler binary: {e}"))?;
                self.start_binary_again().await.map_err(|e| e.to_string())?
            }
            Autoscaler::Replicas(_) => {
                return Err(
                    "with several replicas, kill one: \"When the leading replica is killed\""
                        .into(),
                );
            }
        };
        Ok(())
    }

    /// The configured binary, started again with the scenario's flags.
    async fn start_binary_again(&self) -> Result<Autoscaler, StartError> {
        let UnderTest::Binary { info, args, .. } = under_test() else {
            return Err(StartError::NotBinaryMode);
        };
        let binary = start_binary(
            &self.cluster,
            &info,
            self.provider,
            &self.flags,
            &args,
            self.time_scale,
            None,
        )
        .await?;
        Ok(Autoscaler::Binary(binary))
    }

    /// The writes of the autoscaler under test so far, by client (the
    /// embedded API server's log).
    pub fn writes(&self) -> Result<Vec<apiserver::writes::Write>, String> {
        self.cluster
            .api_server()
            .map(apiserver::ApiServer::writes)
            .ok_or_else(|| "the log of writes needs the embedded API server".into())
    }

    /// Kills the replica that holds the Lease (waiting up to `within` of
    /// scenario time for one to), as `kubectl delete pod --force` or a node
    /// failure would: no graceful shutdown. Returns its name.
    pub async fn kill_leader(&mut self, within: Duration) -> Result<String, String> {
        let deadline = self.window(within);
        let mut waited = Duration::ZERO;
        loop {
            let leader = replicas::leader(&self.writes()?);
            if let Autoscaler::Replicas(replicas) = &mut self.autoscaler {
                if let Some(i) = leader.and_then(|l| replicas.iter().position(|(n, _)| *n == l)) {
                    let hosts: Vec<Option<&str>> =
                        replicas.iter().map(|(_, r)| r.hostname()).collect();
                    match check_holder_identity(&self.cluster.client(), &hosts, i).await? {
                        Holder::Leader => {
                            let (name, mut replica) = replicas.remove(i);
                            replica.kill();
                            return Ok(name.to_string());
                        }
                        // The Lease changed hands since the log was read.
                        Holder::Moved => {}
                    }
                }
            } else {
                return Err(
                    "no replicas: start them with \"Given the autoscaler runs as 2 replicas with leader election\"".into(),
                );
            }
            if waited >= deadline {
                return Err(format!(
                    "no live replica renewed the lease {}/{} within {within:?}",
                    replicas::LEASE.0,
                    replicas::LEASE.1
                ));
            }
            let step = Duration::from_secs(1);
            self.pass(step).await?;
            waited += step;
        }
    }

    /// The decision record where the autoscaler offers one (ours), for a
    /// step whose verdict stands without it (an upstream binary answers 404:
    /// `None`); not an extension.
    pub async fn decisions_if_offered(&self) -> Option<Decisions> {
        match &self.autoscaler {
            Autoscaler::InProcess { endpoints, .. } => Some(endpoints.decisions()),
            Autoscaler::Replicas(_) => None,
            Autoscaler::Binary(b) => match http_get(b.port, "/decisions").await {
                Ok((200, body)) => serde_json::from_str(&body).ok(),
                _ => None,
            },
        }
    }

    /// The decision record (`/decisions`), an extension of ours: a scenario
    /// that reads it must be tagged `@extension`.
    pub async fn decisions(&self) -> Result<Decisions, EndpointError> {
        self.extensions.record("the decision record (/decisions)");
        match &self.autoscaler {
            Autoscaler::InProcess { endpoints, .. } => Ok(endpoints.decisions()),
            Autoscaler::Replicas(_) => Err(EndpointError::Replicas),
            Autoscaler::Binary(b) => {
                let (code, body) = http_get(b.port, "/decisions").await?;
                if code != 200 {
                    return Err(EndpointError::NoDecisionRecord { code });
                }
                serde_json::from_str(&body)
                    .map_err(|source| EndpointError::Decisions { source, body })
            }
        }
    }

    /// The autoscaler's `/metrics` text.
    pub async fn metrics(&self) -> Result<String, EndpointError> {
        match &self.autoscaler {
            Autoscaler::InProcess { endpoints, .. } => Ok(endpoints.metrics.encode()),
            Autoscaler::Replicas(_) => Err(EndpointError::Replicas),
            Autoscaler::Binary(b) => match http_get(b.port, "/metrics").await? {
                (200, body) => Ok(body),
                (code, body) => Err(EndpointError::Status {
                    path: "/metrics",
                    code,
                    body,
                }),
            },
        }
    }

    /// The autoscaler's `/health-check` answer: status code and body.
    pub async fn health(&self) -> Result<(u16, String), EndpointError> {
        match &self.autoscaler {
            Autoscaler::Replicas(_) => Err(EndpointError::Replicas),
            Autoscaler::InProcess { endpoints, .. } => Ok(match endpoints.health() {
                Ok(()) => (200, "OK".into()),
                Err(e) => (500, e.to_string()),
            }),
            Autoscaler::Binary(b) => http_get(b.port, "/health-check").await,
        }
    }
}

/// A `/snapshotz` request under way: its status code and body.
pub type SnapshotRequest = tokio::task::JoinHandle<Result<(u16, String), String>>;

impl Running {
    /// Starts a `/snapshotz` request, which waits for the autoscaler's
    /// next loop: its status code and body, once answered (404 where the
    /// path is not served).
    pub fn request_snapshot(&self) -> Result<SnapshotRequest, String> {
        match &self.autoscaler {
            Autoscaler::InProcess { endpoints, .. } => {
                let endpoints = endpoints.clone();
                Ok(tokio::spawn(async move {
                    Ok(endpoints
                        .snapshot()
                        .await
                        .unwrap_or((404, "404 page not found".into())))
                }))
            }
            Autoscaler::Replicas(_) => Err(EndpointError::Replicas.to_string()),
            Autoscaler::Binary(b) => {
                let port = b.port;
                Ok(tokio::spawn(async move {
                    http_get(port, "/snapshotz")
                        .await
                        .map_err(|e| e.to_string())
                }))
            }
        }
    }
}

/// A plain HTTP/1.0 GET on 127.0.0.1.
async fn http_get(port: u16, path: &'static str) -> Result<(u16, String), EndpointError> {
    harness::http_get(port, path)
        .await
        .map_err(|source| EndpointError::Http { port, path, source })
}
