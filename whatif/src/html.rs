//! The report as one self-contained HTML page: the outcome and the
//! differences as tables, and SVG timelines of every side on one time
//! axis: the nodes (in all, and per group), the node-hours adding up and
//! the pending pods. No script, no outside resource.

use std::fmt::Write;

use crate::report::{Report, Side};

/// Colours of the sides' lines, in order.
const COLOURS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

/// Chart size.
const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 220.0;
const MARGIN: f64 = 40.0;

/// The page.
pub fn page(report: &Report) -> String {
    let mut out = String::from(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>What-if</title>\n<style>\
         body{font-family:sans-serif;margin:2em;max-width:900px}table{border-collapse:collapse;margin:1em 0}\
         td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:first-child,th:first-child{text-align:left}\
         </style></head><body>\n",
    );
    let _ = writeln!(
        out,
        "<h1>What-if: {} h of virtual time</h1>",
        report.duration_seconds as f64 / 3600.0
    );
    out.push_str("<table><tr><th>side</th><th>nodes start</th><th>nodes end</th><th>added</th><th>removed</th><th>node-hours</th><th>cost</th><th>pending pod-minutes</th><th>evictions</th><th>other pod deletions</th></tr>\n");
    for s in &report.sides {
        let m = &s.summary;
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&s.name),
            m.nodes_at_start,
            m.nodes_at_end,
            m.nodes_added,
            m.nodes_removed,
            m.node_hours,
            m.cost.map_or("-".into(), |c| format!("{c:.2}")),
            m.pending_pod_minutes,
            m.evictions,
            m.pods_deleted
        );
    }
    out.push_str("</table>\n");
    for d in &report.differences {
        let _ = writeln!(
            out,
            "<p>{} against {}: node-hours {:+}, pending pod-minutes {:+}, evictions {:+}; removed by {} only: {}; by {} only: {}</p>",
            escape(&d.side),
            escape(&d.base),
            d.node_hours,
            d.pending_pod_minutes,
            d.evictions,
            escape(&d.side),
            escape(&list(&d.removed_only_by_side)),
            escape(&d.base),
            escape(&list(&d.removed_only_by_base)),
        );
    }
    if let Some(sweep) = &report.sweep {
        out.push_str(&sweep_section(sweep));
    }
    let end = report.duration_seconds.max(1);
    out.push_str("<h2>Nodes</h2>\n");
    out.push_str(&chart(&report.sides, end, Shape::Steps, |s| {
        nodes_series(s, None)
    }));
    if report.groups.len() > 1 {
        for g in &report.groups {
            let _ = writeln!(out, "<h3>Group {}</h3>", escape(&g.name));
            out.push_str(&chart(&report.sides, end, Shape::Steps, |s| {
                nodes_series(s, Some(&g.name))
            }));
        }
    }
    out.push_str("<h2>Node-hours, adding up</h2>\n");
    out.push_str(&chart(&report.sides, end, Shape::Lines, |s| {
        node_hours_series(s, end)
    }));
    out.push_str("<h2>Pending pods</h2>\n");
    out.push_str(&chart(&report.sides, end, Shape::Steps, pending_series));
    if report.sides.iter().any(|s| !s.health.is_empty()) {
        out.push_str("<h2>Autoscaler memory, MiB (binary sides)</h2>\n");
        out.push_str(&chart(&report.sides, end, Shape::Lines, |s| {
            health_series(s, |h| Some(h.rss_kib as f64 / 1024.0))
        }));
        out.push_str("<h2>Autoscaler loop time, ms (mean of each sample's loops)</h2>\n");
        out.push_str(&chart(&report.sides, end, Shape::Lines, |s| {
            health_series(s, |h| h.loop_seconds.map(|l| l * 1000.0))
        }));
        out.push_str("<h2>Autoscaler tasks (goroutines, or async tasks)</h2>\n");
        out.push_str(&chart(&report.sides, end, Shape::Lines, |s| {
            health_series(s, |h| h.tasks.map(|t| t as f64))
        }));
    }
    out.push_str("<p>");
    for (i, s) in report.sides.iter().enumerate() {
        let _ = write!(
            out,
            "<span style=\"color:{}\">&#9632; {}</span> ",
            COLOURS[i % COLOURS.len()],
            escape(&s.name)
        );
    }
    out.push_str("</p>\n</body></html>\n");
    out
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// A side's node count (of one group, or all) after each change.
fn nodes_series(side: &Side, group: Option<&str>) -> Vec<(u64, f64)> {
    let mut by_group: std::collections::BTreeMap<&str, usize> = Default::default();
    side.node_timeline
        .iter()
        .filter(|(_, g, _)| group.is_none_or(|w| w == g))
        .map(|(t, g, n)| {
            by_group.insert(g, *n);
            (*t, by_group.values().sum::<usize>() as f64)
        })
        .collect()
}

/// A side's node-hours so far, at each change and at the end.
fn node_hours_series(side: &Side, end: u64) -> Vec<(u64, f64)> {
    let mut out = vec![(0, 0.0)];
    let (mut hours, mut at, mut nodes) = (0.0, 0, 0.0);
    for (t, n) in nodes_series(side, None)
        .into_iter()
        .chain([(end, f64::NAN)])
    {
        hours += nodes * (t.min(end) - at.min(end)) as f64 / 3600.0;
        at = t;
        if !n.is_nan() {
            nodes = n;
        }
        out.push((t.min(end), hours));
    }
    out
}

fn health_series(
    side: &Side,
    value: impl Fn(&crate::health::Sample) -> Option<f64>,
) -> Vec<(u64, f64)> {
    side.health
        .iter()
        .filter_map(|h| Some((h.seconds, value(h)?)))
        .collect()
}

fn pending_series(side: &Side) -> Vec<(u64, f64)> {
    side.pending_timeline
        .iter()
        .map(|(t, n)| (*t, *n as f64))
        .collect()
}

/// How a series is drawn: a count holds until its next change; a running
/// total grows in a straight line between them.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Steps,
    Lines,
}

/// An SVG chart of each side's series.
fn chart(
    sides: &[Side],
    end: u64,
    shape: Shape,
    series: impl Fn(&Side) -> Vec<(u64, f64)>,
) -> String {
    let all: Vec<Vec<(u64, f64)>> = sides.iter().map(series).collect();
    let max = all
        .iter()
        .flatten()
        .map(|(_, n)| *n)
        .fold(0.0_f64, f64::max)
        .max(1.0);
    let x = |t: u64| MARGIN + (WIDTH - 2.0 * MARGIN) * t.min(end) as f64 / end as f64;
    let y = |n: f64| HEIGHT - MARGIN + (2.0 * MARGIN - HEIGHT) * n / max;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" font-size=\"11\">\
         <line x1=\"{MARGIN}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"#888\"/>\
         <line x1=\"{MARGIN}\" y1=\"{MARGIN}\" x2=\"{MARGIN}\" y2=\"{b}\" stroke=\"#888\"/>\
         <text x=\"{MARGIN}\" y=\"{t}\" text-anchor=\"end\">{top}</text>\
         <text x=\"{MARGIN}\" y=\"{b2}\" text-anchor=\"end\">0</text>\
         <text x=\"{r}\" y=\"{b2}\" text-anchor=\"end\">{h} h</text>\n",
        b = HEIGHT - MARGIN,
        r = WIDTH - MARGIN,
        t = MARGIN,
        b2 = HEIGHT - MARGIN + 14.0,
        h = end as f64 / 3600.0,
        top = (max * 100.0).round() / 100.0,
    );
    for (i, points) in all.iter().enumerate() {
        let mut path = String::new();
        let mut last: Option<f64> = None;
        for (t, n) in points {
            match last {
                None => {
                    let _ = write!(path, "M{:.1},{:.1}", x(*t), y(*n));
                }
                Some(_) if shape == Shape::Lines => {
                    let _ = write!(path, " L{:.1},{:.1}", x(*t), y(*n));
                }
                Some(prev) => {
                    let _ = write!(
                        path,
                        " L{:.1},{:.1} L{:.1},{:.1}",
                        x(*t),
                        y(prev),
                        x(*t),
                        y(*n)
                    );
                }
            }
            last = Some(*n);
        }
        if let Some(n) = last {
            let _ = write!(path, " L{:.1},{:.1}", x(end), y(n));
        }
        let _ = writeln!(
            out,
            "<path d=\"{path}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>",
            COLOURS[i % COLOURS.len()]
        );
    }
    out.push_str("</svg>\n");
    out
}

/// A sweep's cases: node-hours against pending pod-minutes, one dot per
/// case, the Pareto front filled and joined; then the table.
fn sweep_section(sweep: &crate::sweep::Sweep) -> String {
    let cases = &sweep.cases;
    let top =
        |f: fn(&crate::sweep::Case) -> f64| cases.iter().map(f).fold(0.0_f64, f64::max).max(1.0);
    let (max_x, max_y) = (top(|c| c.node_hours), top(|c| c.pending_pod_minutes));
    let x = |v: f64| MARGIN + (WIDTH - 2.0 * MARGIN) * v / max_x;
    let y = |v: f64| HEIGHT - MARGIN + (2.0 * MARGIN - HEIGHT) * v / max_y;
    let mut out = String::from("<h2>Sweep</h2>\n");
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" font-size=\"11\">\
         <line x1=\"{MARGIN}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"#888\"/>\
         <line x1=\"{MARGIN}\" y1=\"{MARGIN}\" x2=\"{MARGIN}\" y2=\"{b}\" stroke=\"#888\"/>\
         <text x=\"{MARGIN}\" y=\"{t}\" text-anchor=\"end\">{max_y:.1}</text>\
         <text x=\"{r}\" y=\"{b2}\" text-anchor=\"end\">{max_x:.1} node-hours</text>\
         <text x=\"{MARGIN}\" y=\"{b2}\">0 (vertical: pending pod-minutes)</text>",
        b = HEIGHT - MARGIN,
        r = WIDTH - MARGIN,
        t = MARGIN,
        b2 = HEIGHT - MARGIN + 14.0,
    );
    let mut front: Vec<&crate::sweep::Case> = cases.iter().filter(|c| c.pareto).collect();
    front.sort_by(|a, b| a.node_hours.total_cmp(&b.node_hours));
    let path: Vec<String> = front
        .iter()
        .map(|c| format!("{:.1},{:.1}", x(c.node_hours), y(c.pending_pod_minutes)))
        .collect();
    if path.len() > 1 {
        let _ = writeln!(
            out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-dasharray=\"4 3\"/>",
            path.join(" "),
            COLOURS[0]
        );
    }
    for c in cases {
        let _ = writeln!(
            out,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{}\" stroke=\"{}\"><title>{}: {:.1} node-hours, {:.1} pending pod-minutes</title></circle>",
            x(c.node_hours),
            y(c.pending_pod_minutes),
            if c.pareto { COLOURS[0] } else { "none" },
            COLOURS[0],
            escape(&c.side),
            c.node_hours,
            c.pending_pod_minutes
        );
    }
    out.push_str("</svg>\n<table><tr>");
    for d in &sweep.dimensions {
        let _ = write!(out, "<th>--{}</th>", escape(&d.flag));
    }
    out.push_str("<th>node-hours</th><th>pending pod-minutes</th><th>evictions</th><th>Pareto front</th></tr>\n");
    for c in cases {
        out.push_str("<tr>");
        for v in &c.values {
            let _ = write!(out, "<td>{}</td>", escape(v));
        }
        let _ = writeln!(
            out,
            "<td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}</td></tr>",
            c.node_hours,
            c.pending_pod_minutes,
            c.evictions,
            if c.pareto { "&#9733;" } else { "" }
        );
    }
    out.push_str("</table>\n");
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Summary;

    fn side(node_timeline: Vec<(u64, String, usize)>) -> Side {
        Side {
            name: "s".into(),
            flags: Vec::new(),
            binary: None,
            summary: Summary {
                nodes_at_start: 0,
                nodes_at_end: 0,
                nodes_added: 0,
                nodes_removed: 0,
                node_hours: 0.0,
                cost: None,
                pending_at_start: 0,
                pending_at_end: 0,
                pending_pod_minutes: 0.0,
                evictions: 0,
                pods_deleted: 0,
                loops: 0,
                scale_ups: 0,
            },
            unpriced: Vec::new(),
            nodes: Vec::new(),
            scale_ups: Vec::new(),
            pending_at_end: Vec::new(),
            node_timeline,
            pending_timeline: Vec::new(),
            skipped_steps: Vec::new(),
            health: Vec::new(),
            health_verdict: None,
        }
    }

    #[test]
    fn node_hours_add_up_the_counts_over_time_and_groups_are_apart() {
        let s = side(vec![
            (0, "a".into(), 1),
            (0, "a".into(), 2),
            (0, "b".into(), 1),
            (1800, "a".into(), 1),
        ]);
        // Three nodes for half an hour, then two: 2.5 node-hours.
        assert_eq!(node_hours_series(&s, 3600).last(), Some(&(3600, 2.5)));
        assert_eq!(
            nodes_series(&s, Some("a")),
            [(0, 1.0), (0, 2.0), (1800, 1.0)]
        );
        assert_eq!(nodes_series(&s, None).last(), Some(&(1800, 2.0)));
    }
}
