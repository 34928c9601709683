//! "The autoscaler keeps a node of G because of R": read where every Cluster
//! Autoscaler says it, the `cluster_autoscaler_unremovable_nodes_count`
//! metric, whose `reason` label is the number of the unremovable reason in
//! the release's own order up to 1.36, its name from 1.37
//! (docs/reference/ca-rules.md §2.5). A blocking pod's reason
//! (`NotReplicated`, `NotEnoughPdb`, ...) is counted there as
//! `BlockedByPod`. Where the autoscaler also offers our decision record, the
//! step checks there as well that a node of G is the one kept, and for the
//! very reason R: what no metric says.

use std::time::Duration;

use cucumber::then;

use super::node_names;
use crate::binary::CaVersion;
use crate::world::under_test::under_test;
use crate::world::{CaWorld, StepResult, UnderTest};

/// The metric every release publishes the unremovable nodes in.
const METRIC: &str = "cluster_autoscaler_unremovable_nodes_count";

/// The pod reasons (`drain.BlockingPodReason`) that make a node `BlockedByPod`.
const BLOCKING_POD_REASONS: &[&str] = &[
    "ControllerNotFound",
    "MinReplicasReached",
    "NotReplicated",
    "LocalStorageRequested",
    "NotSafeToEvictAnnotation",
    "UnmovableKubeSystemPod",
    "NotEnoughPdb",
    "UnexpectedError",
];

/// `simulator.UnremovableReason` in upstream's order for `version`.
fn unremovable_reasons(version: CaVersion) -> Vec<&'static str> {
    let mut reasons = vec![
        "NoReason",
        "ScaleDownDisabledAnnotation",
        "ScaleDownUnreadyDisabled",
        "NotAutoscaled",
        "NotUnneededLongEnough",
        "NotUnreadyLongEnough",
        "NodeGroupMinSizeReached",
    ];
    if version.minor >= 32 {
        reasons.extend(["NodeGroupMaxDeletionCountReached", "AtomicScaleDownFailed"]);
    }
    reasons.extend([
        "MinimalResourceLimitExceeded",
        "CurrentlyBeingDeleted",
        "NotUnderutilized",
        "NotUnneededOtherReason",
        "RecentlyUnremovable",
        "NoPlaceToMovePods",
        "BlockedByPod",
        "UnexpectedError",
    ]);
    if version.minor >= 35 {
        reasons.push("NoNodeInfo");
    }
    if version.minor >= 36 {
        reasons.push("BlockedByOnCompletionPod");
    }
    reasons
}

/// The `reason` label `version` publishes a node kept because of `reason`
/// under: the reason's number up to 1.36 (Go's `%v` of an integer type),
/// its name from 1.37 (which gave the type a `String` method).
fn metric_label(version: CaVersion, reason: &str) -> Result<String, String> {
    let unremovable = if BLOCKING_POD_REASONS.contains(&reason) {
        "BlockedByPod"
    } else {
        reason
    };
    let number = unremovable_reasons(version)
        .iter()
        .position(|r| *r == unremovable)
        .ok_or_else(|| {
            format!("{reason:?} is neither an unremovable reason nor a blocking pod reason of CA {version}")
        })?;
    Ok(if version.minor >= 37 {
        unremovable.to_string()
    } else {
        number.to_string()
    })
}

/// The release the autoscaler under test behaves as: ours says which.
fn version_under_test() -> CaVersion {
    let ours = CaVersion::parse(autoscaler::CA_VERSION).unwrap_or(CaVersion {
        major: 1,
        minor: 37,
        patch: 0,
    });
    match under_test() {
        UnderTest::Binary { info, .. } => info.version.unwrap_or(ours),
        UnderTest::InProcess => ours,
    }
}

/// The value of `METRIC{reason="label"}` in a metrics page (0 when absent).
fn unremovable_count(page: &str, label: &str) -> f64 {
    let want = format!("reason=\"{label}\"");
    page.lines()
        .filter(|l| l.starts_with(METRIC) && l.contains(&want))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, f64::max)
}

#[then(regex = r#"^the autoscaler keeps (?:the|a) node of "(\S+)" because of "(\S+)"$"#)]
async fn kept_because(w: &mut CaWorld, group: String, reason: String) -> StepResult {
    let version = version_under_test();
    let label = metric_label(version, &reason)?;
    let names = node_names(w, &group).await?;
    // Some reasons show only when the node's 10 unneeded minutes are up
    // and its pods are checked in full; unremovable nodes are rechecked
    // every 5 minutes: watch 16 minutes.
    let mut seen = (0.0, None);
    for _ in 0..(16 * 60 / 5) {
        let r = w.running().await?;
        let page = r.metrics().await.map_err(|e| e.to_string())?;
        let count = unremovable_count(&page, &label);
        let record = r.decisions_if_offered().await;
        let node_kept = record.as_ref().is_none_or(|d| {
            names.iter().any(|n| {
                d.unremovable
                    .get(n)
                    .is_some_and(|why| why.text().contains(&reason))
            })
        });
        if count >= 1.0 && node_kept {
            return Ok(());
        }
        seen = (count, record.map(|d| d.unremovable.texts()));
        r.pass(Duration::from_secs(5)).await?;
    }
    let (count, record) = seen;
    Err(match record {
        Some(record) => format!(
            "no node of {group} kept because of {reason}: {METRIC}{{reason=\"{label}\"}} is {count}; the decision record's unremovable nodes: {record:?}"
        ),
        None => format!(
            "no node kept because of {reason}: {METRIC}{{reason=\"{label}\"}} (CA {version}'s number for it) is {count}"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(minor: u32) -> CaVersion {
        CaVersion {
            major: 1,
            minor,
            patch: 0,
        }
    }

    #[test]
    fn each_release_numbers_the_reasons_its_own_way() {
        assert_eq!(metric_label(v(30), "BlockedByPod").unwrap(), "13");
        assert_eq!(metric_label(v(31), "NotReplicated").unwrap(), "13");
        assert_eq!(metric_label(v(33), "NotEnoughPdb").unwrap(), "15");
        assert_eq!(metric_label(v(36), "NoPlaceToMovePods").unwrap(), "14");
        assert_eq!(metric_label(v(30), "NotUnderutilized").unwrap(), "9");
        assert_eq!(
            metric_label(v(36), "BlockedByOnCompletionPod").unwrap(),
            "18"
        );
        assert!(metric_label(v(31), "BlockedByOnCompletionPod").is_err());
        assert_eq!(metric_label(v(37), "NotEnoughPdb").unwrap(), "BlockedByPod");
        assert_eq!(
            metric_label(v(37), "NoPlaceToMovePods").unwrap(),
            "NoPlaceToMovePods"
        );
        assert!(metric_label(v(37), "Whatever").is_err());
        assert!(metric_label(v(36), "Whatever").is_err());
    }

    #[test]
    fn the_count_is_read_from_the_reason_line() {
        let page = "# TYPE cluster_autoscaler_unremovable_nodes_count gauge\n\
            cluster_autoscaler_unremovable_nodes_count{reason=\"13\"} 2\n\
            cluster_autoscaler_unremovable_nodes_count{reason=\"1\"} 0\n";
        assert_eq!(unremovable_count(page, "13"), 2.0);
        assert_eq!(unremovable_count(page, "1"), 0.0);
        assert_eq!(unremovable_count(page, "15"), 0.0);
    }
}
