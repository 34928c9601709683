//! `--scheduler-config-file` (upstream's `utils/scheduler.ConfigFromPath`
//! and the framework handle built from it): a `KubeSchedulerConfiguration`
//! of `kubescheduler.config.k8s.io/v1` whose single profile decides which
//! filter plugins the simulation runs.
//!
//! CA runs a profile's PreFilter and Filter plugins only (no Score, Bind,
//! Permit or queue sort: weights and those plugins have no effect, as
//! upstream). Of kube-scheduler's in-tree plugins, the filters this
//! autoscaler's framework has are [`FilterPlugins`]; a profile may disable
//! them (by name, or `*` for all defaults) in `filter`, `preFilter` or
//! `multiPoint`, and enable them again. A plugin that is not in-tree is an
//! error, as upstream's "plugin ... does not exist"; so is an in-tree filter
//! this framework lacks (the volume plugins) when the
//! profile enables it explicitly, and plugin arguments that change what a
//! filter admits (`NodeResourcesFit`'s ignored resources,
//! `PodTopologySpread`'s default constraints): refusing them beats a
//! simulation that silently differs from the scheduler. Errors are reported
//! at start-up, naming the file and what is wrong.

use serde_json::Value;

use predicates::FilterPlugins;

/// The API version read.
const API_VERSION: &str = "kubescheduler.config.k8s.io/v1";

/// In-tree plugins without a Filter: accepted, no effect on the
/// simulation (upstream's CA does not run them either).
const NO_FILTER: [&str; 7] = [
    "PrioritySort",
    "DefaultBinder",
    "DefaultPreemption",
    "ImageLocality",
    "NodeResourcesBalancedAllocation",
    "SchedulingGates",
    "DefaultPodTopologySpread",
];

/// In-tree filters this autoscaler's framework lacks.
const MISSING_FILTERS: [&str; 7] = [
    "VolumeRestrictions",
    "VolumeBinding",
    "VolumeZone",
    "EBSLimits",
    "GCEPDLimits",
    "AzureDiskLimits",
    "CinderLimits",
];

/// The extension points whose plugin sets decide filtering.
const FILTERING: [&str; 3] = ["multiPoint", "preFilter", "filter"];

/// Every extension point of a profile's `plugins`.
const EXTENSION_POINTS: [&str; 13] = [
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
    "multiPoint",
];

/// Why a scheduler configuration is refused (upstream's texts where
/// upstream refuses it too).
#[derive(Debug, thiserror::Error)]
pub enum SchedulerConfigError {
    /// The file cannot be read.
    #[error("couldn't load scheduler config: open {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The reader's error.
        source: std::io::Error,
    },
    /// The file is not YAML.
    #[error("couldn't decode scheduler config: {0}")]
    Yaml(#[source] serde_saphyr::Error),
    /// No `kind`.
    #[error("couldn't decode scheduler config: Object 'Kind' is missing")]
    NoKind,
    /// Not a `kubescheduler.config.k8s.io/v1` `KubeSchedulerConfiguration`.
    #[error(
        "couldn't decode scheduler config: no kind {kind:?} is registered for version {version:?} (this autoscaler reads {API_VERSION} KubeSchedulerConfiguration)"
    )]
    UnknownKind {
        /// The `kind`.
        kind: String,
        /// The `apiVersion`.
        version: String,
    },
    /// `profiles` is not a list.
    #[error("couldn't decode scheduler config: profiles: expected a list, got {0}")]
    ProfilesNotList(Value),
    /// More than one profile.
    #[error(
        "unexpected scheduler config: expected one scheduler profile only (found {0} profiles)"
    )]
    Profiles(usize),
    /// A `plugins` key that is no extension point.
    #[error(
        "couldn't decode scheduler config: strict decoding error: unknown field \"profiles[0].plugins.{0}\""
    )]
    UnknownExtensionPoint(String),
    /// A plugin that is not in-tree.
    #[error("couldn't create scheduler framework; plugin \"{0}\" does not exist")]
    UnknownPlugin(String),
    /// An in-tree filter this framework lacks, enabled explicitly.
    #[error(
        "the scheduler profile enables the {0} plugin, which this autoscaler's scheduler framework does not have"
    )]
    MissingFilter(String),
    /// Plugin arguments that change what a filter admits.
    #[error(
        "the scheduler profile sets {plugin}'s {field}, which this autoscaler's scheduler framework does not honour"
    )]
    UnsupportedArgs {
        /// The plugin.
        plugin: String,
        /// The argument.
        field: &'static str,
    },
}

/// Reads the file and returns the filter plugins of its profile.
pub fn from_path(path: &str) -> Result<FilterPlugins, SchedulerConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| SchedulerConfigError::Read {
        path: path.to_string(),
        source,
    })?;
    parse(&text)
}

/// The filter plugins of a configuration's single profile.
pub fn parse(text: &str) -> Result<FilterPlugins, SchedulerConfigError> {
    let config: Value = serde_saphyr::from_str(text).map_err(SchedulerConfigError::Yaml)?;
    let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
    let version = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if kind.is_empty() {
        return Err(SchedulerConfigError::NoKind);
    }
    if version != API_VERSION || kind != "KubeSchedulerConfiguration" {
        return Err(SchedulerConfigError::UnknownKind {
            kind: kind.to_string(),
            version: version.to_string(),
        });
    }
    let profiles = match config.get("profiles") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(p)) => p.clone(),
        Some(other) => {
            return Err(SchedulerConfigError::ProfilesNotList(other.clone()));
        }
    };
    match profiles.as_slice() {
        // v1 defaulting adds the default profile.
        [] => Ok(FilterPlugins::default()),
        [profile] => profile_plugins(profile),
        more => Err(SchedulerConfigError::Profiles(more.len())),
    }
}

/// The filter plugins one profile runs.
fn profile_plugins(profile: &Value) -> Result<FilterPlugins, SchedulerConfigError> {
    let plugins = profile.get("plugins").cloned().unwrap_or(Value::Null);
    for point in plugins.as_object().into_iter().flat_map(|o| o.keys()) {
        if !EXTENSION_POINTS.contains(&point.as_str()) {
            return Err(SchedulerConfigError::UnknownExtensionPoint(point.clone()));
        }
    }
    let names = |point: &str, list: &str| -> Vec<String> {
        plugins
            .get(point)
            .and_then(|p| p.get(list))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("name").and_then(Value::as_str).map(str::to_string))
            .collect()
    };
    for point in EXTENSION_POINTS {
        for name in names(point, "enabled")
            .iter()
            .chain(&names(point, "disabled"))
        {
            let known = name == "*"
                || FilterPlugins::NAMES.contains(&name.as_str())
                || NO_FILTER.contains(&name.as_str())
                || MISSING_FILTERS.contains(&name.as_str());
            if !known {
                return Err(SchedulerConfigError::UnknownPlugin(name.clone()));
            }
        }
    }
    let mut out = FilterPlugins::default();
    for point in FILTERING {
        for name in names(point, "disabled") {
            if name == "*" {
                for n in FilterPlugins::NAMES {
                    if let Some(on) = out.switch(n) {
                        *on = false;
                    }
                }
            } else if let Some(on) = out.switch(&name) {
                *on = false;
            }
        }
    }
    for point in FILTERING {
        for name in names(point, "enabled") {
            if MISSING_FILTERS.contains(&name.as_str()) {
                return Err(SchedulerConfigError::MissingFilter(name));
            }
            if let Some(on) = out.switch(&name) {
                *on = true;
            }
        }
    }
    check_plugin_args(profile)?;
    Ok(out)
}

/// Refuses plugin arguments that change what a filter admits.
fn check_plugin_args(profile: &Value) -> Result<(), SchedulerConfigError> {
    let configs = profile.get("pluginConfig").and_then(Value::as_array);
    for c in configs.into_iter().flatten() {
        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
        let args = c.get("args").cloned().unwrap_or(Value::Null);
        let set = |field: &str| {
            args.get(field)
                .is_some_and(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
        };
        let unsupported = match name {
            "NodeResourcesFit" => ["ignoredResources", "ignoredResourceGroups"]
                .into_iter()
                .find(|f| set(f)),
            "PodTopologySpread" => ["defaultConstraints"].into_iter().find(|f| set(f)),
            _ => None,
        };
        if let Some(field) = unsupported {
            return Err(SchedulerConfigError::UnsupportedArgs {
                plugin: name.to_string(),
                field,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const HEAD: &str =
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

    #[test]
    fn a_profile_turns_filters_off_and_on() {
        let p = parse(&format!(
            "{HEAD}profiles:\n- schedulerName: default-scheduler\n  plugins:\n    filter:\n      disabled:\n      - name: NodeResourcesFit\n    score:\n      enabled:\n      - name: ImageLocality\n        weight: 3\n"
        ))
        .unwrap();
        assert!(!p.node_resources_fit && p.taint_toleration && p.inter_pod_affinity);
        let p = parse(&format!(
            "{HEAD}profiles:\n- plugins:\n    multiPoint:\n      disabled:\n      - name: '*'\n      enabled:\n      - name: NodeAffinity\n"
        ))
        .unwrap();
        assert!(p.node_affinity && !p.node_resources_fit && !p.node_unschedulable);
        // No profile: v1's default one.
        assert_eq!(parse(HEAD).unwrap(), FilterPlugins::default());
    }

    #[test]
    fn what_the_framework_cannot_honour_is_an_error_naming_it() {
        let two = format!("{HEAD}profiles:\n- schedulerName: a\n- schedulerName: b\n");
        assert_eq!(
            parse(&two).unwrap_err().to_string(),
            "unexpected scheduler config: expected one scheduler profile only (found 2 profiles)"
        );
        let custom = format!(
            "{HEAD}profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: MyPlugin\n"
        );
        assert_eq!(
            parse(&custom).unwrap_err().to_string(),
            "couldn't create scheduler framework; plugin \"MyPlugin\" does not exist"
        );
        let volumes = format!(
            "{HEAD}profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: VolumeBinding\n"
        );
        assert!(
            parse(&volumes)
                .unwrap_err()
                .to_string()
                .contains("VolumeBinding")
        );
        let args = format!(
            "{HEAD}profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      ignoredResources: [example.com/foo]\n"
        );
        assert!(
            parse(&args)
                .unwrap_err()
                .to_string()
                .contains("ignoredResources")
        );
        let old =
            "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n";
        assert!(parse(old).unwrap_err().to_string().contains("no kind"));
        assert!(
            from_path("/nonexistent/scheduler.yaml")
                .unwrap_err()
                .to_string()
                .starts_with("couldn't load scheduler config: open /nonexistent/scheduler.yaml")
        );
    }
}
