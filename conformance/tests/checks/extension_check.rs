//! The `@extension` check is made on what a scenario does, not on the words
//! of its steps: a scenario that reads our decision record (`/decisions`)
//! fails unless it is tagged `@extension`, whichever step or function reads
//! it; the same scenario tagged passes.

use conformance::runner::{self, RunArgs};

const FEATURE: &str = r#"Feature: Tag check
  Scenario: Reads the decision record without saying so
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 0 and max 3
    And the autoscaler runs with "--frequent-loops-enabled=false"
    And a deployment "web" of 2 pods requesting 900m CPU
    Then the autoscaler chooses among "pool" for the scale-up

  @extension
  Scenario: Reads the decision record and is tagged
    Given a node group "pool" of nodes with 4 CPU and 16Gi memory, min 0 and max 3
    And the autoscaler runs with "--frequent-loops-enabled=false"
    And a deployment "web" of 2 pods requesting 900m CPU
    Then the autoscaler chooses among "pool" for the scale-up
"#;

#[test]
fn a_scenario_reading_decisions_untagged_fails_the_tag_check() {
    let dir = tempfile::tempdir().unwrap();
    let feature = dir.path().join("tag_check.feature");
    std::fs::write(&feature, FEATURE).unwrap();
    let args = RunArgs {
        paths: vec![feature],
        tags: Some("not @nothing".into()),
        autoscaler_binary: None,
        autoscaler_args: vec![],
        cloud_provider: Default::default(),
        time_scale: 60.0,
        max_example_minutes: conformance::runner::pace::DEFAULT_MAX_EXAMPLE_MINUTES,
        cluster: "embedded".into(),
        cluster_image: None,
        report_dir: None,
        verbose: false,
        shard: None,
    };
    let summary = runner::run(&args, &[]).unwrap();
    let results: Vec<(&str, Option<&str>)> = summary
        .scenarios
        .iter()
        .map(|s| (s.name.as_str(), s.failure.as_deref()))
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    let untagged = results[0].1.expect("the untagged scenario fails");
    assert!(
        untagged.contains("not tagged @extension") && untagged.contains("/decisions"),
        "{untagged}"
    );
    assert_eq!(results[1].1, None, "the tagged one passes: {results:?}");
}
