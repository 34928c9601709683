#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use serde_json::json;

use super::options::options_from;
use super::scalefromzero::{Capacity, parse_labels, parse_taints, size_annotations};
use super::*;
use crate::cloudprovider::NodeGroupOptions;

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn keys() -> Keys {
    Keys {
        group: DEFAULT_GROUP.into(),
    }
}

const MIN: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";
const MAX: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";

#[test]
fn auto_discovery_specs_parse_as_upstream_and_match_namespace_cluster_and_labels() {
    let d = AutoDiscovery::parse("clusterapi:namespace=ns,clusterName=c1,team=a").unwrap();
    let labels = annotations(&[("team", "a")]);
    assert!(d.allows("ns", "c1", &labels));
    assert!(!d.allows("other", "c1", &labels));
    assert!(!d.allows("ns", "c2", &labels));
    assert!(!d.allows("ns", "c1", &BTreeMap::new()));
    assert!(
        AutoDiscovery::parse("clusterapi:")
            .unwrap()
            .allows("x", "y", &BTreeMap::new())
    );
    let err = |s: &str| AutoDiscovery::parse(s).unwrap_err().to_string();
    assert_eq!(
        err("clusterapi"),
        "spec \"clusterapi\" should be discoverer:key=value,key=value"
    );
    assert_eq!(err("asg:tag=x"), "unsupported discoverer specified: asg");
    assert_eq!(err("clusterapi:foo"), "invalid key=value pair [foo]");
    assert!(err("clusterapi:bad key=x").starts_with("failed to create label selector; "));
}

#[test]
fn size_annotations_name_the_bad_annotation() {
    assert_eq!(
        size_annotations(&annotations(&[(MIN, "1"), (MAX, "3")]), &keys()),
        Ok((1, 3))
    );
    assert_eq!(
        size_annotations(&annotations(&[(MAX, "3")]), &keys()),
        Ok((0, 3))
    );
    let err = |pairs: &[(&str, &str)]| {
        size_annotations(&annotations(pairs), &keys())
            .unwrap_err()
            .to_string()
    };
    let e = err(&[(MIN, "0"), (MAX, "five")]);
    assert!(e.contains(MAX) && e.contains("\"five\""), "{e}");
    let e = err(&[(MIN, "-1"), (MAX, "3")]);
    assert!(e.contains(MIN), "{e}");
    let e = err(&[(MIN, "4"), (MAX, "3")]);
    assert!(e.contains("below the min size 4"), "{e}");
    let e = err(&[(MIN, "2")]);
    assert!(e.contains("is missing"), "{e}");
}

#[test]
fn capacity_annotations_win_over_the_template_status() {
    let template = json!({"status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "50", "nvidia.com/gpu": "1"},
        "nodeInfo": {"architecture": "arm64", "operatingSystem": "linux"}}});
    let a = annotations(&[("capacity.cluster-autoscaler.kubernetes.io/cpu", "2")]);
    let c = Capacity::of(&a, Some(&template)).unwrap().unwrap();
    assert_eq!(c.resources["cpu"], "2");
    assert_eq!(c.resources["memory"], "32Gi");
    assert_eq!(c.resources["nvidia.com/gpu"], "1");
    // Upstream's default maxPods overrides the template's pods too.
    assert_eq!(c.resources["pods"], "110");
    assert_eq!(c.architecture.as_deref(), Some("arm64"));

    // Annotations alone, with a GPU, labels and taints.
    let a = annotations(&[
        ("capacity.cluster-autoscaler.kubernetes.io/cpu", "4"),
        ("capacity.cluster-autoscaler.kubernetes.io/memory", "16Gi"),
        (
            "capacity.cluster-autoscaler.kubernetes.io/gpu-type",
            "nvidia.com/gpu",
        ),
        ("capacity.cluster-autoscaler.kubernetes.io/gpu-count", "2"),
        ("capacity.cluster-autoscaler.kubernetes.io/maxPods", "30"),
        (
            "capacity.cluster-autoscaler.kubernetes.io/labels",
            "a=1,b=2",
        ),
        (
            "capacity.cluster-autoscaler.kubernetes.io/taints",
            "gpu=true:NoSchedule,x:NoExecute",
        ),
    ]);
    let c = Capacity::of(&a, None).unwrap().unwrap();
    assert_eq!(c.resources["nvidia.com/gpu"], "2");
    assert_eq!(c.resources["pods"], "30");
    assert_eq!(c.labels["b"], "2");
    assert_eq!(c.taints.len(), 2);
    assert_eq!(c.taints[1].key, "x");
    assert_eq!(c.taints[1].value, "");

    // Without CPU and memory from either, no scale from zero.
    let only_cpu = annotations(&[("capacity.cluster-autoscaler.kubernetes.io/cpu", "4")]);
    assert_eq!(Capacity::of(&only_cpu, None), Ok(None));
    assert_eq!(Capacity::of(&BTreeMap::new(), Some(&json!({}))), Ok(None));
}

#[test]
fn malformed_capacity_annotations_are_errors_naming_them() {
    let e = Capacity::of(
        &annotations(&[("capacity.cluster-autoscaler.kubernetes.io/memory", "500mb")]),
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("capacity.cluster-autoscaler.kubernetes.io/memory") && e.contains("500mb"),
        "{e}"
    );
    let e = Capacity::of(
        &annotations(&[("capacity.cluster-autoscaler.kubernetes.io/gpu-count", "two")]),
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("gpu-count"), "{e}");
    assert!(
        parse_taints("a=b:Sometimes")
            .unwrap_err()
            .to_string()
            .contains("effect")
    );
    assert!(parse_taints("a=b=c:NoSchedule").is_err());
    assert!(
        parse_labels("novalue")
            .unwrap_err()
            .to_string()
            .contains("expected key=value")
    );
}

#[test]
fn provider_ids_compare_on_their_last_segment() {
    assert_eq!(normalize_provider_id("aws:///us-east-1a/i-abc"), "i-abc");
    assert_eq!(normalize_provider_id("kwok://m-1"), "m-1");
    assert_eq!(normalize_provider_id("plain"), "plain");
}

#[test]
fn per_group_options_come_from_annotations_and_bad_values_keep_the_default() {
    let defaults = NodeGroupOptions {
        scale_down_utilization_threshold: 0.5,
        scale_down_gpu_utilization_threshold: 0.5,
        scale_down_unneeded_time: std::time::Duration::from_secs(600),
        scale_down_unready_time: std::time::Duration::from_secs(1200),
        max_node_provision_time: std::time::Duration::from_secs(900),
        max_node_startup_time: std::time::Duration::from_secs(900),
        ignore_daemonsets_utilization: false,
        zero_or_max_node_scaling: false,
    };
    let a = annotations(&[
        (
            "cluster.x-k8s.io/autoscaling-options-scaledownunneededtime",
            "1m",
        ),
        (
            "cluster.x-k8s.io/autoscaling-options-scaledownutilizationthreshold",
            "lots",
        ),
    ]);
    let o = options_from(&a, &keys(), "MachineDeployment/ns/md", &defaults).unwrap();
    assert_eq!(
        o.scale_down_unneeded_time,
        std::time::Duration::from_secs(60)
    );
    assert_eq!(o.scale_down_utilization_threshold, 0.5);
    assert_eq!(
        options_from(&BTreeMap::new(), &keys(), "x", &defaults),
        None
    );
}

#[test]
fn the_csi_driver_annotation_gives_the_template_its_volume_limits() {
    use super::scalefromzero::parse_csi_drivers;
    let csi = parse_csi_drivers("ebs.csi.aws.com=25, efs.csi.aws.com=0,bad,=3,x=-1,y=z").unwrap();
    let want: BTreeMap<String, Option<i64>> = [
        ("ebs.csi.aws.com".to_string(), Some(25)),
        ("efs.csi.aws.com".to_string(), None),
    ]
    .into();
    assert_eq!(csi.drivers, want, "malformed entries skipped, 0 = no limit");
    assert!(parse_csi_drivers("").is_none());
    assert!(parse_csi_drivers("bad").is_none());
    let a = annotations(&[
        ("capacity.cluster-autoscaler.kubernetes.io/cpu", "4"),
        ("capacity.cluster-autoscaler.kubernetes.io/memory", "16Gi"),
        (
            "capacity.cluster-autoscaler.kubernetes.io/csi-driver",
            "ebs.csi.aws.com=2",
        ),
    ]);
    let c = Capacity::of(&a, None).unwrap().unwrap();
    assert_eq!(c.csi.unwrap().drivers["ebs.csi.aws.com"], Some(2));
}
