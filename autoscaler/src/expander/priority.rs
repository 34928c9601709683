//! The priority expander's configuration (docs/reference/ca-rules.md §5.3): the
//! `cluster-autoscaler-priority-expander` ConfigMap in the autoscaler's
//! namespace, read every loop; what is wrong with it is reported as events
//! on it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use regex::Regex;

use crate::config::ExpanderName;
use crate::context::AutoscalingContext;
use crate::events::{EventReason, EventType, ObjectRef};

/// The ConfigMap of the priority expander.
pub const PRIORITY_CONFIG_MAP: &str = "cluster-autoscaler-priority-expander";

/// Why the `priorities` value is unusable (the event's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriorityConfigError {
    /// The value is empty.
    #[error(
        "priority configuration in cluster-autoscaler-priority-expander configmap is empty; please provide valid configuration"
    )]
    Empty,
    /// The value is not a map from integer to a list of strings.
    #[error("Wrong configuration for priority expander: {0}. Ignoring update.")]
    Yaml(String),
    /// An expression is not a regular expression.
    #[error(
        "Wrong configuration for priority expander: regexp {expr:?} at priority {priority}: {error}. Ignoring update."
    )]
    Regexp {
        /// The expression.
        expr: String,
        /// Its priority.
        priority: i64,
        /// What the regex parser said.
        error: String,
    },
}

/// What the priority expander reports (events on its ConfigMap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriorityNotice {
    /// `PriorityConfigMapNotMatchedGroup`.
    NotMatchedGroup(String),
    /// `PriorityConfigMapNoGroupMatched`.
    NoGroupMatched,
}

/// The parsed `priorities` of `cluster-autoscaler-priority-expander`.
#[derive(Debug, Clone, Default)]
pub struct Priorities {
    levels: Vec<(i64, Vec<Regex>)>,
}

impl Priorities {
    /// Parses the `priorities` value: a YAML map from integer priority to a
    /// list of (unanchored) regular expressions.
    pub fn parse(text: &str) -> Result<Self, PriorityConfigError> {
        if text.trim().is_empty() {
            return Err(PriorityConfigError::Empty);
        }
        let raw: BTreeMap<i64, Vec<String>> =
            serde_saphyr::from_str(text).map_err(|e| PriorityConfigError::Yaml(e.to_string()))?;
        let mut levels = Vec::new();
        for (priority, exprs) in raw {
            let mut compiled = Vec::new();
            for e in exprs {
                compiled.push(Regex::new(&e).map_err(|error| PriorityConfigError::Regexp {
                    expr: e.clone(),
                    priority,
                    error: error.to_string(),
                })?);
            }
            levels.push((priority, compiled));
        }
        Ok(Self { levels })
    }

    /// The highest priority whose expressions match the group id.
    pub(super) fn priority_of(&self, group: &str) -> Option<i64> {
        self.levels
            .iter()
            .filter(|(_, res)| res.iter().any(|r| r.is_match(group)))
            .map(|(p, _)| *p)
            .max()
    }
}

/// Reads the priorities when the priority expander is in the chain; an
/// unusable ConfigMap is reported on it and ignored.
pub async fn load(ctx: &AutoscalingContext) -> Option<Priorities> {
    if !ctx.validated.expanders.contains(&ExpanderName::Priority) {
        return None;
    }
    let namespace = &ctx.flags.namespace;
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
    let cm = api.get_opt(PRIORITY_CONFIG_MAP).await.ok().flatten()?;
    let object = ObjectRef {
        uid: cm.metadata.uid.clone().unwrap_or_default(),
        ..ObjectRef::config_map(namespace, PRIORITY_CONFIG_MAP)
    };
    let Some(text) = cm.data.as_ref().and_then(|d| d.get("priorities")) else {
        ctx.events.record(
            &object,
            EventType::Warning,
            EventReason::PriorityConfigMapInvalid,
            "Wrong configmap for priority expander, doesn't contain priorities key. Ignoring update.".into(),
        );
        return None;
    };
    match Priorities::parse(text) {
        Ok(p) => Some(p),
        Err(e) => {
            ctx.events.record(
                &object,
                EventType::Warning,
                EventReason::PriorityConfigMapInvalid,
                e.to_string(),
            );
            None
        }
    }
}

/// Reports what the expander noticed as events on its ConfigMap.
pub fn report_notices(ctx: &AutoscalingContext, notices: Vec<PriorityNotice>) {
    let object = ObjectRef::config_map(&ctx.flags.namespace, PRIORITY_CONFIG_MAP);
    for n in notices {
        let (reason, message) = match n {
            PriorityNotice::NotMatchedGroup(g) => (
                EventReason::PriorityConfigMapNotMatchedGroup,
                format!(
                    "Priority expander: node group {g} not found in priority expander configuration. The group won't be used."
                ),
            ),
            PriorityNotice::NoGroupMatched => (
                EventReason::PriorityConfigMapNoGroupMatched,
                "Priority expander: no priorities info found for any of the expansion options. No options filtered.".to_string(),
            ),
        };
        ctx.events
            .record(&object, EventType::Warning, reason, message);
    }
}
