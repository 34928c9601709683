//! What a scenario used beyond what every Cluster Autoscaler offers.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// What a scenario used beyond what every Cluster Autoscaler offers (our
/// decision record, the kwok provider's fault annotation): a scenario that
/// uses any must be tagged `@extension` ([`crate::steps::EXTENSION_TAG`]),
/// which the runner checks after every scenario.
#[derive(Debug, Clone, Default)]
pub struct Extensions(Arc<Mutex<BTreeSet<&'static str>>>);

impl Extensions {
    /// Records that the scenario uses `what`.
    pub fn record(&self, what: &'static str) {
        if let Ok(mut used) = self.0.lock() {
            used.insert(what);
        }
    }

    /// What the scenario used.
    pub fn used(&self) -> Vec<&'static str> {
        self.0
            .lock()
            .map(|u| u.iter().copied().collect())
            .unwrap_or_default()
    }
}
