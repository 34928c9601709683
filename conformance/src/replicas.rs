//! Several replicas of the autoscaler with leader election, as a
//! Deployment of two or three runs it: `Given the autoscaler runs as 2
//! replicas with leader election`. Only the replica holding the Lease
//! `kube-system/cluster-autoscaler` may act; killing it (`When the leading
//! replica is killed`) hands the Lease to another once it expires.
//!
//! Who acted when is read from the embedded API server's log of writes
//! ([`apiserver::writes`]), where each replica's client has its own name:
//! in-process, the name given to its client; a binary, the TLS endpoint
//! served for it alone. Acting is writing anything but the Lease itself
//! and Events (a replica waiting for the Lease writes neither; a killed
//! in-process replica's queued events may still drain, as they would not
//! from a killed process, and they change nothing in the cluster).
//!
//! In-process replicas run CA's default leader election timings (a 15 s
//! lease, 10 s renew deadline, 2 s retry period) on the scenario's virtual
//! clock. Binaries get real-time timings of a 4 s lease, 3 s renew
//! deadline and 1 s retry period (CA's flags), short enough for a scenario
//! at a time scale of 60 to see the hand-over.
//!
//! Killing the leader checks the Lease's holder identity too
//! ([`check_holder_identity`]): replicas that all took one name would each
//! believe they hold it.

use std::sync::Arc;
use std::time::Duration;

use apiserver::writes::Write;
use autoscaler::leaderelection::LeaderElection;
use harness::cluster::Cluster;

use crate::world::autoscaler::build_in_process;
use crate::world::provider::Provider;

/// The Lease's namespace and name: CA's defaults.
pub const LEASE: (&str, &str) = ("kube-system", "cluster-autoscaler");

/// The leader election flags of a binary replica (real time, unscaled).
pub const BINARY_FLAGS: [&str; 4] = [
    "--leader-elect=true",
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=1s",
];

/// Starts an in-process replica named `name`: it waits for the Lease,
/// then builds the autoscaler (its cache, its provider) and runs until it
/// loses the Lease or its task is aborted (killed).
pub fn spawn_in_process(
    cluster: &Cluster,
    clock: &simclock::Clock,
    provider: Provider,
    flags: Vec<String>,
    name: String,
) -> tokio::task::JoinHandle<()> {
    let client = cluster.client_under_test_named(&name);
    let clock = clock.clone();
    let election = LeaderElection {
        namespace: LEASE.0.into(),
        name: LEASE.1.into(),
        identity: name.clone(),
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    };
    tokio::spawn(async move {
        election.acquire(&client, &clock).await;
        let built = match build_in_process(client.clone(), &clock, provider, &flags).await {
            Ok(b) => b,
            Err(e) => {
                eprintln!("replica {name}: {e}");
                return;
            }
        };
        let lost = async {
            let why = election.hold(&client, &clock).await;
            eprintln!("replica {name}: {why}");
        };
        built.autoscaler.run_until(lost).await;
    })
}

/// The client that took or renewed the Lease last: the leader. (A
/// replica's attempt that lost to another's conflicts and does not count.)
pub fn leader(writes: &[Write]) -> Option<Arc<str>> {
    writes
        .iter()
        .rev()
        .find(|w| {
            w.done && w.resource == "leases" && matches!(w.verb, "create" | "update" | "patch")
        })
        .map(|w| w.client.clone())
}

/// What a replica did in its turn: its writes from the first to the last.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// The replica's client.
    pub client: Arc<str>,
    /// Its first and last write.
    pub from: std::time::SystemTime,
    /// Its last write.
    pub to: std::time::SystemTime,
    /// How many writes.
    pub writes: usize,
}

/// Whether a write is acting on the cluster (not the Lease, not an Event;
/// attempts the store refused count: the replica tried to act).
fn acts(w: &Write) -> bool {
    !matches!(w.resource.as_str(), "leases" | "events")
}

/// The replicas' turns at acting, in order; an error when a replica acted
/// again after another had (two acted in the same period), naming both
/// and when.
pub fn turns(writes: &[Write]) -> Result<Vec<Turn>, String> {
    let mut turns: Vec<Turn> = Vec::new();
    for w in writes.iter().filter(|w| acts(w)) {
        match turns.last_mut() {
            Some(t) if t.client == w.client => {
                t.to = w.at;
                t.writes += 1;
            }
            _ => {
                if let Some(earlier) = turns.iter().find(|t| t.client == w.client) {
                    let other = turns.last().map_or("?", |t| &*t.client);
                    return Err(format!(
                        "replica {} acted again ({} {}{}{}) after replica {other} had acted; its earlier turn was {} writes",
                        w.client,
                        w.verb,
                        w.resource,
                        if w.name.is_empty() { "" } else { " " },
                        w.name,
                        earlier.writes
                    ));
                }
                turns.push(Turn {
                    client: w.client.clone(),
                    from: w.at,
                    to: w.at,
                    writes: 1,
                });
            }
        }
    }
    Ok(turns)
}

/// Who holds the Lease, against the replica the log of writes names.
pub enum Holder {
    /// The leading replica (or a replica without a hostname of its own).
    Leader,
    /// Another live replica: the Lease changed hands since the log was read.
    Moved,
}

/// The Lease's holder must be the leading replica (`hosts[leader]`) under
/// its own name: its hostname, alone (CA 1.30: `os.Hostname()`) or with a
/// uniquifier after `_` (client-go's `<hostname>_<UUID>`). Replicas that
/// all took one name (an inherited `$HOSTNAME`, say) would each believe
/// they hold the Lease.
pub async fn check_holder_identity(
    client: &kube::Client,
    hosts: &[Option<&str>],
    leader: usize,
) -> Result<Holder, String> {
    let Some(Some(hostname)) = hosts.get(leader) else {
        return Ok(Holder::Leader);
    };
    let (ns, name) = LEASE;
    let lease =
        kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), ns)
            .get(name)
            .await
            .map_err(|e| format!("reading the Lease {ns}/{name}: {e}"))?;
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    if holder_is_host(&holder, hostname) {
        Ok(Holder::Leader)
    } else if hosts.iter().flatten().any(|h| holder_is_host(&holder, h)) {
        Ok(Holder::Moved)
    } else {
        Err(format!(
            "the Lease {ns}/{name} is held as {holder:?}, but its holder is the replica whose hostname is {hostname:?}: a leader election identity is the hostname, or the hostname, `_` and a uniquifier"
        ))
    }
}

/// Whether a holder identity names the host `hostname`.
fn holder_is_host(holder: &str, hostname: &str) -> bool {
    holder == hostname
        || holder
            .strip_prefix(hostname)
            .is_some_and(|rest| rest.starts_with('_'))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::time::SystemTime;

    fn write(client: &str, verb: &'static str, resource: &str, secs: u64) -> Write {
        Write {
            at: SystemTime::UNIX_EPOCH + Duration::from_secs(secs),
            client: client.into(),
            verb,
            resource: resource.into(),
            namespace: "kube-system".into(),
            name: if resource == "leases" {
                LEASE.1.into()
            } else {
                String::new()
            },
            done: true,
        }
    }

    #[test]
    fn turns_follow_each_other_and_leases_and_events_do_not_count() {
        let log = [
            write("a", "update", "leases", 1),
            write("a", "create", "nodes", 2),
            write("b", "create", "events", 3),
            write("a", "update", "configmaps", 4),
            write("b", "update", "leases", 20),
            write("b", "create", "nodes", 21),
            Write {
                done: false,
                ..write("a", "update", "leases", 22)
            },
        ];
        let t = turns(&log).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!((&*t[0].client, t[0].writes), ("a", 2));
        assert_eq!((&*t[1].client, t[1].writes), ("b", 1));
        assert_eq!(leader(&log).as_deref(), Some("b"), "a's refused attempt");
    }

    #[test]
    fn a_replica_acting_again_after_another_is_two_acting_at_once() {
        let log = [
            write("a", "create", "nodes", 1),
            write("b", "create", "nodes", 2),
            write("a", "patch", "nodes", 3),
        ];
        let e = turns(&log).unwrap_err();
        assert!(e.contains("replica a acted again (patch nodes)"), "{e}");
        assert!(e.contains("after replica b"), "{e}");
    }

    #[test]
    fn a_holder_identity_is_the_hostname_alone_or_with_a_uniquifier() {
        assert!(holder_is_host("replica-0", "replica-0"));
        assert!(holder_is_host(
            "replica-0_0f8fad5b-d9cb-469f-a165-70867728950e",
            "replica-0"
        ));
        assert!(!holder_is_host(
            "vm_0f8fad5b-d9cb-469f-a165-70867728950e",
            "replica-0"
        ));
        assert!(!holder_is_host("replica-01", "replica-0"));
    }
}
