#![allow(clippy::unwrap_used)]

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Pod, PodTemplate};
use serde_json::json;

use super::fakepods::{FAKE_POD_ANNOTATION, is_fake_pod, make_fake_pods};
use super::translators::{ReplicasError, number_of_pods};
use super::types::{BufferCondition, CapacityBuffer, ConditionType};

fn buffer(spec: serde_json::Value) -> CapacityBuffer {
    serde_json::from_value(json!({
        "metadata": {"name": "spare", "namespace": "default", "uid": "u1", "generation": 3},
        "spec": spec,
    }))
    .unwrap()
}

fn pod(cpu: &str) -> Pod {
    serde_json::from_value(json!({"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}))
    .unwrap()
}

#[test]
fn the_replicas_are_the_larger_of_count_and_share_rounded_up_within_limits() {
    let p = pod("3");
    assert_eq!(
        number_of_pods(&buffer(json!({"replicas": 4})), &p, None),
        Ok(4)
    );
    // 50% of 9 is 5 (rounded up); the larger of 3 and 50% of 4 is 3.
    assert_eq!(
        number_of_pods(&buffer(json!({"percentage": 50})), &p, Some(9)),
        Ok(5)
    );
    assert_eq!(
        number_of_pods(
            &buffer(json!({"percentage": 50, "replicas": 3})),
            &p,
            Some(4)
        ),
        Ok(3)
    );
    assert_eq!(
        number_of_pods(
            &buffer(json!({"percentage": 200, "replicas": 15})),
            &p,
            Some(10)
        ),
        Ok(20)
    );
    // 1% of one replica is one pod; a share of no replicas is none.
    assert_eq!(
        number_of_pods(&buffer(json!({"percentage": 1})), &p, Some(1)),
        Ok(1)
    );
    assert_eq!(
        number_of_pods(&buffer(json!({"percentage": 50})), &p, Some(0)),
        Ok(0)
    );
    // Limits cap the count: 20 pods asked, 7 CPU hold two.
    assert_eq!(
        number_of_pods(
            &buffer(json!({"replicas": 20, "limits": {"cpu": "7"}})),
            &p,
            None
        ),
        Ok(2)
    );
    // 7 CPU of limits hold two 3-CPU pods; 5Gi of memory five 1Gi ones.
    assert_eq!(
        number_of_pods(&buffer(json!({"limits": {"cpu": "7"}})), &p, None),
        Ok(2)
    );
    assert_eq!(
        number_of_pods(
            &buffer(json!({"limits": {"cpu": "100", "memory": "5Gi"}})),
            &p,
            None
        ),
        Ok(5)
    );
    // A percentage without a scalable object counts for nothing.
    assert_eq!(
        number_of_pods(&buffer(json!({"percentage": 50})), &p, None),
        Err(ReplicasError::NotDefined)
    );
    assert_eq!(
        number_of_pods(
            &buffer(json!({"limits": {"nvidia.com/gpu": "2"}})),
            &p,
            None
        ),
        Err(ReplicasError::LimitsNotInTemplate)
    );
    assert_eq!(
        number_of_pods(&buffer(json!({"replicas": -2})), &p, None),
        Ok(0)
    );
}

#[test]
fn each_condition_renders_upstreams_text() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let mut b = buffer(json!({}));
    let cases = [
        (
            BufferCondition::Ready,
            "ReadyForProvisioning",
            "True",
            "AttributesSetSuccessfully",
            "ready",
        ),
        (
            BufferCondition::NotReady(Some("boom".into())),
            "ReadyForProvisioning",
            "False",
            "error",
            "Buffer not ready for provisioning: boom",
        ),
        (
            BufferCondition::FakePodsInjected,
            "Provisioning",
            "True",
            "FakePodsInjected",
            "",
        ),
        (
            BufferCondition::BufferIsEmpty,
            "Provisioning",
            "False",
            "BufferIsEmpty",
            "CapacityBuffer has zero replicas",
        ),
        (
            BufferCondition::LimitedByQuotas(5, 2, vec!["a".into(), "b".into()]),
            "LimitedByQuotas",
            "True",
            "ResourceQuotasAllocated",
            "Buffer replicas limited from 5 to 2 due to quotas: a, b",
        ),
    ];
    for (c, type_, status, reason, message) in cases {
        assert!(c.set(&mut b, now));
        let got = b
            .status
            .as_ref()
            .unwrap()
            .conditions
            .iter()
            .find(|x| x.type_ == type_)
            .unwrap();
        assert_eq!(
            (
                got.status.as_str(),
                got.reason.as_str(),
                got.message.as_str()
            ),
            (status, reason, message)
        );
    }
    // Only LimitedByQuotas observes the generation; setting the same
    // condition again changes nothing.
    assert_eq!(
        b.condition(ConditionType::LimitedByQuotas)
            .unwrap()
            .observed_generation,
        Some(3)
    );
    assert_eq!(
        b.condition(ConditionType::Provisioning)
            .unwrap()
            .observed_generation,
        None
    );
    assert!(!BufferCondition::BufferIsEmpty.set(&mut b, now + Duration::from_secs(60)));
}

#[test]
fn fake_pods_copy_the_template_owned_by_the_buffer_and_safe_to_evict() {
    let b = buffer(json!({}));
    let t: PodTemplate = serde_json::from_value(json!({
        "metadata": {"name": "capacitybuffer-spare-pod-template", "namespace": "default"},
        "template": {"metadata": {"labels": {"app": "x"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}}
    }))
    .unwrap();
    let pods = make_fake_pods(&b, &t, 2);
    let names: Vec<&str> = pods
        .iter()
        .map(|p| p.pod.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(
        names,
        ["capacity-buffer-spare-1", "capacity-buffer-spare-2"]
    );
    let p = &pods[1].pod;
    assert!(is_fake_pod(p));
    let a = p.metadata.annotations.as_ref().unwrap();
    assert_eq!(a[FAKE_POD_ANNOTATION.0], FAKE_POD_ANNOTATION.1);
    assert_eq!(a["cluster-autoscaler.kubernetes.io/safe-to-evict"], "true");
    assert_eq!(p.metadata.uid.as_deref(), Some("u1-2"));
    let owner = &p.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("CapacityBuffer", "spare", Some(true))
    );
    assert!(p.spec.as_ref().unwrap().node_name.is_none());
    assert!(p.metadata.creation_timestamp.is_none());
    assert_eq!(pods[0].requests.milli_cpu, 3000);
}
