//! The autoscaler's flags of a what-if: those of the Cluster Autoscaler
//! Deployment in the input (or given), less what the what-if supplies
//! itself (the cloud provider, the connection, logging, leader election,
//! node group discovery), with each side's own flags over them.

use std::collections::BTreeSet;

use apimachinery::json::Lookup;
use serde_json::Value;

use crate::groups::NodesFlag;
use crate::input::{Input, Object};
use crate::kinds::Kind;

/// Flags the what-if sets or that mean nothing in it, and why.
const SUPPLIED: &[(&str, &str)] = &[
    (
        "cloud-provider",
        "the what-if's groups are kwok node groups",
    ),
    ("cloud-config", "the what-if's groups are kwok node groups"),
    (
        "node-group-auto-discovery",
        "groups are inferred from node labels (or --group-label)",
    ),
    ("kubeconfig", "the what-if connects to its own cluster"),
    ("kubernetes", "the what-if connects to its own cluster"),
    (
        "kube-api-content-type",
        "the what-if connects to its own cluster",
    ),
    (
        "kube-client-qps",
        "the what-if's API server has no rate limit",
    ),
    (
        "kube-client-burst",
        "the what-if's API server has no rate limit",
    ),
    ("leader-elect", "one autoscaler runs per side"),
    (
        "leader-elect-lease-duration",
        "one autoscaler runs per side",
    ),
    (
        "leader-elect-renew-deadline",
        "one autoscaler runs per side",
    ),
    ("leader-elect-retry-period", "one autoscaler runs per side"),
    ("leader-elect-resource-lock", "one autoscaler runs per side"),
    ("leader-elect-resource-name", "one autoscaler runs per side"),
    (
        "leader-elect-resource-namespace",
        "one autoscaler runs per side",
    ),
    ("lease-resource-name", "one autoscaler runs per side"),
    ("address", "nothing is served"),
    ("profiling", "nothing is served"),
    ("v", "logs are not kept"),
    ("logtostderr", "logs are not kept"),
    ("alsologtostderr", "logs are not kept"),
    ("stderrthreshold", "logs are not kept"),
    ("log-file", "logs are not kept"),
    ("log-dir", "logs are not kept"),
    ("log-file-max-size", "logs are not kept"),
    ("logging-format", "logs are not kept"),
    ("namespace", "the autoscaler's objects live in kube-system"),
];

/// One flag: its name (without dashes) and value, if any.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Flag {
    /// The name, without the leading dashes.
    pub name: String,
    /// The value (`None` for a bare boolean flag).
    pub value: Option<String>,
}

impl std::fmt::Display for Flag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.value {
            Some(v) => write!(f, "--{}={v}", self.name),
            None => write!(f, "--{}", self.name),
        }
    }
}

/// Why flags were refused.
#[derive(Debug, thiserror::Error)]
pub enum FlagsError {
    /// A token is not a flag.
    #[error("{origin}: {token:?} is not a flag (expected --name=value)")]
    NotAFlag {
        /// Where the flags came from.
        origin: String,
        /// The token.
        token: String,
    },
    /// A `--nodes` value is wrong.
    #[error("{origin}: {source}")]
    Nodes {
        /// Where the flags came from.
        origin: String,
        /// Why.
        source: crate::groups::GroupError,
    },
}

/// Flags in order, normalised to `--name=value`; `--nodes` kept apart.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// The flags passed to the autoscaler.
    pub flags: Vec<Flag>,
    /// `--nodes MIN:MAX:NAME` values (the groups' bounds).
    pub nodes: Vec<NodesFlag>,
    /// Flags left out, each with why.
    pub left_out: Vec<(Flag, &'static str)>,
}

impl Flags {
    /// Parses `tokens` (`--a=1 --b 2 --c`), which came from `origin`.
    pub fn parse(origin: &str, tokens: &[String]) -> Result<Flags, FlagsError> {
        let mut out = Flags::default();
        let mut i = 0;
        while i < tokens.len() {
            let token = &tokens[i];
            let Some(body) = token.strip_prefix("--").or_else(|| token.strip_prefix('-')) else {
                return Err(FlagsError::NotAFlag {
                    origin: origin.into(),
                    token: token.clone(),
                });
            };
            let (name, value) = match body.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => match tokens.get(i + 1).filter(|t| !t.starts_with('-')) {
                    Some(v) => {
                        i += 1;
                        (body.to_string(), Some(v.clone()))
                    }
                    None => (body.to_string(), None),
                },
            };
            i += 1;
            let flag = Flag { name, value };
            if flag.name == "nodes" {
                let value = flag.value.clone().unwrap_or_default();
                let parsed = value.parse().map_err(|source| FlagsError::Nodes {
                    origin: origin.into(),
                    source,
                })?;
                out.nodes.push(parsed);
            } else if let Some((_, why)) = SUPPLIED.iter().find(|(n, _)| *n == flag.name) {
                out.left_out.push((flag, why));
            } else {
                out.flags.push(flag);
            }
        }
        Ok(out)
    }

    /// These flags with `side`'s over them: a flag `side` gives replaces
    /// the same flag here; `--nodes` values of `side` replace those for
    /// the same group.
    pub fn with(&self, side: &Flags) -> Flags {
        let replaced: BTreeSet<&str> = side.flags.iter().map(|f| f.name.as_str()).collect();
        let mut flags: Vec<Flag> = self
            .flags
            .iter()
            .filter(|f| !replaced.contains(f.name.as_str()))
            .cloned()
            .collect();
        flags.extend(side.flags.iter().cloned());
        let groups: BTreeSet<&str> = side.nodes.iter().map(|n| n.name.as_str()).collect();
        let mut nodes: Vec<NodesFlag> = self
            .nodes
            .iter()
            .filter(|n| !groups.contains(n.name.as_str()))
            .cloned()
            .collect();
        nodes.extend(side.nodes.iter().cloned());
        let mut left_out = self.left_out.clone();
        left_out.extend(side.left_out.iter().cloned());
        Flags {
            flags,
            nodes,
            left_out,
        }
    }

    /// The flags as the autoscaler's arguments.
    pub fn args(&self) -> Vec<String> {
        self.flags.iter().map(Flag::to_string).collect()
    }

    /// The flags in a canonical order, to tell two sets apart.
    pub fn canonical(&self) -> (Vec<Flag>, Vec<String>) {
        let mut flags = self.flags.clone();
        flags.sort();
        let mut nodes: Vec<String> = self.nodes.iter().map(NodesFlag::to_string).collect();
        nodes.sort();
        (flags, nodes)
    }
}

/// The Cluster Autoscaler of the input: a Deployment (else a Pod) with a
/// container whose image or arguments are the Cluster Autoscaler's.
#[derive(Debug, Clone)]
pub struct Deployed {
    /// `Deployment kube-system/cluster-autoscaler`.
    pub object: String,
    /// The container's arguments after the program.
    pub args: Vec<String>,
}

/// Finds the autoscaler's Deployment (or Pod) in `input`.
pub fn deployed(input: &Input) -> Option<Deployed> {
    let find = |kind: Kind, containers: &'static str| {
        input.of(kind).find_map(|o: &Object| {
            let list = o.value.lookup(containers)?.as_array()?;
            list.iter().find_map(|c| {
                let args = container_args(c);
                let image = c.get("image").and_then(Value::as_str).unwrap_or("");
                let is_ca = image.contains("cluster-autoscaler")
                    || args.iter().any(|a| a.starts_with("--cloud-provider"));
                is_ca.then(|| Deployed {
                    object: o.describe(),
                    args,
                })
            })
        })
    };
    find(Kind::Deployment, "/spec/template/spec/containers")
        .or_else(|| find(Kind::Pod, "/spec/containers"))
}

/// A container's arguments: its command after the program, then its args.
fn container_args(container: &Value) -> Vec<String> {
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let command = strings(container.get("command"));
    let mut args: Vec<String> = command
        .into_iter()
        .skip_while(|t| !t.starts_with('-'))
        .collect();
    args.extend(strings(container.get("args")));
    args
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn tokens(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn flags_are_normalised_and_the_supplied_ones_left_out() {
        let f = Flags::parse(
            "test",
            &tokens("--cloud-provider=aws --nodes 1:10:ng --scale-down-unneeded-time 5m --v=4 --balance-similar-node-groups"),
        )
        .unwrap();
        assert_eq!(
            f.args(),
            vec![
                "--scale-down-unneeded-time=5m",
                "--balance-similar-node-groups"
            ]
        );
        assert_eq!(f.nodes, vec!["1:10:ng".parse().unwrap()]);
        let left: Vec<String> = f.left_out.iter().map(|(f, _)| f.to_string()).collect();
        assert_eq!(left, vec!["--cloud-provider=aws", "--v=4"]);
        assert!(Flags::parse("test", &tokens("scale")).is_err());
    }

    #[test]
    fn a_sides_flags_replace_the_same_flags() {
        let base = Flags::parse("base", &tokens("--a=1 --b=2 --nodes=1:3:x")).unwrap();
        let side = Flags::parse("side", &tokens("--b=3 --nodes=0:5:x")).unwrap();
        let merged = base.with(&side);
        assert_eq!(merged.args(), vec!["--a=1", "--b=3"]);
        assert_eq!(merged.nodes, vec!["0:5:x".parse().unwrap()]);
    }

    #[test]
    fn the_autoscaler_is_found_by_its_image_or_its_flags() {
        let mut input = Input::default();
        input
            .read_text(
                "ca.yaml",
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: cluster-autoscaler, namespace: kube-system}\nspec:\n  template:\n    spec:\n      containers:\n      - name: ca\n        image: registry.k8s.io/autoscaling/cluster-autoscaler:v1.31.5\n        command: [./cluster-autoscaler, --v=4, --expander=least-waste]\n",
            )
            .unwrap();
        let d = deployed(&input).unwrap();
        assert_eq!(d.object, "Deployment kube-system/cluster-autoscaler");
        assert_eq!(d.args, vec!["--v=4", "--expander=least-waste"]);
    }
}
