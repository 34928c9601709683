//! A CA-compatible autoscaler binary under test: what it is (the Cluster
//! Autoscaler release it behaves as, the flags it knows), what a scenario
//! needs of it, and how it is started against the embedded API server.
//!
//! Upstream releases differ: a flag appears (`--max-node-startup-time` in
//! 1.35), a default changes (the `least-waste` expander in 1.33). So the
//! binary is probed once per run ([`BinaryInfo::probe`]): its `--help` gives
//! the flags it knows, its start-up line (`Cluster Autoscaler 1.30.7`, logged
//! at `--v=1`) its version. A scenario then runs only when the binary has
//! what it needs ([`BinaryInfo::unmet`]): every `--flag` its steps name, and
//! the version its `@ca>=X.Y` tags ask for. The others are skipped with the
//! reason printed, never failed and never silently passed.
//!
//! The launcher ([`command`]) gives every release what it needs to run here:
//! the kwok provider's local mode (`KWOK_PROVIDER_MODE=local` and
//! `KUBECONFIG`, without which upstream's kwok provider looks for an
//! in-cluster config), the timing flags divided by the time scale and the
//! client rate limits multiplied by it (only the flags the binary knows).

use std::collections::BTreeSet;
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{LazyLock, mpsc};
use std::time::Duration;

use regex::Regex;

use crate::world::provider::Provider;

/// The timing flags of CA with their defaults: in binary mode each is
/// divided by the time scale, so the autoscaler lives on scenario time.
/// (`--scale-down-delay-after-delete` defaults to the scan interval.)
pub const TIMING_FLAGS: &[(&str, &str)] = &[
    ("scan-interval", "10s"),
    ("scale-down-unneeded-time", "10m"),
    ("scale-down-unready-time", "20m"),
    ("scale-down-delay-after-add", "10m"),
    ("scale-down-delay-after-delete", "10s"),
    ("scale-down-delay-after-failure", "3m"),
    ("max-node-provision-time", "15m"),
    ("new-pod-scale-up-delay", "0s"),
    ("unremovable-node-recheck-timeout", "5m"),
    ("initial-node-group-backoff-duration", "5m"),
    ("max-node-group-backoff-duration", "30m"),
    ("node-group-backoff-reset-timeout", "3h"),
    ("max-pod-eviction-time", "2m"),
    ("node-delete-delay-after-taint", "5s"),
    ("node-deletion-batcher-interval", "0s"),
    ("node-deletion-candidate-ttl", "0s"),
    ("node-deletion-delay-timeout", "2m"),
    ("max-inactivity", "10m"),
    ("max-failing-time", "15m"),
    ("max-startup-time", "20m"),
    ("max-node-startup-time", "15m"),
    ("provisioning-request-initial-backoff-time", "1m"),
    ("provisioning-request-max-backoff-time", "10m"),
];

/// The longest of CA's fixed waits (constants, not flags, so they stay in
/// real time whatever the scale) that a step's "within" window may have to
/// sit through: a drain polls for its evicted pods every 5 s and retries a
/// refused eviction every 10 s (upstream's `waitPodsToDisappear` and
/// `DefaultEvictionRetryTime`), so a node whose pods leave one by one under
/// a PDB takes 5 s + 2 × 10 s more. In binary mode every "within" window is
/// longer by this much real time ([`crate::world::Running::window`]).
pub const FIXED_REAL_WAITS: Duration = Duration::from_secs(25);

/// Timing flags that bound a loop of CA's whose period is fixed in real
/// time, with the least real duration they are scaled to:
/// `--max-pod-eviction-time` bounds the eviction retries (every 10 s real);
/// below 30 s it would allow a single try, not the dozen it allows at its
/// 2-minute default.
pub const REAL_TIME_FLOORS: &[(&str, Duration)] =
    &[("max-pod-eviction-time", Duration::from_secs(30))];

/// CA's client rate limits with their defaults: multiplied by the time
/// scale, so that a scenario minute allows the API calls a real minute does
/// (5 QPS would otherwise be 5 calls per scenario minute at a scale of 60).
pub const RATE_FLAGS: &[(&str, f64)] = &[("kube-client-qps", 5.0), ("kube-client-burst", 10.0)];

/// A Cluster Autoscaler release number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct CaVersion {
    /// Major (1).
    pub major: u32,
    /// Minor (30).
    pub minor: u32,
    /// Patch (7).
    pub patch: u32,
}

impl CaVersion {
    /// `1.30.7`, `v1.30.7` or `1.30` (patch 0).
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim().trim_start_matches('v');
        let mut parts = text.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = match parts.next() {
            // `1.36.1-compatible`: the digits before any suffix.
            Some(p) => p
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()?,
            None => 0,
        };
        Some(Self {
            major,
            minor,
            patch,
        })
    }
}

impl fmt::Display for CaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The prefix of the version tags: `@ca>=1.33` runs a scenario only
/// against releases 1.33 and later.
pub const VERSION_TAG_PREFIX: &str = "ca>=";

/// The prefix of the upper-bound tags: `@ca<1.37` runs a scenario only
/// against releases before 1.37 (a behaviour that release changed), so
/// not in-process, where ours behaves as [`autoscaler::CA_VERSION`].
pub const BEFORE_TAG_PREFIX: &str = "ca<";

/// What the version tags of a scenario ask that `version` (`None`:
/// unknown) does not meet, one reason each.
pub fn version_tags_unmet<'a>(
    tags: impl IntoIterator<Item = &'a String>,
    version: Option<CaVersion>,
) -> Vec<String> {
    let mut unmet = Vec::new();
    for tag in tags {
        let tag = tag.trim_start_matches('@');
        if let Some(wanted) = tag.strip_prefix(VERSION_TAG_PREFIX) {
            unmet.extend(at_least_unmet(wanted, version, ""));
        } else if let Some(before) = tag.strip_prefix(BEFORE_TAG_PREFIX) {
            match (CaVersion::parse(before), version) {
                (None, _) => unmet.push(format!("tag @{tag} is not a version")),
                (Some(b), Some(v)) if v < b => {}
                (Some(b), Some(v)) => {
                    unmet.push(format!("for releases before CA {b} (the autoscaler: {v})"))
                }
                (Some(b), None) => unmet.push(format!(
                    "for releases before CA {b} (the binary's version is unknown)"
                )),
            }
        }
    }
    unmet.dedup();
    unmet
}

/// Why `version` does not meet the lower bound `wanted`, if it does not.
fn at_least_unmet(wanted: &str, version: Option<CaVersion>, why: &str) -> Option<String> {
    match (CaVersion::parse(wanted), version) {
        (None, _) => Some(format!(
            "tag @{VERSION_TAG_PREFIX}{wanted} is not a version"
        )),
        (Some(w), Some(v)) if v >= w => None,
        (Some(w), Some(v)) => Some(format!("needs CA {w} or later (binary: {v}){why}")),
        (Some(w), None) => Some(format!(
            "needs CA {w} or later (the binary's version is unknown){why}"
        )),
    }
}

/// Steps that need a release because what they read or do first worked
/// there: (a regex on the step text after its keyword, the release, why).
/// A scenario with such a step is skipped against an older binary.
pub const STEP_NEEDS: [(&str, &str, &str); 2] = [
    (
        r"^the status ConfigMap (shows|follows|is rewritten) ",
        "1.30",
        "reads the status ConfigMap's YAML, CA's format from 1.30",
    ),
    (
        r#"^\d+ nodes? of "\S+" (is|are) deleted$"#,
        "1.30",
        "deletes a Node under the autoscaler, on whose instance CA 1.29's kwok provider exits",
    ),
];

/// The step with which a scenario makes its node groups Cluster API
/// MachineDeployments, whatever the run's provider.
pub const CLUSTER_API_STEP: &str = "node groups are Cluster API MachineDeployments";

/// [`STEP_NEEDS`], compiled.
static STEP_NEEDS_RE: LazyLock<Vec<(Regex, &str, &str)>> = LazyLock::new(|| {
    STEP_NEEDS
        .iter()
        .filter_map(|(re, release, why)| Regex::new(re).ok().map(|r| (r, *release, *why)))
        .collect()
});

/// Our `cluster-autoscaler` as `cargo test --workspace` builds it for a
/// test of this crate (`target/<profile>/cluster-autoscaler`, beside the
/// test's `deps/`), or the error that says how to build it.
pub fn sibling_autoscaler() -> Result<PathBuf, MissingBinary> {
    sibling_binary("autoscaler", "cluster-autoscaler")
}

/// The binary `name` of the workspace's `package` as `cargo test
/// --workspace` builds it for a test of this crate
/// (`target/<profile>/<name>`, beside the test's `deps/`).
pub fn sibling_binary(package: &'static str, name: &'static str) -> Result<PathBuf, MissingBinary> {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent().map(|d| d.join(name)))
        .filter(|p| p.is_file())
        .ok_or(MissingBinary { package, name })
}

/// A binary of ours is not built beside the test ([`sibling_binary`]).
#[derive(Debug, thiserror::Error)]
#[error(
    "target/<profile>/{name} is missing; build it first \
     (cargo build -p {package} --bin {name}, or run cargo test --workspace)"
)]
pub struct MissingBinary {
    /// The package that builds it.
    pub package: &'static str,
    /// The binary's name.
    pub name: &'static str,
}

/// Why a binary could not be probed ([`BinaryInfo::probe`]).
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// `--help` did not run.
    #[error("running {} --help: {source}", path.display())]
    Help {
        /// The executable.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Its `--help` lists no `--cloud-provider`.
    #[error(
        "{} --help lists no --cloud-provider flag: is it a Cluster Autoscaler?\n{head}",
        path.display()
    )]
    NotAnAutoscaler {
        /// The executable.
        path: PathBuf,
        /// The first lines of its `--help`.
        head: String,
    },
    /// It lacks the run's cloud provider.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// It did not start (to log its version).
    #[error("starting {}: {source}", path.display())]
    Start {
        /// The executable.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The binary's `--help` offers cloud providers, and not the one asked for.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "{} has no {provider} cloud provider (its --cloud-provider offers [{}]); upstream CA \
     builds it by default or with the {provider} build tag (kwok from 1.29)",
    path.display(),
    offered.join(",")
)]
pub struct ProviderError {
    /// The executable.
    pub path: PathBuf,
    /// The `--cloud-provider` value asked for.
    pub provider: &'static str,
    /// The values its `--help` offers.
    pub offered: Vec<String>,
}

/// A flag's value that cannot be scaled to the time scale
/// ([`scaled_flags`]).
#[derive(Debug, Clone, thiserror::Error)]
pub enum FlagError {
    /// A timing flag's value is not a duration.
    #[error("flag --{name}={value}: not a duration")]
    NotADuration {
        /// The flag.
        name: String,
        /// Its value.
        value: String,
    },
    /// A rate flag's value is not a number.
    #[error("flag --{name}={value}: not a number")]
    NotANumber {
        /// The flag.
        name: String,
        /// Its value.
        value: String,
    },
}

/// What the runner learned of the binary before the first scenario.
#[derive(Debug, Clone)]
pub struct BinaryInfo {
    /// The executable.
    pub path: PathBuf,
    /// The release it behaves as, from its start-up line.
    pub version: Option<CaVersion>,
    /// The flags its `--help` lists (without `--`).
    pub flags: BTreeSet<String>,
    /// The cloud providers its `--help` offers, when it lists them.
    pub providers: Option<Vec<String>>,
}

impl BinaryInfo {
    /// Asks the binary for its flags (`--help`) and its version (the
    /// `Cluster Autoscaler X.Y.Z` line it logs at `--v=1` as it starts; it
    /// is stopped right after).
    pub fn probe(path: &Path, provider: Provider) -> Result<Self, ProbeError> {
        let help = Command::new(path)
            .arg("--help")
            .stdin(Stdio::null())
            .output()
            .map_err(|source| ProbeError::Help {
                path: path.to_path_buf(),
                source,
            })?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&help.stdout),
            String::from_utf8_lossy(&help.stderr)
        );
        let flags = help_flags(&text);
        if !flags.contains("cloud-provider") {
            return Err(ProbeError::NotAnAutoscaler {
                path: path.to_path_buf(),
                head: text.lines().take(10).collect::<Vec<_>>().join("\n"),
            });
        }
        let mut info = Self {
            path: path.to_path_buf(),
            version: None,
            flags,
            providers: cloud_providers_offered(&text),
        };
        info.check_provider(provider)?;
        info.version = probe_version(path, provider)?;
        Ok(info)
    }

    /// Fails when the binary's `--help` lists its cloud providers and
    /// `provider` is not among them.
    pub fn check_provider(&self, provider: Provider) -> Result<(), ProviderError> {
        match &self.providers {
            Some(offered) if !offered.iter().any(|p| p == provider.flag()) => Err(ProviderError {
                path: self.path.clone(),
                provider: provider.flag(),
                offered: offered.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Whether the binary knows `--flag`.
    pub fn knows(&self, flag: &str) -> bool {
        self.flags.contains(flag)
    }

    /// Why a scenario cannot run against this binary: the flags its steps
    /// name that the binary does not know, and the releases its
    /// `@ca>=X.Y` and `@ca<X.Y` tags and [`STEP_NEEDS`] steps ask for that
    /// its version does not meet. Empty when it can run.
    pub fn unmet<'a>(
        &self,
        tags: impl IntoIterator<Item = &'a String>,
        step_texts: impl IntoIterator<Item = &'a str>,
    ) -> Vec<String> {
        let mut unmet = version_tags_unmet(tags, self.version);
        let step_texts: Vec<&str> = step_texts.into_iter().collect();
        for (re, release, why) in STEP_NEEDS_RE.iter() {
            if step_texts.iter().any(|t| re.is_match(t)) {
                let reason = at_least_unmet(release, self.version, &format!(": {why}"));
                unmet.extend(reason.filter(|r| !unmet.contains(r)));
            }
        }
        if step_texts.contains(&CLUSTER_API_STEP)
            && let Err(e) = self.check_provider(Provider::ClusterApi)
        {
            unmet.push(e.to_string());
        }
        for (pattern, why) in IN_PROCESS_STEPS {
            if step_texts.iter().any(|t| t.contains(pattern)) {
                unmet.push(why.to_string());
            }
        }
        let mut missing = BTreeSet::new();
        for text in step_texts {
            for flag in flags_named(text) {
                if !self.knows(&flag) {
                    missing.insert(flag);
                }
            }
        }
        for flag in missing {
            unmet.push(format!("needs --{flag}, which the binary does not know"));
        }
        unmet
    }
}

/// `command` in a UTS namespace of its own whose hostname is `name`, as
/// each pod of a Deployment has: upstream CA takes its leader election
/// identity from its hostname alone (`os.Hostname()`), so replicas on one
/// machine would all believe they hold the Lease. Needs `unshare` (from
/// util-linux) and the right to make namespaces (root); otherwise the
/// replica exits at once with `unshare`'s error in its log.
pub fn with_hostname(command: &tokio::process::Command, name: &str) -> tokio::process::Command {
    let std = command.as_std();
    let mut wrapped = tokio::process::Command::new("unshare");
    wrapped
        .args(["--uts", "sh", "-c", "hostname \"$0\" && exec \"$@\"", name])
        .arg(std.get_program())
        .args(std.get_args());
    for (key, value) in std.get_envs() {
        match value {
            Some(v) => wrapped.env(key, v),
            None => wrapped.env_remove(key),
        };
    }
    wrapped.kill_on_drop(true);
    wrapped
}

/// Steps only the in-process autoscaler can take (a part of their text,
/// and why a binary cannot).
pub const IN_PROCESS_STEPS: [(&str, &str); 1] = [(
    "the autoscaler's clock is",
    "sets the autoscaler's clock, and a binary reads its own machine's",
)];

/// Steps that wait for one of CA's fixed waits (a constant, not a flag), which
/// a binary counts in real time: scaled, their window would end long
/// before. They run in binary mode only at `--time-scale 1`.
pub const FIXED_WAIT_STEPS: [(&str, &str); 1] = [(
    "\"BookingExpired=True\" with reason \"CapacityReservationTimeExpired\"",
    "waits for CA's 10-minute booking of a ProvisioningRequest, a constant that a binary counts in real minutes (run it with --time-scale 1)",
)];

/// Why a scenario with these steps cannot run at `time_scale`.
pub fn fixed_wait_unmet<'a>(
    step_texts: impl IntoIterator<Item = &'a str>,
    time_scale: f64,
) -> Vec<String> {
    if time_scale <= 1.0 {
        return Vec::new();
    }
    let texts: Vec<&str> = step_texts.into_iter().collect();
    FIXED_WAIT_STEPS
        .iter()
        .filter(|(pattern, _)| texts.iter().any(|t| t.contains(pattern)))
        .map(|(_, why)| why.to_string())
        .collect()
}

/// The flag names a `--help` text lists: pflag's `      --name type  ...`
/// and `  -v, --v Level ...`, clap's `      --name <NAME>`.
pub fn help_flags(help: &str) -> BTreeSet<String> {
    help.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let line = match line.split_once(", --") {
                Some((short, rest)) if short.starts_with('-') && short.len() == 2 => rest,
                _ => line.strip_prefix("--")?,
            };
            let name: String = line
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// The `--flag` names in a step's text (`the autoscaler runs with
/// "--expander=random"`).
pub fn flags_named(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || c == '"')
        .filter_map(|word| word.strip_prefix("--"))
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect::<String>()
        })
        .filter(|name| !name.is_empty())
        .collect()
}

/// The version from the start-up line, read for up to 20 s.
fn probe_version(path: &Path, provider: Provider) -> Result<Option<CaVersion>, ProbeError> {
    let mut child = Command::new(path)
        .args([
            "--v=1",
            &format!("--cloud-provider={}", provider.flag()),
            "--kubeconfig=/nonexistent/kubeconfig",
            "--address=127.0.0.1:0",
            "--leader-elect=false",
        ])
        .env("KWOK_PROVIDER_MODE", "local")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ProbeError::Start {
            path: path.to_path_buf(),
            source,
        })?;
    let (tx, rx) = mpsc::channel();
    let readers: Vec<Box<dyn Read + Send>> = [
        child
            .stdout
            .take()
            .map(|o| Box::new(o) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|e| Box::new(e) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    .collect();
    for reader in readers {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(reader).lines().map_while(Result::ok) {
                if let Some(v) = version_in(&line) {
                    let _ = tx.send(v);
                    return;
                }
            }
        });
    }
    drop(tx);
    let version = rx.recv_timeout(Duration::from_secs(20)).ok();
    let _ = child.kill();
    let _ = child.wait();
    Ok(version)
}

/// The providers upstream's `--cloud-provider` help offers
/// (`Available values: [aws,kwok]`); `None` when the help gives no list.
fn cloud_providers_offered(help: &str) -> Option<Vec<String>> {
    let line = help
        .lines()
        .find(|l| l.trim_start().starts_with("--cloud-provider "))?;
    let (_, rest) = line.split_once("Available values: [")?;
    let (list, _) = rest.split_once(']')?;
    Some(list.split(',').map(|v| v.trim().to_string()).collect())
}

/// `Cluster Autoscaler 1.30.7` anywhere in a log line.
fn version_in(line: &str) -> Option<CaVersion> {
    let (_, rest) = line.split_once("Cluster Autoscaler ")?;
    CaVersion::parse(rest.split_whitespace().next()?)
}

/// `flags` with every timing flag divided by `scale` and every rate flag
/// multiplied by it, the defaults of the ones not given included; flags
/// `knows` rejects are left out (their defaults apply).
pub fn scaled_flags(
    flags: &[String],
    scale: f64,
    knows: impl Fn(&str) -> bool,
) -> Result<Vec<String>, FlagError> {
    let mut out = Vec::new();
    let mut given = BTreeSet::new();
    for f in flags {
        let name_value = f.strip_prefix("--").and_then(|rest| rest.split_once('='));
        let Some((name, value)) = name_value else {
            out.push(f.clone());
            continue;
        };
        if !knows(name) {
            continue;
        }
        given.insert(name.to_string());
        if TIMING_FLAGS.iter().any(|(n, _)| *n == name) {
            out.push(format!("--{name}={}", scale_duration(name, value, scale)?));
        } else if RATE_FLAGS.iter().any(|(n, _)| *n == name) {
            let v: f64 = value.parse().map_err(|_| FlagError::NotANumber {
                name: name.to_string(),
                value: value.to_string(),
            })?;
            out.push(format!("--{name}={}", scale_rate(name, v * scale)));
        } else {
            out.push(f.clone());
        }
    }
    for (name, default) in TIMING_FLAGS {
        if !given.contains(*name) && knows(name) {
            out.push(format!(
                "--{name}={}",
                scale_duration(name, default, scale)?
            ));
        }
    }
    for (name, default) in RATE_FLAGS {
        if !given.contains(*name) && knows(name) {
            out.push(format!("--{name}={}", scale_rate(name, default * scale)));
        }
    }
    Ok(out)
}

/// QPS is a float flag, burst an int.
fn scale_rate(name: &str, v: f64) -> String {
    if name.ends_with("burst") {
        format!("{}", v.ceil().max(1.0))
    } else {
        format!("{v}")
    }
}

fn scale_duration(name: &str, value: &str, scale: f64) -> Result<String, FlagError> {
    let d = simclock::parse_go_duration(value).ok_or_else(|| FlagError::NotADuration {
        name: name.to_string(),
        value: value.to_string(),
    })?;
    let mut scaled = d.div_f64(scale);
    if let Some((_, floor)) = REAL_TIME_FLOORS.iter().find(|(n, _)| *n == name) {
        scaled = scaled.max((*floor).min(d));
    }
    if !d.is_zero() && scaled < Duration::from_millis(1) {
        return Ok("1ms".into());
    }
    Ok(simclock::format_go_duration(Duration::from_millis(
        u64::try_from(scaled.as_millis()).unwrap_or(u64::MAX),
    )))
}

/// The command line and environment of the binary for a scenario.
pub fn command(
    info: &BinaryInfo,
    provider: Provider,
    kubeconfig: &Path,
    port: u16,
    flags: &[String],
    extra: &[String],
    time_scale: f64,
) -> Result<tokio::process::Command, FlagError> {
    let mut args = vec![
        format!("--cloud-provider={}", provider.flag()),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--address=127.0.0.1:{port}"),
    ];
    // One autoscaler needs no election; replicas ask for it in `extra`.
    if !extra.iter().any(|a| a.starts_with("--leader-elect=")) {
        args.push("--leader-elect=false".to_string());
    }
    args.extend(scaled_flags(flags, time_scale, |f| info.knows(f))?);
    if provider == Provider::Aws {
        args.push(crate::aws::DISCOVERY.to_string());
    }
    args.extend(extra.iter().cloned());
    let mut cmd = tokio::process::Command::new(&info.path);
    cmd.args(&args)
        .env("POD_NAMESPACE", "kube-system")
        // Upstream's kwok provider reads a kubeconfig only in local mode.
        .env("KWOK_PROVIDER_MODE", "local")
        .env("KUBECONFIG", kubeconfig)
        .kill_on_drop(true);
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const PFLAG_HELP: &str = "Usage of ./cluster-autoscaler:
      --address string                    The address to expose prometheus metrics. (default \":8085\")
      --cloud-provider string             Cloud provider type. (default \"gce\")
      --kube-client-qps float             QPS value for kubernetes client. (default 5)
      --scale-down-delay-after-add duration   How long after scale up that scale down evaluation resumes (default 10m0s)
  -v, --v Level                           number for the log level verbosity
";

    fn info(version: &str, flags: &[&str]) -> BinaryInfo {
        BinaryInfo {
            path: PathBuf::from("ca"),
            version: CaVersion::parse(version),
            flags: flags.iter().map(|f| f.to_string()).collect(),
            providers: None,
        }
    }

    #[test]
    fn the_offered_cloud_providers_are_read_from_the_help() {
        let line = |list: &str| {
            format!(
                "      --cloud-provider string    Cloud provider type. Available values: [{list}] (default \"gce\")\n"
            )
        };
        assert_eq!(
            cloud_providers_offered(&line("aws,gce,kwok")),
            Some(vec!["aws".into(), "gce".into(), "kwok".into()])
        );
        assert_eq!(
            cloud_providers_offered(&line("aws,gce")),
            Some(vec!["aws".into(), "gce".into()])
        );
        assert_eq!(
            cloud_providers_offered(
                "  --cloud-provider string   Cloud provider type. Implemented: kwok."
            ),
            None
        );
    }

    #[test]
    fn help_flags_and_versions_parse() {
        let flags = help_flags(PFLAG_HELP);
        for f in [
            "address",
            "cloud-provider",
            "kube-client-qps",
            "scale-down-delay-after-add",
            "v",
        ] {
            assert!(flags.contains(f), "{f} in {flags:?}");
        }
        assert_eq!(flags.len(), 5, "{flags:?}");
        assert_eq!(
            version_in("I1123 11:02:10.1 1 main.go:649] Cluster Autoscaler 1.30.7"),
            CaVersion::parse("1.30.7")
        );
        assert!(CaVersion::parse("1.30.7") < CaVersion::parse("1.33"));
        assert_eq!(
            CaVersion::parse("1.36.1-compatible"),
            CaVersion::parse("v1.36.1")
        );
        assert_eq!(
            flags_named(
                r#"the autoscaler runs with "--expander=random --max-node-startup-time=5m""#
            ),
            ["expander", "max-node-startup-time"]
        );
    }

    #[test]
    fn scenarios_needing_what_the_binary_lacks_are_named() {
        let old = info("1.30.7", &["expander", "cloud-provider"]);
        let tags = vec!["@ca>=1.35".to_string(), "@binary".to_string()];
        let steps = [r#"the autoscaler runs with "--max-node-startup-time=5m --expander=random""#];
        assert_eq!(
            old.unmet(&tags, steps),
            [
                "needs CA 1.35.0 or later (binary: 1.30.7)",
                "needs --max-node-startup-time, which the binary does not know"
            ]
        );
        let new = info("1.35.1", &["expander", "max-node-startup-time"]);
        assert!(new.unmet(&tags, steps).is_empty());
        let unknown = info("", &[]);
        assert_eq!(
            unknown.unmet(&tags, [])[0],
            "needs CA 1.35.0 or later (the binary's version is unknown)"
        );
        let status = [r#"the status ConfigMap shows "autoscalerStatus" = "Running""#];
        assert_eq!(
            info("1.29.5", &[]).unmet(&[], status),
            [
                "needs CA 1.30.0 or later (binary: 1.29.5): reads the status ConfigMap's YAML, CA's format from 1.30"
            ]
        );
        assert!(info("1.30.0", &[]).unmet(&[], status).is_empty());
        assert_eq!(
            STEP_NEEDS_RE.len(),
            STEP_NEEDS.len(),
            "a STEP_NEEDS regex does not compile"
        );
        let deletion = [
            r#"1 node of "pool" is deleted"#,
            r#"the deployment "web" is deleted"#,
        ];
        assert_eq!(info("1.29.5", &[]).unmet(&[], deletion).len(), 1);
    }

    #[test]
    fn only_a_booking_that_runs_its_ten_minutes_needs_real_time() {
        let expired = [
            r#"within 12 minutes the ProvisioningRequest "a" has the condition "BookingExpired=True" with reason "CapacityReservationTimeExpired""#,
        ];
        assert_eq!(fixed_wait_unmet(expired, 60.0).len(), 1);
        assert!(fixed_wait_unmet(expired, 1.0).is_empty());
        let consumed = [
            r#"within 3 minutes the ProvisioningRequest "a" has the condition "BookingExpired=True" with reason "CapacityBookingConsumed""#,
        ];
        assert!(fixed_wait_unmet(consumed, 60.0).is_empty());
    }

    #[test]
    fn an_upper_bound_tag_skips_the_release_and_later_ones() {
        let tags = vec!["@ca>=1.36".to_string(), "@ca<1.37".to_string()];
        assert!(info("1.36.1", &[]).unmet(&tags, []).is_empty());
        assert_eq!(
            info("1.37.0", &[]).unmet(&tags, []),
            ["for releases before CA 1.37.0 (the autoscaler: 1.37.0)"]
        );
        assert_eq!(
            info("1.31.5", &[]).unmet(&tags, []),
            ["needs CA 1.36.0 or later (binary: 1.31.5)"]
        );
        assert_eq!(
            version_tags_unmet(&tags, None),
            [
                "needs CA 1.36.0 or later (the binary's version is unknown)",
                "for releases before CA 1.37.0 (the binary's version is unknown)"
            ]
        );
        let bad = vec!["@ca<soon".to_string()];
        assert_eq!(
            version_tags_unmet(&bad, CaVersion::parse("1.37")),
            ["tag @ca<soon is not a version"]
        );
    }

    #[test]
    fn flags_are_scaled_and_unknown_ones_left_out() {
        let given = [
            "--scale-down-unneeded-time=3m".to_string(),
            "--expander=random".to_string(),
            "--max-node-startup-time=5m".to_string(),
        ];
        let knows = |f: &str| f != "max-node-startup-time";
        let out = scaled_flags(&given, 60.0, knows).unwrap();
        assert!(
            out.contains(&"--scale-down-unneeded-time=3s".to_string()),
            "{out:?}"
        );
        assert!(out.contains(&"--expander=random".to_string()));
        assert!(
            out.contains(&"--scan-interval=166ms".to_string()),
            "{out:?}"
        );
        assert!(
            out.contains(&"--kube-client-qps=300".to_string()),
            "{out:?}"
        );
        assert!(
            out.contains(&"--kube-client-burst=600".to_string()),
            "{out:?}"
        );
        assert!(
            !out.iter().any(|f| f.contains("max-node-startup-time")),
            "{out:?}"
        );
        assert!(
            out.contains(&"--max-pod-eviction-time=30s".to_string()),
            "{out:?}"
        );
    }
}
