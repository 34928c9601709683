//! One side of a what-if: a fresh embedded cluster on paused time, the
//! plan loaded before its control plane starts, our autoscaler with the
//! side's flags, the cluster watched for the run's duration, and the
//! autoscaler's decisions of every loop folded into what the report
//! needs ([`Loops`]). A timeline's steps are made at their times.
//!
//! Each side runs on a thread of its own, on a single-threaded runtime
//! whose generators are seeded: the same inputs and seed give the same
//! run, event for event.

use std::time::{Duration, SystemTime};

use harness::cluster::{Cluster, ClusterError};
use harness::kwok_provider::{provider_config_map, templates_config_map};

use crate::groups::Grouping;
use crate::load::{LoadError, Loaded, load};
use crate::observe::{Observer, Seen};
use crate::plan::Plan;
use crate::report::Loops;
use crate::timeline::{StepFailed, Timeline};

/// How long the cluster may take to make the loaded nodes Ready and run
/// the bound pods before the autoscaler starts (virtual time).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(600);

/// How long the cluster runs alone once settled, before the autoscaler
/// starts (virtual time).
const SETTLE: Duration = Duration::from_secs(10);

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
    /// The run's length in seconds.
    pub end: f64,
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

/// Runs one side on this thread.
pub fn run_side(
    plan: &Plan,
    grouping: &Grouping,
    args: &[String],
    settings: &Settings,
) -> Result<SideRun, RunError> {
    apimachinery::rand::seed_this_thread(settings.seed);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .map_err(RunError::Runtime)?;
    runtime.block_on(run(plan, grouping, args, settings))
}

async fn run(
    plan: &Plan,
    grouping: &Grouping,
    args: &[String],
    settings: &Settings,
) -> Result<SideRun, RunError> {
    let templates = grouping.groups.iter().map(|g| g.template.clone()).collect();
    let builder = Cluster::builder()
        .epoch(settings.epoch)
        .kwok_config(harness::kwok_config_for_scale())
        .object(provider_config_map())
        .object(templates_config_map(templates));
    let (cluster, loaded) = builder
        .start_loaded(|client| async move { load(client, plan).await.map_err(RunError::Load) })
        .await?;
    let nodes = loaded.created.get("Node").copied().unwrap_or(0);
    if nodes > 0 {
        cluster.wait_nodes_ready(nodes, SETTLE_TIMEOUT).await?;
    }
    if plan.bound_pods > 0 {
        cluster
            .wait_pods_running("", plan.bound_pods, SETTLE_TIMEOUT)
            .await?;
    }
    // The controllers make the pods of loaded workloads that had none and
    // the scheduler places what it can, before the autoscaler looks.
    tokio::time::sleep(SETTLE).await;
    let observer = Observer::start(cluster.client())
        .await
        .map_err(|source| ClusterError::Api {
            what: "listing the nodes and pods at the start".into(),
            source,
        })?;
    let clock = cluster.clock().clone();
    let mut built = autoscaler::inprocess::kwok(cluster.client_under_test(), clock, args).await?;
    let mut log = built.autoscaler.decision_log();
    let task = tokio::spawn(built.autoscaler.run());
    let started = tokio::time::Instant::now();
    let collector = tokio::spawn(async move {
        let mut loops = Loops::default();
        while let Some(d) = log.recv().await {
            loops.add(started.elapsed().as_secs_f64(), d);
        }
        loops
    });
    let client = cluster.client();
    for step in &settings.timeline.steps {
        tokio::time::sleep_until(started + Duration::from_secs(step.at)).await;
        step.apply(&client, &loaded.uids).await?;
    }
    tokio::time::sleep_until(started + settings.duration).await;
    let end = observer.elapsed();
    task.abort();
    let _ = task.await;
    let loops = collector.await.unwrap_or_default();
    let seen = observer.finish(end);
    drop(cluster);
    Ok(SideRun {
        loaded,
        seen,
        loops,
        end,
    })
}
