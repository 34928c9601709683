//! The what-if end to end on a small cluster dump (`data/shop.json`, as
//! `kubectl get -A -o json` writes it): three EKS nodes of group
//! `general`, one control-plane node, a web Deployment under a PDB, a
//! lone cache pod on the third node, a report pod (3.8 CPU) pending for want of room,
//! and the Cluster Autoscaler's own Deployment with its flags.

use std::path::PathBuf;
use std::time::Duration;

use whatif::coverage::Status;
use whatif::flags::Flags;
use whatif::report::Report;
use whatif::{SideSpec, WhatIf};

fn shop() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/shop.json")
}

fn what_if(sides: &[(&str, &str)]) -> WhatIf {
    WhatIf {
        inputs: vec![shop()],
        kubeconfig: None,
        recording: None,
        flags: Flags::default(),
        sides: sides
            .iter()
            .map(|(name, flags)| SideSpec {
                name: (*name).into(),
                flags: Flags::parse(
                    name,
                    &flags
                        .split_whitespace()
                        .map(str::to_string)
                        .collect::<Vec<_>>(),
                )
                .expect("flags parse"),
                binary: None,
            })
            .collect(),
        group_label: None,
        duration: Duration::from_secs(3600),
        seed: 7,
        timeline: Default::default(),
        prices: Default::default(),
        parallel: 2,
        sweep: Vec::new(),
        case: None,
    }
}

fn run(w: &WhatIf) -> Report {
    whatif::run(w).expect("the what-if runs")
}

#[test]
fn the_deployed_flags_scale_up_for_the_pending_pod_and_remove_the_idle_node() {
    let report = run(&what_if(&[]));
    assert_eq!(report.sides.len(), 1);
    let side = &report.sides[0];
    assert_eq!(side.name, "as deployed");
    assert!(
        side.flags
            .contains(&"--scale-down-unneeded-time=10m".to_string()),
        "{:?}",
        side.flags
    );
    // The group comes from the EKS label, its bounds from the Deployment's --nodes.
    let general = &report.groups[0];
    assert_eq!(
        (general.name.as_str(), general.min, general.max),
        ("general", 1, 5)
    );
    assert_eq!(general.nodes.len(), 3);
    // The report pod (3.8 CPU) fits no node: one scale-up of general.
    assert_eq!(side.scale_ups.len(), 1, "{:#?}", side.scale_ups);
    assert_eq!(side.scale_ups[0].groups["general"], "3->4");
    assert!(
        side.scale_ups[0]
            .pods
            .contains(&"shop/report-6c9f7d5b8-p1".to_string())
    );
    assert_eq!(side.summary.pending_at_start, 1);
    assert_eq!(
        (side.summary.nodes_at_start, side.summary.nodes_added),
        (4, 1)
    );
    assert_eq!(side.summary.pending_at_end, 0);
    // The cache's node (5% of its CPU requested) and the first web node
    // (26%) are under the 0.5 threshold and their pods fit elsewhere:
    // removed after 10 minutes unneeded, one at a time as the PDB allows.
    for (name, utilization) in [("ip-10-0-1-13", 0.051), ("ip-10-0-1-11", 0.255)] {
        let node = side
            .nodes
            .iter()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("{name} is reported"));
        let removed = node
            .removed_at
            .unwrap_or_else(|| panic!("{name} is removed"));
        let since = node.unneeded_since.expect("it was unneeded first");
        assert!(
            removed >= since + 600,
            "{name} removed at {removed}, unneeded since {since}"
        );
        assert_eq!(node.utilization, Some(utilization), "{name}");
    }
    assert_eq!(side.summary.evictions, 3);
    let kept = side
        .nodes
        .iter()
        .find(|n| n.name == "ip-10-0-1-12")
        .expect("reported");
    assert!(kept.removed_at.is_none());
    assert!(kept.kept_because.is_some());
    // The control-plane node is in no group: never touched.
    assert!(
        report
            .coverage
            .ungrouped_nodes
            .contains(&"control-1".to_string())
    );
    let control = side
        .nodes
        .iter()
        .find(|n| n.name == "control-1")
        .expect("reported");
    assert!(control.removed_at.is_none());
}

#[test]
fn a_stricter_threshold_keeps_the_idle_node_and_the_difference_says_so() {
    let report = run(&what_if(&[
        ("default", ""),
        ("strict", "--scale-down-utilization-threshold=0.2"),
    ]));
    // At 0.2 the web node (26% of its CPU) is not underutilized; the
    // cache's node (5%) still goes.
    let strict = &report.sides[1];
    let node = |name: &str| {
        strict
            .nodes
            .iter()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("{name} is reported"))
    };
    assert!(node("ip-10-0-1-11").removed_at.is_none());
    assert_eq!(
        node("ip-10-0-1-11").kept_because.as_deref(),
        Some("NotUnderutilized")
    );
    assert!(node("ip-10-0-1-13").removed_at.is_some());
    let d = &report.differences[0];
    assert_eq!(d.removed_only_by_base, vec!["ip-10-0-1-11".to_string()]);
    assert!(d.removed_only_by_side.is_empty());
    assert!(
        d.node_hours > 0.0,
        "strict keeps more node-hours: {}",
        d.node_hours
    );
}

#[test]
fn the_same_inputs_and_seed_give_the_same_bytes() {
    let w = what_if(&[("a", ""), ("b", "--expander=random")]);
    let first = serde_json::to_string(&run(&w)).expect("serialises");
    for _ in 0..2 {
        let again = serde_json::to_string(&run(&w)).expect("serialises");
        assert_eq!(first, again);
    }
}

#[test]
fn the_coverage_says_what_was_read_and_what_is_missing() {
    let report = run(&WhatIf {
        duration: Duration::from_secs(60),
        ..what_if(&[])
    });
    let c = &report.coverage;
    let row = |what: &str| {
        c.rows
            .iter()
            .find(|r| r.what == what)
            .unwrap_or_else(|| panic!("no row {what}"))
    };
    assert_eq!((row("Node").count, row("Node").status), (4, Status::Loaded));
    assert_eq!(row("PodDisruptionBudget").status, Status::Loaded);
    assert_eq!(row("StatefulSet").status, Status::Missing);
    assert_eq!(
        row("autoscaler flags").note,
        "from Deployment kube-system/cluster-autoscaler"
    );
    assert_eq!(row("node group bounds").status, Status::Read);
    assert_eq!(c.unused.get("Service"), Some(&1));
    assert_eq!(c.dropped.config_maps, 1);
    assert!(
        c.flags_left_out
            .iter()
            .any(|f| f.starts_with("--cloud-provider=aws"))
    );
}

#[test]
fn a_timeline_changes_the_cluster_mid_run_and_prices_give_a_cost() {
    let timeline = whatif::timeline::Timeline::parse(
        "timeline.yaml",
        "- {at: 30m, scale: Deployment shop/web, replicas: 20}\n\
         - {at: 35m, cordon: ip-10-0-1-12}\n\
         - at: 40m\n  create:\n    apiVersion: v1\n    kind: Pod\n    metadata: {name: batch-1, namespace: shop}\n    \
         spec: {containers: [{name: main, image: busybox, resources: {requests: {cpu: '3'}}}]}\n",
    )
    .expect("the timeline parses");
    let report = run(&WhatIf {
        timeline,
        prices: [("m5.xlarge".to_string(), 0.192)].into(),
        ..what_if(&[])
    });
    let actions: Vec<(u64, &str)> = report
        .timeline
        .iter()
        .map(|s| (s.at, s.action.as_str()))
        .collect();
    assert_eq!(
        actions,
        [
            (1800, "scale Deployment shop/web to 20"),
            (2100, "cordon Node ip-10-0-1-12"),
            (2400, "create Pod shop/batch-1"),
        ]
    );
    assert!(report.markdown().contains("## Timeline"));
    let side = &report.sides[0];
    // Sixteen more web pods (half a CPU each) and the batch pod pending:
    // scale-ups after the steps, none of them for the batch pod before it
    // exists.
    let later: Vec<_> = side.scale_ups.iter().filter(|u| u.at >= 1800).collect();
    assert!(!later.is_empty(), "{:#?}", side.scale_ups);
    assert!(
        later
            .iter()
            .any(|u| u.pods.iter().any(|p| p.starts_with("shop/web-"))),
        "{later:#?}"
    );
    assert!(
        side.scale_ups
            .iter()
            .filter(|u| u.pods.contains(&"shop/batch-1".to_string()))
            .all(|u| u.at >= 2400),
        "{:#?}",
        side.scale_ups
    );
    // The cost counts the m5.xlarge hours; the control-plane node's
    // m5.large (there all hour) has no price and says so.
    assert_eq!(side.unpriced, ["m5.large"]);
    let xlarge_hours = side.summary.node_hours - 1.0;
    let cost = side.summary.cost.expect("a cost with prices given");
    assert!(
        (cost - xlarge_hours * 0.192).abs() < 0.01,
        "cost {cost} for {xlarge_hours} m5.xlarge hours"
    );
}

#[test]
fn a_timeline_step_that_fails_names_itself() {
    let timeline = whatif::timeline::Timeline::parse(
        "timeline.yaml",
        "- {at: 5m, delete: Deployment shop/nothing}\n",
    )
    .expect("the timeline parses");
    let e = whatif::run(&WhatIf {
        timeline,
        ..what_if(&[])
    })
    .expect_err("no such Deployment")
    .to_string();
    assert!(
        e.contains("timeline step at 300 s (delete Deployment shop/nothing)"),
        "{e}"
    );
    let late = whatif::timeline::Timeline::parse("timeline.yaml", "- {at: 2h, cordon: n}\n")
        .expect("the timeline parses");
    let e = whatif::run(&WhatIf {
        timeline: late,
        ..what_if(&[])
    })
    .expect_err("after the end")
    .to_string();
    assert!(e.contains("not before the run's end (3600 s)"), "{e}");
}

#[test]
fn a_provisioning_request_in_the_input_is_loaded_and_acted_on_when_enabled() {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/batch.yaml");
    // Room for all of them: were yesterday's request served again, its two
    // pods would take two nodes more.
    let flags = Flags::parse("test", &["--nodes=1:10:general".to_string()]).expect("parses");
    let report = run(&WhatIf {
        inputs: vec![shop(), data],
        flags,
        ..what_if(&[
            ("without", ""),
            ("provreq", "--enable-provisioning-requests"),
        ])
    });
    let row = |what: &str| {
        let r = report
            .coverage
            .rows
            .iter()
            .find(|r| r.what == what)
            .unwrap_or_else(|| panic!("no row {what}"));
        (r.count, r.status)
    };
    assert_eq!(row("ProvisioningRequest"), (2, Status::Loaded));
    assert_eq!(row("PodTemplate"), (1, Status::Loaded));
    // Without the flag only the report pod's scale-up; with it the
    // request's second 3.5-CPU pod gets a node of its own too; yesterday's
    // request, its booking expired, none.
    let added = |i: usize| report.sides[i].summary.nodes_added;
    assert_eq!(
        (added(0), added(1)),
        (1, 2),
        "{:#?}",
        report.sides[1].scale_ups
    );
}

/// `testbed whatif`'s arguments as the command line gives them.
#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    args: whatif::cli::Args,
}

fn request(argv: &[&str]) -> Result<WhatIf, String> {
    use clap::Parser;
    let shop = shop();
    let words = ["testbed-whatif", shop.to_str().expect("a UTF-8 path")];
    let cli = Cli::try_parse_from(words.into_iter().chain(argv.iter().copied()))
        .map_err(|e| e.to_string())?;
    whatif::cli::request(&cli.args, None).map_err(|e| e.to_string())
}

#[test]
fn a_sweep_runs_a_side_per_case_and_a_case_alone_gives_the_same_numbers() {
    let mut sweep = request(&[
        "--for=1h",
        "--seed=7",
        "--sweep",
        "scale-down-utilization-threshold=0.3..0.7/0.4",
        "--sweep",
        "scale-down-unneeded-time=5m,20m",
    ])
    .expect("the sweep is accepted");
    sweep.parallel = 2;
    let report = run(&sweep);
    let rows = &report
        .sweep
        .as_ref()
        .expect("the report has the sweep")
        .cases;
    let names: Vec<&str> = rows.iter().map(|c| c.side.as_str()).collect();
    assert_eq!(
        names,
        [
            "scale-down-utilization-threshold=0.3 scale-down-unneeded-time=5m",
            "scale-down-utilization-threshold=0.3 scale-down-unneeded-time=20m",
            "scale-down-utilization-threshold=0.7 scale-down-unneeded-time=5m",
            "scale-down-utilization-threshold=0.7 scale-down-unneeded-time=20m",
        ]
    );
    assert_eq!(report.sides.len(), 4, "a side per case");
    // The swept flags reach the autoscaler: the idle node goes 15 minutes
    // sooner with the shorter unneeded time.
    assert!(
        rows[0].node_hours < rows[1].node_hours,
        "5m {} node-hours, 20m {}",
        rows[0].node_hours,
        rows[1].node_hours
    );
    assert!(rows.iter().any(|c| c.pareto), "the front has a case");
    let alone = run(&request(&[
        "--for=1h",
        "--seed=7",
        "--flags=--scale-down-utilization-threshold=0.7 --scale-down-unneeded-time=20m",
    ])
    .expect("the case alone is accepted"));
    let one = &alone.sides[0].summary;
    let case = &rows[3];
    assert_eq!(
        (
            one.node_hours,
            one.pending_pod_minutes,
            one.evictions,
            one.nodes_removed
        ),
        (
            case.node_hours,
            case.pending_pod_minutes,
            case.evictions,
            case.nodes_removed
        )
    );
}

#[test]
fn a_bad_sweep_is_refused_before_anything_runs() {
    let refused = |argv: &[&str]| -> String {
        match request(argv) {
            Err(e) => e,
            Ok(w) => whatif::run(&w)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default(),
        }
    };
    assert!(refused(&["--sweep", "expander="]).contains("no values"));
    assert!(
        refused(&["--sweep", "no-such-flag=1,2"]).contains("no-such-flag"),
        "{}",
        refused(&["--sweep", "no-such-flag=1,2"])
    );
    assert!(
        refused(&[
            "--sweep",
            "expander=random",
            "--side",
            "a=--expander=random"
        ])
        .contains("cannot be used with")
    );
}
