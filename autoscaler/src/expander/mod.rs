//! Expanders (docs/reference/ca-rules.md §5): choose one scale-up option among several.
//! `--expander` is a chain: each expander keeps the best options by its
//! rule; as soon as one option is left it wins; ties left at the end are
//! broken at random.

use crate::config::ExpanderName;

pub mod priority;
pub use priority::{Priorities, PriorityNotice};

/// One way to scale up: a node group, how many nodes, which pods they
/// would take.
#[derive(Debug, Clone)]
pub struct ScaleUpOption {
    /// Node group id.
    pub group: String,
    /// Nodes to add.
    pub node_count: usize,
    /// Pods that would be scheduled (keys).
    pub pods: Vec<String>,
    /// Sum of the pods' CPU requests (milli) and memory requests (bytes).
    pub pod_requests: (i64, i64),
    /// The template node's CPU (milli) and memory (bytes) capacity.
    pub node_capacity: (i64, i64),
}

fn keep_best<K: PartialOrd + Copy>(
    options: Vec<ScaleUpOption>,
    key: impl Fn(&ScaleUpOption) -> Option<K>,
    higher: bool,
) -> Vec<ScaleUpOption> {
    let mut best: Option<K> = None;
    for o in &options {
        if let Some(k) = key(o) {
            best = match best {
                None => Some(k),
                Some(b) if (higher && k > b) || (!higher && k < b) => Some(k),
                other => other,
            };
        }
    }
    let Some(best) = best else {
        return options;
    };
    options
        .into_iter()
        .filter(|o| key(o).is_some_and(|k| k == best))
        .collect()
}

/// The least-waste score (lower is better): unused CPU fraction plus
/// unused memory fraction of the new nodes' capacity.
pub fn waste_score(o: &ScaleUpOption) -> Option<f64> {
    let n = o.node_count as f64;
    let (cpu, mem) = (o.node_capacity.0 as f64 * n, o.node_capacity.1 as f64 * n);
    if cpu <= 0.0 || mem <= 0.0 {
        return None;
    }
    Some((cpu - o.pod_requests.0 as f64) / cpu + (mem - o.pod_requests.1 as f64) / mem)
}

/// Applies one expander.
pub fn filter(
    name: ExpanderName,
    options: Vec<ScaleUpOption>,
    priorities: Option<&Priorities>,
    notices: &mut Vec<PriorityNotice>,
) -> Vec<ScaleUpOption> {
    match name {
        ExpanderName::Random | ExpanderName::Price | ExpanderName::Grpc => {
            if options.is_empty() {
                return options;
            }
            let i = fastrand::usize(0..options.len());
            vec![options[i].clone()]
        }
        ExpanderName::MostPods => keep_best(options, |o| Some(o.pods.len()), true),
        ExpanderName::LeastNodes => keep_best(
            options,
            |o| (o.node_count > 0).then_some(o.node_count),
            false,
        ),
        ExpanderName::LeastWaste => {
            let scored: Vec<ScaleUpOption> = options
                .into_iter()
                .filter(|o| waste_score(o).is_some())
                .collect();
            for o in &scored {
                if let Some(s) = waste_score(o) {
                    let n = o.node_count as f64;
                    tracing::debug!(
                        "Expanding Node Group {} would waste {:.2}% CPU, {:.2}% Memory, {:.2}% Blended",
                        o.group,
                        100.0 * (1.0 - o.pod_requests.0 as f64 / (o.node_capacity.0 as f64 * n)),
                        100.0 * (1.0 - o.pod_requests.1 as f64 / (o.node_capacity.1 as f64 * n)),
                        s * 50.0
                    );
                }
            }
            keep_best(scored, waste_score, false)
        }
        ExpanderName::Priority => {
            let Some(p) = priorities else {
                return options;
            };
            // The running maximum starts at -1: lower priorities never win (upstream quirk).
            let mut best = -1i64;
            let mut kept: Vec<ScaleUpOption> = Vec::new();
            for o in &options {
                match p.priority_of(&o.group) {
                    None => notices.push(PriorityNotice::NotMatchedGroup(o.group.clone())),
                    Some(prio) if prio > best => {
                        best = prio;
                        kept = vec![o.clone()];
                    }
                    Some(prio) if prio == best => kept.push(o.clone()),
                    Some(_) => {}
                }
            }
            if kept.is_empty() {
                notices.push(PriorityNotice::NoGroupMatched);
                return options;
            }
            kept
        }
    }
}

/// Runs the chain and returns the chosen option.
pub fn choose(
    chain: &[ExpanderName],
    options: Vec<ScaleUpOption>,
    priorities: Option<&Priorities>,
    notices: &mut Vec<PriorityNotice>,
) -> Option<ScaleUpOption> {
    let mut left = options;
    for name in chain {
        left = filter(*name, left, priorities, notices);
        if left.len() == 1 {
            return left.pop();
        }
    }
    if left.is_empty() {
        return None;
    }
    let i = fastrand::usize(0..left.len());
    Some(left.swap_remove(i))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const GI: i64 = 1 << 30;

    fn option(
        group: &str,
        nodes: usize,
        pods: usize,
        req: (i64, i64),
        cap: (i64, i64),
    ) -> ScaleUpOption {
        ScaleUpOption {
            group: group.into(),
            node_count: nodes,
            pods: (0..pods).map(|i| format!("p{i}")).collect(),
            pod_requests: req,
            node_capacity: cap,
        }
    }

    #[test]
    fn least_waste_arithmetic() {
        // 3 pods of 1 CPU / 1Gi: on one 4-CPU/16Gi node the waste is
        // (4-3)/4 + (16-3)/16 = 0.25 + 0.8125; on one 3-CPU/4Gi node it is
        // 0 + 0.25.
        let big = option("big", 1, 3, (3000, 3 * GI), (4000, 16 * GI));
        let fit = option("fit", 1, 3, (3000, 3 * GI), (3000, 4 * GI));
        assert!((waste_score(&big).unwrap() - 1.0625).abs() < 1e-9);
        assert!((waste_score(&fit).unwrap() - 0.25).abs() < 1e-9);
        let mut n = Vec::new();
        assert_eq!(
            choose(
                &[ExpanderName::LeastWaste],
                vec![big.clone(), fit.clone()],
                None,
                &mut n
            )
            .unwrap()
            .group,
            "fit"
        );
        // Two nodes of the big group for the same pods waste more, not less.
        let two = option("two", 2, 3, (3000, 3 * GI), (4000, 16 * GI));
        assert!(waste_score(&two).unwrap() > waste_score(&big).unwrap());
        // No capacity: dropped.
        assert!(waste_score(&option("z", 1, 1, (1, 1), (0, 0))).is_none());
    }

    #[test]
    fn most_pods_and_least_nodes_keep_ties_for_the_next_expander() {
        let a = option("a", 2, 10, (1, 1), (1000, GI));
        let b = option("b", 1, 10, (1, 1), (1000, GI));
        let c = option("c", 1, 5, (1, 1), (1000, GI));
        let mut n = Vec::new();
        let kept = filter(
            ExpanderName::MostPods,
            vec![a.clone(), b.clone(), c.clone()],
            None,
            &mut n,
        );
        assert_eq!(
            kept.iter().map(|o| o.group.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let chosen = choose(
            &[ExpanderName::MostPods, ExpanderName::LeastNodes],
            vec![a, b, c],
            None,
            &mut n,
        )
        .unwrap();
        assert_eq!(chosen.group, "b");
        let zero = option("zero", 0, 1, (1, 1), (1000, GI));
        assert_eq!(
            filter(
                ExpanderName::LeastNodes,
                vec![zero, option("one", 1, 1, (1, 1), (1, 1))],
                None,
                &mut n
            )[0]
            .group,
            "one"
        );
    }

    #[test]
    fn priority_picks_the_highest_matching_level() {
        let p = Priorities::parse(
            "10:\n  - .*t2\\.large.*\n  - .*t3\\.large.*\n50:\n  - .*m4\\.4xlarge.*\n",
        )
        .unwrap();
        let opts = vec![
            option("pool-t2.large", 1, 1, (1, 1), (1, 1)),
            option("pool-m4.4xlarge", 1, 1, (1, 1), (1, 1)),
            option("pool-other", 1, 1, (1, 1), (1, 1)),
        ];
        let mut notices = Vec::new();
        let chosen = choose(
            &[ExpanderName::Priority, ExpanderName::LeastWaste],
            opts.clone(),
            Some(&p),
            &mut notices,
        )
        .unwrap();
        assert_eq!(chosen.group, "pool-m4.4xlarge");
        assert_eq!(
            notices,
            [PriorityNotice::NotMatchedGroup("pool-other".into())]
        );
        // Nothing matches: every option passes through.
        let none = Priorities::parse("5:\n  - nomatch\n").unwrap();
        let mut notices = Vec::new();
        assert_eq!(
            filter(ExpanderName::Priority, opts, Some(&none), &mut notices).len(),
            3
        );
        assert!(notices.contains(&PriorityNotice::NoGroupMatched));
        // Priorities below -1 never win.
        let low = Priorities::parse("-5:\n  - .*\n").unwrap();
        let mut notices = Vec::new();
        assert_eq!(
            filter(
                ExpanderName::Priority,
                vec![
                    option("x", 1, 1, (1, 1), (1, 1)),
                    option("y", 1, 1, (1, 1), (1, 1))
                ],
                Some(&low),
                &mut notices
            )
            .len(),
            2
        );
    }

    #[test]
    fn bad_priority_configs_are_errors() {
        assert!(
            Priorities::parse("")
                .unwrap_err()
                .to_string()
                .contains("is empty")
        );
        assert!(
            Priorities::parse("high: [a]")
                .unwrap_err()
                .to_string()
                .starts_with("Wrong configuration for priority expander")
        );
        assert!(
            Priorities::parse("10:\n  - '('\n")
                .unwrap_err()
                .to_string()
                .contains("regexp")
        );
    }

    #[test]
    fn random_returns_one_of_them() {
        let mut n = Vec::new();
        let opts = vec![
            option("a", 1, 1, (1, 1), (1, 1)),
            option("b", 1, 1, (1, 1), (1, 1)),
        ];
        let c = choose(&[ExpanderName::Random], opts, None, &mut n).unwrap();
        assert!(c.group == "a" || c.group == "b");
        assert!(choose(&[ExpanderName::LeastWaste], Vec::new(), None, &mut n).is_none());
    }
}
