//! An embedded Kubernetes API server: the component the whole testbed
//! stands on.
//!
//! It implements the Kubernetes REST API for the resources schedulers,
//! controllers, kubectl, kube-rs and client-go use, over one in-memory
//! store, and is served two ways from the same axum router:
//!
//! - in memory, as a `tower::Service` handed to `kube::Client::new`
//!   ([`ApiServer::client`]): no sockets, deterministic, and usable under
//!   tokio's paused (virtual) time;
//! - over TCP on 127.0.0.1 with TLS and a bearer token, with a kubeconfig
//!   ([`ApiServer::serve_tls`]), for kubectl and external binaries.
//!
//! # Architecture
//!
//! ```text
//!  http/        the router and auth; path resolution, RBAC and faults (route);
//!     │         options and responses, kubectl's Tables too (request); list,
//!     │         get, writes and subresources (rest); watch streams (watch);
//!     │         the fault rules' endpoint (admin)
//!     │
//!  server/      the server's state (state), request options (options), and the
//!     │         operations, a file each: read (get, list) / create / update
//!     │         (and patch) / apply / delete / scale
//!     │  ├── admission.rs  defaults, Priority, DefaultTolerationSeconds, pods quota, validation
//!     │  │                 (reads the server only through `AdmissionContext`)
//!     │  ├── dra.rs        resource.k8s.io/v1 defaults and validation (selectors compiled)
//!     │  ├── normalize.rs  typed k8s-openapi round trip, strict field validation
//!     │  ├── patch.rs      JSON, merge and strategic merge patch
//!     │  └── pdb.rs        PodDisruptionBudget status, eviction, binding
//!  store.rs     one lock, one resourceVersion, ordered watchers
//!  window.rs    each resource's watch window (kube-apiserver's watch cache: 75 s)
//!  registry.rs  built-in resources and CRDs registered at run time
//!  crd/         custom resources: structural schemas (prune, default, validate)
//!               and CEL validation rules, compiled once per CRD version
//!  gc.rs        garbage collector, namespace lifecycle, budget status refresh
//!  discovery.rs /api, /apis, /version, OpenAPI v3 stubs
//!  tls.rs       certificates, TLS serving, kubeconfig
//!  rbac/        who a TLS request is (admin, ServiceAccount token, impersonated),
//!               RBAC, and the access reviews answered from it
//!  faults.rs    injected errors, latency and watch faults for the client under test
//!  writes.rs    the clients under test's writes, by client (which replica acted when)
//!  limits.rs    request body, etcd object and ConfigMap/Secret data size limits
//! ```
//!
//! Every timestamp the server writes comes from one [`simclock::Clock`], so
//! under paused tokio time the cluster's clock is virtual. Label and field
//! selectors and name validation are the shared `apimachinery` crate's.

pub mod admission;
pub mod crd;
pub mod discovery;
pub mod dra;
pub mod error;
pub mod faults;
pub mod gc;
pub mod http;
pub mod limits;
pub mod normalize;
pub mod patch;
pub mod pdb;
pub mod protobuf;
pub mod rbac;
pub mod registry;
pub mod server;
pub mod store;
pub mod table;
pub mod timings;
pub mod tls;
pub mod window;
pub mod writes;

use std::net::SocketAddr;
use std::sync::Arc;

use simclock::Clock;
use tokio::task::JoinHandle;

pub use error::ApiError;
pub use server::Server;
pub use tls::{ServeError, TlsEndpoint};
pub use window::WindowPolicy;

/// A running embedded API server: the store and registry, plus its
/// background loops (garbage collection, namespace lifecycle, budget status).
pub struct ApiServer {
    server: Arc<Server>,
    loops: JoinHandle<()>,
}

impl ApiServer {
    /// Starts a server on `clock` whose watch windows are kube-apiserver's
    /// ([`WindowPolicy::KUBE_APISERVER`]). Must be called inside a tokio runtime.
    pub fn start(clock: Clock) -> Result<Self, ApiError> {
        Self::with_window(clock, WindowPolicy::KUBE_APISERVER)
    }

    /// Starts a server whose resources each keep their last `changes`
    /// changes for resuming watches (a tiny window makes clients relist).
    pub fn with_history(clock: Clock, changes: usize) -> Result<Self, ApiError> {
        Self::with_window(clock, WindowPolicy::changes(changes))
    }

    /// Starts a server whose watch windows follow `window`.
    pub fn with_window(clock: Clock, window: WindowPolicy) -> Result<Self, ApiError> {
        let server = Server::new(clock, window)?;
        let loops = gc::spawn(&server);
        Ok(Self { server, loops })
    }

    /// The server's state and operations.
    pub fn server(&self) -> &Arc<Server> {
        &self.server
    }

    /// The router without authentication (for in-memory use).
    pub fn router(&self) -> axum::Router {
        http::router(self.server.clone(), None, "127.0.0.1:443".into())
    }

    /// A kube client talking to this server in memory. With busy-time
    /// accounting on ([`simclock::busy`]), request handling and response
    /// bodies (watch streams included) are charged to `apiserver`. The
    /// testbed's own components use it: no fault is injected into it.
    pub fn client(&self) -> kube::Client {
        self.in_memory_client(None)
    }

    /// An in-memory client for the autoscaler under test: the server's
    /// [`faults`] apply to its requests, as to every request over TLS.
    pub fn client_under_test(&self) -> kube::Client {
        self.client_under_test_named("in-memory")
    }

    /// A client under test whose writes the log of writes
    /// ([`Self::writes`]) gives as `name`'s: one autoscaler replica of
    /// several.
    pub fn client_under_test_named(&self, name: &str) -> kube::Client {
        self.in_memory_client(Some(name.into()))
    }

    /// The writes of the clients under test so far, oldest first.
    pub fn writes(&self) -> Vec<writes::Write> {
        self.server.writes.all()
    }

    fn in_memory_client(&self, under_test: Option<std::sync::Arc<str>>) -> kube::Client {
        let router = self.router();
        let busy = simclock::busy::enabled();
        let service = tower::service_fn(move |mut req: ::http::Request<kube::client::Body>| {
            let mut router = router.clone();
            if let Some(name) = &under_test {
                req.extensions_mut().insert(faults::UnderTest(name.clone()));
            }
            async move {
                let call = <axum::Router as tower::Service<_>>::call(&mut router, req);
                if !busy {
                    return call.await;
                }
                simclock::busy::timed("apiserver", async move {
                    let response = call.await?;
                    Ok::<_, std::convert::Infallible>(
                        response.map(|b| axum::body::Body::new(TimedBody(b))),
                    )
                })
                .await
            }
        });
        kube::Client::new(service, "default")
    }

    /// Requests served over TLS so far (clients outside the process).
    pub fn tls_requests(&self) -> u64 {
        self.server.tls_requests()
    }

    /// Serves the API over TLS with a bearer token on `addr` (port 0 picks one).
    pub async fn serve_tls(&self, addr: SocketAddr) -> Result<TlsEndpoint, ServeError> {
        let server = self.server.clone();
        TlsEndpoint::serve(
            move |token, address| http::router(server, Some(token), address),
            addr,
        )
        .await
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.loops.abort();
    }
}

/// A response body whose polls are charged to `apiserver`.
struct TimedBody(axum::body::Body);

impl http_body::Body for TimedBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, axum::Error>>> {
        let body = &mut self.get_mut().0;
        simclock::busy::charge("apiserver", || std::pin::Pin::new(body).poll_frame(cx))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.0.size_hint()
    }
}
