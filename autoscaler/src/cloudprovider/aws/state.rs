//! The provider's settings, and the state it shares with its node groups:
//! the cache of ASGs that each refresh rebuilds, and the problems already
//! reported.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::SystemTime;

use super::api::{Asg, AwsApi, AwsError, Connection};
use super::autodiscovery;
use super::shape::Shape;
use super::template::{BadTag, TemplateTags};
use crate::cloudprovider::{CloudError, lock};
use crate::config::NodeGroupSpec;
use crate::events::{EventReason, EventRecorder, EventType, ObjectRef};

/// How the provider finds its groups and reaches AWS.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Region, endpoint and credentials.
    pub connection: Connection,
    /// The `--nodes` groups.
    pub static_groups: Vec<NodeGroupSpec>,
    /// The tags every auto-discovered ASG carries.
    pub discovery: BTreeMap<String, String>,
}

impl Settings {
    /// From the `--nodes` and `--node-group-auto-discovery` values; region,
    /// endpoint and credentials come from the SDK's usual sources.
    pub fn new(static_groups: &[NodeGroupSpec], discovery: &[String]) -> Result<Self, CloudError> {
        Ok(Self {
            connection: Connection::default(),
            static_groups: static_groups.to_vec(),
            discovery: autodiscovery::parse(discovery)
                .map_err(|e| CloudError::configuration(e.to_string()))?,
        })
    }
}

/// Why an ASG's instance type is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstanceTypeError {
    /// A mixed instances policy with neither overrides nor a launch
    /// template.
    #[error("its mixed instances policy names no instance type")]
    MixedNamesNoType,
    /// Nothing says how the ASG launches instances.
    #[error("it has no launch configuration, launch template or mixed instances policy")]
    NoLaunchSpec,
    /// AWS did not say (the error names the call and its object).
    #[error("{0}")]
    Aws(#[from] AwsError),
}

/// An ASG's instance type and its shape, or why they are not known.
pub(super) type InstanceTypeOf = Result<(String, Shape), InstanceTypeError>;

/// One ASG as the last refresh read it.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub(super) asg: Asg,
    /// Its node template tags, or the first that does not parse.
    pub(super) tags: Result<TemplateTags, BadTag>,
    /// Why AWS cannot add instances (a failed scaling activity).
    pub(super) unavailable: Option<String>,
    /// Its instance type and shape, or why it is not known.
    pub(super) instance_type: InstanceTypeOf,
}

impl Group {
    pub(super) fn is_node_group(&self) -> bool {
        self.tags.is_ok()
    }
}

#[derive(Debug, Default)]
pub(crate) struct Cache {
    pub(super) groups: BTreeMap<String, Group>,
    /// Instance id → ASG name.
    pub(super) by_instance: HashMap<String, String>,
    /// When the cache was last rebuilt.
    pub(super) refreshed: Option<SystemTime>,
    /// Rebuild on the next refresh whatever the interval (after deletions).
    pub(super) stale: bool,
    /// When this autoscaler last set each ASG's desired capacity.
    pub(super) resized: HashMap<String, SystemTime>,
    /// Instance types by launch spec, with when they were read.
    pub(super) types: HashMap<String, (SystemTime, InstanceTypeOf)>,
}

pub(crate) struct Shared {
    pub(super) api: AwsApi,
    pub(super) settings: Settings,
    pub(super) clock: simclock::Clock,
    pub(super) events: EventRecorder,
    pub(super) cache: Mutex<Cache>,
    /// Problems already reported, so that each is said once.
    pub(super) reported: Mutex<BTreeSet<String>>,
    /// Held by every change of a group's size: each reads the desired
    /// capacity it changes.
    pub(super) resize: tokio::sync::Mutex<()>,
}

impl Shared {
    /// Reports a problem with an ASG once: an error log and a Warning
    /// event on the status ConfigMap.
    pub(super) fn report(&self, asg: &str, reason: EventReason, message: String) {
        if !lock(&self.reported).insert(format!("{asg}/{message}")) {
            return;
        }
        tracing::error!("ASG {asg}: {message}");
        self.events.record(
            &ObjectRef::config_map("kube-system", "cluster-autoscaler-status"),
            EventType::Warning,
            reason,
            format!("ASG {asg}: {message}"),
        );
    }
}
