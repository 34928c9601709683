//! The what-if: what an autoscaler would do to a real cluster.
//!
//! A cluster's state, read from files ([`input`]: `kubectl get -o
//! json|yaml` dumps, multi-document YAML, upstream Cluster Autoscaler's
//! `/snapshotz`), with the ReplicaSets and DaemonSets its pods name but it
//! lacks made from those pods ([`owners`]), is turned into node groups
//! ([`groups`]: from the labels
//! the common platforms put on nodes, or a label the operator names) and
//! a plan of objects to create ([`plan`]: nodes as kwok nodes of their
//! groups, pods bound where they were, owners before what they own). Each
//! side ([`run`]) loads the plan into a fresh embedded cluster before its
//! control plane starts ([`load`]), runs our autoscaler with the side's
//! flags ([`flags`]: the input's Cluster Autoscaler Deployment's, with the
//! side's over them) in virtual time, watches the cluster ([`observe`])
//! and keeps every loop's decisions. The [`report`] (versioned JSON,
//! Markdown, and an HTML page with SVG timelines: [`html`]) says, side by side, what each would do, node by node, and
//! the [`coverage`] table says what the input held, what was derived or
//! defaulted and what is missing.
//!
//! Sides run on parallel threads (each takes the next side when done),
//! each side on a single-threaded runtime on
//! paused time with seeded generators: the same snapshot and seed give a
//! byte-identical JSON report, from a frozen snapshot or a recording. A [`sweep`] runs one side per combination
//! of flag values and reports the trade-off of each case and the Pareto
//! front; its cases can run apart, in the pods of a Kubernetes Indexed
//! Job ([`job`]), and [`merge`] makes one report of theirs. A
//! [`recording`] of a cluster's changes (written by `testbed record`,
//! [`record`]) replays as the starting state and a timeline of its
//! workload changes. `testbed whatif` is the command ([`cli`]);
//! `testbed synthetic` writes a cluster dump of any size, or a recorded
//! day of it, for its benchmarks ([`synthetic`]).

pub mod binary;
pub mod cli;
pub mod coverage;
pub mod flags;
pub mod groups;
pub mod health;
pub mod html;
pub mod input;
pub mod job;
pub mod kinds;
pub mod live;
pub mod load;
pub mod merge;
pub mod observe;
pub mod owners;
pub mod plan;
pub mod record;
pub mod recording;
pub mod report;
pub mod run;
pub mod sweep;
pub mod synthetic;
pub mod timeline;

use std::time::{Duration, SystemTime};

use crate::coverage::Coverage;
use crate::flags::{Flags, FlagsError};
use crate::groups::{GroupError, NodesFlag};
use crate::input::{Input, InputError};
use crate::plan::PlanError;
use crate::report::Report;
use crate::run::{RunError, Settings};
use crate::timeline::{Timeline, TimelineError};

/// Why a what-if could not run.
#[derive(Debug, thiserror::Error)]
pub enum WhatIfError {
    /// An input file was refused.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The live cluster could not be read.
    #[error("reading the cluster: {0}")]
    Live(#[from] live::LiveError),
    /// Flags were refused.
    #[error(transparent)]
    Flags(#[from] FlagsError),
    /// The node groups could not be inferred.
    #[error(transparent)]
    Groups(#[from] GroupError),
    /// The input cannot be loaded.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The timeline was refused.
    #[error(transparent)]
    Timeline(#[from] TimelineError),
    /// The timeline does not fit the run.
    #[error("{0}")]
    TimelineEnd(String),
    /// A price was refused.
    #[error("{0}")]
    Price(String),
    /// The sides are not what a comparison needs.
    #[error("{0}")]
    Sides(String),
    /// A sweep was refused.
    #[error(transparent)]
    Sweep(#[from] sweep::SweepError),
    /// A recording was refused.
    #[error(transparent)]
    Recording(#[from] recording::RecordingError),
    /// A side failed.
    #[error("side {side}: {source}")]
    Run {
        /// The side.
        side: String,
        /// Why.
        source: Box<RunError>,
    },
}

/// A side to run: its name and its own flags (over the input's).
#[derive(Debug, Clone)]
pub struct SideSpec {
    /// Its name.
    pub name: String,
    /// Its flags.
    pub flags: Flags,
    /// A binary to run instead of our autoscaler in-process.
    pub binary: Option<binary::BinarySide>,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct WhatIf {
    /// The input's state.
    pub inputs: Vec<std::path::PathBuf>,
    /// A live cluster to read (list only) besides the files.
    pub kubeconfig: Option<std::path::PathBuf>,
    /// A recording ([`recording`]): its starting state is read with the
    /// files, its changes replayed at their times.
    pub recording: Option<std::path::PathBuf>,
    /// Flags over the input autoscaler's (or its defaults).
    pub flags: Flags,
    /// The sides; none is one side with the input's flags.
    pub sides: Vec<SideSpec>,
    /// Group nodes by this label instead of the platforms' labels.
    pub group_label: Option<String>,
    /// How long the autoscaler runs (virtual time).
    pub duration: Duration,
    /// Changes made during the run (none: workloads stay as they were).
    pub timeline: Timeline,
    /// Hourly prices by instance type, for a cost line (none: no cost).
    pub prices: std::collections::BTreeMap<String, f64>,
    /// The generators' seed.
    pub seed: u64,
    /// How many sides run at once.
    pub parallel: usize,
    /// The swept flags, when the sides are a sweep's cases (in the
    /// order of [`sweep::cases`]).
    pub sweep: Vec<sweep::Dimension>,
    /// The one case of the sweep the sides are, when not all of them.
    pub case: Option<usize>,
}

/// Where the cluster's clock starts when the input does not say when it
/// was taken.
const DEFAULT_EPOCH_SECONDS: u64 = 1_767_225_600; // 2026-01-01T00:00:00Z

/// What the sides run on: the input read and checked, before anything
/// runs.
struct Prepared {
    sides: Vec<SideSpec>,
    groupings: Vec<groups::Grouping>,
    plan: plan::Plan,
    coverage: Coverage,
    settings: Settings,
    recorded: Option<recording::Recorded>,
}

/// Reads the input and checks everything a run needs (the flags, the
/// sides, the groups, the plan) without running: what `--emit-job` does
/// before it writes a Job.
pub fn check(what: &WhatIf) -> Result<(), WhatIfError> {
    prepare(what).map(|_| ())
}

/// Reads the input, runs every side and reports.
pub fn run(what: &WhatIf) -> Result<Report, WhatIfError> {
    let Prepared {
        sides,
        groupings,
        plan,
        coverage,
        settings,
        recorded,
    } = prepare(what)?;
    let runs = run_sides(&sides, &groupings, &plan, &settings, what.parallel.max(1))?;
    let sides: Vec<report::Side> = sides
        .iter()
        .zip(&runs)
        .map(|(s, r)| {
            let mut shown = s.flags.args();
            shown.extend(s.flags.nodes.iter().map(|n| format!("--nodes={n}")));
            let ran = report::Ran {
                seen: &r.seen,
                loops: &r.loops,
                end: r.end,
            };
            let mut side = report::side(&s.name, shown, ran, &what.prices);
            side.skipped_steps = r.skipped_steps.clone();
            side.health = r.health.clone();
            side.health_verdict = health::verdict(&r.health, r.end.round() as u64);
            if let Some(b) = &s.binary {
                side.binary = Some(report::Binary {
                    path: b.path.display().to_string(),
                    time_scale: b.time_scale,
                    log: b.log(&s.name).display().to_string(),
                });
            }
            side
        })
        .collect();
    let differences = sides
        .iter()
        .skip(1)
        .map(|s| report::difference(&sides[0], s))
        .collect();
    let sweep = if what.sweep.is_empty() {
        None
    } else {
        let indices: Vec<usize> = match what.case {
            Some(i) => vec![i],
            None => (0..sides.len()).collect(),
        };
        Some(sweep::summarize(&what.sweep, &indices, &sides)?)
    };
    Ok(Report {
        schema: report::SCHEMA.to_string(),
        coverage,
        duration_seconds: what.duration.as_secs(),
        seed: what.seed,
        prices: what.prices.clone(),
        timeline: settings.timeline.steps.iter().map(|s| s.shown()).collect(),
        recorded,
        groups: groupings
            .into_iter()
            .next()
            .map(|g| g.groups)
            .unwrap_or_default(),
        sides,
        differences,
        sweep,
    })
}

/// [`Prepared`] from what to run.
fn prepare(what: &WhatIf) -> Result<Prepared, WhatIfError> {
    let mut input = Input::read(&what.inputs)?;
    if let Some(path) = &what.kubeconfig {
        read_live(&mut input, path)?;
    }
    let (timeline, recorded) = match &what.recording {
        Some(path) => {
            let replay = recording::read(path)?;
            input.read_documents(&replay.recorded.file, vec![replay.start])?;
            if replay.taken.is_some() {
                input.taken = replay.taken;
            }
            input.date();
            (what.timeline.with(replay.steps), Some(replay.recorded))
        }
        None => (what.timeline.clone(), None),
    };
    timeline
        .check(what.duration)
        .map_err(WhatIfError::TimelineEnd)?;
    for owner in owners::derive(&input) {
        *input.derived.entry(owner.kind.name().into()).or_default() += 1;
        input.objects.push(owner);
    }
    let deployed = flags::deployed(&input);
    let base = match &deployed {
        Some(d) => Flags::parse(&d.object, &d.args)?,
        None => Flags::default(),
    }
    .with(&what.flags);
    let sides: Vec<SideSpec> = if what.sides.is_empty() {
        vec![SideSpec {
            name: if deployed.is_some() {
                "as deployed".into()
            } else {
                "defaults".into()
            },
            flags: base.clone(),
            binary: None,
        }]
    } else {
        what.sides
            .iter()
            .map(|s| SideSpec {
                name: s.name.clone(),
                flags: base.with(&s.flags),
                binary: s.binary.clone(),
            })
            .collect()
    };
    check_sides(&sides)?;
    for s in sides.iter().filter(|s| s.binary.is_none()) {
        autoscaler::inprocess::check_flags("kwok", &s.flags.args()).map_err(|source| {
            WhatIfError::Run {
                side: s.name.clone(),
                source: Box::new(RunError::Autoscaler(source)),
            }
        })?;
    }
    let groupings = sides
        .iter()
        .map(|s| groups::infer(&input, what.group_label.as_deref(), &s.flags.nodes))
        .collect::<Result<Vec<_>, _>>()?;
    let plan = plan::plan(&input, &groupings[0])?;
    let left_out: Vec<String> = base
        .left_out
        .iter()
        .map(|(f, why)| format!("{f}: {why}"))
        .collect();
    let coverage = Coverage::new(&input, &plan, &groupings[0], deployed.as_ref(), left_out);
    let settings = Settings {
        duration: what.duration,
        seed: what.seed,
        epoch: input
            .taken
            .unwrap_or(SystemTime::UNIX_EPOCH + Duration::from_secs(DEFAULT_EPOCH_SECONDS)),
        timeline,
    };
    Ok(Prepared {
        sides,
        groupings,
        plan,
        coverage,
        settings,
        recorded,
    })
}

/// Adds a live cluster's state (list calls only) to `input`.
fn read_live(input: &mut Input, kubeconfig: &std::path::Path) -> Result<(), WhatIfError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| live::LiveError::Kubeconfig(format!("starting the runtime: {e}")))?;
    let (list, unreadable) = runtime.block_on(async {
        let client = live::client(kubeconfig).await?;
        live::read(&client).await
    })?;
    input.read_documents(&format!("{} (live)", kubeconfig.display()), vec![list])?;
    input.unreadable.extend(unreadable);
    input.date();
    Ok(())
}

/// Sides need distinct names and distinct flags.
fn check_sides(sides: &[SideSpec]) -> Result<(), WhatIfError> {
    for (i, a) in sides.iter().enumerate() {
        for b in &sides[i + 1..] {
            if a.name == b.name {
                return Err(WhatIfError::Sides(format!(
                    "two sides are named {}: give each its own name",
                    a.name
                )));
            }
            let binary = |s: &SideSpec| s.binary.as_ref().map(|b| b.path.clone());
            if a.flags.canonical() == b.flags.canonical() && binary(a) == binary(b) {
                return Err(WhatIfError::Sides(format!(
                    "sides {} and {} have the same flags ({}): they would give the same result",
                    a.name,
                    b.name,
                    if a.flags.args().is_empty() {
                        "the defaults".to_string()
                    } else {
                        a.flags.args().join(" ")
                    }
                )));
            }
        }
    }
    Ok(())
}

/// Runs the sides on `parallel` threads, each taking the next side not
/// yet taken when it is done with one: a slow side holds up no other.
fn run_sides(
    sides: &[SideSpec],
    groupings: &[groups::Grouping],
    plan: &plan::Plan,
    settings: &Settings,
    parallel: usize,
) -> Result<Vec<run::SideRun>, WhatIfError> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<run::SideRun, WhatIfError>>>> =
        sides.iter().map(|_| Mutex::new(None)).collect();
    let run_one = |i: usize| {
        let (side, grouping) = (&sides[i], &groupings[i]);
        let binary = side.binary.as_ref().map(|b| (side.name.as_str(), b));
        run::run_side(plan, grouping, &side.flags.args(), settings, binary).map_err(|source| {
            WhatIfError::Run {
                side: side.name.clone(),
                source: Box::new(source),
            }
        })
    };
    std::thread::scope(|scope| {
        for _ in 0..parallel.min(sides.len()) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= sides.len() {
                        break;
                    }
                    let result =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_one(i)))
                            .unwrap_or_else(|_| {
                                Err(WhatIfError::Sides(format!(
                                    "side {} panicked",
                                    sides[i].name
                                )))
                            });
                    if result.is_err() {
                        // A failed side fails the run: start no other.
                        next.store(sides.len(), Ordering::Relaxed);
                    }
                    if let Ok(mut slot) = results[i].lock() {
                        *slot = Some(result);
                    }
                }
            });
        }
    });
    results
        .into_iter()
        .zip(sides)
        .map(|(slot, side)| {
            slot.into_inner().ok().flatten().unwrap_or_else(|| {
                Err(WhatIfError::Sides(format!(
                    "side {} did not run",
                    side.name
                )))
            })
        })
        .collect()
}

/// Parses `--nodes` values.
pub fn nodes_flags(values: &[String]) -> Result<Vec<NodesFlag>, GroupError> {
    values.iter().map(|v| v.parse()).collect()
}
