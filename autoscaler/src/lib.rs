//! `cluster-autoscaler`: a drop-in replacement for the upstream Kubernetes
//! Cluster Autoscaler (CA).
//!
//! The modules mirror upstream CA's packages, so that a CA engineer finds
//! their way at once. Data flows in this order each loop ([`core`], a short
//! list of named steps over an [`context::AutoscalingContext`]):
//!
//! | ours | upstream | what |
//! | --- | --- | --- |
//! | [`config`] | `config`, `main.go` flags, `utils/scheduler` | the flags (the FAQ's table is the contract), the grouped `--help`, `provider`: the one list of implemented providers (`kwok`, `clusterapi`, `aws`), and `scheduler`: the `--scheduler-config-file` profile |
//! | [`cache`] | informers and listers | nodes, pods, PDBs and controllers from watches |
//! | [`cloudprovider`] | `cloudprovider` | node groups and the providers; `builder` re-exports the list of implemented providers |
//! | [`clusterstate`] | `clusterstate` | readiness, unregistered instances, upcoming nodes, backoff, health; the notices and cluster gauges it reports |
//! | [`simulator`] | `simulator` | the forkable snapshot (with DRA's slices and claims) and the drainability rules; template-versus-node device comparison |
//! | [`processors`] | `processors` (`customresources`, `nodeinfosprovider`, `pods`, `podinjection`, `nodegroups`, `status`), `core/podlistprocessor` | the seams of the loop: nodes unready for their DRA devices or CSI drivers, template nodes of every group, the pod-list processor chain (expendable, draining nodes' pods, filter out schedulable, DaemonSet pods; proactive scale-up's fake pods), node-group list processors, the scale-up status processors (the pods' events) |
//! | [`provisioningrequest`] | `provisioningrequest`, `processors/provreq` | ProvisioningRequests: the API, the classes (check-capacity, best-effort-atomic), the conditions, the injected and booked pods |
//! | [`capacitybuffer`] | `capacitybuffer`, `processors/capacitybuffer` | CapacityBuffers: the API, the controller (status, managed PodTemplate, ResourceQuota cut), the fake pods |
//! | [`resourcequotas`] | `resourcequotas` | CapacityQuotas: the API, the controller (`Valid`, `status.used`), the quotas scale-up enforces |
//! | [`scaleup`] | `core/scaleup`, `estimator`, `processors/nodegroupset` | pending pods, equivalence, estimator, limits, balancing, plan, the one executor, min-size enforcement |
//! | [`expander`] | `expander` | choosing among options; the priority expander's ConfigMap |
//! | [`scaledown`] | `core/scaledown` | eligibility, unneeded, selection, soft taints, cooldown, actuation (drain, batching, delete), the removal-latency and skipped-evaluation trackers |
//! | [`core`] | `core/static_autoscaler.go` | the loop and its housekeeping |
//! | [`taints`] | `utils/taints` | ToBeDeleted, DeletionCandidate and startup taints |
//! | [`gpu`] | `utils/gpu` | the vendors' GPU resources; GPU pods and GPU nodes |
//! | [`events`], [`status`] | `utils/events`, `clusterstate/utils` | events with CA's typed reasons, the queue and the pod event budget; the status ConfigMap |
//! | [`metrics`], [`server`] | `metrics` | `/metrics`, `/health-check` and `/decisions` |
//! | [`debuggingsnapshot`], [`profiling`] | `debuggingsnapshot`, pprof routes | `/snapshotz` (what the next loop saw), `/debug/pprof/` |
//! | [`decisions`] | (none) | the decision record of a loop, served at `/decisions` |
//! | [`leaderelection`] | client-go leader election | the Lease |
//! | [`client`] | client-go's request retries | 429 and 5xx with `Retry-After` retried, as client-go does |
//! | [`inprocess`] | (none) | the autoscaler as a library beside an embedded cluster (tests and the conformance suite) |
//!
//! Outcomes are typed where CA names them: [`scaleup::ScaleUpStatus`],
//! [`scaledown::Unremovable`] and [`scaledown::UnremovableReason`],
//! [`events::EventReason`], [`scaledown::actuation::DeletionError`]; each
//! renders CA's text in one place. The predicates the scheduler and the
//! simulator share are in the `predicates` crate; label selectors and name
//! rules in `apimachinery`; the clock in `simclock`.
//!
//! The modules form no cycle: the low ones (`config`, `cache`,
//! `cloudprovider`, `simulator`, `taints`, `gpu`, `events`, `metrics`) know
//! nothing of the loop; `context` gathers them; the steps (`clusterstate`,
//! `processors`, `scaleup`, `scaledown`, `expander`) take a context; `core`
//! calls the steps and writes the `decisions` record and the `status`.

/// The upstream Cluster Autoscaler release whose behaviour (flags, defaults,
/// texts) this autoscaler follows. Logged at start-up the way CA logs its
/// version (`Cluster Autoscaler <version>`), where the conformance suite
/// reads it to decide which version-tagged scenarios apply.
pub const CA_VERSION: &str = "1.37.0";

/// Declares a fieldless enum whose variants are upstream CA's names, with
/// the list of all of them and their text, so that each set of names (event
/// reasons, unremovable reasons...) is written once.
macro_rules! ca_names {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$vmeta:meta])* $variant:ident,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant,)+];

            /// Upstream's name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => stringify!($variant),)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub mod cache;
pub mod capacitybuffer;
pub mod client;
pub mod cloudprovider;
pub mod clusterstate;
pub mod config;
pub mod context;
pub mod core;
pub mod crd;
pub mod debuggingsnapshot;
pub mod decisions;
pub mod events;
pub mod expander;
pub mod gpu;
pub mod inprocess;
pub mod leaderelection;
pub mod metrics;
pub mod processors;
pub mod profiling;
pub mod provisioningrequest;
pub mod resourcequotas;
pub mod scaledown;
pub mod scaleup;
pub mod server;
pub mod simulator;
pub mod status;
pub mod taints;
