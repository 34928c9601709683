//! Properties of every parser of outside input: whatever the
//! text, no panic, and an error that names what was wrong; where a parser
//! has a printed form, parsing what it prints gives the same value back.
//!
//! Covered: label and field selectors, quantities, Go durations, the
//! autoscaler's flags (duration, ratio, integer and node group values), the
//! priority expander's ConfigMap, Cluster API's taint and label
//! annotations, AWS node template tags, kwok's jq subset, templates and
//! Stage YAML, protobuf request bodies, and the status ConfigMap (any text
//! read without a panic; what the autoscaler writes read back as written). The kwok provider's ConfigMaps
//! have their properties beside the provider (`autoscaler`'s
//! `cloudprovider::kwok` tests), as its parsers are private to it.
//!
//! `PROPTEST_CASES=100000 cargo test -p conformance --test checks parsers::` runs
//! longer; CI runs proptest's default of 256 cases per property.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;

/// Text of the characters these grammars use, and some they do not.
fn grammar_text() -> impl Strategy<Value = String> {
    proptest::string::string_regex(r"[a-zA-Z0-9 _.,=!()/:\-+*\[\]{}|$@#%~^&<>'\x22\\\n\té漢]{0,60}")
        .unwrap()
}

proptest! {
    #[test]
    fn label_selectors_never_panic_and_round_trip(s in grammar_text()) {
        if let Ok(sel) = apimachinery::labels::LabelSelector::parse(&s) {
            let printed = sel.to_string();
            let again = apimachinery::labels::LabelSelector::parse(&printed)
                .unwrap_or_else(|e| panic!("{s:?} printed as {printed:?}, which does not parse: {e}"));
            prop_assert_eq!(again.to_string(), printed);
        }
    }

    #[test]
    fn generated_label_selectors_parse_and_match_as_written(
        key in "[a-z][a-z0-9]{0,8}(/[a-z]{1,5})?",
        value in "[a-z0-9]{0,8}",
        other in "[a-z0-9]{1,8}",
    ) {
        let sel = apimachinery::labels::LabelSelector::parse(&format!("{key}={value},{key} in ({value},{other})"))
            .unwrap();
        let labels: BTreeMap<String, String> = [(key.clone(), value.clone())].into();
        prop_assert!(sel.matches(&labels));
        // Longer than both values, so neither (`{other}x` was `0x` = `0x`).
        let wrong: BTreeMap<String, String> = [(key, format!("{other}{value}z"))].into();
        prop_assert!(!sel.matches(&wrong));
    }

    #[test]
    fn field_selectors_never_panic_and_name_the_field(s in grammar_text()) {
        match apimachinery::fields::FieldSelector::parse(&s, &["metadata.name", "spec.nodeName"]) {
            Ok(_) => {}
            Err(e) => prop_assert!(!e.0.is_empty()),
        }
    }

    #[test]
    fn quantities_never_panic(s in grammar_text()) {
        let _ = predicates::quantity::parse_milli(&s);
        let _ = predicates::quantity::parse_value(&s);
    }

    #[test]
    fn quantities_scale_by_their_suffix(n in 0i64..1_000_000_000, big in 0u64..u64::MAX) {
        use predicates::quantity::{parse_milli, parse_value};
        prop_assert_eq!(parse_milli(&format!("{n}m")), Some(n));
        prop_assert_eq!(parse_milli(&n.to_string()), Some(n * 1000));
        prop_assert_eq!(parse_value(&format!("{n}Ki")), Some(n * 1024));
        prop_assert_eq!(parse_value(&format!("{n}k")), Some(n * 1000));
        // Past i64: refused, not wrapped.
        let huge = format!("{big}{big}Ei");
        prop_assert_eq!(parse_value(&huge), None);
    }

    #[test]
    fn go_durations_never_panic(s in grammar_text()) {
        let _ = simclock::parse_go_duration(&s);
    }

    #[test]
    fn go_durations_add_up(h in 0u64..1000, m in 0u64..1000, s in 0u64..1000, ms in 0u64..1000) {
        let text = format!("{h}h{m}m{s}s{ms}ms");
        let want = Duration::from_secs(h * 3600 + m * 60 + s) + Duration::from_millis(ms);
        prop_assert_eq!(simclock::parse_go_duration(&text), Some(want));
        prop_assert_eq!(simclock::parse_go_duration(&format!("-{text}")), None);
    }

    #[test]
    fn flag_values_are_refused_naming_the_flag(
        flag in prop::sample::select(vec![
            "scale-down-unneeded-time", "scan-interval", "max-node-provision-time",
            "scale-down-utilization-threshold", "max-nodes-total", "nodes", "expander",
            "max-graceful-termination-sec", "balancing-ignore-label",
        ]),
        value in grammar_text(),
    ) {
        let args = ["cluster-autoscaler".to_string(), format!("--{flag}={value}")];
        let parsed = autoscaler::config::Flags::parse_args(args);
        let result = parsed
            .map_err(|e| e.to_string())
            .and_then(|f| f.validate().map(|_| ()).map_err(|e| e.to_string()));
        if let Err(message) = result {
            prop_assert!(
                message.contains(flag),
                "--{}={:?} was refused without naming the flag: {}", flag, value, message
            );
        }
    }

    #[test]
    fn priority_expander_config_never_panics(s in grammar_text(), n in -5i64..5, re in grammar_text()) {
        let _ = autoscaler::expander::priority::Priorities::parse(&s);
        let _ = autoscaler::expander::priority::Priorities::parse(&format!("{n}:\n  - {re}\n"));
    }

    #[test]
    fn cluster_api_annotations_never_panic(s in grammar_text()) {
        use autoscaler::cloudprovider::clusterapi::scalefromzero::{parse_labels, parse_taints};
        if let Err(e) = parse_taints(&s) {
            prop_assert!(!e.to_string().is_empty());
        }
        if let Err(e) = parse_labels(&s) {
            prop_assert!(!e.to_string().is_empty());
        }
    }

    // The aws provider's parsers are built with the `aws` feature.
    #[cfg(feature = "aws")]
    #[test]
    fn aws_template_tags_name_the_bad_tag(suffix in "[a-zA-Z0-9/._\\-]{0,20}", value in grammar_text()) {
        let prefixes = ["k8s.io/cluster-autoscaler/node-template/label/",
            "k8s.io/cluster-autoscaler/node-template/taint/",
            "k8s.io/cluster-autoscaler/node-template/resources/",
            "k8s.io/cluster-autoscaler/node-template/autoscaling-options/"];
        for prefix in prefixes {
            let key = format!("{prefix}{suffix}");
            let tags: BTreeMap<String, String> = [(key.clone(), value.clone())].into();
            if let Err(bad) = autoscaler::cloudprovider::aws::template::parse_tags(&tags) {
                prop_assert_eq!(&bad.key, &key);
                prop_assert!(!bad.why.to_string().is_empty());
            }
        }
    }

    #[test]
    fn kwok_jq_templates_and_stages_never_panic(s in grammar_text()) {
        let _ = kwok::jq::Query::parse(&s);
        let _ = kwok::template::Template::parse(&s);
        let _ = kwok::stage::parse_stages(&s, "fuzz.yaml");
    }

    #[test]
    fn kwok_stages_with_bad_fields_never_panic(
        selector in grammar_text(),
        delay in grammar_text(),
        template in grammar_text(),
    ) {
        let yaml = format!(
            "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: s\nspec:\n  resourceRef:\n    apiGroup: v1\n    kind: Pod\n  selector:\n    matchExpressions:\n    - key: {selector:?}\n      operator: In\n      values: [\"x\"]\n  delay:\n    durationMilliseconds: 1\n    jitterDurationFrom:\n      expressionFrom: {delay:?}\n  next:\n    statusTemplate: {template:?}\n"
        );
        let _ = kwok::stage::parse_stages(&yaml, "fuzz.yaml");
    }

    #[test]
    fn protobuf_bodies_never_panic(body in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = apiserver::protobuf::decode(&body);
        let mut framed = b"k8s\x00".to_vec();
        framed.extend_from_slice(&body);
        if let Err(e) = apiserver::protobuf::decode(&framed) {
            prop_assert!((400..500).contains(&e.code), "{}", e);
        }
    }

    #[test]
    fn status_config_maps_never_panic_and_keep_their_message(s in grammar_text(), message in grammar_text()) {
        if let Err(e) = conformance::steps::assertions::parse_status(&s) {
            prop_assert!(e.starts_with("the status is not YAML"), "{}", e);
        }
        // What the autoscaler writes, the suite reads back as written.
        let now = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let status = autoscaler::status::StatusWriter::initializing(now, Some(&message));
        let text = serde_saphyr::to_string(&status).unwrap();
        let read = conformance::steps::assertions::parse_status(&text).unwrap();
        prop_assert_eq!(conformance::steps::assertions::field(&read, "message"), Some(message));
        prop_assert_eq!(
            conformance::steps::assertions::field(&read, "autoscalerStatus"),
            Some("Initializing".to_string())
        );
    }
}
