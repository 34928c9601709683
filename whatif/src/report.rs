//! The what-if's report: a versioned JSON document ([`Report`]) and its
//! Markdown rendering. Times are seconds since the autoscaler started;
//! nothing in it depends on the machine or the wall clock, so the same
//! inputs and seed give the same bytes.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use autoscaler::decisions::Decisions;

use crate::coverage::Coverage;
use crate::groups::Group;
use crate::observe::Seen;

/// The report's schema version.
pub const SCHEMA: &str = "testbed.whatif/v1";

/// How many pods a scale-up or the pending list names before it counts.
const LISTED: usize = 20;

/// The whole report.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: String,
    /// What was read and how it was used.
    pub coverage: Coverage,
    /// The run's length in seconds.
    pub duration_seconds: u64,
    /// The seed of the generators.
    pub seed: u64,
    /// Hourly prices by instance type, for the cost line.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prices: BTreeMap<String, f64>,
    /// The changes made during the run, the same on every side.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<crate::timeline::Shown>,
    /// The node groups.
    pub groups: Vec<Group>,
    /// Each side.
    pub sides: Vec<Side>,
    /// Each side after the first against the first.
    pub differences: Vec<Difference>,
    /// The sweep's cases, when the sides are a sweep's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<crate::sweep::Sweep>,
    /// What a replayed recording held besides its replayed changes: the
    /// recorded autoscaler's node changes among them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<crate::recording::Recorded>,
}

/// One side's outcome.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    /// Its name.
    pub name: String,
    /// The autoscaler's flags.
    pub flags: Vec<String>,
    /// The binary it ran, when not ours in-process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<Binary>,
    /// The totals.
    pub summary: Summary,
    /// Instance types of nodes it ran that have no price (their hours are
    /// left out of the cost).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpriced: Vec<String>,
    /// Every node: what became of it.
    pub nodes: Vec<NodeOutcome>,
    /// Every scale-up.
    pub scale_ups: Vec<ScaleUp>,
    /// Pods pending at the end, and why no group helped (the last loop's
    /// verdicts), the first [`LISTED`].
    pub pending_at_end: Vec<PendingPod>,
    /// Node counts per group after each change: `[seconds, group, count]`.
    pub node_timeline: Vec<(u64, String, usize)>,
    /// Pending pods after each change: `[seconds, count]`.
    pub pending_timeline: Vec<(u64, usize)>,
    /// Changes of a replayed recording this side skipped: its cluster no
    /// longer had the object (or had it already).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_steps: Vec<String>,
    /// A binary's process over the run ([`crate::health`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health: Vec<crate::health::Sample>,
    /// Its hour 2 against its last hour, for a run of three hours or more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_verdict: Option<crate::health::Verdict>,
}

/// A binary a side ran: its outcome comes from the cluster, its
/// decisions are in its log.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Binary {
    /// Its path.
    pub path: String,
    /// Cluster time per real time.
    pub time_scale: f64,
    /// Its log.
    pub log: String,
}

/// A side's totals.
#[derive(Debug, Serialize, Deserialize, Clone, Copy, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Nodes at the start.
    pub nodes_at_start: usize,
    /// Nodes at the end.
    pub nodes_at_end: usize,
    /// Nodes the autoscaler added.
    pub nodes_added: usize,
    /// Nodes removed.
    pub nodes_removed: usize,
    /// Node-hours over the run.
    pub node_hours: f64,
    /// What the node-hours cost at the prices given (none given: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Pods pending at the start.
    pub pending_at_start: usize,
    /// Pods pending at the end.
    pub pending_at_end: usize,
    /// Pod-minutes spent pending.
    pub pending_pod_minutes: f64,
    /// Bound pods evicted through the Eviction API: the autoscaler's
    /// drains.
    pub evictions: usize,
    /// Bound pods deleted otherwise: by their controller scaling down, by
    /// a step of the timeline or the recording, or with their node.
    #[serde(default)]
    pub pods_deleted: usize,
    /// The autoscaler's loops (ours in-process; 0 for a binary, whose
    /// loops are in its log).
    pub loops: usize,
    /// Loops that scaled up.
    pub scale_ups: usize,
}

/// What became of a node.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeOutcome {
    /// Its name.
    pub name: String,
    /// Its group (none: the autoscaler leaves it be).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// When the autoscaler added it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_at: Option<u64>,
    /// When it was removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed_at: Option<u64>,
    /// When it was first found unneeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unneeded_since: Option<u64>,
    /// Its utilization when last found unneeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization: Option<f64>,
    /// For a node that stays: why the last loop kept it
    /// (`NotUnderutilized`, `BlockedByPod: ns/pod NotReplicated`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_because: Option<String>,
}

/// A scale-up.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleUp {
    /// When.
    pub at: u64,
    /// Groups and sizes (`3->5`).
    pub groups: BTreeMap<String, String>,
    /// The options the expander weighed: group → nodes.
    pub options: BTreeMap<String, usize>,
    /// The pods that triggered it (the first [`LISTED`]).
    pub pods: Vec<String>,
    /// How many pods triggered it.
    pub pod_count: usize,
}

/// A pod pending at the end.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingPod {
    /// `namespace/name`.
    pub pod: String,
    /// Group → why it does not help (the last loop's verdict).
    pub reasons: BTreeMap<String, String>,
}

/// One side against the first.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    /// The first side.
    pub base: String,
    /// The other.
    pub side: String,
    /// Nodes of the input the base side removed and the other did not.
    pub removed_only_by_base: Vec<String>,
    /// Nodes of the input the other side removed and the base did not.
    pub removed_only_by_side: Vec<String>,
    /// The other's node-hours less the base's.
    pub node_hours: f64,
    /// The other's cost less the base's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// The other's pending pod-minutes less the base's.
    pub pending_pod_minutes: f64,
    /// The other's evictions less the base's.
    pub evictions: isize,
}

/// What the report keeps of the autoscaler's loops, folded in as each
/// loop ends (keeping every loop's record would hold a copy of every
/// node's reason per loop).
#[derive(Debug, Default)]
pub struct Loops {
    /// How many ended.
    pub count: usize,
    /// When each node was first found unneeded, in seconds.
    unneeded_since: BTreeMap<String, u64>,
    /// Each node's utilization when last found unneeded.
    utilization: BTreeMap<String, f64>,
    /// The scale-ups.
    scale_ups: Vec<ScaleUp>,
    /// The last loop's record (reasons of the nodes kept, verdicts on the
    /// pods pending).
    last: Option<std::sync::Arc<Decisions>>,
}

impl Loops {
    /// Folds in the record of a loop that ended `t` seconds after the
    /// start.
    pub fn add(&mut self, t: f64, d: std::sync::Arc<Decisions>) {
        self.count += 1;
        for (node, text) in &d.unneeded {
            if let Some((_, u)) = parse_unneeded(text) {
                self.utilization.insert(node.clone(), u);
            }
            self.unneeded_since.entry(node.clone()).or_insert(secs(t));
        }
        if !d.scaled_up.is_empty() {
            self.scale_ups.push(scale_up(t, &d));
        }
        self.last = Some(d);
    }
}

/// What a side ran through: what its watchers saw and its loops, for a
/// run of `end` seconds.
pub struct Ran<'a> {
    /// The watchers' record.
    pub seen: &'a Seen,
    /// The loops, folded.
    pub loops: &'a Loops,
    /// The run's length in seconds.
    pub end: f64,
}

/// A side's outcome from its run, its cost at `prices` (hourly, by
/// instance type; none: no cost).
pub fn side(name: &str, flags: Vec<String>, ran: Ran, prices: &BTreeMap<String, f64>) -> Side {
    let Ran { seen, loops, end } = ran;
    let unneeded_since = &loops.unneeded_since;
    let utilization = &loops.utilization;
    let scale_ups = &loops.scale_ups;
    let last = loops.last.as_ref();
    let hours =
        |n: &crate::observe::NodeLife| (n.removed.unwrap_or(end) - n.added.unwrap_or(0.0)) / 3600.0;
    let node_hours: f64 = seen.nodes.values().map(hours).sum();
    let mut unpriced = BTreeSet::new();
    let cost = (!prices.is_empty()).then(|| {
        let cost: f64 = seen
            .nodes
            .values()
            .filter_map(|n| {
                let t = n.instance_type.as_deref().unwrap_or("(no instance type)");
                let price = prices.get(t);
                if price.is_none() {
                    unpriced.insert(t.to_string());
                }
                price.map(|p| p * hours(n))
            })
            .sum();
        round(cost, 2)
    });
    let nodes: Vec<NodeOutcome> = seen
        .nodes
        .iter()
        .map(|(name, life)| NodeOutcome {
            name: name.clone(),
            group: life.group.clone(),
            added_at: life.added.map(secs),
            removed_at: life.removed.map(secs),
            unneeded_since: unneeded_since.get(name.as_str()).copied(),
            utilization: utilization.get(name.as_str()).map(|u| round(*u, 3)),
            kept_because: life
                .removed
                .is_none()
                .then(|| last.and_then(|d| d.unremovable.get(name).map(|why| why.text())))
                .flatten(),
        })
        .collect();
    let pending_at_end: Vec<PendingPod> = seen
        .pending
        .keys()
        .take(LISTED)
        .map(|pod| PendingPod {
            pod: pod.clone(),
            reasons: last
                .and_then(|d| d.pods.get(pod).cloned())
                .unwrap_or_default(),
        })
        .collect();
    let summary = Summary {
        nodes_at_start: seen.nodes.values().filter(|n| n.added.is_none()).count(),
        nodes_at_end: seen.nodes.values().filter(|n| n.removed.is_none()).count(),
        nodes_added: seen.nodes.values().filter(|n| n.added.is_some()).count(),
        nodes_removed: seen.nodes.values().filter(|n| n.removed.is_some()).count(),
        node_hours: round(node_hours, 2),
        cost,
        pending_at_start: seen.pending_at_start,
        pending_at_end: seen.pending.len(),
        pending_pod_minutes: round(seen.pending_seconds / 60.0, 1),
        evictions: seen.evictions,
        pods_deleted: seen.deletions,
        loops: loops.count,
        scale_ups: scale_ups.len(),
    };
    Side {
        name: name.into(),
        flags,
        binary: None,
        summary,
        unpriced: unpriced.into_iter().collect(),
        nodes,
        scale_ups: scale_ups.clone(),
        pending_at_end,
        node_timeline: seen
            .node_changes
            .iter()
            .map(|(t, g, n)| (secs(*t), g.clone().unwrap_or_default(), *n))
            .collect(),
        pending_timeline: seen
            .pending_changes
            .iter()
            .map(|(t, n)| (secs(*t), *n))
            .collect(),
        skipped_steps: Vec::new(),
        health: Vec::new(),
        health_verdict: None,
    }
}

/// A binary side's health over the run, hour 2 against the last hour.
fn health_markdown(v: &crate::health::Verdict) -> String {
    let h = v.last_hour;
    let mut out = format!(
        "Its process, hour 2 against hour {h}: memory peak {:.0} and {:.0} MiB",
        v.memory_mib.0, v.memory_mib.1
    );
    if let Some((a, b)) = v.loop_ms {
        out.push_str(&format!(", loop time {a:.1} and {b:.1} ms"));
    }
    if let Some((a, b)) = v.tasks {
        out.push_str(&format!(", tasks {a} and {b}"));
    }
    if v.grew.is_empty() {
        out.push_str(": flat.\n\n");
    } else {
        out.push_str(&format!(". **Grew**: {}.\n\n", v.grew.join("; ")));
    }
    out
}

/// `other` against `base`.
pub fn difference(base: &Side, other: &Side) -> Difference {
    let removed = |s: &Side| -> BTreeSet<String> {
        s.nodes
            .iter()
            .filter(|n| n.added_at.is_none() && n.removed_at.is_some())
            .map(|n| n.name.clone())
            .collect()
    };
    let (a, b) = (removed(base), removed(other));
    Difference {
        base: base.name.clone(),
        side: other.name.clone(),
        removed_only_by_base: a.difference(&b).cloned().collect(),
        removed_only_by_side: b.difference(&a).cloned().collect(),
        node_hours: round(other.summary.node_hours - base.summary.node_hours, 2),
        cost: base
            .summary
            .cost
            .zip(other.summary.cost)
            .map(|(b, o)| round(o - b, 2)),
        pending_pod_minutes: round(
            other.summary.pending_pod_minutes - base.summary.pending_pod_minutes,
            1,
        ),
        evictions: other.summary.evictions as isize - base.summary.evictions as isize,
    }
}

fn scale_up(t: f64, d: &Decisions) -> ScaleUp {
    let pods: Vec<String> = d
        .pods
        .iter()
        .filter(|(_, verdicts)| verdicts.values().any(|v| v == "chosen"))
        .map(|(p, _)| p.clone())
        .collect();
    ScaleUp {
        at: secs(t),
        groups: d.scaled_up.clone(),
        options: d.options.clone(),
        pod_count: pods.len(),
        pods: pods.into_iter().take(LISTED).collect(),
    }
}

/// The decision record's unneeded entry, `since <time> utilization {cpu
/// memory gpu dra resource deciding}`: the time and the deciding value.
fn parse_unneeded(text: &str) -> Option<(&str, f64)> {
    let (since, utilization) = text.strip_prefix("since ")?.split_once(" utilization ")?;
    let deciding = utilization
        .trim_matches(|c| c == '{' || c == '}')
        .split_whitespace()
        .last()?;
    Some((since, deciding.parse().ok()?))
}

fn secs(t: f64) -> u64 {
    t.max(0.0).round() as u64
}

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// `h:mm:ss` of `seconds`.
fn clock(seconds: u64) -> String {
    format!(
        "{}:{:02}:{:02}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

impl Report {
    /// The report as Markdown.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "# What-if: {} of virtual time, {} side{}\n\n",
            clock(self.duration_seconds),
            self.sides.len(),
            if self.sides.len() == 1 { "" } else { "s" }
        ));
        out.push_str("## Input\n\n");
        out.push_str(&self.coverage.markdown());
        out.push_str("\n## Node groups\n\n| group | recognised as | nodes | min | max | bounds | template |\n|---|---|---:|---:|---:|---|---|\n");
        for g in &self.groups {
            out.push_str(&format!(
                "| {} | {} ({}) | {} | {} | {} | {} | {} |\n",
                g.name,
                g.platform,
                g.selector,
                g.nodes.len(),
                g.min,
                g.max,
                match g.bounds {
                    crate::groups::Bounds::NodesFlag => "--nodes",
                    crate::groups::Bounds::Template => "template annotations",
                    crate::groups::Bounds::Defaulted => "defaulted (give --nodes MIN:MAX:GROUP)",
                },
                g.template_from
            ));
        }
        if let Some(r) = &self.recorded {
            let controllers: Vec<String> = r
                .by_controllers
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect();
            out.push_str(&format!(
                "\n## Recording\n\n`{}`: {} recorded{}. {} changes replayed as the timeline below; left to the simulated controllers: {}. The recorded autoscaler added {} nodes and removed {} (left out: each side's own are in the outcome).\n",
                r.file,
                clock(r.seconds as u64),
                if r.complete {
                    ""
                } else {
                    " (no end line: the recording was cut)"
                },
                r.replayed,
                if controllers.is_empty() {
                    "none".to_string()
                } else {
                    controllers.join(", ")
                },
                r.nodes_added,
                r.nodes_removed
            ));
        }
        if !self.timeline.is_empty() {
            out.push_str("\n## Timeline\n\nThe same changes on every side:\n\n");
            for step in &self.timeline {
                out.push_str(&format!("- {}: {}\n", clock(step.at), step.action));
            }
        }
        out.push_str("\n## Outcome\n\n| side | nodes start → end | added | removed | node-hours | cost | pending start → end | pending pod-minutes | evictions | other pod deletions | loops |\n|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|\n");
        for s in &self.sides {
            let m = &s.summary;
            out.push_str(&format!(
                "| {} | {} → {} | {} | {} | {} | {} | {} → {} | {} | {} | {} | {} |\n",
                s.name,
                m.nodes_at_start,
                m.nodes_at_end,
                m.nodes_added,
                m.nodes_removed,
                m.node_hours,
                m.cost.map_or("-".into(), |c| format!("{c:.2}")),
                m.pending_at_start,
                m.pending_at_end,
                m.pending_pod_minutes,
                m.evictions,
                m.pods_deleted,
                if s.binary.is_some() {
                    "-".to_string()
                } else {
                    m.loops.to_string()
                }
            ));
        }
        if let Some(sweep) = &self.sweep {
            sweep.markdown(&mut out);
        }
        for d in &self.differences {
            out.push_str(&format!(
                "\n### {} against {}\n\nnode-hours {:+}{}, pending pod-minutes {:+}, evictions {:+}\n\n",
                d.side,
                d.base,
                d.node_hours,
                d.cost.map_or(String::new(), |c| format!(", cost {c:+.2}")),
                d.pending_pod_minutes,
                d.evictions
            ));
            if !d.removed_only_by_side.is_empty() {
                out.push_str(&format!(
                    "- removed by {} only: {}\n",
                    d.side,
                    d.removed_only_by_side.join(", ")
                ));
            }
            if !d.removed_only_by_base.is_empty() {
                out.push_str(&format!(
                    "- removed by {} only: {}\n",
                    d.base,
                    d.removed_only_by_base.join(", ")
                ));
            }
        }
        for s in &self.sides {
            s.markdown(&mut out);
        }
        out
    }
}

impl Side {
    /// The side's part of the Markdown report: its flags, removed and
    /// kept nodes, scale-ups and the pods pending at the end.
    fn markdown(&self, out: &mut String) {
        let s = self;
        out.push_str(&format!(
            "\n## Side {}\n\nflags: `{}`\n\n",
            s.name,
            s.flags.join(" ")
        ));
        if let Some(b) = &s.binary {
            out.push_str(&format!(
                "binary: `{}` in real time at {}x; its decisions are in its log, `{}`\n\n",
                b.path, b.time_scale, b.log
            ));
        }
        if let Some(v) = &s.health_verdict {
            out.push_str(&health_markdown(v));
        }
        if !s.skipped_steps.is_empty() {
            out.push_str(&format!(
                "Recorded changes skipped (this side's cluster went another way):\n\n{}\n\n",
                s.skipped_steps
                    .iter()
                    .map(|x| format!("- {x}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        }
        if !s.unpriced.is_empty() {
            out.push_str(&format!(
                "Instance types without a price (left out of the cost): {}\n\n",
                s.unpriced.join(", ")
            ));
        }
        let removed: Vec<&NodeOutcome> =
            s.nodes.iter().filter(|n| n.removed_at.is_some()).collect();
        if !removed.is_empty() {
            out.push_str("Removed nodes:\n\n| node | group | unneeded since | utilization | removed at |\n|---|---|---|---:|---|\n");
            for n in removed {
                out.push_str(&format!(
                    "| {} | {} | {} | {} | {} |\n",
                    n.name,
                    n.group.as_deref().unwrap_or("-"),
                    n.unneeded_since.map_or("-".into(), clock),
                    n.utilization.map_or("-".into(), |u| u.to_string()),
                    n.removed_at.map_or("-".into(), clock)
                ));
            }
            out.push('\n');
        }
        let kept: Vec<&NodeOutcome> = s
            .nodes
            .iter()
            .filter(|n| n.removed_at.is_none() && n.kept_because.is_some())
            .collect();
        if !kept.is_empty() {
            out.push_str("Nodes kept, and why (the last loop's reason):\n\n| node | group | reason |\n|---|---|---|\n");
            for n in kept {
                out.push_str(&format!(
                    "| {} | {} | {} |\n",
                    n.name,
                    n.group.as_deref().unwrap_or("-"),
                    n.kept_because.as_deref().unwrap_or("")
                ));
            }
            out.push('\n');
        }
        if !s.scale_ups.is_empty() {
            out.push_str(
                "Scale-ups:\n\n| at | groups | options weighed | pods |\n|---|---|---|---:|\n",
            );
            for u in &s.scale_ups {
                let groups: Vec<String> =
                    u.groups.iter().map(|(g, s)| format!("{g} {s}")).collect();
                let options: Vec<String> =
                    u.options.iter().map(|(g, n)| format!("{g}: {n}")).collect();
                out.push_str(&format!(
                    "| {} | {} | {} | {} |\n",
                    clock(u.at),
                    groups.join(", "),
                    options.join(", "),
                    u.pod_count
                ));
            }
            out.push('\n');
        }
        if !s.pending_at_end.is_empty() {
            out.push_str(&format!(
                "Pods pending at the end ({}), and why no group helps:\n\n",
                s.summary.pending_at_end
            ));
            for p in &s.pending_at_end {
                let reasons: Vec<String> =
                    p.reasons.iter().map(|(g, r)| format!("{g}: {r}")).collect();
                out.push_str(&format!("- {}: {}\n", p.pod, reasons.join("; ")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decision_records_unneeded_entry_parses() {
        assert_eq!(
            parse_unneeded("since 2026-01-01T00:00:00Z utilization {0.25 0.1 0 0 cpu 0.25}"),
            Some(("2026-01-01T00:00:00Z", 0.25))
        );
        assert_eq!(parse_unneeded("garbled"), None);
        assert_eq!(clock(3725), "1:02:05");
    }
}
