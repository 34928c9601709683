//! Unit tests of the flags.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::time::Duration;

use super::*;

fn parse(args: &[&str]) -> Result<Flags, clap::Error> {
    let argv =
        std::iter::once("cluster-autoscaler".to_string()).chain(args.iter().map(|s| s.to_string()));
    Flags::parse_args(argv)
}

#[test]
fn defaults_are_the_faq_table() {
    let f = Flags::default_values();
    assert_eq!(f.scan_interval, Duration::from_secs(10));
    assert_eq!(f.scale_down_unneeded_time, Duration::from_secs(600));
    assert_eq!(f.scale_down_unready_time, Duration::from_secs(1200));
    assert_eq!(f.scale_down_delay_after_add, Duration::from_secs(600));
    assert_eq!(f.scale_down_delay_after_failure, Duration::from_secs(180));
    assert_eq!(f.max_node_provision_time, Duration::from_secs(900));
    assert_eq!(f.expendable_pods_priority_cutoff, -10);
    assert_eq!(f.expander, "least-waste");
    assert_eq!(f.max_total_unready_percentage, 45.0);
    assert_eq!(f.ok_total_unready_count, 3);
    assert_eq!(f.max_scale_down_parallelism, 10);
    assert_eq!(f.max_drain_parallelism, 1);
    assert_eq!(
        f.node_group_backoff_reset_timeout,
        Duration::from_secs(3 * 3600)
    );
    assert_eq!(f.address, ":8085");
    assert_eq!(f.status_config_map_name, "cluster-autoscaler-status");
    assert!(f.skip_nodes_with_local_storage && f.skip_nodes_with_system_pods);
    assert!(f.cordon_node_before_terminating, "true since CA 1.34");
    assert!(f.frequent_loops_enabled, "true since CA 1.35");
    assert!(f.daemonset_eviction_for_occupied_nodes && !f.daemonset_eviction_for_empty_nodes);
    let v = f.validate().unwrap();
    assert_eq!(
        v.cores_total,
        MinMax {
            min: 0,
            max: 320_000
        }
    );
    assert_eq!(
        v.memory_total,
        MinMax {
            min: 0,
            max: 6_400_000
        }
    );
    assert_eq!(v.max_graceful_termination_sec, 600);
    assert_eq!(v.expanders, [ExpanderName::LeastWaste]);
    assert_eq!(v.address.port(), 8085);
}

#[test]
fn go_flag_syntax_is_accepted() {
    let f = parse(&[
        "--nodes=1:10:pool-a",
        "--nodes",
        "0:5:ns:pool:b",
        "-scale-down-unneeded-time=2m",
        "--balance_similar_node_groups",
        "--scale-down-enabled=false",
        "--expander=priority,least-waste",
        "--v=4",
        "--expendable-pods-priority-cutoff=-100",
        "--bypassed-scheduler-names=a,b",
    ])
    .unwrap();
    let v = f.validate().unwrap();
    assert_eq!(
        v.node_groups,
        [
            NodeGroupSpec {
                min: 1,
                max: 10,
                name: "pool-a".into()
            },
            NodeGroupSpec {
                min: 0,
                max: 5,
                name: "ns:pool:b".into()
            },
        ]
    );
    assert_eq!(f.scale_down_unneeded_time, Duration::from_secs(120));
    assert!(f.balance_similar_node_groups);
    assert!(!f.scale_down_enabled);
    assert_eq!(
        v.expanders,
        [ExpanderName::Priority, ExpanderName::LeastWaste]
    );
    assert_eq!(f.verbosity, 4);
    assert_eq!(f.expendable_pods_priority_cutoff, -100);
    assert_eq!(f.bypassed_scheduler_names, ["a", "b"]);
}

#[test]
fn bad_values_name_their_flag() {
    let e = parse(&["--scan-interval=10"]).unwrap_err().to_string();
    assert!(
        e.contains("--scan-interval") && e.contains("not a Go duration"),
        "{e}"
    );
    let e = parse(&["--no-such-flag=1"]).unwrap_err().to_string();
    assert!(e.contains("--no-such-flag"), "{e}");
    let bad = |args: &[&str]| parse(args).unwrap().validate().unwrap_err().to_string();
    assert_eq!(
        bad(&["--nodes=5:1:g"]),
        "invalid value for --nodes: \"5:1:g\": max 1 is below min 5"
    );
    assert!(bad(&["--nodes=1:x"]).contains("is not <min>:<max>:<name>"));
    assert!(bad(&["--nodes=1:2:"]).contains("the node group name is empty"));
    assert!(bad(&["--cores-total=10"]).starts_with("invalid value for --cores-total"));
    assert!(bad(&["--memory-total=5:1"]).contains("want 0 <= min <= max"));
    assert_eq!(
        bad(&["--expander=fastest"]),
        "invalid value for --expander: Expander fastest not supported"
    );
    assert!(bad(&["--expander=random,most-pods"]).contains("will always return only one result"));
    assert!(bad(&["--expander=most-pods,most-pods"]).contains("specified multiple times"));
    assert!(
        bad(&[
            "--drain-priority-config=10:20",
            "--max-graceful-termination-sec=30"
        ])
        .contains("cannot be used together")
    );
    assert!(bad(&["--drain-priority-config=x:20"]).contains("is not an integer"));
    assert!(bad(&["--scale-down-utilization-threshold=1.5"]).contains("above 1"));
    assert!(
        bad(&["--balancing-label=a", "--balancing-ignore-label=b"]).contains("cannot be combined")
    );
    assert!(bad(&["--address=nonsense"]).starts_with("invalid value for --address"));
    assert!(bad(&["--estimator=oracle"]).contains("not supported"));
}

#[test]
fn drain_priorities_sort_ascending() {
    let f = parse(&["--drain-priority-config=10000:20,0:60,1000:100"]).unwrap();
    let v = f.validate().unwrap();
    let prios: Vec<i32> = v.drain_priorities.iter().map(|d| d.priority).collect();
    assert_eq!(prios, [0, 1000, 10000]);
}

#[test]
fn flags_for_other_clouds_warn_once_each() {
    assert!(Flags::default_values().warnings().is_empty());
    let f = parse(&[
        "--regional",
        "--gce-concurrent-refreshes=4",
        "--max-empty-bulk-delete=3",
    ])
    .unwrap();
    let w = f.warnings();
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(w[0].starts_with("--regional is accepted but has no effect"));
}

#[test]
fn provisioning_request_and_capacity_flags_take_effect_without_a_warning() {
    let f = parse(&[
        "--enable-provisioning-requests",
        "--check-capacity-batch-processing",
        "--provisioning-request-initial-backoff-time=2m",
        "--check-capacity-processor-instance=a",
        "--capacity-buffer-controller-enabled",
        "--capacity-buffer-pod-injection-enabled",
        "--capacity-buffer-pod-dry-run-enabled=false",
        "--capacity-quotas-enabled",
        "--once",
    ])
    .unwrap();
    assert!(f.enable_provisioning_requests && f.capacity_quotas_enabled && f.once);
    assert!(f.warnings().is_empty(), "{:?}", f.warnings());
    // A feature still missing does warn: the check is not vacuous.
    let f = parse(&["--async-node-groups"]).unwrap();
    assert_eq!(f.warnings().len(), 1);
}

fn help_text(width: usize) -> String {
    help::render(&Flags::command_with_help(), width)
}

#[test]
fn every_flag_is_in_a_group() {
    let cmd = Flags::command_with_help();
    let ungrouped: Vec<String> = cmd
        .get_arguments()
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .filter(|a| {
            !a.get_help_heading()
                .is_some_and(|h| help::HEADINGS.contains(&h))
        })
        .map(|a| a.get_id().to_string())
        .collect();
    assert!(ungrouped.is_empty(), "flags without a group: {ungrouped:?}");
}

#[test]
fn help_fits_its_width_and_reads_as_sentences() {
    for width in [help::MIN_WIDTH, 90, help::MAX_WIDTH] {
        help_reads_well_at(width);
    }
}

fn help_reads_well_at(width: usize) {
    let text = help_text(width);
    let long: Vec<&str> = text.lines().filter(|l| l.chars().count() > width).collect();
    assert!(long.is_empty(), "lines over {width} columns: {long:#?}");
    // A description wrapped one word a line has continuation lines of
    // a single word; a well-wrapped one has at most its last.
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.windows(2) {
        let one_word = |l: &str| {
            l.starts_with("   ")
                && !l.trim_start().starts_with('-')
                && l.split_whitespace().count() == 1
        };
        assert!(
            !(one_word(pair[0]) && one_word(pair[1])),
            "one word a line: {pair:#?}"
        );
    }
    for needle in [
        "  --scan-interval duration",
        "(default 10s)",
        "  --expander string",
        "(default \"least-waste\")",
        "Cloud provider type. Implemented: kwok,",
        "  --nodes stringArray",
        "\nScale-down:\n",
    ] {
        assert!(text.contains(needle), "no {needle:?} in:\n{text}");
    }
}

/// A flag's default in a `--help` text, by flag name: what follows
/// `(default ` in its entry, or empty when the entry shows none.
fn help_defaults(help: &str) -> std::collections::BTreeMap<String, String> {
    let mut entries: Vec<String> = Vec::new();
    for line in help.lines() {
        let t = line.trim_start();
        if t.starts_with("--") || (t.starts_with('-') && t.get(2..4) == Some(", ")) {
            entries.push(t.to_string());
        } else if let Some(e) = entries.last_mut()
            && line.starts_with("      ")
        {
            e.push(' ');
            e.push_str(t);
        }
    }
    entries
        .into_iter()
        .filter_map(|e| {
            let name = e.split("--").nth(1)?.split_whitespace().next()?.to_string();
            let default = e
                .rsplit_once("(default ")
                .and_then(|(_, d)| d.strip_suffix(')'))
                .unwrap_or_default()
                .to_string();
            Some((name, default))
        })
        .collect()
}

/// A default as both helps compare: pflag prints zero durations and empty
/// lists (`0s`, `[]`), ours leaves every zero value out.
fn normalised(default: &str) -> &str {
    match default {
        "0s" | "[]" | "0" | "\"\"" | "false" => "",
        d => d,
    }
}

#[test]
fn help_defaults_are_upstream_1_37() {
    let table = super::reference::UPSTREAM_1_37;
    let ours = help_defaults(&help_text(help::MAX_WIDTH));
    // Where our --help says otherwise on purpose, and why.
    let differ: [(&str, &str); 1] = [(
        "stderrthreshold",
        "accepted for klog; ours logs by --v alone",
    )];
    let mut wrong = Vec::new();
    let mut missing = Vec::new();
    for line in table.lines().filter(|l| !l.starts_with('#')) {
        let mut cols = line.split('\t');
        let (Some(name), Some(_), default) = (cols.next(), cols.next(), cols.next()) else {
            continue;
        };
        if differ.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let Some(our) = ours.get(name) else {
            if !name.starts_with("ginkgo.") {
                missing.push(name);
            }
            continue;
        };
        // The table has pflag's DefValue; --help quotes a string's.
        let theirs = normalised(default.unwrap_or_default());
        if normalised(our.trim_matches('"')) != theirs {
            wrong.push(format!("--{name}: ours {our:?}, upstream {theirs:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "defaults that differ from 1.37: {wrong:#?}"
    );
    // Every flag of 1.37 is known, but klog's threshold for logging to
    // files and standard error at once (ours logs to standard error only),
    // and the test framework's `ginkgo.*` flags that upstream's API packages
    // bring into its binary.
    assert_eq!(
        missing,
        ["alsologtostderrthreshold"],
        "1.37's flags we lack"
    );
    let parsed = help_defaults(&help_text(help::MAX_WIDTH));
    assert_eq!(parsed.get("scan-interval").map(String::as_str), Some("10s"));
}

#[test]
fn the_1_36_flags_implemented_start_without_a_warning() {
    let f = parse(&[
        "--parallel-scale-up",
        "--salvo-scale-up",
        "--salvo-scale-up-budget=30s",
        "--node-deletion-batcher-interval=10s",
        "--node-removal-latency-tracking-enabled",
        "--force-delete-failed-nodes",
        "--force-delete-unregistered-nodes",
        "--cordon-node-before-terminating=false",
        "--frequent-loops-enabled=false",
        "--node-deletion-candidate-ttl=1h",
        "--max-startup-time=30m",
        "--startup-taint-prefix=example.com/starting",
        "--scaleup-simulation-for-skipped-node-groups-enabled",
        "--enable-proactive-scaleup",
        "--pod-injection-limit=10",
        "--max-node-skip-eval-time-tracker-enabled",
        "--dynamic-node-delete-delay-after-taint-enabled",
        "--fastpath-binpacking-enabled",
        "--debugging-snapshot-enabled",
        "--profiling",
        "--enable-csi-node-aware-scheduling",
    ])
    .unwrap();
    assert_eq!(f.warnings(), Vec::<String>::new());
}

#[test]
fn the_graceful_degradation_flags_of_1_37_take_upstreams_defaults() {
    let f = parse(&[]).unwrap();
    assert!(!f.enable_graceful_degradation);
    assert_eq!(f.pending_pods_batching_timeout, Duration::from_secs(240));
    let f = parse(&[
        "--enable-graceful-degradation",
        "--pending-pods-batching-timeout=30s",
    ])
    .unwrap();
    assert!(f.enable_graceful_degradation);
    assert_eq!(f.pending_pods_batching_timeout, Duration::from_secs(30));
    let err = parse(&["--pending-pods-batching-timeout=soon"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("--pending-pods-batching-timeout"), "{err}");
}

#[test]
fn the_scheduler_verbosity_of_1_37_is_at_most_v_with_upstreams_warning() {
    let f = parse(&["--scheduler-verbosity=3", "--v=1"]).unwrap();
    assert_eq!(f.effective_scheduler_verbosity(), 1);
    assert_eq!(
        f.warnings(),
        ["--scheduler-verbosity should be at most as high as -v flag, overriding it to: 1"]
    );
    let f = parse(&["--scheduler-verbosity=2", "--v=4"]).unwrap();
    assert_eq!(f.effective_scheduler_verbosity(), 2);
    assert!(f.warnings().is_empty(), "{:?}", f.warnings());
    let err = parse(&["--scheduler-verbosity=loud"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("--scheduler-verbosity"), "{err}");
    let f = parse(&["--enable-inter-pod-affinity-hostname-fast-path"]).unwrap();
    assert!(f.enable_inter_pod_affinity_hostname_fast_path);
    assert!(f.warnings().is_empty(), "{:?}", f.warnings());
}

#[test]
fn a_startup_time_below_the_other_health_timeouts_is_raised_with_upstreams_warning() {
    let f = parse(&["--max-startup-time=1m"]).unwrap();
    assert_eq!(f.effective_max_startup_time(), Duration::from_secs(15 * 60));
    assert_eq!(
        f.warnings(),
        [
            "--max-startup-time needs to be at least as high as --max-failing-time and --max-inactivity, overriding it to the highest value out of them: 15m0s"
        ]
    );
    let f = parse(&["--max-startup-time=30m"]).unwrap();
    assert_eq!(f.effective_max_startup_time(), Duration::from_secs(30 * 60));
}

#[test]
fn a_flag_given_twice_takes_the_last_value_and_repeatable_ones_accumulate() {
    let f = parse(&[
        "--frequent-loops-enabled=true",
        "--frequent-loops-enabled=false",
        "--scan-interval=1s",
        "--scan-interval=20s",
        "--nodes=1:2:a",
        "--nodes=1:3:b",
    ])
    .unwrap();
    assert!(!f.frequent_loops_enabled);
    assert_eq!(f.scan_interval, std::time::Duration::from_secs(20));
    assert_eq!(f.nodes, ["1:2:a", "1:3:b"]);
}
