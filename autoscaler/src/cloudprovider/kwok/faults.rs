//! Fault injection (beyond upstream, for test clusters): a group's
//! `increase_size` fails with an error class and code, its instances fail to
//! be created or never register, or its deletions fail; set from tests
//! ([`Faults`]) or from a template annotation ([`FAULT_ANNOTATION`]).

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::cloudprovider::{ErrorClass, InstanceErrorInfo, lock};

/// Template annotation that injects a fault into the group (beyond
/// upstream, for test clusters driven from outside the process):
/// `never-register`, `increase-size-error=<Class>:<code>:<message>`,
/// `creation-error=<Class>:<code>:<message>` (Class `OutOfResource` or
/// `Other`) or `delete-error=<message>`.
pub const FAULT_ANNOTATION: &str = "testbed.cluster-autoscaler.kwok/fault";

/// A [`FAULT_ANNOTATION`] value that is not a fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    /// Not one of the fault kinds.
    #[error(
        "{0:?} is not never-register, increase-size-error=<Class>:<code>:<message>, creation-error=<Class>:<code>:<message> or delete-error=<message>"
    )]
    Unknown(String),
    /// A kind without its class, code and message.
    #[error("{0:?}: want <kind>=<Class>:<code>:<message>")]
    Incomplete(String),
    /// An unknown error class.
    #[error("{value:?}: error class {class:?} is not OutOfResource or Other")]
    Class {
        /// The annotation value.
        value: String,
        /// The class it names.
        class: String,
    },
}

/// Parses a [`FAULT_ANNOTATION`] value.
pub fn parse_fault(value: &str) -> Result<Fault, FaultError> {
    if value.trim() == "never-register" {
        return Ok(Fault::NeverRegister);
    }
    let (creation, spec) = match value.trim().split_once('=') {
        Some(("increase-size-error", spec)) => (false, spec),
        Some(("creation-error", spec)) => (true, spec),
        Some(("delete-error", message)) if !message.trim().is_empty() => {
            return Ok(Fault::DeleteFails(message.trim().to_string()));
        }
        _ => {
            return Err(FaultError::Unknown(value.to_string()));
        }
    };
    let mut parts = spec.splitn(3, ':');
    let (Some(class), Some(code), Some(message)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(FaultError::Incomplete(value.to_string()));
    };
    let class = match class {
        "OutOfResource" => ErrorClass::OutOfResources,
        "Other" => ErrorClass::Other,
        other => {
            return Err(FaultError::Class {
                value: value.to_string(),
                class: other.to_string(),
            });
        }
    };
    let info = InstanceErrorInfo {
        class,
        code: code.to_string(),
        message: message.to_string(),
    };
    Ok(if creation {
        Fault::CreationFails(info)
    } else {
        Fault::IncreaseSizeFails(info)
    })
}

/// An injected fault for one node group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// `increase_size` fails with this error (quota, stock-out...).
    IncreaseSizeFails(InstanceErrorInfo),
    /// New instances are accepted but never register (no Node object).
    NeverRegister,
    /// New instances are accepted, then reported as failed to create
    /// (`Creating` with this error), as a cloud out of stock does.
    CreationFails(InstanceErrorInfo),
    /// Deleting registered nodes fails with this message (scale-down
    /// failures); instances that never came up are still given up.
    DeleteFails(String),
}

/// Fault injection for tests and the conformance suite, per group id.
#[derive(Debug, Default)]
pub struct Faults {
    by_group: Mutex<BTreeMap<String, Fault>>,
}

impl Faults {
    /// Injects a fault into a group.
    pub fn set(&self, group: &str, fault: Fault) {
        lock(&self.by_group).insert(group.to_string(), fault);
    }

    /// Removes a group's fault.
    pub fn clear(&self, group: &str) {
        lock(&self.by_group).remove(group);
    }

    pub(super) fn get(&self, group: &str) -> Option<Fault> {
        lock(&self.by_group).get(group).cloned()
    }
}

/// The class named in an injected error, for tests that build one.
pub fn quota_exceeded(message: &str) -> InstanceErrorInfo {
    InstanceErrorInfo {
        class: ErrorClass::OutOfResources,
        code: "QUOTA_EXCEEDED".into(),
        message: message.into(),
    }
}
