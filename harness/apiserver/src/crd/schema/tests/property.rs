//! Property: CapacityBuffer specs built to satisfy the CRD's schema validate
//! with no causes; one mutation (wrong type, out of range, too short, an
//! enum violation) is refused.

use proptest::prelude::*;
use serde_json::json;

use super::*;

fn quantity() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0i64..100_000).prop_map(Value::from),
        (
            "[1-9][0-9]{0,3}",
            prop::sample::select(vec!["", "m", "Mi", "Gi", "k"])
        )
            .prop_map(|(n, unit)| Value::from(format!("{n}{unit}"))),
    ]
}

prop_compose! {
    fn valid_spec()(
        name in "[a-z][a-z0-9-]{0,20}",
        replicas in proptest::option::of(0i64..=i64::from(i32::MAX)),
        percentage in proptest::option::of(0i64..=100),
        limits in prop::collection::btree_map("[a-z]{1,8}", quantity(), 0..4),
        strategy in proptest::option::of("[a-z./-]{1,30}"),
    ) -> Value {
        let mut spec = json!({"podTemplateRef": {"name": name}});
        if let Some(r) = replicas { spec["replicas"] = json!(r); }
        if let Some(p) = percentage { spec["percentage"] = json!(p); }
        if !limits.is_empty() { spec["limits"] = json!(limits); }
        if let Some(s) = strategy { spec["provisioningStrategy"] = json!(s); }
        spec
    }
}

fn buffer(spec: Value, status: Option<&str>) -> Value {
    let mut obj = json!({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
        "metadata": {"name": "b"}, "spec": spec});
    if let Some(status) = status {
        obj["status"] = json!({"conditions": [{"type": "Ready", "status": status, "reason": "R",
            "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]});
    }
    obj
}

proptest! {
    #[test]
    fn valid_buffers_validate_and_mutations_are_refused(
        spec in valid_spec(),
        status in prop::sample::select(vec!["True", "False", "Unknown"]),
        mutation in 0usize..6,
        bad_number in 1i64..1_000_000,
    ) {
        let s = buffers();
        let valid = buffer(spec.clone(), Some(status));
        prop_assert_eq!(rendered(&s.validate(&valid)), Vec::<String>::new());

        let mut bad = spec;
        let mut bad_status = Some(status);
        match mutation {
            0 => bad["replicas"] = json!(format!("{bad_number}")),
            1 => bad["replicas"] = json!(-bad_number),
            2 => bad["percentage"] = json!(i64::from(i32::MAX) + bad_number),
            3 => bad["podTemplateRef"]["name"] = json!(""),
            4 => bad["limits"] = json!({"cpu": bad_number % 2 == 0}),
            _ => bad_status = Some("Maybe"),
        }
        let causes = s.validate(&buffer(bad, bad_status));
        prop_assert!(!causes.is_empty(), "mutation {} accepted", mutation);
    }
}
