//! The scheduler's equivalence classes.
use super::*;
use serde_json::json;

fn pod(name: &str, cpu: &str, extra: serde_json::Value) -> PodInfo {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "pause",
            "resources": {"requests": {"cpu": cpu}}}]}});
    if let (Some(spec), Some(extra)) = (p["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    PodInfo::new(Arc::new(serde_json::from_value(p).expect("a pod"))).compact()
}

#[test]
fn pods_of_one_shape_share_a_class_and_others_do_not() {
    let a = equivalence_class(&pod("a", "1", json!({})));
    let b = equivalence_class(&pod("b", "1", json!({})));
    let bigger = equivalence_class(&pod("c", "2", json!({})));
    assert!(a.is_some());
    assert_eq!(a, b, "the name is not part of the class");
    assert_ne!(a, bigger);
    let d = pod("d", "1", json!({}));
    let mut other_labels = (*d.pod).clone();
    other_labels.metadata.labels = Some([("app".into(), "db".into())].into());
    assert_ne!(a, equivalence_class(&d.with_pod(other_labels)));
}

#[test]
fn pods_with_required_pod_affinity_have_no_class() {
    let affine = pod(
        "a",
        "1",
        json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}}),
    );
    assert_eq!(equivalence_class(&affine), None);
}
