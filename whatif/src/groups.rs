//! Node groups inferred from the labels the common platforms put on
//! nodes, or from a label the operator names; their size bounds from
//! `--nodes MIN:MAX:NAME` flags, else defaulted (and said so); their
//! templates from `/snapshotz`'s `TemplateNodes` when the input has them,
//! else from a node of the group, as the autoscaler builds one from a real
//! node.
//!
//! A group's nodes must be alike for a template to stand for them: a
//! group whose nodes have more than one instance type (a Karpenter
//! NodePool always may) is split by instance type.

use std::collections::BTreeMap;

use apimachinery::json::Lookup;
use serde_json::{Map, Value, json};

use harness::kwok_provider::{GROUP_LABEL, GROUP_NAME_ANNOTATION, size_annotation};

use crate::input::{Input, Object};
use crate::kinds::Kind;

/// The labels that name a node's group on each platform, in the order
/// they are tried.
pub const PLATFORM_LABELS: &[(&str, &str)] = &[
    (GROUP_LABEL, "kwok node group"),
    (
        "cluster.x-k8s.io/deployment-name",
        "Cluster API MachineDeployment",
    ),
    ("cluster.x-k8s.io/set-name", "Cluster API MachineSet"),
    ("eks.amazonaws.com/nodegroup", "EKS managed node group"),
    ("alpha.eksctl.io/nodegroup-name", "eksctl node group"),
    ("karpenter.sh/nodepool", "Karpenter NodePool"),
    ("karpenter.sh/provisioner-name", "Karpenter Provisioner"),
    ("cloud.google.com/gke-nodepool", "GKE node pool"),
    ("kubernetes.azure.com/agentpool", "AKS agent pool"),
    ("agentpool", "AKS agent pool"),
    ("kops.k8s.io/instancegroup", "kops instance group"),
];

/// The annotation Cluster API puts on a Node: the Machine's owner (a
/// MachineSet), when no label names the group.
const CAPI_OWNER_NAME: &str = "cluster.x-k8s.io/owner-name";
const CAPI_OWNER_KIND: &str = "cluster.x-k8s.io/owner-kind";

/// The labels of a node's instance type (the first present is read).
const INSTANCE_TYPE_LABELS: &[&str] = &[
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
];

/// Taints that say how a node is now, not what its group's nodes are
/// (the node lifecycle's, and the autoscaler's own).
const STATE_TAINT_PREFIXES: &[&str] = &[
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "ToBeDeletedByClusterAutoscaler",
    "DeletionCandidateOfClusterAutoscaler",
];

/// Why the node groups could not be inferred.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// `--group-label` names a label no node has.
    #[error("--group-label {key}: no node has this label (labels on the nodes: {seen})")]
    LabelMatchesNoNode {
        /// The label key.
        key: String,
        /// The label keys the nodes have.
        seen: String,
    },
    /// `--nodes` names no group.
    #[error("--nodes {flag}: no node group {name} (groups: {known})")]
    UnknownGroup {
        /// The flag's value.
        flag: String,
        /// The name in it.
        name: String,
        /// The groups inferred.
        known: String,
    },
    /// A `--nodes` value is not `MIN:MAX:NAME`.
    #[error("--nodes {flag}: expected MIN:MAX:NAME with MIN <= MAX, e.g. 1:10:workers")]
    BadBounds {
        /// The flag's value.
        flag: String,
    },
}

/// Where a group's size bounds came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Bounds {
    /// A `--nodes MIN:MAX:NAME` flag (the autoscaler's, or given).
    NodesFlag,
    /// The kwok provider's template annotations (`min-count`,
    /// `max-count`).
    Template,
    /// None given: 0 to twice the group's size (at least 1).
    Defaulted,
}

/// A node group of the what-if.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Group {
    /// Its name (a label value: the kwok provider's group name).
    pub name: String,
    /// How it was recognised (`EKS managed node group`, `--group-label
    /// KEY`, `/snapshotz template`).
    pub platform: String,
    /// `key=value` of the label that made it (and the instance type when
    /// it was split by one).
    pub selector: String,
    /// Its nodes, by name.
    pub nodes: Vec<String>,
    /// Minimum size.
    pub min: usize,
    /// Maximum size.
    pub max: usize,
    /// Where min and max came from.
    pub bounds: Bounds,
    /// Where the template came from.
    pub template_from: String,
    /// The template node, as the kwok provider reads it.
    #[serde(skip)]
    pub template: Value,
    /// The instance type of its nodes, when its label's nodes were split
    /// by instance type.
    #[serde(skip)]
    split_by: Option<String>,
    /// Other names the group answers to in `--nodes` (the label value, the
    /// autoscaler's group id in a `/snapshotz`).
    #[serde(skip)]
    aliases: Vec<String>,
}

/// The groups, and the nodes in none.
#[derive(Debug, Default)]
pub struct Grouping {
    /// The node groups, by name.
    pub groups: Vec<Group>,
    /// Nodes of no group: they stay and take pods, and the autoscaler
    /// neither adds nor removes them.
    pub ungrouped: Vec<String>,
}

/// A `--nodes MIN:MAX:NAME` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodesFlag {
    /// Minimum size.
    pub min: usize,
    /// Maximum size.
    pub max: usize,
    /// The group.
    pub name: String,
}

impl std::str::FromStr for NodesFlag {
    type Err = GroupError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || GroupError::BadBounds { flag: s.into() };
        let mut parts = s.splitn(3, ':');
        let min = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let max = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let name = parts.next().filter(|n| !n.is_empty()).ok_or_else(bad)?;
        if min > max {
            return Err(bad());
        }
        Ok(NodesFlag {
            min,
            max,
            name: name.into(),
        })
    }
}

impl std::fmt::Display for NodesFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.min, self.max, self.name)
    }
}

/// Infers the groups of `input`'s nodes: by `label` when given, else by
/// the platforms' labels; bounds from `bounds`.
pub fn infer(
    input: &Input,
    label: Option<&str>,
    bounds: &[NodesFlag],
) -> Result<Grouping, GroupError> {
    let nodes: Vec<&Object> = input.of(Kind::Node).collect();
    if let Some(key) = label
        && !nodes.iter().any(|n| label_of(&n.value, key).is_some())
    {
        let mut seen: Vec<&str> = nodes
            .iter()
            .filter_map(|n| {
                n.value
                    .lookup("/metadata/labels")
                    .and_then(Value::as_object)
            })
            .flat_map(|l| l.keys().map(String::as_str))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        return Err(GroupError::LabelMatchesNoNode {
            key: key.into(),
            seen: if seen.is_empty() {
                "none".into()
            } else {
                seen.join(", ")
            },
        });
    }
    // (platform, selector, value, instance type) → nodes.
    let mut found: BTreeMap<(String, String, String), Vec<&Object>> = BTreeMap::new();
    let mut ungrouped = Vec::new();
    for node in &nodes {
        match group_key(&node.value, label) {
            Some((platform, key, value)) => {
                found.entry((platform, key, value)).or_default().push(node)
            }
            None => ungrouped.push(node.name().to_string()),
        }
    }
    let mut groups: Vec<Group> = Vec::new();
    for ((platform, key, value), members) in found {
        let mut by_type: BTreeMap<String, Vec<&Object>> = BTreeMap::new();
        for n in members {
            by_type
                .entry(instance_type(&n.value).unwrap_or_default())
                .or_default()
                .push(n);
        }
        let split = by_type.len() > 1;
        for (itype, mut members) in by_type {
            members.sort_by(|a, b| a.name().cmp(b.name()));
            let (name, selector) = if split {
                (
                    label_value(&format!("{value}-{itype}")),
                    format!("{key}={value}, instance type {itype}"),
                )
            } else {
                (label_value(&value), format!("{key}={value}"))
            };
            let first = members[0];
            groups.push(Group {
                name,
                platform: platform.clone(),
                selector,
                nodes: members.iter().map(|n| n.name().to_string()).collect(),
                min: 0,
                max: 0,
                bounds: Bounds::Defaulted,
                template_from: format!("node {}", first.name()),
                template: first.value.clone(),
                split_by: split.then(|| itype.clone()),
                aliases: vec![value.clone()],
            });
        }
    }
    adopt_templates(input, label, &mut groups);
    apply_bounds(&mut groups, bounds)?;
    for g in &mut groups {
        g.template = template(&g.template, g);
    }
    ungrouped.sort();
    Ok(Grouping { groups, ungrouped })
}

/// A template node the input holds: `/snapshotz`'s `TemplateNodes`, or
/// the kwok provider's templates ConfigMap.
struct Template {
    /// The autoscaler's group id.
    id: String,
    /// The node.
    node: Value,
    /// `/snapshotz template ID`, `kwok provider template ID`.
    from: String,
    /// Its size bounds, when it carries them (the kwok provider's
    /// annotations).
    bounds: Option<(usize, usize)>,
}

/// The templates of the input: `/snapshotz`'s, then the kwok provider's.
fn templates(input: &Input) -> Vec<Template> {
    let mut out: Vec<Template> = input
        .templates
        .iter()
        .map(|(id, node)| Template {
            id: id.clone(),
            node: node.clone(),
            from: format!("/snapshotz template {id}"),
            bounds: None,
        })
        .collect();
    let kwok = input.of(Kind::ConfigMap).find(|o| {
        o.namespace() == "kube-system" && o.name() == harness::kwok_provider::TEMPLATES_CONFIG_MAP
    });
    let items: Vec<Value> = kwok
        .and_then(|o| o.value.lookup("/data/templates"))
        .and_then(Value::as_str)
        .and_then(|text| serde_saphyr::from_str::<Value>(text).ok())
        .and_then(|list| list.get("items").and_then(Value::as_array).cloned())
        .unwrap_or_default();
    for node in items {
        let annotation = |key: &str| {
            node.lookup("/metadata/annotations")
                .and_then(|a| a.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let Some(id) = annotation(GROUP_NAME_ANNOTATION)
            .or_else(|| label_of(&node, GROUP_LABEL).map(str::to_string))
        else {
            continue;
        };
        let bound = |b: &str| annotation(&size_annotation(b)).and_then(|v| v.parse().ok());
        out.push(Template {
            from: format!("kwok provider template {id}"),
            bounds: bound("min-count").zip(bound("max-count")),
            id,
            node,
        });
    }
    out
}

/// The input's template nodes: the autoscaler's own templates of the
/// groups they match (and their bounds, when they carry them), and groups
/// of their own for those no node matches (a group at zero).
fn adopt_templates(input: &Input, label: Option<&str>, groups: &mut Vec<Group>) {
    for t in templates(input) {
        let key = group_key(&t.node, label);
        let itype = instance_type(&t.node);
        let matching = groups.iter().position(|g| {
            (g.aliases.contains(&t.id)
                || key
                    .as_ref()
                    .is_some_and(|(_, _, value)| g.aliases.contains(value)))
                && (g.split_by.is_none() || g.split_by == itype)
        });
        let i = match matching {
            Some(i) => i,
            None => {
                let (platform, selector, value) =
                    key.unwrap_or_else(|| ("template".into(), "template".into(), t.id.clone()));
                groups.push(Group {
                    name: label_value(&value),
                    platform,
                    selector: format!("{selector}={value}"),
                    nodes: Vec::new(),
                    min: 0,
                    max: 0,
                    bounds: Bounds::Defaulted,
                    template_from: String::new(),
                    template: Value::Null,
                    split_by: None,
                    aliases: vec![value],
                });
                groups.len() - 1
            }
        };
        let group = &mut groups[i];
        group.template = t.node;
        group.template_from = t.from;
        group.aliases.push(t.id);
        if let Some((min, max)) = t.bounds {
            group.min = min;
            group.max = max;
            group.bounds = Bounds::Template;
        }
    }
}

/// Each group's bounds from the `--nodes` flag naming it (by its name or
/// an alias), else 0 to twice its size.
fn apply_bounds(groups: &mut [Group], bounds: &[NodesFlag]) -> Result<(), GroupError> {
    for flag in bounds {
        let Some(g) = groups
            .iter_mut()
            .find(|g| g.name == flag.name || g.aliases.contains(&flag.name))
        else {
            let known: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
            return Err(GroupError::UnknownGroup {
                flag: flag.to_string(),
                name: flag.name.clone(),
                known: if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                },
            });
        };
        g.min = flag.min;
        g.max = flag.max;
        g.bounds = Bounds::NodesFlag;
    }
    for g in groups.iter_mut().filter(|g| g.bounds == Bounds::Defaulted) {
        g.min = 0;
        g.max = (2 * g.nodes.len()).max(1);
    }
    Ok(())
}

/// `(platform, label key, value)` of the group a node belongs to.
fn group_key(node: &Value, label: Option<&str>) -> Option<(String, String, String)> {
    if let Some(key) = label {
        return label_of(node, key).map(|v| {
            (
                format!("--group-label {key}"),
                key.to_string(),
                v.to_string(),
            )
        });
    }
    for (key, platform) in PLATFORM_LABELS {
        if let Some(v) = label_of(node, key) {
            return Some(((*platform).into(), (*key).into(), v.into()));
        }
    }
    let annotations = node.lookup("/metadata/annotations");
    let owner = annotations
        .and_then(|a| a.get(CAPI_OWNER_NAME))
        .and_then(Value::as_str);
    let kind = annotations
        .and_then(|a| a.get(CAPI_OWNER_KIND))
        .and_then(Value::as_str);
    match (owner, kind) {
        (Some(owner), Some("MachineSet")) => Some((
            "Cluster API MachineSet".into(),
            CAPI_OWNER_NAME.into(),
            owner.into(),
        )),
        _ => None,
    }
}

fn label_of<'a>(node: &'a Value, key: &str) -> Option<&'a str> {
    node.lookup("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
}

fn instance_type(node: &Value) -> Option<String> {
    INSTANCE_TYPE_LABELS
        .iter()
        .find_map(|k| label_of(node, k))
        .map(str::to_string)
}

/// `s` as a label value: letters, digits, `-`, `_` and `.`, at most 63,
/// starting and ending with a letter or digit.
pub fn label_value(s: &str) -> String {
    let mapped: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed: String = mapped.chars().take(63).collect();
    let trimmed = trimmed.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if trimmed.is_empty() {
        "group".into()
    } else {
        trimmed.into()
    }
}

/// Whether a taint says how a node is now rather than what it is.
pub fn is_state_taint(taint: &Value) -> bool {
    let key = taint.get("key").and_then(Value::as_str).unwrap_or("");
    STATE_TAINT_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// The kwok provider's template of `group` made from `node`: its labels
/// (the hostname's left out, the group's label added), its lasting taints,
/// its capacity, allocatable and node info; the group's name and bounds
/// as annotations.
fn template(node: &Value, group: &Group) -> Value {
    let mut labels: Map<String, Value> = node
        .lookup("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    labels.remove("kubernetes.io/hostname");
    labels.insert(GROUP_LABEL.into(), json!(group.name));
    let taints: Vec<Value> = node
        .lookup("/spec/taints")
        .and_then(Value::as_array)
        .map(|t| t.iter().filter(|t| !is_state_taint(t)).cloned().collect())
        .unwrap_or_default();
    let mut annotations = Map::new();
    annotations.insert(GROUP_NAME_ANNOTATION.into(), json!(group.name));
    annotations.insert(size_annotation("min-count"), json!(group.min.to_string()));
    annotations.insert(size_annotation("max-count"), json!(group.max.to_string()));
    annotations.insert(
        size_annotation("desired-count"),
        json!(group.nodes.len().to_string()),
    );
    let mut status = Map::new();
    for f in ["capacity", "allocatable", "nodeInfo"] {
        if let Some(v) = node.lookup(&format!("/status/{f}")) {
            status.insert(f.into(), v.clone());
        }
    }
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": group.name, "labels": labels, "annotations": annotations},
        "spec": {"taints": taints},
        "status": status})
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn node(name: &str, labels: Value) -> String {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}})
        .to_string()
    }

    fn input(nodes: &[String]) -> Input {
        let mut input = Input::default();
        for (i, n) in nodes.iter().enumerate() {
            input.read_text(&format!("n{i}.json"), n).unwrap();
        }
        input
    }

    #[test]
    fn platforms_labels_make_groups() {
        let i = input(&[
            node("a", json!({"eks.amazonaws.com/nodegroup": "ng-1"})),
            node("b", json!({"eks.amazonaws.com/nodegroup": "ng-1"})),
            node("c", json!({"cloud.google.com/gke-nodepool": "pool-2"})),
            node("d", json!({"node-role.kubernetes.io/control-plane": ""})),
        ]);
        let g = infer(&i, None, &[]).unwrap();
        let names: Vec<(&str, usize, &str)> = g
            .groups
            .iter()
            .map(|g| (g.name.as_str(), g.nodes.len(), g.platform.as_str()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("ng-1", 2, "EKS managed node group"),
                ("pool-2", 1, "GKE node pool")
            ]
        );
        assert_eq!(g.ungrouped, vec!["d"]);
        assert_eq!((g.groups[0].min, g.groups[0].max), (0, 4));
        assert_eq!(g.groups[0].bounds, Bounds::Defaulted);
    }

    #[test]
    fn mixed_instance_types_split_a_group() {
        let i = input(&[
            node(
                "a",
                json!({"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.large"}),
            ),
            node(
                "b",
                json!({"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "c5.xlarge"}),
            ),
        ]);
        let g = infer(&i, None, &[]).unwrap();
        let names: Vec<&str> = g.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, vec!["default-c5.xlarge", "default-m5.large"]);
    }

    #[test]
    fn nodes_flags_set_bounds_and_unknown_groups_are_refused() {
        let i = input(&[node("a", json!({"pool": "web"}))]);
        let flag: NodesFlag = "1:7:web".parse().unwrap();
        let g = infer(&i, Some("pool"), &[flag]).unwrap();
        assert_eq!((g.groups[0].min, g.groups[0].max), (1, 7));
        assert_eq!(g.groups[0].bounds, Bounds::NodesFlag);
        let e = infer(&i, Some("pool"), &["1:7:db".parse().unwrap()]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--nodes 1:7:db: no node group db (groups: web)"
        );
        let e = infer(&i, Some("zone"), &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--group-label zone: no node has this label (labels on the nodes: pool)"
        );
        assert!("7:1:web".parse::<NodesFlag>().is_err());
    }

    #[test]
    fn templates_keep_what_the_groups_nodes_share() {
        let text = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "a", "labels": {"pool": "web", "kubernetes.io/hostname": "a"}},
            "spec": {"providerID": "aws:///i-1", "taints": [
                {"key": "dedicated", "value": "web", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]},
            "status": {"allocatable": {"cpu": "4"}, "conditions": []}})
        .to_string();
        let mut i = Input::default();
        i.read_text("n.json", &text).unwrap();
        let g = infer(&i, Some("pool"), &[]).unwrap();
        let t = &g.groups[0].template;
        assert_eq!(t["metadata"]["labels"]["kwok-nodegroup"], "web");
        assert!(
            t["metadata"]["labels"]
                .get("kubernetes.io/hostname")
                .is_none()
        );
        assert_eq!(t["spec"]["taints"].as_array().unwrap().len(), 1);
        assert!(t["spec"].get("providerID").is_none());
        assert_eq!(
            t["metadata"]["annotations"]["cluster-autoscaler.kwok.nodegroup/max-count"],
            "2"
        );
    }
}
