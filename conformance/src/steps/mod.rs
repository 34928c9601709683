//! The step library. Cluster shape, faults and autoscaler flags are
//! `Given`s (most also work as `When`s once the cluster runs); workloads,
//! node changes and the passing of time are `When`s; every `Then` reads the
//! cluster (nodes, pods, events, the status ConfigMap) or what the
//! autoscaler publishes (metrics, health check, decision records) and says
//! what it saw when it fails.
//!
//! - [`cluster`]: node groups, their labels, taints, zones and resources,
//!   faults, autoscaler flags and restarts, node changes at runtime;
//! - [`clusterapi`]: node groups as Cluster API MachineDeployments, where
//!   they advertise their capacity for scale from zero, their annotations;
//! - [`workloads`]: deployments, bare pods, DaemonSets, PDBs, priority
//!   classes, the priority expander's ConfigMap, any object from YAML;
//! - [`time`]: "When N minutes pass", "When the autoscaler finds a node
//!   unneeded";
//! - [`assertions`]: node counts, pods, events, taints, the status
//!   ConfigMap, metrics, health, decisions;
//! - [`unremovable`]: why a node is kept, from the metric every release
//!   publishes (and our decision record where offered);
//! - [`scalability`]: the FAQ's scale-up latency objective, per pod, and
//!   the main loop's mean time;
//! - [`faults`]: the API server failing, timing out, slowing down and
//!   cutting watches for the autoscaler, and the safety invariants watched
//!   over the whole scenario;
//! - [`provisioning`]: ProvisioningRequests: the CRD, pod templates,
//!   requests and the conditions CA writes on them;
//! - [`capacity`]: CapacityBuffers and CapacityQuotas: the CRDs, buffers,
//!   quotas and the conditions and status CA writes on them;
//! - [`storage`]: CSI drivers on the nodes and their volume limits,
//!   StorageClasses, pods that claim volumes;
//! - [`dra`]: devices on a group's nodes, DeviceClasses, ResourceClaims and
//!   their templates, where claims are allocated;
//! - [`replicas`]: the autoscaler as replicas with leader election, the
//!   leader killed, which replicas acted and whether one at a time.
//!
//! `docs/reference/steps.md` lists every step ([`reference`] renders it);
//! `docs/suite/writing-scenarios.md` shows them at work.

pub mod assertions;
pub mod capacity;
pub mod cluster;
pub mod clusterapi;
pub mod dra;
pub mod faults;
pub mod provisioning;
pub mod reference;
pub mod replicas;
pub mod scalability;
pub mod storage;
pub mod time;
pub mod unremovable;
pub mod workloads;

use std::time::Duration;

use autoscaler::decisions::Decisions;

use crate::world::CaWorld;

/// The tag of scenarios that need more than an upstream Cluster Autoscaler
/// offers: our decision record (`/decisions`), the kwok provider's fault
/// annotation, or a behaviour of ours alone. Run an upstream binary with
/// `--tags "not @extension"`.
pub const EXTENSION_TAG: &str = "extension";

/// Parts of the steps that need those extensions ([`EXTENSION_TAG`]).
const EXTENSION_STEPS: &[&str] = &[
    "the autoscaler chooses among",
    "fail with a quota error",
    "the cloud provider refuses to",
    "never register",
    "the faults of",
    // A template changed while the autoscaler runs: upstream's kwok
    // provider reads its templates once, at start (and exits on a bad one).
    "the template of",
    // Our clusterapi provider's events on a MachineDeployment (upstream
    // only logs).
    "\"InvalidNodeGroupAnnotation\"",
    "\"ScaleFromZeroUnavailable\"",
    // With --frequent-loops-enabled ours does not wait for very new pods.
    "without upstream's wait for very new pods",
    // Our kwok provider gives a template the devices its annotation
    // declares (upstream's templates have no ResourceSlices).
    "the kwok template of",
];

/// Whether a step needs an extension of ours ([`EXTENSION_TAG`]).
pub fn needs_extension(step: &str) -> bool {
    EXTENSION_STEPS.iter().any(|part| step.contains(part))
}

/// `minutes` of scenario time.
pub fn minutes(minutes: u64) -> Duration {
    Duration::from_secs(60 * minutes)
}

/// The names of a group's nodes.
pub async fn node_names(w: &mut CaWorld, group: &str) -> Result<Vec<String>, String> {
    Ok(w.group_nodes(group)
        .await?
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect())
}

/// How many names a failure message lists before it gives only the count
/// of the rest.
const NAMES_SHOWN: usize = 5;

/// Names for a failure message: all of them up to [`NAMES_SHOWN`], else the
/// first few and how many more (a 1,000-node group's would fill a screen).
pub fn few_names(names: &[String]) -> String {
    let shown = names.iter().take(NAMES_SHOWN).map(String::as_str);
    let mut text = shown.collect::<Vec<_>>().join(", ");
    if names.len() > NAMES_SHOWN {
        text.push_str(&format!(" and {} more", names.len() - NAMES_SHOWN));
    }
    text
}

/// Advances one second at a time, for up to `seconds`, until the
/// autoscaler's decision record satisfies `check`; `Err` holds the last
/// record seen.
pub async fn watch_decisions(
    w: &mut CaWorld,
    seconds: u32,
    check: impl Fn(&Decisions) -> bool,
) -> Result<Result<(), Decisions>, String> {
    let r = w.running().await?;
    for _ in 0..seconds {
        let d = r.decisions().await.map_err(|e| e.to_string())?;
        if check(&d) {
            return Ok(Ok(()));
        }
        r.pass(Duration::from_secs(1)).await?;
    }
    Ok(Err(r.decisions().await.map_err(|e| e.to_string())?))
}

/// The quoted names in `"a", "b" and "c"`; a numbered range
/// `"pool-1" to "pool-50"` stands for every name from the first to the last.
pub fn quoted_list(text: &str) -> Vec<String> {
    let parts: Vec<&str> = text.split('"').collect();
    if let [_, first, " to ", last, _] = parts.as_slice()
        && let (Some((prefix, from)), Some((last_prefix, to))) = (numbered(first), numbered(last))
        && prefix == last_prefix
        && from <= to
    {
        return (from..=to).map(|i| format!("{prefix}{i}")).collect();
    }
    parts
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_string())
        .collect()
}

/// `pool-12` as (`pool-`, 12).
fn numbered(name: &str) -> Option<(&str, u32)> {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (prefix, number) = name.split_at(name.len() - digits);
    Some((prefix, number.parse().ok()?))
}

/// `key=value:Effect` (value optional) as a taint or toleration object.
pub fn parse_taint(text: &str) -> Result<serde_json::Value, String> {
    let (kv, effect) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("taint {text:?}: want key=value:Effect"))?;
    if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
        return Err(format!(
            "taint {text:?}: effect {effect:?} is not NoSchedule, PreferNoSchedule or NoExecute"
        ));
    }
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    let mut t = serde_json::json!({"key": key, "effect": effect});
    if !value.is_empty() {
        t["value"] = serde_json::json!(value);
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn failure_messages_list_a_few_names_and_count_the_rest() {
        let names: Vec<String> = (1..=1001).map(|i| format!("pool-{i}")).collect();
        assert_eq!(
            few_names(&names),
            "pool-1, pool-2, pool-3, pool-4, pool-5 and 996 more"
        );
        assert_eq!(few_names(&names[..2]), "pool-1, pool-2");
        assert_eq!(
            few_names(&names[..5]),
            "pool-1, pool-2, pool-3, pool-4, pool-5"
        );
        assert_eq!(few_names(&[]), "");
    }

    /// Every scenario that uses an extension step is tagged `@extension`,
    /// and every `@extension` scenario uses one, so that an upstream binary
    /// runs exactly the scenarios it can pass.
    #[test]
    fn extension_tags_match_the_steps() {
        use cucumber::gherkin::{Background, Feature, GherkinEnv, Scenario};
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../features");
        let mut wrong = Vec::new();
        let mut check =
            |file: &str, tags: &[&Vec<String>], bg: &[&Option<Background>], sc: &Scenario| {
                let steps = bg
                    .iter()
                    .filter_map(|b| b.as_ref())
                    .flat_map(|b| &b.steps)
                    .chain(&sc.steps);
                let needs = steps.into_iter().any(|s| needs_extension(&s.value));
                let tagged = tags
                    .iter()
                    .copied()
                    .chain([&sc.tags])
                    .flatten()
                    .any(|t| t.trim_start_matches('@') == EXTENSION_TAG);
                if needs != tagged {
                    wrong.push(format!(
                        "{file}: {:?} (needs: {needs}, tagged: {tagged})",
                        sc.name
                    ));
                }
            };
        let mut files = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "feature") {
                continue;
            }
            files += 1;
            let f = Feature::parse_path(&path, GherkinEnv::default()).unwrap();
            let file = path.file_name().unwrap().to_string_lossy().to_string();
            for sc in &f.scenarios {
                check(&file, &[&f.tags], &[&f.background], sc);
            }
            for rule in &f.rules {
                for sc in &rule.scenarios {
                    check(
                        &file,
                        &[&f.tags, &rule.tags],
                        &[&f.background, &rule.background],
                        sc,
                    );
                }
            }
        }
        assert!(
            files >= 12,
            "found {files} feature files in {}",
            dir.display()
        );
        assert!(
            wrong.is_empty(),
            "@extension tags to fix:\n{}",
            wrong.join("\n")
        );
    }

    #[test]
    fn quoted_lists_and_taints_parse() {
        assert_eq!(quoted_list(r#""a", "b" and "c""#), ["a", "b", "c"]);
        assert_eq!(
            quoted_list(r#""pool-1" to "pool-3""#),
            ["pool-1", "pool-2", "pool-3"]
        );
        assert_eq!(quoted_list(r#""a-1" to "b-3""#), ["a-1", "b-3"]);
        assert_eq!(quoted_list(r#""a" and "b""#), ["a", "b"]);
        assert_eq!(
            parse_taint("dedicated=gpu:NoSchedule").unwrap(),
            serde_json::json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"})
        );
        assert_eq!(
            parse_taint("startup.example/init:NoSchedule").unwrap(),
            serde_json::json!({"key": "startup.example/init", "effect": "NoSchedule"})
        );
        assert!(
            parse_taint("x=y:Sometimes")
                .unwrap_err()
                .contains("Sometimes")
        );
    }
}
