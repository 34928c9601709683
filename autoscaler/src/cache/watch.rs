//! The watch-fed cache: [`ClusterCache`] starts one watch per kind, maps
//! each event to a [`Change`], [`apply`]s it to the state under the write
//! lock and fires the wake-ups it returns.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod, PodTemplate, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use predicates::nodeinfo::pod_key;
use simclock::Clock;
use tokio::sync::{Notify, watch};

use super::apply::{Change, Lists, WakeUps, apply, namespaced_key};
use super::desired_pods;
use super::dra::{Dra, DraKind, DraObject};
use super::state::State;
use super::storage::StorageObject;
use crate::provisioningrequest::types::ProvisioningRequest;
use predicates::dynamicresources::api::{DeviceClass, ResourceClaim, ResourceSlice};

/// The kinds a cache watches beyond those every loop needs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extra {
    /// ProvisioningRequests and PodTemplates (`--enable-provisioning-requests`).
    pub provisioning_requests: bool,
}

/// The watch-fed cache.
pub struct ClusterCache {
    state: RwLock<State>,
    /// The autoscaler's clock (how recent an Unschedulable mark is).
    clock: Clock,
    unschedulable: Notify,
    /// Whether the last loop left nodes upcoming.
    nodes_upcoming: AtomicBool,
    bound: Notify,
    ready: watch::Sender<bool>,
    /// Counts pod events, so that waiters wake on the next one.
    pod_events: watch::Sender<u64>,
}

impl ClusterCache {
    /// Starts the watches; [`Self::wait_ready`] returns once every initial
    /// list is in.
    pub fn start(client: Client, clock: Clock) -> (Arc<Self>, tokio::task::JoinHandle<()>) {
        Self::start_with(client, clock, Extra::default())
    }

    /// Like [`Self::start`], watching the `extra` kinds too: the cache is
    /// ready once their lists are in as well (upstream waits for its
    /// ProvisioningRequest informer to sync, without end if the CRD is
    /// missing: the watch retries and the log says why).
    pub fn start_with(
        client: Client,
        clock: Clock,
        extra: Extra,
    ) -> (Arc<Self>, tokio::task::JoinHandle<()>) {
        let (ready, _) = watch::channel(false);
        let (pod_events, _) = watch::channel(0);
        let cache = Arc::new(Self {
            state: RwLock::new(State::default()),
            clock,
            unschedulable: Notify::new(),
            nodes_upcoming: AtomicBool::new(false),
            bound: Notify::new(),
            ready,
            pod_events,
        });
        let task = tokio::spawn(cache.clone().run(client, extra));
        (cache, task)
    }

    /// Waits until every watch has delivered its initial list.
    pub async fn wait_ready(&self) {
        let mut rx = self.ready.subscribe();
        let _ = rx.wait_for(|r| *r).await;
    }

    /// Read access.
    pub fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Write access (snapshot building rebuilds dirty node infos).
    pub fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// A receiver that sees every pod event applied to the cache from now
    /// on (`changed()` resolves after the next one).
    pub fn pod_events(&self) -> watch::Receiver<u64> {
        self.pod_events.subscribe()
    }

    /// Resolves on the next change to a recently Unschedulable pod (the
    /// [cache](super) module's docs), or at once if one came since the last call.
    pub async fn unschedulable_pod(&self) {
        self.unschedulable.notified().await;
    }

    /// Whether nodes are upcoming, which makes binds notify
    /// [`Self::pod_bound`].
    pub fn set_nodes_upcoming(&self, upcoming: bool) {
        self.nodes_upcoming.store(upcoming, Ordering::Relaxed);
    }

    /// Resolves on the next pod bound while nodes are upcoming (the
    /// [cache](super) module's docs), or at once if one was since the last call.
    pub async fn pod_bound(&self) {
        self.bound.notified().await;
    }

    /// Applies every change the watches deliver, then fires its wake-ups
    /// (after the write lock is released).
    async fn run(self: Arc<Self>, client: Client, extra: Extra) {
        let mut streams = watches(&client);
        streams.extend(storage_watches(&client));
        streams.extend(dra_watches(&client));
        if extra.provisioning_requests {
            streams.extend(provisioning_request_watches(&client));
        }
        let mut lists = Lists::new(streams.len());
        let mut changes = futures::stream::select_all(streams);
        while let Some(change) = changes.next().await {
            let upcoming = self.nodes_upcoming.load(Ordering::Relaxed);
            let wake = apply(&mut self.write(), change, &mut lists, &self.clock, upcoming);
            self.wake(wake);
        }
    }

    /// Fires the wake-ups [`apply`] returned.
    fn wake(&self, wake: WakeUps) {
        if wake.ready {
            self.ready.send_replace(true);
        }
        if wake.unschedulable_pod {
            self.unschedulable.notify_one();
        }
        if wake.pod_bound {
            self.bound.notify_one();
        }
        if wake.pod_event {
            self.pod_events.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

/// What a watched kind is: a typed API object the watcher can list and
/// decode.
trait Watched:
    Resource<DynamicType = ()>
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// One watch per kind the cache keeps, each event mapped to its [`Change`].
fn watches(client: &Client) -> Vec<BoxStream<'static, Change>> {
    vec![
        stream(
            client,
            "Node",
            |n: Node, _| Change::NodeApplied(Box::new(n)),
            |n| Change::NodeDeleted(n.name_any()),
        ),
        stream(
            client,
            "Pod",
            |p: Pod, listed| Change::PodApplied {
                pod: Box::new(p),
                listed,
            },
            |p| Change::PodDeleted(pod_key(&p)),
        ),
        stream(
            client,
            "PodDisruptionBudget",
            |b: PodDisruptionBudget, _| Change::BudgetApplied(Box::new(b)),
            |b| Change::BudgetDeleted(namespaced_key(&b)),
        ),
        controller::<ReplicaSet>(
            client,
            "ReplicaSet",
            |r| r.spec.as_ref().and_then(|s| s.replicas),
            desired_pods::replica_set,
        ),
        controller::<ReplicationController>(
            client,
            "ReplicationController",
            |r| r.spec.as_ref().and_then(|s| s.replicas),
            |_| None,
        ),
        controller::<StatefulSet>(
            client,
            "StatefulSet",
            |r| r.spec.as_ref().and_then(|s| s.replicas),
            desired_pods::stateful_set,
        ),
        controller::<Job>(client, "Job", |_| None, desired_pods::job),
        stream(
            client,
            "DaemonSet",
            |d: DaemonSet, _| Change::DaemonSetApplied(Box::new(d)),
            |d| Change::DaemonSetDeleted {
                namespace: d.namespace().unwrap_or_default(),
                name: d.name_any(),
            },
        ),
    ]
}

/// The watches of what NodeVolumeLimits reads.
fn storage_watches(client: &Client) -> Vec<BoxStream<'static, Change>> {
    fn watch<K>(
        client: &Client,
        kind: &'static str,
        wrap: fn(K) -> StorageObject,
    ) -> BoxStream<'static, Change>
    where
        K: Watched,
    {
        stream(
            client,
            kind,
            move |k: K, _| Change::StorageApplied(Box::new(wrap(k))),
            move |k: K| Change::StorageDeleted {
                kind,
                key: wrap(k).key(),
            },
        )
    }
    vec![
        watch(client, "CSINode", StorageObject::CsiNode),
        watch(client, "PersistentVolumeClaim", |c| {
            StorageObject::Claim(Box::new(c))
        }),
        watch(client, "PersistentVolume", |v| {
            StorageObject::Volume(Box::new(v))
        }),
        watch(client, "StorageClass", StorageObject::Class),
    ]
}

/// The watches of the DRA kinds.
fn dra_watches(client: &Client) -> Vec<BoxStream<'static, Change>> {
    fn watch<T>(client: &Client, wrap: fn(T) -> DraObject) -> BoxStream<'static, Change>
    where
        T: DraKind + serde::de::DeserializeOwned + Clone + std::fmt::Debug + Send + Sync + 'static,
        T::Scope: Send + Sync,
    {
        stream(
            client,
            T::KIND,
            move |d: Dra<T>, _| Change::DraApplied(Box::new(wrap(d.object))),
            move |d: Dra<T>| Change::DraDeleted {
                kind: T::KIND,
                key: wrap(d.object).key(),
            },
        )
    }
    vec![
        watch::<DeviceClass>(client, DraObject::Class),
        watch::<ResourceClaim>(client, |c| DraObject::Claim(Box::new(c))),
        watch::<ResourceSlice>(client, |s| DraObject::Slice(Box::new(s))),
    ]
}

/// The watches of ProvisioningRequests and PodTemplates.
fn provisioning_request_watches(client: &Client) -> Vec<BoxStream<'static, Change>> {
    vec![
        stream(
            client,
            "ProvisioningRequest",
            |p: ProvisioningRequest, _| Change::ProvisioningRequestApplied(Box::new(p)),
            |p| Change::ProvisioningRequestDeleted(p.key()),
        ),
        stream(
            client,
            "PodTemplate",
            |t: PodTemplate, _| Change::PodTemplateApplied(Box::new(t)),
            |t| Change::PodTemplateDeleted(namespaced_key(&t)),
        ),
    ]
}

/// A watch of every object of `kind`, retried with backoff; errors are
/// logged and skipped.
fn stream<K>(
    client: &Client,
    kind: &'static str,
    applied: impl Fn(K, bool) -> Change + Send + Sync + 'static,
    deleted: impl Fn(K) -> Change + Send + Sync + 'static,
) -> BoxStream<'static, Change>
where
    K: Watched,
{
    watcher::watcher(Api::<K>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .filter_map(move |e| {
            let out = match e {
                Ok(e) => Some(Change::from_event(kind, e, &applied, &deleted)),
                Err(err) if not_served(&err) => {
                    // A kind the server does not serve (a CRD not
                    // installed) is the user's to fix: say so.
                    tracing::warn!("Failed to watch {kind}: {err}");
                    None
                }
                Err(err) => {
                    tracing::debug!("cluster cache watch: {err}");
                    None
                }
            };
            async move { out }
        })
        .boxed()
}

/// Whether a watch failed because the server does not serve the kind
/// (404 on the list: its CRD is not installed).
fn not_served(err: &watcher::Error) -> bool {
    matches!(err, watcher::Error::InitialListFailed(kube::Error::Api(s)) if s.code == 404)
}

/// A watch of a controller kind: what the drainability rules need of one
/// is its namespace, name and desired replicas; proactive scale-up, its uid
/// and the pods it wants to exist.
fn controller<K>(
    client: &Client,
    kind: &'static str,
    replicas: fn(&K) -> Option<i32>,
    desired: fn(&K) -> Option<i32>,
) -> BoxStream<'static, Change>
where
    K: Watched,
{
    stream(
        client,
        kind,
        move |k: K, _| Change::ControllerApplied {
            kind,
            namespace: k.namespace().unwrap_or_default(),
            name: k.name_any(),
            uid: k.uid().unwrap_or_default(),
            replicas: replicas(&k),
            desired_pods: desired(&k),
        },
        move |k: K| Change::ControllerDeleted {
            kind,
            namespace: k.namespace().unwrap_or_default(),
            name: k.name_any(),
        },
    )
}
