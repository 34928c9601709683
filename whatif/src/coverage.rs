//! The coverage table printed for every load: each kind the what-if
//! knows, how many objects of it the input held and what was done with
//! them; what is missing and what that means for the run; what was
//! derived or defaulted instead; and what the input held that the what-if
//! does not use. Nothing is filled in silently.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::flags::Deployed;
use crate::groups::{Bounds, Grouping};
use crate::input::{Format, Input};
use crate::kinds::Kind;
use crate::plan::{Dropped, Plan};

/// One kind's row.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// The kind, or what was derived (`node group bounds`).
    pub what: String,
    /// Objects read.
    pub count: usize,
    /// How the run has it.
    pub status: Status,
    /// What it means for the run.
    pub note: String,
}

/// How the run has a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Created in the cluster as read.
    Loaded,
    /// Read and used, not created.
    Read,
    /// Made from other objects.
    Derived,
    /// Not in the input: a default stands in.
    Defaulted,
    /// Not in the input.
    Missing,
    /// A live cluster would not list them.
    Unreadable,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Status::Loaded => "loaded",
            Status::Read => "read",
            Status::Derived => "derived",
            Status::Defaulted => "defaulted",
            Status::Missing => "missing",
            Status::Unreadable => "unreadable",
        })
    }
}

/// What was read and how it was used.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Coverage {
    /// Each file and its form.
    pub files: Vec<(String, Format)>,
    /// One row per kind, then the derived rows.
    pub rows: Vec<Row>,
    /// Objects of kinds the what-if does not use, by kind.
    pub unused: BTreeMap<String, usize>,
    /// What the input held that the cluster will not.
    pub dropped: Dropped,
    /// Objects read twice.
    pub duplicates: usize,
    /// Upcoming nodes of a `/snapshotz`, left out.
    pub upcoming_nodes: usize,
    /// Owners made from their pods, by kind.
    pub derived_owners: BTreeMap<String, usize>,
    /// Nodes in no group.
    pub ungrouped_nodes: Vec<String>,
    /// Flags of the input's autoscaler the what-if leaves out, and why.
    pub flags_left_out: Vec<String>,
}

/// What a missing kind means for the run.
fn when_missing(kind: Kind) -> &'static str {
    match kind {
        Kind::Namespace => "made for the namespaces the objects name",
        Kind::PriorityClass => "pods keep the priority they carry (spec.priority)",
        Kind::Node => "groups come from /snapshotz templates alone",
        Kind::PodDisruptionBudget => "no budget limits evictions: drains are unhindered",
        Kind::Deployment | Kind::ReplicaSet | Kind::StatefulSet | Kind::Job => {
            "pods whose owner is missing are not recreated when evicted"
        }
        Kind::DaemonSet => "new nodes get no DaemonSet pods",
        Kind::ConfigMap => "no priority expander ConfigMap",
        Kind::CsiNode => "no volume attach limits per node",
        Kind::DeviceClass
        | Kind::ResourceSlice
        | Kind::ResourceClaimTemplate
        | Kind::ResourceClaim => "no DRA devices",
        Kind::Pod => "no workload: nothing to schedule or drain",
        Kind::PodTemplate => "ProvisioningRequests and CapacityBuffers name no pods",
        Kind::CapacityQuota => "no quota limits scale-ups",
        Kind::CapacityBuffer => "no spare capacity is kept",
        Kind::ProvisioningRequest => "no capacity is asked for all at once",
    }
}

impl Coverage {
    /// The coverage of a load.
    pub fn new(
        input: &Input,
        plan: &Plan,
        grouping: &Grouping,
        deployed: Option<&Deployed>,
        flags_left_out: Vec<String>,
    ) -> Coverage {
        let snapshotz = input.files.iter().any(|(_, f)| *f == Format::Snapshotz);
        let mut rows = Vec::new();
        for kind in Kind::ALL {
            let derived = input.derived.get(kind.name()).copied().unwrap_or(0);
            let count = input.of(kind).count() - derived;
            let (status, note) = match kind {
                _ if derived > 0 => (
                    if count == 0 {
                        Status::Derived
                    } else {
                        Status::Loaded
                    },
                    format!("{derived} more made from the pods that name them"),
                ),
                _ if count == 0 && snapshotz && kind == Kind::PodDisruptionBudget => (
                    Status::Missing,
                    "a /snapshotz holds none: no budget limits evictions".to_string(),
                ),
                _ if count == 0 && input.unreadable.contains_key(kind.name()) => (
                    Status::Unreadable,
                    format!(
                        "the cluster would not list them ({}): {}",
                        input.unreadable[kind.name()],
                        when_missing(kind)
                    ),
                ),
                _ if count == 0 => (Status::Missing, when_missing(kind).to_string()),
                Kind::ConfigMap => (
                    Status::Read,
                    "the priority expander's only; others are not used".to_string(),
                ),
                Kind::Pod => (
                    Status::Loaded,
                    format!(
                        "{} bound where they were, {} pending",
                        plan.bound_pods, plan.pending_pods
                    ),
                ),
                Kind::Node => (
                    Status::Loaded,
                    format!(
                        "as kwok nodes; {} in node groups, {} in none",
                        count - grouping.ungrouped.len(),
                        grouping.ungrouped.len()
                    ),
                ),
                _ => (Status::Loaded, String::new()),
            };
            rows.push(Row {
                what: kind.name().into(),
                count,
                status,
                note,
            });
        }
        let defaulted: Vec<&str> = grouping
            .groups
            .iter()
            .filter(|g| g.bounds == Bounds::Defaulted)
            .map(|g| g.name.as_str())
            .collect();
        rows.push(Row {
            what: "node group bounds".into(),
            count: grouping.groups.len(),
            status: if defaulted.is_empty() {
                Status::Read
            } else {
                Status::Defaulted
            },
            note: if defaulted.is_empty() {
                "from --nodes or the kwok provider's templates".into()
            } else {
                format!(
                    "0 to twice today's size for {} (give --nodes MIN:MAX:GROUP)",
                    defaulted.join(", ")
                )
            },
        });
        let from_nodes = grouping
            .groups
            .iter()
            .filter(|g| g.template_from.starts_with("node "))
            .count();
        rows.push(Row {
            what: "node group templates".into(),
            count: grouping.groups.len(),
            status: if from_nodes == grouping.groups.len() {
                Status::Derived
            } else {
                Status::Read
            },
            note: format!(
                "{from_nodes} made from a node of the group, {} the autoscaler's own",
                grouping.groups.len() - from_nodes
            ),
        });
        rows.push(Row {
            what: "autoscaler flags".into(),
            count: usize::from(deployed.is_some()),
            status: if deployed.is_some() {
                Status::Read
            } else {
                Status::Missing
            },
            note: match deployed {
                Some(d) => format!("from {}", d.object),
                None => "no Cluster Autoscaler in the input: its defaults, and --flags".into(),
            },
        });
        if snapshotz {
            rows.push(Row {
                what: "pods that fit no node".into(),
                count: 0,
                status: Status::Missing,
                note: "a /snapshotz lists only pending pods that fit a node".into(),
            });
        }
        Coverage {
            files: input.files.clone(),
            rows,
            unused: input.unused.clone(),
            dropped: plan.dropped.clone(),
            duplicates: input.duplicates,
            upcoming_nodes: input.upcoming,
            derived_owners: input.derived.clone(),
            ungrouped_nodes: grouping.ungrouped.clone(),
            flags_left_out,
        }
    }

    /// The table and the lists under it, as Markdown.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        for (f, format) in &self.files {
            out.push_str(&format!("- `{f}` ({format})\n"));
        }
        out.push_str("\n| kind | objects | | what it means |\n|---|---:|---|---|\n");
        for r in &self.rows {
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                r.what, r.count, r.status, r.note
            ));
        }
        out.push('\n');
        if !self.unused.is_empty() {
            let list: Vec<String> = self
                .unused
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            out.push_str(&format!("- not used: {}\n", list.join(", ")));
        }
        let d = &self.dropped;
        let counted = [
            (d.finished_pods, "finished pods not loaded"),
            (d.terminating, "objects being deleted, not loaded"),
            (
                d.config_maps,
                "ConfigMaps other than the priority expander's, not loaded",
            ),
            (
                d.not_ready_nodes,
                "nodes not Ready in the input, Ready here",
            ),
            (self.duplicates, "objects read twice, the first kept"),
            (
                self.upcoming_nodes,
                "upcoming nodes of the /snapshotz (the loop's own), left out",
            ),
        ];
        for (n, what) in counted.into_iter().filter(|(n, _)| *n > 0) {
            out.push_str(&format!("- {what}: {n}\n"));
        }
        if !self.derived_owners.is_empty() {
            let list: Vec<String> = self
                .derived_owners
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            out.push_str(&format!(
                "- owners made from their pods (so that evicted pods come back): {}\n",
                list.join(", ")
            ));
        }
        if !d.owners_missing.is_empty() {
            let list: Vec<String> = d
                .owners_missing
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            out.push_str(&format!(
                "- owner references to objects not in the input, left out: {}\n",
                list.join(", ")
            ));
        }
        if !self.ungrouped_nodes.is_empty() {
            out.push_str(&format!(
                "- nodes in no group (kept, never scaled): {}\n",
                self.ungrouped_nodes.join(", ")
            ));
        }
        for f in &self.flags_left_out {
            out.push_str(&format!("- flag left out: {f}\n"));
        }
        out
    }
}
