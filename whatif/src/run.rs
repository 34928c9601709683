//! One side of a what-if: a fresh embedded cluster on paused time, the
//! plan loaded before its control plane starts, our autoscaler with the
//! side's flags, the cluster watched for the run's duration, and the
//! autoscaler's decisions of every loop folded into what the report
//! needs ([`Loops`]). A timeline's steps are made at their times.
//!
//! Each side runs on a thread of its own, on a single-threaded runtime
//! whose generators are seeded: the same inputs and seed give the same
//! run, event for event. A binary side ([`crate::binary`]) runs in real
//! time instead, its cluster served over TLS, every wait divided by its
//! time scale and every time seen multiplied by it.

use std::time::{Duration, SystemTime};

use harness::cluster::{Cluster, ClusterError};
use harness::kwok_provider::{provider_config_map, templates_config_map};

use crate::binary::{BinarySide, Launch, free_port};
use crate::groups::Grouping;
use crate::health::{Sample, Sampler};
use crate::load::{LoadError, Loaded, load};
use crate::observe::{Observer, Seen};
use crate::plan::Plan;
use crate::report::Loops;
use crate::timeline::{StepFailed, Timeline};

/// How long the cluster may take to make the loaded nodes Ready and run
/// the bound pods before the autoscaler starts (virtual time).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(600);

/// How often the waits for the loaded nodes and pods check (virtual
/// time): each check lists every pod.
const SETTLE_POLL: Duration = Duration::from_secs(2);

/// How long the cluster runs alone once settled, before the autoscaler
/// starts (virtual time).
const SETTLE: Duration = Duration::from_secs(10);

/// kwok's stage that patches every Ready node's status every ten minutes.
const HEARTBEAT_STAGE: &str = "node-heartbeat-with-lease";

/// Why a side could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The runtime could not start.
    #[error("starting the runtime: {0}")]
    Runtime(std::io::Error),
    /// The cluster did not start, or did not settle.
    #[error("{0}")]
    Cluster(#[from] ClusterError),
    /// An object of the input could not be created.
    #[error("loading the input: {0}")]
    Load(#[from] LoadError),
    /// The autoscaler refused its flags or configuration.
    #[error("starting the autoscaler: {0}")]
    Autoscaler(#[from] autoscaler::inprocess::InProcessError),
    /// A binary side's binary could not be started.
    #[error("{0}")]
    Binary(String),
    /// A step of the timeline could not be made.
    #[error("{0}")]
    Timeline(#[from] StepFailed),
}

/// What one side's run gives.
#[derive(Debug)]
pub struct SideRun {
    /// What was created.
    pub loaded: Loaded,
    /// What the watchers saw.
    pub seen: Seen,
    /// The autoscaler's loops, folded.
    pub loops: Loops,
    /// A binary's process over the run (none for ours in-process).
    pub health: Vec<Sample>,
    /// The run's length in seconds.
    pub end: f64,
    /// Recorded changes skipped: the object was gone from this side's
    /// cluster (a node it had removed), or there already.
    pub skipped_steps: Vec<String>,
}

/// The run's settings shared by every side.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How long the autoscaler runs.
    pub duration: Duration,
    /// The seed of the generators (node names, the random expander).
    pub seed: u64,
    /// Where the cluster's clock starts.
    pub epoch: SystemTime,
    /// The changes made during the run.
    pub timeline: Timeline,
}

/// Runs one side on this thread: our autoscaler in-process on paused
/// time, or `binary` (the side's name and binary) in scaled real time.
pub fn run_side(
    plan: &Plan,
    grouping: &Grouping,
    args: &[String],
    settings: &Settings,
    binary: Option<(&str, &BinarySide)>,
) -> Result<SideRun, RunError> {
    apimachinery::rand::seed_this_thread(settings.seed);
    let mut runtime = tokio::runtime::Builder::new_current_thread();
    runtime.enable_all();
    if binary.is_none() {
        runtime.start_paused(true);
    }
    let runtime = runtime.build().map_err(RunError::Runtime)?;
    runtime.block_on(run(plan, grouping, args, settings, binary))
}

async fn run(
    plan: &Plan,
    grouping: &Grouping,
    args: &[String],
    settings: &Settings,
    binary: Option<(&str, &BinarySide)>,
) -> Result<SideRun, RunError> {
    let scale = binary.map_or(1.0, |(_, b)| b.time_scale);
    let templates = grouping.groups.iter().map(|g| g.template.clone()).collect();
    let builder = Cluster::builder()
        .kwok_config(harness::kwok_config_for_scale())
        // Nothing here reads node heartbeats: no node lifecycle controller
        // runs, and the autoscaler reads the Ready condition's status.
        .without_stage(HEARTBEAT_STAGE)
        // Nor the scheduler's events: an autoscaler does not watch Events,
        // and the report is made from the pods and nodes.
        .without_scheduler_events()
        .object(provider_config_map())
        .object(templates_config_map(templates));
    // Nor the ResourceClaim controller when nothing will ask for claims: it
    // reads every pod.
    let builder = if plan.uses_claims() || settings.timeline.uses_claims() {
        builder
    } else {
        builder.without_resourceclaim_controller()
    };
    // A binary reads the machine's clock: its cluster's starts now.
    let started_at = binary.map_or(settings.epoch, |_| std::time::SystemTime::now());
    let builder = match binary {
        None => builder.epoch(settings.epoch),
        Some((_, b)) => builder.time_scale(b.time_scale),
    };
    let (cluster, loaded) = builder
        .start_loaded(|client, server| async move {
            load(client, &server, plan, started_at)
                .await
                .map_err(RunError::Load)
        })
        .await?;
    let cluster = cluster.poll_every(SETTLE_POLL.div_f64(scale));
    let nodes = loaded.created.get("Node").copied().unwrap_or(0);
    if nodes > 0 {
        cluster.wait_nodes_ready(nodes, SETTLE_TIMEOUT).await?;
    }
    if plan.bound_pods > 0 {
        cluster
            .wait_pods_running_count("", plan.bound_pods, SETTLE_TIMEOUT)
            .await?;
    }
    // The controllers make the pods of loaded workloads that had none and
    // the scheduler places what it can, before the autoscaler looks.
    tokio::time::sleep(SETTLE.div_f64(scale)).await;
    let observer = Observer::start(cluster.client(), scale)
        .await
        .map_err(|source| ClusterError::Api {
            what: "listing the nodes and pods at the start".into(),
            source,
        })?;
    let started = tokio::time::Instant::now();
    let running = match binary {
        None => Running::in_process(&cluster, args, started).await?,
        Some((name, b)) => Running::binary(&cluster, name, b, args).await?,
    };
    let client = cluster.client();
    let mut skipped_steps = Vec::new();
    for step in &settings.timeline.steps {
        tokio::time::sleep_until(started + Duration::from_secs(step.at).div_f64(scale)).await;
        match step.apply(&client, &loaded.uids).await {
            Ok(()) => {}
            Err(e) if step.recorded && e.diverged() => {
                skipped_steps.push(format!("{} s: {}: {}", step.at, step.action, e.source));
            }
            Err(e) => return Err(e.into()),
        }
    }
    tokio::time::sleep_until(started + settings.duration.div_f64(scale)).await;
    let end = observer.elapsed();
    let (loops, health) = running.stop().await;
    let seen = observer.finish(end);
    drop(cluster);
    Ok(SideRun {
        loaded,
        seen,
        loops,
        health,
        end,
        skipped_steps,
    })
}

/// The autoscaler of a side, running.
enum Running {
    /// Ours, in-process: its task, and the task folding its loops.
    InProcess {
        task: tokio::task::JoinHandle<()>,
        collector: tokio::task::JoinHandle<Loops>,
    },
    /// A binary: its process and the cluster's TLS endpoint, both stopped
    /// when dropped, and the sampler of its process.
    Binary {
        _process: Box<dyn Send>,
        _endpoint: Box<dyn Send>,
        sampler: Sampler,
    },
}

impl Running {
    /// Our autoscaler on the cluster's clock, its loops folded from
    /// `started` on.
    async fn in_process(
        cluster: &Cluster,
        args: &[String],
        started: tokio::time::Instant,
    ) -> Result<Running, RunError> {
        let clock = cluster.clock().clone();
        let mut built =
            autoscaler::inprocess::kwok(cluster.client_under_test(), clock, args).await?;
        let mut log = built.autoscaler.decision_log();
        let task = tokio::spawn(built.autoscaler.run());
        let collector = tokio::spawn(async move {
            let mut loops = Loops::default();
            while let Some(d) = log.recv().await {
                loops.add(started.elapsed().as_secs_f64(), d);
            }
            loops
        });
        Ok(Running::InProcess { task, collector })
    }

    /// `binary` against the cluster served over TLS.
    async fn binary(
        cluster: &Cluster,
        name: &str,
        binary: &BinarySide,
        args: &[String],
    ) -> Result<Running, RunError> {
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            RunError::Binary(format!("{}: {what}: {e}", binary.path.display()))
        };
        let api = cluster
            .api_server()
            .ok_or_else(|| failed("serving the cluster", &"it is not embedded"))?;
        let endpoint = api
            .serve_tls(([127, 0, 0, 1], 0).into())
            .await
            .map_err(|e| failed("serving the cluster over TLS", &e))?;
        std::fs::create_dir_all(&binary.dir)
            .map_err(|e| failed(&format!("creating {}", binary.dir.display()), &e))?;
        let kubeconfig = binary.kubeconfig(name);
        endpoint
            .write_kubeconfig(&kubeconfig)
            .map_err(|e| failed("writing its kubeconfig", &e))?;
        let port = free_port().map_err(|e| failed("finding a free port", &e))?;
        let log = binary.log(name);
        let process = binary
            .launcher
            .launch(&Launch {
                binary: &binary.path,
                kubeconfig: &kubeconfig,
                port,
                flags: args,
                time_scale: binary.time_scale,
                log: &log,
            })
            .map_err(RunError::Binary)?;
        Ok(Running::Binary {
            _process: process.guard,
            _endpoint: Box::new(endpoint),
            sampler: Sampler::start(process.pid, port, binary.time_scale),
        })
    }

    /// Stops the autoscaler; our loops, folded (none for a binary), and a
    /// binary's samples.
    async fn stop(self) -> (Loops, Vec<Sample>) {
        match self {
            Running::InProcess { task, collector } => {
                task.abort();
                let _ = task.await;
                (collector.await.unwrap_or_default(), Vec::new())
            }
            Running::Binary { sampler, .. } => (Loops::default(), sampler.finish().await),
        }
    }
}
