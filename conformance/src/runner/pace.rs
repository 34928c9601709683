//! An example's size, and the pace it runs at in binary mode.
//!
//! In binary mode scenario time is real time multiplied by the time scale
//! (`--time-scale`, 60 by default: a scenario minute lasts a real second).
//! A binary's own computation does not scale: upstream CA 1.30 and 1.31
//! take about 200 real seconds for one scale-up of 30,000 pods onto 1,000
//! nodes on a 2-core machine, which at scale 60 is 200 scenario minutes,
//! far past any window of the example. So the runner chooses each
//! example's time scale from its size, the same for every binary:
//!
//! - An example's size is the `N` of its `@scale-N` tag (the nodes it
//!   needs). Untagged examples are small ([`SMALL_EXAMPLE_NODES`] or
//!   fewer) and run at `--time-scale`.
//! - A larger one runs at the scale where [`REAL_SECONDS_PER_NODE`] real
//!   seconds a node (upstream's computation time, measured as above) fit
//!   its tightest window (the shortest duration its steps name), or at
//!   `--time-scale` if that is slower.
//! - If its windows and waits together would last longer than
//!   `--max-example-minutes` real minutes at that scale, it is skipped,
//!   with the time it would take and the option that runs it.
//!
//! Without `--tags`, `testbed run` leaves the examples over
//! [`SMALL_EXAMPLE_NODES`] out ([`LARGE_EXAMPLES_TAGS`] runs them); the
//! conformance test target runs them (in virtual time).

use std::time::Duration;

/// The nodes of an example without a `@scale-N` tag, at most.
pub const SMALL_EXAMPLE_NODES: usize = 100;

/// The real time a binary's scale-up computation is given per node of the
/// example: upstream CA 1.30.7 and 1.31.5 took about 200 s for 30,000
/// pods onto 1,000 nodes of 30 CPU on a 2-core machine (`testbed
/// compare`), a quarter of a second a node with some room.
pub const REAL_SECONDS_PER_NODE: f64 = 0.25;

/// The real minutes an example may last at its pace, unless
/// `--max-example-minutes` says otherwise.
pub const DEFAULT_MAX_EXAMPLE_MINUTES: f64 = 30.0;

/// The tag filter that runs the examples `testbed run` leaves out by
/// default (those over [`SMALL_EXAMPLE_NODES`]).
pub const LARGE_EXAMPLES_TAGS: &str = "not @known-gap and @scale-1000";

/// How an example runs in binary mode.
#[derive(Debug, Clone, PartialEq)]
pub enum Pace {
    /// At this time scale.
    Run {
        /// Scenario time per real time.
        scale: f64,
    },
    /// Not at all: why, with the time it would take.
    Skip(String),
}

/// The nodes an example needs: the largest `N` of its `@scale-N` tags,
/// else [`SMALL_EXAMPLE_NODES`].
pub fn example_nodes<'a>(tags: impl IntoIterator<Item = &'a String>) -> usize {
    tags.into_iter()
        .filter_map(|t| {
            t.trim_start_matches('@')
                .strip_prefix("scale-")?
                .parse()
                .ok()
        })
        .max()
        .unwrap_or(SMALL_EXAMPLE_NODES)
}

/// Whether an example of `nodes` is one `testbed run` leaves out without
/// `--tags`.
pub fn is_large(nodes: usize) -> bool {
    nodes > SMALL_EXAMPLE_NODES
}

/// The scenario-time durations the step texts name ("within 10 minutes",
/// "60 seconds pass", "keeps 5 nodes for 15 minutes"), in order. A bound
/// on what the binary measures itself in real time ("took 5 seconds or
/// less") is not one.
pub fn step_durations<'a>(steps: impl IntoIterator<Item = &'a str>) -> Vec<Duration> {
    steps
        .into_iter()
        .flat_map(|text| {
            let words: Vec<&str> = text.split_whitespace().collect();
            (0..words.len().saturating_sub(1))
                .filter_map(|i| {
                    let n: f64 = words[i].parse().ok()?;
                    let unit = match words[i + 1].trim_end_matches([',', '.', ';']) {
                        "second" | "seconds" => 1.0,
                        "minute" | "minutes" => 60.0,
                        "hour" | "hours" => 3600.0,
                        _ => return None,
                    };
                    let real_bound = words.get(i + 2..i + 4) == Some(&["or", "less"][..]);
                    (n.is_finite() && n >= 0.0 && !real_bound)
                        .then(|| Duration::from_secs_f64(n * unit))
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The pace of an example of `nodes` whose steps name `durations`, with
/// `--time-scale requested` and `--max-example-minutes max_minutes`.
pub fn pace(nodes: usize, durations: &[Duration], requested: f64, max_minutes: f64) -> Pace {
    if !is_large(nodes) {
        return Pace::Run { scale: requested };
    }
    let computation = REAL_SECONDS_PER_NODE * nodes as f64;
    let tightest = durations
        .iter()
        .filter(|d| !d.is_zero())
        .min()
        .map_or(60.0, Duration::as_secs_f64);
    let scale = round_down(requested.min(tightest / computation));
    let total: f64 = durations.iter().map(Duration::as_secs_f64).sum();
    let real_minutes = total / scale / 60.0;
    if real_minutes <= max_minutes {
        return Pace::Run { scale };
    }
    Pace::Skip(format!(
        "at {nodes} nodes it runs at time scale {scale} (1 scenario minute = {:.0} real seconds), \
         so that a binary's scale-up computation ({REAL_SECONDS_PER_NODE} s a node, {computation:.0} s) \
         fits its {tightest:.0}-second window; its windows and waits add up to {:.0} scenario minutes, \
         up to {real_minutes:.0} real minutes, over --max-example-minutes {max_minutes}: \
         give --max-example-minutes {} to run it",
        60.0 / scale,
        total / 60.0,
        real_minutes.ceil()
    ))
}

/// `scale` rounded down to two significant digits, for a readable report
/// (0.24, 6.0, 60.0).
fn round_down(scale: f64) -> f64 {
    if !(scale.is_finite() && scale > 0.0) {
        return scale;
    }
    let step = 10f64.powf(scale.log10().floor() - 1.0);
    let rounded = (scale / step).floor() * step;
    // Two significant digits, without the float's tail.
    format!("{rounded:.*}", (-(step.log10())).max(0.0) as usize)
        .parse()
        .unwrap_or(rounded)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_size_is_the_scale_tag() {
        assert_eq!(example_nodes(&tags(&["@scale", "@scale-1000"])), 1000);
        assert_eq!(example_nodes(&tags(&["scale-5000", "@binary"])), 5000);
        assert_eq!(example_nodes(&tags(&["@scale", "@binary"])), 100);
        assert!(is_large(1000) && !is_large(100));
    }

    #[test]
    fn durations_are_read_from_the_steps() {
        let d = step_durations([
            "all 30000 pods of \"backlog\" are running within 10 minutes",
            "every pod of \"backlog\" got a new node within 60 seconds of being marked unschedulable",
            "90 seconds pass",
            "the node group \"pool\" keeps 1000 nodes for 15 minutes",
            "a deployment \"x\" of 2 pods requesting 15 CPU is created",
            "the autoscaler's main loop took 5 seconds or less on average",
        ]);
        let secs: Vec<u64> = d.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, vec![600, 60, 90, 900]);
    }

    #[test]
    fn small_examples_keep_the_requested_scale() {
        let d = [Duration::from_secs(30)];
        assert_eq!(pace(100, &d, 60.0, 30.0), Pace::Run { scale: 60.0 });
    }

    #[test]
    fn a_large_example_slows_down_until_the_computation_fits_its_tightest_window() {
        // 1,000 nodes: 250 s of computation in a 60 s window: scale 0.24.
        let d = [Duration::from_secs(60), Duration::from_secs(120)];
        assert_eq!(pace(1000, &d, 60.0, 30.0), Pace::Run { scale: 0.24 });
        // A slower requested scale is kept.
        assert_eq!(pace(1000, &d, 0.1, 30.0), Pace::Run { scale: 0.1 });
    }

    #[test]
    fn a_large_example_over_the_budget_is_skipped_with_its_time() {
        let d = step_durations([
            "all 2 pods of \"full\" are running within 5 minutes",
            "all 30000 pods of \"backlog\" are running within 10 minutes",
            "every pod of \"backlog\" got a new node within 60 seconds of being marked unschedulable",
        ]);
        let Pace::Skip(why) = pace(1001, &d, 60.0, 30.0) else {
            panic!("a 16-minute example at scale 0.23 lasts over an hour");
        };
        assert!(why.contains("time scale 0.23"), "{why}");
        assert!(why.contains("up to 70 real minutes"), "{why}");
        assert!(why.contains("--max-example-minutes 70"), "{why}");
        assert_eq!(pace(1001, &d, 60.0, 70.0), Pace::Run { scale: 0.23 });
    }

    #[test]
    fn scales_round_down_to_two_digits() {
        assert_eq!(round_down(0.2397), 0.23);
        assert_eq!(round_down(60.0), 60.0);
        assert_eq!(round_down(6.66), 6.6);
        assert_eq!(round_down(123.4), 120.0);
    }
}
