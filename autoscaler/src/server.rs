//! The HTTP endpoints on `--address` (docs/reference/ca-rules.md §8.1): `/metrics`,
//! `/health-check`, with `--debugging-snapshot-enabled` `/snapshotz`
//! ([`crate::debuggingsnapshot`]), with `--profiling` `/debug/pprof/...`
//! ([`crate::profiling`]), and (beyond upstream) `/decisions`, the last
//! loop's decision record as JSON. They answer on non-leaders too.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{any, get};

use crate::core::Liveness;
use crate::debuggingsnapshot::DebuggingSnapshotter;
use crate::decisions::Decisions;
use crate::metrics::{self, Metrics, Unhealthy};

/// What the endpoints read.
#[derive(Clone)]
pub struct Endpoints {
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Loop liveness; `None` until the loop starts (health is then OK).
    pub liveness: Arc<Mutex<Option<Arc<Mutex<Liveness>>>>>,
    /// Decisions of the last loop.
    pub decisions: Arc<Mutex<Option<crate::decisions::LastDecisions>>>,
    /// The clock.
    pub clock: simclock::Clock,
    /// `--max-inactivity`, `--max-failing-time`, `--max-startup-time`.
    pub timeouts: (Duration, Duration, Duration),
    /// `--debugging-snapshot-enabled`: `/snapshotz`.
    pub snapshotter: Option<Arc<DebuggingSnapshotter>>,
    /// `--profiling`: `/debug/pprof/...`.
    pub profiling: bool,
}

impl Endpoints {
    /// The router.
    pub fn router(self) -> Router {
        let snapshotter = self.snapshotter.clone();
        let profiling = self.profiling;
        let (m, h, d) = (self.clone(), self.clone(), self);
        let mut router = Router::new()
            .route(
                "/metrics",
                get(move || {
                    let text = m.metrics.encode();
                    async move {
                        (
                            [(
                                header::CONTENT_TYPE,
                                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                            )],
                            text,
                        )
                    }
                }),
            )
            .route(
                "/health-check",
                get(move || {
                    let verdict = h.health();
                    async move {
                        match verdict {
                            Ok(()) => (StatusCode::OK, "OK".to_string()).into_response(),
                            Err(e) => {
                                (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
                            }
                        }
                    }
                }),
            )
            .route(
                "/decisions",
                get(move || {
                    let body = d.decisions();
                    async move { axum::Json(body) }
                }),
            );
        if profiling {
            router = router.merge(crate::profiling::routes());
        }
        match snapshotter {
            // Any method, as upstream's handler.
            Some(s) => router.route(
                "/snapshotz",
                any(move || {
                    let s = s.clone();
                    async move {
                        let (code, body) = s.request().await;
                        let code =
                            StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                        (
                            code,
                            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                            body,
                        )
                    }
                }),
            ),
            None => router,
        }
    }

    /// `/snapshotz`: waits for the next loop's snapshot (`None` without
    /// `--debugging-snapshot-enabled`: the path is not served).
    pub async fn snapshot(&self) -> Option<(u16, String)> {
        let s = self.snapshotter.clone()?;
        Some(s.request().await)
    }

    /// The last loop's decision record (empty before the first loop).
    pub fn decisions(&self) -> Decisions {
        self.decisions
            .lock()
            .ok()
            .and_then(|o| o.clone())
            .and_then(|dec| dec.lock().ok().map(|x| (**x).clone()))
            .unwrap_or_default()
    }

    /// The `/health-check` verdict: `Ok`, or what the 500 body says.
    pub fn health(&self) -> Result<(), Unhealthy> {
        let Some(l) = self.liveness.lock().ok().and_then(|o| o.clone()) else {
            return Ok(());
        };
        let l = *l.lock().unwrap_or_else(|e| e.into_inner());
        let (inactivity, failing, startup) = self.timeouts;
        metrics::health(
            self.clock.now(),
            l.last_activity,
            l.last_success,
            l.started,
            inactivity,
            failing,
            startup,
        )
    }

    /// Serves on `addr` until the process ends.
    pub async fn serve(
        self,
        addr: SocketAddr,
    ) -> Result<tokio::task::JoinHandle<()>, std::io::Error> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let router = self.router();
        Ok(tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                tracing::error!("metrics server: {e}");
            }
        }))
    }
}
