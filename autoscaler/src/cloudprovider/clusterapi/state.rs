//! The provider's settings, and the state it shares with its node groups:
//! the clients, the last [`Snapshot`] and the problems already reported.

use std::collections::BTreeSet;
use std::sync::Mutex;

use kube::api::{ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::{Api, Client, ResourceExt};

use super::autodiscovery::AutoDiscovery;
use super::keys::Keys;
use super::snapshot::{ScalableKind, Snapshot, key_of};
use crate::cloudprovider::{CloudError, lock};
use crate::events::{EventReason, EventRecorder, EventType, ObjectRef};

/// Cluster API's default group.
pub const DEFAULT_GROUP: &str = "cluster.x-k8s.io";
/// How the provider finds its objects.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `CAPI_GROUP`.
    pub group: String,
    /// `CAPI_VERSION`; `None` means the group's preferred version.
    pub version: Option<String>,
    /// `--node-group-auto-discovery` specs.
    pub discovery: Vec<AutoDiscovery>,
    /// `CAPI_SCALE_ZERO_DEFAULT_ARCH` (amd64 unless a known architecture).
    pub default_arch: String,
}

impl Settings {
    /// From the environment and the auto-discovery flag values.
    pub fn new(discovery: &[String]) -> Result<Self, CloudError> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let arch = env("CAPI_SCALE_ZERO_DEFAULT_ARCH").unwrap_or_default();
        let default_arch = match arch.as_str() {
            "amd64" | "arm64" | "ppc64le" | "s390x" => arch,
            "" => "amd64".to_string(),
            other => {
                tracing::error!("Unrecognized architecture '{other}', falling back to amd64");
                "amd64".to_string()
            }
        };
        Ok(Self {
            group: env("CAPI_GROUP").unwrap_or_else(|| DEFAULT_GROUP.to_string()),
            version: env("CAPI_VERSION"),
            discovery: discovery
                .iter()
                .map(|s| AutoDiscovery::parse(s))
                .collect::<Result<_, _>>()
                .map_err(|e| {
                    CloudError::configuration(format!(
                        "failed to parse auto discovery configuration: {e}"
                    ))
                })?,
            default_arch,
        })
    }
}

pub(crate) struct Shared {
    /// The management cluster.
    pub(super) client: Client,
    pub(super) keys: Keys,
    pub(super) settings: Settings,
    pub(super) version: String,
    pub(super) has_deployments: bool,
    pub(super) events: EventRecorder,
    pub(super) clock: simclock::Clock,
    pub(super) snapshot: Mutex<Snapshot>,
    /// Problems already reported, so that each is said once.
    pub(super) reported: Mutex<BTreeSet<String>>,
    /// Held by every change of a group's size, as upstream's controller
    /// holds its access lock: deletions run concurrently, and each reads
    /// the replicas it lowers.
    pub(super) resize: tokio::sync::Mutex<()>,
}

impl Shared {
    pub(super) fn resource(&self, kind: &str) -> ApiResource {
        let plural = format!("{}s", kind.to_lowercase());
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&self.keys.group, &self.version, kind),
            &plural,
        )
    }

    pub(super) fn api(&self, kind: &str, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &self.resource(kind))
    }

    /// Reports a problem with an object once (until it is fixed): an error
    /// log and a Warning event on the object.
    pub(super) fn report(
        &self,
        o: &DynamicObject,
        kind: ScalableKind,
        reason: EventReason,
        message: String,
    ) {
        let key = format!("{}/{}/{message}", kind.as_str(), key_of(o));
        if !lock(&self.reported).insert(key) {
            return;
        }
        tracing::error!("{} {}: {message}", kind.as_str(), key_of(o));
        let object = ObjectRef {
            api_version: format!("{}/{}", self.keys.group, self.version),
            kind: kind.as_str().to_string(),
            namespace: o.namespace().unwrap_or_default(),
            name: o.name_any(),
            uid: o.metadata.uid.clone().unwrap_or_default(),
        };
        self.events
            .record(&object, EventType::Warning, reason, message);
    }
}
