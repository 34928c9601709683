//! `testbed bench`: the [`crate::compare`] scenario (a backlog of
//! `nodes × pods-per-node` pods on an embedded cluster, in real time) for
//! one autoscaler binary at several scales, written as a Markdown table and
//! an SVG plot under `target/bench/`: time until every node is requested
//! and every pod runs, the FAQ's per-pod latency (p50, p99), the main
//! loop's mean duration, and the autoscaler's CPU time and peak memory, per
//! scale; then the testbed's own figures (how long after the last pod's
//! creation its scheduler marked the last pod, and its peak memory) and
//! which of the scale targets each scale meets ([`targets`]).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use crate::binary::BinaryInfo;
use crate::compare::{self, Row, ScenarioArgs, measured_cells};

/// `testbed bench` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// The autoscaler binary (with the kwok provider).
    #[arg(
        long = "autoscaler-binary",
        default_value = "target/release/cluster-autoscaler"
    )]
    pub binary: PathBuf,
    /// The scales: nodes the backlog needs, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,5000")]
    pub nodes: Vec<usize>,
    /// Pods per node, extra flags, timeout.
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    /// Where to write `scale.md` and `scale.svg`.
    #[arg(long, default_value = "target/bench")]
    pub out: PathBuf,
}

/// One scale's result.
#[derive(Debug, Clone)]
pub struct Point {
    /// Nodes the backlog needed.
    pub nodes: usize,
    /// What the binary did.
    pub row: Row,
}

/// Runs every scale, smallest first, each on a fresh cluster, and writes
/// the table and the plot. Returns the points and the table.
pub async fn run(args: &BenchArgs) -> Result<(Vec<Point>, String), String> {
    if args.nodes.is_empty() || args.nodes.contains(&0) {
        return Err("--nodes needs one or more scales of at least 1 node".into());
    }
    let info =
        BinaryInfo::probe(&args.binary, crate::world::Provider::Kwok).map_err(|e| e.to_string())?;
    let mut scales = args.nodes.clone();
    scales.sort_unstable();
    scales.dedup();
    let mut points = Vec::new();
    let mut busy = String::new();
    simclock::busy::enable();
    for nodes in scales {
        eprintln!(
            "bench: {} at {nodes} nodes x {} pods",
            args.binary.display(),
            args.scenario.pods_per_node
        );
        let before = simclock::busy::totals();
        let row = compare::measure(&info, nodes, &args.scenario).await?;
        let line = busy_line(nodes, &before, &simclock::busy::totals());
        eprintln!("bench: {line}");
        busy.push_str(&line);
        busy.push('\n');
        points.push(Point { nodes, row });
    }
    let mut table = table(&points, args.scenario.pods_per_node);
    table.push('\n');
    table.push_str(&targets(&points));
    table.push('\n');
    table.push_str(&busy);
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("creating {}: {e}", args.out.display()))?;
    for (name, text) in [
        ("scale.md", table.clone()),
        ("scale.svg", svg(&points, args.scenario.pods_per_node)),
    ] {
        let path = args.out.join(name);
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        eprintln!("bench: wrote {}", path.display());
    }
    Ok((points, table))
}

/// Where the testbed's time went at one scale: each component's busy
/// time ([`simclock::busy`], the time its tasks were being polled) between
/// the `before` and `after` totals, most first.
fn busy_line(
    nodes: usize,
    before: &[(&'static str, Duration)],
    after: &[(&'static str, Duration)],
) -> String {
    let mut spent: Vec<(&str, Duration)> = after
        .iter()
        .map(|(label, total)| {
            let earlier = before.iter().find(|(l, _)| l == label).map(|(_, d)| *d);
            (*label, total.saturating_sub(earlier.unwrap_or_default()))
        })
        .filter(|(_, d)| !d.is_zero())
        .collect();
    spent.sort_by_key(|(_, d)| std::cmp::Reverse(*d));
    let parts: Vec<String> = spent
        .iter()
        .map(|(label, d)| format!("{label} {:.1} s", d.as_secs_f64()))
        .collect();
    format!("- {nodes} nodes: testbed busy time {}", parts.join(", "))
}

/// The Markdown table: a row per scale.
pub fn table(points: &[Point], pods_per_node: usize) -> String {
    let mut out = String::from(
        "| nodes | pods | all pods created | all nodes | all running | latency p50 / p99 | loop mean (loops) | CPU | peak RSS | last pod marked | testbed peak RSS |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for p in points {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} MiB |",
            p.nodes,
            p.nodes * pods_per_node,
            measured_cells(&p.row),
            p.row
                .marks
                .map_or_else(|| "-".into(), |m| format!("{} s", m.lag().as_secs())),
            p.row.testbed_peak_rss_kib / 1024
        );
    }
    out
}

/// One scale target at a scale: what, the bound, the measure.
struct Target {
    what: &'static str,
    bound: f64,
    unit: &'static str,
    measured: Option<f64>,
}

/// The scale targets, per scale: the testbed holds at most 8 GiB (its
/// report's reads included), answers writes within 50 ms at p99 and gives
/// no 5xx of its own, and its scheduler marks the last pod within 5 s of
/// its creation up to 1,000 nodes, 20 s above; the autoscaler's loop mean is at most 0.5 s, its
/// peak memory 1.5 GiB, the pods' latency p99 2 s, and it requests the
/// last node within 10 s of the last mark. A line per scale, each target
/// `met` or `MISSED` (`no figure` when the run gave none).
pub fn targets(points: &[Point]) -> String {
    let mut out = String::new();
    for p in points {
        let r = &p.row;
        let gib = |kib: u64| kib as f64 / (1024.0 * 1024.0);
        let list = [
            Target {
                what: "testbed peak RSS",
                bound: 8.0,
                unit: "GiB",
                measured: (r.testbed_peak_rss_kib > 0).then(|| gib(r.testbed_peak_rss_kib)),
            },
            Target {
                what: "API write p99",
                bound: 50.0,
                unit: "ms",
                measured: r.api.writes.map(|w| w.p99.as_secs_f64() * 1e3),
            },
            Target {
                what: "testbed 5xx",
                bound: 0.0,
                unit: "answers",
                measured: Some(r.api.server_errors as f64),
            },
            Target {
                what: "watch changes lost or out of order",
                bound: 0.0,
                unit: "changes",
                measured: (!r.watches.is_empty()).then(|| {
                    r.watches
                        .iter()
                        .map(|w| w.out_of_order + w.gone + w.differ as u64)
                        .sum::<u64>() as f64
                }),
            },
            Target {
                what: "last pod marked after its creation",
                bound: if p.nodes <= 1000 { 5.0 } else { 20.0 },
                unit: "s",
                measured: r.marks.map(|m| m.lag().as_secs_f64()),
            },
            Target {
                what: "loop mean",
                bound: 0.5,
                unit: "s",
                measured: r.loops.map(|l| l.mean.as_secs_f64()),
            },
            Target {
                what: "autoscaler peak RSS",
                bound: 1.5,
                unit: "GiB",
                measured: (r.peak_rss_kib > 0).then(|| gib(r.peak_rss_kib)),
            },
            Target {
                what: "latency p99",
                bound: 2.0,
                unit: "s",
                measured: r.latency.map(|l| l.1.as_secs_f64()),
            },
            Target {
                what: "all nodes after the last mark",
                bound: 10.0,
                unit: "s",
                measured: r
                    .all_nodes
                    .zip(r.marks)
                    .map(|(n, m)| n.as_secs_f64() - m.last_marked.as_secs_f64()),
            },
        ];
        let mut cells: Vec<String> = list
            .iter()
            .map(|t| match t.measured {
                Some(v) => format!(
                    "{} {} {u} (≤ {} {u}) {}",
                    t.what,
                    // Counts are whole; durations and sizes to two places.
                    if matches!(t.unit, "answers" | "changes") {
                        format!("{v:.0}")
                    } else {
                        format!("{v:.2}")
                    },
                    t.bound,
                    if v <= t.bound { "met" } else { "MISSED" },
                    u = t.unit
                ),
                None => format!("{} (≤ {} {}) no figure", t.what, t.bound, t.unit),
            })
            .collect();
        let stated = |what: &str, s: Option<apiserver::timings::KindSummary>| match s {
            Some(s) => format!(
                "{what}: {} requests, p50 {:.1} ms, p99 {:.1} ms",
                s.count,
                s.p50.as_secs_f64() * 1e3,
                s.p99.as_secs_f64() * 1e3
            ),
            None => format!("{what}: none"),
        };
        cells.push(stated("API writes", r.api.writes));
        cells.push(stated("API lists", r.api.lists));
        cells.extend(r.watches.iter().map(|w| format!("watch check of {w}")));
        let _ = writeln!(out, "- {} nodes: {}", p.nodes, cells.join("; "));
    }
    out
}

/// A series of the plot: its name, colour and value per point.
type Series = (&'static str, &'static str, Vec<f64>);

/// The plot: time to all nodes, time to all running, the latency
/// percentiles and the main loop's mean (seconds) on the left; peak memory (MiB) on the right; one
/// column per scale.
pub fn svg(points: &[Point], pods_per_node: usize) -> String {
    let dur = |d: Option<Duration>| d.map_or(0.0, |d| d.as_secs_f64());
    let seconds: Vec<Series> = vec![
        (
            "all nodes requested",
            "#1f77b4",
            points.iter().map(|p| dur(p.row.all_nodes)).collect(),
        ),
        (
            "all pods running",
            "#2ca02c",
            points.iter().map(|p| dur(p.row.all_running)).collect(),
        ),
        (
            "pod latency p99",
            "#d62728",
            points
                .iter()
                .map(|p| p.row.latency.map_or(0.0, |l| l.1.as_secs_f64()))
                .collect(),
        ),
        (
            "pod latency p50",
            "#ff7f0e",
            points
                .iter()
                .map(|p| p.row.latency.map_or(0.0, |l| l.0.as_secs_f64()))
                .collect(),
        ),
        (
            "main loop mean",
            "#8c564b",
            points
                .iter()
                .map(|p| p.row.loops.map_or(0.0, |l| l.mean.as_secs_f64()))
                .collect(),
        ),
    ];
    let memory: Vec<Series> = vec![(
        "peak RSS",
        "#9467bd",
        points
            .iter()
            .map(|p| p.row.peak_rss_kib as f64 / 1024.0)
            .collect(),
    )];
    let labels: Vec<String> = points
        .iter()
        .map(|p| format!("{} nodes", p.nodes))
        .collect();
    let mut out = String::from(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"760\" height=\"340\" \
         font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"760\" height=\"340\" fill=\"white\"/>\n",
    );
    let _ = writeln!(
        out,
        "<text x=\"380\" y=\"18\" text-anchor=\"middle\" font-size=\"13\">\
         Scale-up from a backlog ({pods_per_node} pods per node)</text>"
    );
    panel(&mut out, 50.0, "seconds", &labels, &seconds);
    panel(&mut out, 470.0, "MiB", &labels, &memory);
    out.push_str("</svg>\n");
    out
}

/// Plot geometry: panel width and height, top margin.
const W: f64 = 240.0;
const H: f64 = 200.0;
const TOP: f64 = 40.0;

/// A panel at `x0`: axes, a line and dots per series, a legend.
fn panel(out: &mut String, x0: f64, unit: &str, labels: &[String], series: &[Series]) {
    let max = series
        .iter()
        .flat_map(|s| s.2.iter().copied())
        .fold(0.0_f64, f64::max);
    let top = nice_ceiling(max);
    let n = labels.len().max(1);
    let x = |i: usize| x0 + W * (i as f64 + 0.5) / n as f64;
    let y = |v: f64| TOP + H - H * (v / top);
    let _ = writeln!(
        out,
        "<line x1=\"{x0}\" y1=\"{TOP}\" x2=\"{x0}\" y2=\"{b}\" stroke=\"black\"/>\n\
         <line x1=\"{x0}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"black\"/>",
        b = TOP + H,
        r = x0 + W
    );
    for k in 0..=4 {
        let v = top * f64::from(k) / 4.0;
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            x0 - 4.0,
            y(v) + 4.0,
            trim(v)
        );
    }
    let _ = writeln!(out, "<text x=\"{x0}\" y=\"{}\">{unit}</text>", TOP - 8.0);
    for (i, l) in labels.iter().enumerate() {
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{l}</text>",
            x(i),
            TOP + H + 16.0
        );
    }
    for (k, (name, colour, values)) in series.iter().enumerate() {
        let pts: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v)))
            .collect();
        let _ = writeln!(
            out,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
            pts.join(" ")
        );
        for (i, v) in values.iter().enumerate() {
            let _ = writeln!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{colour}\"><title>{name}: {}</title></circle>",
                x(i),
                y(*v),
                trim(*v)
            );
        }
        let ly = TOP + H + 34.0 + 14.0 * k as f64;
        let _ = writeln!(
            out,
            "<rect x=\"{x0}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{colour}\"/>\
             <text x=\"{}\" y=\"{ly}\">{name}</text>",
            ly - 9.0,
            x0 + 14.0
        );
    }
}

/// 1, 2 or 5 times a power of ten, at least `v` (1 for nothing).
fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * p)
}

fn trim(v: f64) -> String {
    if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_is_what_each_component_spent_at_that_scale_most_first() {
        let s = Duration::from_secs;
        let before = [("apiserver", s(10)), ("scheduler", s(5))];
        let after = [("apiserver", s(12)), ("scheduler", s(9)), ("kwok", s(1))];
        assert_eq!(
            busy_line(1000, &before, &after),
            "- 1000 nodes: testbed busy time scheduler 4.0 s, apiserver 2.0 s, kwok 1.0 s"
        );
    }

    fn point(nodes: usize, all_nodes: u64, rss_mib: u64) -> Point {
        Point {
            nodes,
            row: Row {
                binary: PathBuf::from("ca"),
                version: "1.30.7".into(),
                all_pods: Some(Duration::from_secs(1)),
                all_nodes: Some(Duration::from_secs(all_nodes)),
                all_running: Some(Duration::from_secs(all_nodes + 5)),
                cpu: Duration::from_secs(2),
                peak_rss_kib: rss_mib * 1024,
                latency: Some((Duration::from_secs(1), Duration::from_secs(3))),
                loops: Some(compare::LoopTime {
                    count: 7,
                    mean: Duration::from_millis(500),
                }),
                events: 0,
                requests: 0,
                testbed_peak_rss_kib: 2048 * 1024,
                api: compare::ApiFigures {
                    writes: Some(apiserver::timings::KindSummary {
                        count: 100,
                        p50: Duration::from_millis(2),
                        p99: Duration::from_millis(60),
                    }),
                    lists: None,
                    server_errors: 0,
                },
                watches: vec![crate::watch_check::WatchReport {
                    kind: "Pod".into(),
                    events: 10,
                    listed: 3,
                    ..Default::default()
                }],
                marks: Some(compare::MarkTimes {
                    last_created: Duration::from_secs(1),
                    last_marked: Duration::from_secs(3),
                }),
            },
        }
    }

    #[test]
    fn the_table_has_a_row_per_scale() {
        let t = table(&[point(100, 4, 50), point(1000, 31, 251)], 30);
        assert!(t.contains(
            "| 100 | 3000 | 1.0 s | 4.0 s | 9.0 s | 1 s / 3 s | 0.50 s (7) | 2.0 s | 50 MiB | 2 s | 2048 MiB |"
        ));
        assert!(t.contains("| 1000 | 30000 | 1.0 s | 31.0 s | 36.0 s |"));
    }

    #[test]
    fn the_plot_puts_the_largest_value_on_the_nice_ceiling() {
        let s = svg(&[point(100, 4, 50), point(1000, 36, 251)], 30);
        // Seconds: the largest value is 41 s (all running at 1,000 nodes),
        // so the axis tops at 50; memory's 251 MiB tops at 500.
        assert!(s.contains(">50</text>"), "{s}");
        assert!(s.contains(">500</text>"), "{s}");
        assert!(s.contains("all nodes requested: 36"), "{s}");
        assert!(s.contains("peak RSS: 251"), "{s}");
        assert!(s.contains("main loop mean: 0.5"), "{s}");
        assert_eq!(s.matches("<polyline").count(), 6);
        assert!(s.contains("1000 nodes"));
    }

    #[test]
    fn targets_say_which_are_met() {
        let t = targets(&[point(1000, 31, 251), point(10000, 9, 2000)]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("- 1000 nodes: testbed peak RSS 2.00 GiB (≤ 8 GiB) met"),
            "{t}"
        );
        assert!(
            lines[0].contains("last pod marked after its creation 2.00 s (≤ 5 s) met"),
            "{t}"
        );
        // 31 s to all nodes, the last mark at 3 s: 28 s after it.
        assert!(
            lines[0].contains("all nodes after the last mark 28.00 s (≤ 10 s) MISSED"),
            "{t}"
        );
        assert!(
            lines[1].contains("autoscaler peak RSS 1.95 GiB (≤ 1.5 GiB) MISSED"),
            "{t}"
        );
        assert!(
            lines[1].contains("latency p99 3.00 s (≤ 2 s) MISSED"),
            "{t}"
        );
        assert!(
            lines[1].contains("all nodes after the last mark 6.00 s (≤ 10 s) met"),
            "{t}"
        );
        // Writes answered in 60 ms at p99, no 5xx; no list made.
        assert!(
            lines[0].contains("API write p99 60.00 ms (≤ 50 ms) MISSED"),
            "{t}"
        );
        assert!(
            lines[0].contains("testbed 5xx 0 answers (≤ 0 answers) met"),
            "{t}"
        );
        assert!(
            lines[0].contains("API writes: 100 requests, p50 2.0 ms, p99 60.0 ms"),
            "{t}"
        );
        assert!(lines[0].contains("API lists: none"), "{t}");
        assert!(
            lines[0].contains("watch changes lost or out of order 0 changes (≤ 0 changes) met"),
            "{t}"
        );
        assert!(
            lines[0].contains("watch check of Pod: 10 events, 0 out of order, 0 watches gone; view against a list of 3: 0 differ"),
            "{t}"
        );
    }

    #[test]
    fn nice_ceilings() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(41.0), 50.0);
        assert_eq!(nice_ceiling(100.0), 100.0);
        assert_eq!(nice_ceiling(101.0), 200.0);
        assert_eq!(nice_ceiling(0.3), 0.5);
    }
}
