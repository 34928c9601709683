//! An autoscaler binary as a side (upstream CA built with its kwok cloud
//! provider, or ours): the side's cluster runs in real time, served over
//! TLS, and the binary runs against it with its timing flags divided by the
//! side's time scale, as the conformance suite's binary mode runs it. The
//! what-if does not start the process itself: a [`Launcher`] given by the
//! caller does (the testbed's, which knows CA binaries' flags), so that the
//! what-if depends on no suite.
//!
//! What a binary side reports comes from the cluster alone (nodes added
//! and removed, pods pending, evictions); the decisions behind them (why a
//! node was kept, the options weighed) are in the binary's log, whose path
//! the report gives. A binary side runs in real time: the same inputs give
//! much the same outcome, not the same bytes.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a launcher starts.
#[derive(Debug)]
pub struct Launch<'a> {
    /// The binary.
    pub binary: &'a Path,
    /// The kubeconfig of the side's cluster.
    pub kubeconfig: &'a Path,
    /// A free port for the binary's metrics and health endpoints.
    pub port: u16,
    /// The side's flags, in cluster time (the launcher scales them).
    pub flags: &'a [String],
    /// Cluster time per real time.
    pub time_scale: f64,
    /// Where the binary's output goes.
    pub log: &'a Path,
}

/// A binary started: its process id, and what stops it when dropped.
pub struct Launched {
    /// The process, sampled for its memory and threads
    /// ([`crate::health`]).
    pub pid: u32,
    /// Stops the process when dropped.
    pub guard: Box<dyn Send>,
}

/// Starts autoscaler binaries for binary sides.
pub trait Launcher: Send + Sync + fmt::Debug {
    /// Starts the binary (within a tokio runtime) with its debugging
    /// endpoints on (`--profiling`, where it has the flag); the process
    /// stops when the returned guard is dropped. An error says what failed
    /// and on which binary or flag.
    fn launch(&self, launch: &Launch) -> Result<Launched, String>;
}

/// A side that runs a binary instead of our autoscaler in-process.
#[derive(Debug, Clone)]
pub struct BinarySide {
    /// The binary.
    pub path: PathBuf,
    /// Cluster time per real time: 60 makes a simulated hour one real
    /// minute.
    pub time_scale: f64,
    /// Where its log (and its cluster's kubeconfig) is written.
    pub dir: PathBuf,
    /// Who starts it.
    pub launcher: Arc<dyn Launcher>,
}

impl BinarySide {
    /// The log of side `name`.
    pub fn log(&self, name: &str) -> PathBuf {
        self.dir.join(format!("side-{}.log", file_name(name)))
    }

    /// The kubeconfig of side `name`'s cluster.
    pub fn kubeconfig(&self, name: &str) -> PathBuf {
        self.dir
            .join(format!("side-{}.kubeconfig", file_name(name)))
    }
}

/// `name` with what a file name should not hold replaced.
fn file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A port nothing listens on now.
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
