//! Sweeps: `--sweep FLAG=VALUES`, repeatable, runs one case per
//! combination of the values (the product of the dimensions, the first
//! dimension varying slowest), each case a side of the what-if with the
//! dimension's flags over the input's. VALUES is a list (`least-waste,
//! priority,random`) or a range `LOW..HIGH/STEP` (`0.4..0.8/0.05`,
//! `5m..15m/5m`: a unit after each number, the same on all three).
//!
//! The report's [`Sweep`] has a row per case with what the operator trades
//! off: node-hours against pending pod-minutes, and the cases no other
//! case beats on both (the Pareto front).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::report::Side;

/// The most cases a sweep may have: more is a typo in a step.
pub const MAX_CASES: usize = 1000;

/// Why a `--sweep` was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SweepError {
    /// Not `FLAG=VALUES`.
    #[error(
        "--sweep {0:?}: expected FLAG=VALUES, e.g. 'scale-down-utilization-threshold=0.4..0.8/0.05' or 'expander=least-waste,priority'"
    )]
    Form(String),
    /// No value to sweep.
    #[error("--sweep {0:?}: no values")]
    NoValues(String),
    /// A value given twice.
    #[error("--sweep {arg:?}: the value {value:?} is given twice")]
    Twice {
        /// The argument.
        arg: String,
        /// The value.
        value: String,
    },
    /// A range that does not read.
    #[error("--sweep {arg:?}: {why}")]
    Range {
        /// The argument.
        arg: String,
        /// Why.
        why: String,
    },
    /// A flag swept twice.
    #[error("--sweep: --{0} is swept twice; give all its values in one --sweep")]
    FlagTwice(String),
    /// Too many cases.
    #[error("--sweep: {0} cases, more than {MAX_CASES}; use fewer values or a larger step")]
    TooMany(usize),
    /// A case index past the last case.
    #[error("case {index}: the sweep has {cases} cases, 0 to {last}", last = cases.saturating_sub(1))]
    NoCase {
        /// The index asked for.
        index: usize,
        /// How many cases the sweep has.
        cases: usize,
    },
}

/// One swept flag and its values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dimension {
    /// The flag, without dashes.
    pub flag: String,
    /// Its values, in the order given.
    pub values: Vec<String>,
}

impl Dimension {
    /// Reads `FLAG=VALUES`.
    pub fn parse(arg: &str) -> Result<Dimension, SweepError> {
        let (flag, values) = arg
            .split_once('=')
            .map(|(f, v)| (f.trim().trim_start_matches('-'), v.trim()))
            .filter(|(f, _)| !f.is_empty())
            .ok_or_else(|| SweepError::Form(arg.into()))?;
        let values = match values.split_once("..") {
            Some((low, rest)) => range(arg, low, rest)?,
            None => values
                .split(',')
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
                .collect(),
        };
        if values.is_empty() {
            return Err(SweepError::NoValues(arg.into()));
        }
        let mut seen = BTreeSet::new();
        if let Some(v) = values.iter().find(|v| !seen.insert(v.as_str())) {
            return Err(SweepError::Twice {
                arg: arg.into(),
                value: v.clone(),
            });
        }
        Ok(Dimension {
            flag: flag.to_string(),
            values,
        })
    }
}

/// The values of `LOW..HIGH/STEP`, with as many decimals as the most
/// precise of the three and their common unit.
fn range(arg: &str, low: &str, rest: &str) -> Result<Vec<String>, SweepError> {
    let bad = |why: String| SweepError::Range {
        arg: arg.into(),
        why,
    };
    let (high, step) = rest
        .split_once('/')
        .ok_or_else(|| bad("a range is LOW..HIGH/STEP, e.g. 0.4..0.8/0.05".into()))?;
    let parts = [low.trim(), high.trim(), step.trim()];
    let unit_of = |s: &str| {
        let at = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
        (s[..at].to_string(), s[at..].to_string())
    };
    let split: Vec<(String, String)> = parts.iter().map(|p| unit_of(p)).collect();
    let unit = split[0].1.clone();
    if split.iter().any(|(_, u)| *u != unit) {
        return Err(bad(format!(
            "LOW, HIGH and STEP must have the same unit ({:?}, {:?}, {:?})",
            split[0].1, split[1].1, split[2].1
        )));
    }
    let number = |s: &str| -> Result<f64, SweepError> {
        s.parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .ok_or_else(|| bad(format!("{s:?} is not a number")))
    };
    let (lo, hi, step) = (
        number(&split[0].0)?,
        number(&split[1].0)?,
        number(&split[2].0)?,
    );
    if step <= 0.0 {
        return Err(bad(format!("the step must be above 0, not {}", split[2].0)));
    }
    if hi < lo {
        return Err(bad(format!(
            "HIGH ({}) is below LOW ({})",
            split[1].0, split[0].0
        )));
    }
    let decimals = split
        .iter()
        .map(|(n, _)| n.split_once('.').map_or(0, |(_, d)| d.len()))
        .max()
        .unwrap_or(0);
    // A tolerance of a millionth of a step keeps HIGH despite rounding.
    let steps = ((hi - lo) / step + 1e-6).floor();
    if steps >= MAX_CASES as f64 {
        return Err(SweepError::TooMany(steps as usize + 1));
    }
    Ok((0..=steps as usize)
        .map(|i| format!("{:.*}{unit}", decimals, lo + step * i as f64))
        .collect())
}

/// Every case of the dimensions: for each, the flag and value of each
/// dimension, the first dimension varying slowest.
pub fn cases(dimensions: &[Dimension]) -> Result<Vec<Vec<(String, String)>>, SweepError> {
    let mut flags = BTreeSet::new();
    if let Some(d) = dimensions.iter().find(|d| !flags.insert(d.flag.as_str())) {
        return Err(SweepError::FlagTwice(d.flag.clone()));
    }
    let count = dimensions
        .iter()
        .try_fold(1usize, |n, d| n.checked_mul(d.values.len()))
        .unwrap_or(usize::MAX);
    if count > MAX_CASES {
        return Err(SweepError::TooMany(count));
    }
    let mut out: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for d in dimensions {
        out = out
            .into_iter()
            .flat_map(|case| {
                d.values.iter().map(move |v| {
                    let mut next = case.clone();
                    next.push((d.flag.clone(), v.clone()));
                    next
                })
            })
            .collect();
    }
    Ok(out)
}

/// A case's side name: `flag=value` for each dimension.
pub fn case_name(case: &[(String, String)]) -> String {
    case.iter()
        .map(|(f, v)| format!("{f}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A case's flags, as `--side` takes them.
pub fn case_flags(case: &[(String, String)]) -> Vec<String> {
    case.iter().map(|(f, v)| format!("--{f}={v}")).collect()
}

/// The sides a sweep's cases are: every case, or only case `only`.
pub fn sides(
    dimensions: &[Dimension],
    only: Option<usize>,
) -> Result<Vec<crate::SideSpec>, crate::WhatIfError> {
    let cases = cases(dimensions)?;
    let chosen: Vec<Vec<(String, String)>> = match only {
        Some(index) if index >= cases.len() => {
            return Err(SweepError::NoCase {
                index,
                cases: cases.len(),
            }
            .into());
        }
        Some(i) => cases.into_iter().skip(i).take(1).collect(),
        None => cases,
    };
    chosen
        .into_iter()
        .map(|case| {
            let name = case_name(&case);
            Ok(crate::SideSpec {
                flags: crate::flags::Flags::parse(
                    &format!("sweep case {name}"),
                    &case_flags(&case),
                )?,
                name,
                binary: None,
            })
        })
        .collect()
}

/// The sweep in the report: the dimensions and a row per case.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sweep {
    /// The swept flags and their values.
    pub dimensions: Vec<Dimension>,
    /// One row per case, in the order run.
    pub cases: Vec<Case>,
}

/// One case's outcome.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Case {
    /// Its place in the product of the values, from 0 (`--case`, a
    /// Job's completion index).
    pub index: usize,
    /// The side that ran it.
    pub side: String,
    /// Each swept flag's value.
    pub values: Vec<String>,
    /// Node-hours over the run.
    pub node_hours: f64,
    /// Pod-minutes spent pending.
    pub pending_pod_minutes: f64,
    /// What the node-hours cost, at the prices given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Nodes removed.
    pub nodes_removed: usize,
    /// Nodes added.
    pub nodes_added: usize,
    /// Pods evicted.
    pub evictions: usize,
    /// No other case has both fewer node-hours and fewer pending
    /// pod-minutes (and is better in one).
    pub pareto: bool,
}

/// The sweep's rows from the sides that ran its cases: the case of each
/// side by its index in [`cases`], in the order of `sides`.
pub fn summarize(
    dimensions: &[Dimension],
    indices: &[usize],
    sides: &[Side],
) -> Result<Sweep, SweepError> {
    let all = cases(dimensions)?;
    let cases = indices
        .iter()
        .map(|&i| {
            all.get(i).ok_or(SweepError::NoCase {
                index: i,
                cases: all.len(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let points: Vec<(f64, f64)> = sides
        .iter()
        .map(|s| (s.summary.node_hours, s.summary.pending_pod_minutes))
        .collect();
    let rows = sides
        .iter()
        .zip(indices.iter().zip(cases))
        .zip(front(&points))
        .map(|((s, (&index, case)), pareto)| Case {
            index,
            side: s.name.clone(),
            values: case.iter().map(|(_, v)| v.clone()).collect(),
            node_hours: s.summary.node_hours,
            pending_pod_minutes: s.summary.pending_pod_minutes,
            cost: s.summary.cost,
            nodes_removed: s.summary.nodes_removed,
            nodes_added: s.summary.nodes_added,
            evictions: s.summary.evictions,
            pareto,
        })
        .collect();
    Ok(Sweep {
        dimensions: dimensions.to_vec(),
        cases: rows,
    })
}

/// For each point (node-hours, pending pod-minutes), whether no other
/// point dominates it.
fn front(points: &[(f64, f64)]) -> Vec<bool> {
    points
        .iter()
        .map(|&b| !points.iter().any(|&a| dominates(a, b)))
        .collect()
}

/// Whether `a` is no worse than `b` on both counts and better on one
/// (both are costs: lower is better).
fn dominates(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0 <= b.0 && a.1 <= b.1 && (a.0 < b.0 || a.1 < b.1)
}

impl Sweep {
    /// The Markdown section: a row per case, the front marked.
    pub fn markdown(&self, out: &mut String) {
        use std::fmt::Write;
        let _ = writeln!(out, "\n## Sweep\n");
        let _ = writeln!(
            out,
            "{} cases; ★ marks the Pareto front (no other case has fewer node-hours and fewer pending pod-minutes).\n",
            self.cases.len()
        );
        let flags: Vec<String> = self
            .dimensions
            .iter()
            .map(|d| format!("`--{}`", d.flag))
            .collect();
        let _ = writeln!(
            out,
            "| {} | node-hours | pending pod-minutes | cost | removed | added | evictions | front |",
            flags.join(" | ")
        );
        let _ = writeln!(
            out,
            "|{}---:|---:|---:|---:|---:|---:|---|",
            "---|".repeat(flags.len())
        );
        for c in &self.cases {
            let cost = c.cost.map_or("-".to_string(), |x| format!("{x:.2}"));
            let _ = writeln!(
                out,
                "| {} | {:.1} | {:.1} | {cost} | {} | {} | {} | {} |",
                c.values.join(" | "),
                c.node_hours,
                c.pending_pod_minutes,
                c.nodes_removed,
                c.nodes_added,
                c.evictions,
                if c.pareto { "★" } else { "" }
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn values(arg: &str) -> Vec<String> {
        Dimension::parse(arg).unwrap().values
    }

    #[test]
    fn lists_and_ranges_give_their_values() {
        assert_eq!(
            values("scale-down-utilization-threshold=0.4..0.8/0.05"),
            [
                "0.40", "0.45", "0.50", "0.55", "0.60", "0.65", "0.70", "0.75", "0.80"
            ]
        );
        assert_eq!(
            values("--expander=least-waste, priority,random"),
            ["least-waste", "priority", "random"]
        );
        assert_eq!(
            values("scale-down-unneeded-time=5m..15m/5m"),
            ["5m", "10m", "15m"]
        );
        assert_eq!(values("max-nodes-total=10..12/1"), ["10", "11", "12"]);
        assert_eq!(values("x=1..2/5"), ["1"]);
    }

    #[test]
    fn bad_sweeps_are_refused_with_what_is_wrong() {
        let err = |arg: &str| Dimension::parse(arg).unwrap_err().to_string();
        assert!(err("expander").contains("expected FLAG=VALUES"));
        assert!(err("=a,b").contains("expected FLAG=VALUES"));
        assert!(err("expander=").contains("no values"));
        assert!(err("expander=,,").contains("no values"));
        assert!(err("expander=random,random").contains("\"random\" is given twice"));
        assert!(err("t=0.8..0.4/0.1").contains("is below LOW"));
        assert!(err("t=0.4..0.8/0").contains("step must be above 0"));
        assert!(err("t=0.4..0.8").contains("LOW..HIGH/STEP"));
        assert!(err("t=0.4..0.8/1.2.3").contains("\"1.2.3\" is not a number"));
        assert!(err("t=a..b/c").contains("same unit"));
        assert!(err("t=5m..1h/5m").contains("same unit"));
        assert!(err("t=0..1/0.0001").contains("more than 1000"));
        let d = |a: &str| Dimension::parse(a).unwrap();
        assert_eq!(
            cases(&[d("a=1,2"), d("a=3")]).unwrap_err(),
            SweepError::FlagTwice("a".into())
        );
        assert_eq!(
            cases(&[d("a=1..40/1"), d("b=1..30/1")]).unwrap_err(),
            SweepError::TooMany(1200)
        );
    }

    #[test]
    fn cases_are_the_product_first_dimension_slowest() {
        let d = |a: &str| Dimension::parse(a).unwrap();
        let all = cases(&[d("t=0.5,0.6"), d("expander=random,priority,least-waste")]).unwrap();
        let names: Vec<String> = all.iter().map(|c| case_name(c)).collect();
        assert_eq!(
            names,
            [
                "t=0.5 expander=random",
                "t=0.5 expander=priority",
                "t=0.5 expander=least-waste",
                "t=0.6 expander=random",
                "t=0.6 expander=priority",
                "t=0.6 expander=least-waste",
            ]
        );
        assert_eq!(case_flags(&all[4]), ["--t=0.6", "--expander=priority"]);
    }

    #[test]
    fn the_front_is_the_cases_no_other_beats_on_both() {
        // (node-hours, pending pod-minutes)
        let points = [
            (10.0, 5.0),
            (8.0, 9.0),
            (12.0, 4.0),
            (11.0, 6.0),
            (8.0, 9.0),
        ];
        assert_eq!(front(&points), [true, true, true, false, true]);
    }
}
