//! `Then` steps: they read the cluster (nodes, pods, events, the status
//! ConfigMap) or what the autoscaler publishes (metrics, `/health-check`,
//! decision records), waiting where the step says "within", and fail with
//! what they saw.

use std::time::Duration;

use cucumber::{then, when};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Node, Pod};
use kube::Api;
use kube::api::{WatchEvent, WatchParams};
use serde_json::Value;

use super::{few_names, minutes, node_names, quoted_list, watch_decisions};
use crate::world::{CaWorld, StepResult, node_group_of};

// ---- Nodes ----

async fn count(w: &mut CaWorld, group: &str) -> Result<usize, String> {
    Ok(w.group_nodes(group).await?.len())
}

#[then(regex = r#"^the node group "(\S+)" has (\d+) nodes?$"#)]
async fn group_has(w: &mut CaWorld, group: String, want: usize) -> StepResult {
    let names = node_names(w, &group).await?;
    if names.len() == want {
        return Ok(());
    }
    Err(format!(
        "node group {group} has {} nodes, want {want}: {}",
        names.len(),
        few_names(&names)
    ))
}

#[then(regex = r#"^the node group "(\S+)" reaches (\d+) nodes? within (\d+) minutes?$"#)]
async fn group_reaches(w: &mut CaWorld, group: String, want: usize, within: u64) -> StepResult {
    let window = w.running().await?.window(minutes(within));
    for _ in 0..window.as_secs().div_ceil(5) {
        if count(w, &group).await? == want {
            return Ok(());
        }
        w.pass(Duration::from_secs(5)).await?;
    }
    group_has(w, group, want).await
}

#[then(regex = r#"^the node group "(\S+)" keeps (\d+) nodes? for (\d+) minutes?$"#)]
async fn group_keeps(w: &mut CaWorld, group: String, want: usize, during: u64) -> StepResult {
    for i in 0..(during * 6) {
        let n = count(w, &group).await?;
        if n != want {
            return Err(format!(
                "node group {group} has {n} nodes after {}s, want it to stay at {want}",
                i * 10
            ));
        }
        w.pass(Duration::from_secs(10)).await?;
    }
    group_has(w, group, want).await
}

#[then(regex = r#"^each of the node groups (".*") has (\d+) nodes?$"#)]
async fn each_has(w: &mut CaWorld, groups: String, want: usize) -> StepResult {
    let mut seen = Vec::new();
    for g in quoted_list(&groups) {
        seen.push((count(w, &g).await?, g));
    }
    if seen.iter().all(|(n, _)| *n == want) {
        Ok(())
    } else {
        Err(format!("want {want} nodes in each group; sizes: {seen:?}"))
    }
}

#[then(regex = r#"^the node groups (".*") have (\d+) nodes? in total$"#)]
async fn total_of(w: &mut CaWorld, groups: String, want: usize) -> StepResult {
    let mut seen = Vec::new();
    for g in quoted_list(&groups) {
        seen.push((count(w, &g).await?, g));
    }
    let total: usize = seen.iter().map(|(n, _)| n).sum();
    if total == want {
        Ok(())
    } else {
        Err(format!(
            "want {want} nodes in total, have {total}: {seen:?}"
        ))
    }
}

#[then(regex = r#"^one of the node groups (".*") has (\d+) nodes? and the others? (\d+)$"#)]
async fn one_of(w: &mut CaWorld, groups: String, one: usize, others: usize) -> StepResult {
    let mut seen = Vec::new();
    for g in quoted_list(&groups) {
        seen.push((count(w, &g).await?, g));
    }
    let ones = seen.iter().filter(|(n, _)| *n == one).count();
    let rest = seen.iter().filter(|(n, _)| *n == others).count();
    if ones == 1 && ones + rest == seen.len() {
        Ok(())
    } else {
        Err(format!(
            "want one group at {one} nodes and the others at {others}; sizes: {seen:?}"
        ))
    }
}

/// Polls every second: the count may only fall by one at a time.
#[then(
    regex = r#"^the node group "(\S+)" shrinks one node at a time to (\d+) nodes? within (\d+) minutes$"#
)]
async fn shrinks_one_at_a_time(
    w: &mut CaWorld,
    group: String,
    want: usize,
    within: u64,
) -> StepResult {
    let mut last = count(w, &group).await?;
    let mut history = vec![last];
    let window = w.running().await?.window(minutes(within));
    for _ in 0..window.as_secs() {
        if last == want {
            return Ok(());
        }
        w.pass(Duration::from_secs(1)).await?;
        let n = count(w, &group).await?;
        if n != last {
            history.push(n);
        }
        if n + 1 < last {
            return Err(format!(
                "node group {group} went from {last} to {n} nodes at once (sizes so far: {history:?})"
            ));
        }
        last = n;
    }
    Err(format!(
        "node group {group} did not shrink to {want} in {within} minutes (sizes: {history:?})"
    ))
}

// ---- Pods ----

async fn pods_of(w: &mut CaWorld, app: &str) -> Result<Vec<Pod>, String> {
    let r = w.running().await?;
    harness::cluster::list::<Pod>(&r.cluster.client(), &format!("app={app}")).await
}

#[then(regex = r#"^all (\d+) pods? of "(\S+)" (?:is|are) running within (\d+) minutes?$"#)]
async fn pods_running(w: &mut CaWorld, want: usize, app: String, within: u64) -> StepResult {
    let r = w.running().await?;
    let timeout = r.real(r.window(minutes(within)));
    r.cluster
        .wait_pods_running(&format!("app={app}"), want, timeout)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[then(regex = r#"^(\d+) pods? of "(\S+)" stays? pending for (\d+) minutes?$"#)]
async fn pods_stay_pending(w: &mut CaWorld, want: usize, app: String, during: u64) -> StepResult {
    // Pods just asked for (a new Deployment) may not exist yet: give their
    // controller up to 30 seconds to create them.
    for _ in 0..6 {
        if pods_of(w, &app).await?.len() >= want {
            break;
        }
        w.pass(Duration::from_secs(5)).await?;
    }
    for i in 0..=(during * 2) {
        let pods = pods_of(w, &app).await?;
        let pending = pods
            .iter()
            .filter(|p| !harness::cluster::pod_running(p))
            .count();
        if pending != want {
            return Err(format!(
                "{pending} pods of {app} are pending after {}s, want {want}: {}",
                i * 30,
                harness::cluster::summarize(&pods)
            ));
        }
        if i < during * 2 {
            w.pass(Duration::from_secs(30)).await?;
        }
    }
    Ok(())
}

// ---- Events ----

/// Events with `reason` on the objects `on` accepts (all namespaces).
async fn events(
    w: &mut CaWorld,
    reason: &str,
    on: impl Fn(&Event) -> bool,
) -> Result<Vec<String>, String> {
    let r = w.running().await?;
    let all = Api::<Event>::all(r.cluster.client())
        .list(&Default::default())
        .await
        .map_err(|e| format!("listing events: {e}"))?;
    Ok(all
        .items
        .into_iter()
        // Upstream writes some events with no reason (`""` in a step).
        .filter(|e| e.reason.as_deref().unwrap_or_default() == reason)
        .filter(|e| on(e))
        .map(|e| e.message.unwrap_or_default())
        .collect())
}

/// What an event step is about.
enum Subject {
    Pods(String),
    GroupNodes(String),
    StatusConfigMap,
    MachineDeployment(String),
    CapacityBuffer(String),
}

impl Subject {
    fn parse(text: &str) -> Result<Self, String> {
        let quoted = quoted_list(text);
        if text.starts_with("the pods of") {
            quoted.first().cloned().map(Self::Pods)
        } else if text.starts_with("a node of") {
            quoted.first().cloned().map(Self::GroupNodes)
        } else if text == "the status ConfigMap" {
            Some(Self::StatusConfigMap)
        } else if text.starts_with("the MachineDeployment") {
            quoted.first().cloned().map(Self::MachineDeployment)
        } else if text.starts_with("the CapacityBuffer") {
            quoted.first().cloned().map(Self::CapacityBuffer)
        } else {
            None
        }
        .ok_or_else(|| format!("unknown event subject {text:?}"))
    }

    async fn events(&self, w: &mut CaWorld, reason: &str) -> Result<Vec<String>, String> {
        match self {
            Self::Pods(app) => {
                // By name, so that pods already deleted (evicted) count.
                let prefix = format!("{app}-");
                events(w, reason, |e| {
                    e.involved_object.kind.as_deref() == Some("Pod")
                        && e.involved_object
                            .name
                            .as_ref()
                            .is_some_and(|n| n == app || n.starts_with(&prefix))
                })
                .await
            }
            Self::GroupNodes(group) => {
                let prefix = format!("{group}-");
                events(w, reason, |e| {
                    e.involved_object.kind.as_deref() == Some("Node")
                        && e.involved_object
                            .name
                            .as_ref()
                            .is_some_and(|n| n.starts_with(&prefix))
                })
                .await
            }
            Self::StatusConfigMap => {
                events(w, reason, |e| {
                    e.involved_object.kind.as_deref() == Some("ConfigMap")
                        && e.involved_object.name.as_deref() == Some("cluster-autoscaler-status")
                })
                .await
            }
            Self::MachineDeployment(name) => {
                events(w, reason, |e| {
                    e.involved_object.kind.as_deref() == Some("MachineDeployment")
                        && e.involved_object.name.as_deref() == Some(name.as_str())
                })
                .await
            }
            Self::CapacityBuffer(name) => {
                events(w, reason, |e| {
                    e.involved_object.kind.as_deref() == Some("CapacityBuffer")
                        && e.involved_object.name.as_deref() == Some(name.as_str())
                })
                .await
            }
        }
    }
}

/// What an event's message must be.
enum Message<'a> {
    Any,
    Exactly(&'a str),
    Containing(&'a str),
}

impl Message<'_> {
    fn matches(&self, message: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Exactly(want) => message == *want || same_reasons(message, want),
            Self::Containing(part) => message.contains(part),
        }
    }
}

/// The prefix of CA's NotTriggerScaleUp message, before its reasons.
const NO_SCALE_UP_PREFIX: &str = "pod didn't trigger scale-up: ";

/// Whether two NotTriggerScaleUp messages give the same reasons in any
/// order: CA aggregates them in a Go map (`ReasonsMessage`), so their order
/// differs from one event to the next.
fn same_reasons(message: &str, want: &str) -> bool {
    fn reasons(m: &str) -> Option<Vec<&str>> {
        m.strip_prefix(NO_SCALE_UP_PREFIX).map(|rest| {
            let mut r: Vec<&str> = rest.split(", ").collect();
            r.sort_unstable();
            r
        })
    }
    matches!((reasons(message), reasons(want)), (Some(a), Some(b)) if a == b)
}

/// Waits up to a minute for an event with `reason` and a matching message.
async fn expect_event(
    w: &mut CaWorld,
    subject: &str,
    reason: &str,
    message: Message<'_>,
) -> StepResult {
    let s = Subject::parse(subject)?;
    let mut seen = Vec::new();
    for _ in 0..12 {
        seen = s.events(w, reason).await?;
        if seen.iter().any(|m| message.matches(m)) {
            return Ok(());
        }
        w.pass(Duration::from_secs(5)).await?;
    }
    Err(match message {
        Message::Exactly(m) => {
            format!("no {reason} event {m:?} on {subject}; {reason} events seen: {seen:?}")
        }
        Message::Containing(m) => format!(
            "no {reason} event containing {m:?} on {subject}; {reason} events seen: {seen:?}"
        ),
        Message::Any => format!("no {reason} event on {subject}"),
    })
}

#[then(
    regex = r#"^(the pods of "\S+"|a node of "\S+"|the status ConfigMap|the MachineDeployment "\S+"|the CapacityBuffer "\S+") gets? an? "(\S*)" event (saying|containing) "(.*)"$"#
)]
async fn event_saying(
    w: &mut CaWorld,
    subject: String,
    reason: String,
    how: String,
    message: String,
) -> StepResult {
    // CA names a group by its id: `{MachineDeployment/default/pool 0->3 ...}`.
    // A quote inside the quoted message is written `\"`.
    let message = w.with_group_ids(&message.replace("\\\"", "\""));
    let message = if how == "saying" {
        Message::Exactly(&message)
    } else {
        Message::Containing(&message)
    };
    expect_event(w, &subject, &reason, message).await
}

#[then(
    regex = r#"^(the pods of "\S+"|a node of "\S+"|the status ConfigMap|the MachineDeployment "\S+"|the CapacityBuffer "\S+") gets? an? "(\S+)" event$"#
)]
async fn event_any(w: &mut CaWorld, subject: String, reason: String) -> StepResult {
    expect_event(w, &subject, &reason, Message::Any).await
}

#[then(
    regex = r#"^(the pods of "\S+"|a node of "\S+"|the status ConfigMap|the MachineDeployment "\S+"|the CapacityBuffer "\S+") gets? no "(\S+)" event$"#
)]
async fn no_event(w: &mut CaWorld, subject: String, reason: String) -> StepResult {
    let seen = Subject::parse(&subject)?.events(w, &reason).await?;
    if seen.is_empty() {
        Ok(())
    } else {
        Err(format!("{subject} got {reason} events: {seen:?}"))
    }
}

// ---- Taints ----

fn has_taint(n: &Node, key: &str) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == key))
}

/// Watches the nodes, so that a taint that lives for a moment (a node
/// tainted then deleted) is seen.
#[then(regex = r#"^a node of "(\S+)" gets the taint "(\S+)" within (\d+) minutes?$"#)]
async fn gets_taint(w: &mut CaWorld, group: String, key: String, within: u64) -> StepResult {
    let r = w.running().await?;
    let api = Api::<Node>::all(r.cluster.client());
    let deadline = tokio::time::Instant::now() + r.real(r.window(minutes(within)));
    let matches = |n: &Node| node_group_of(n) == Some(group.as_str()) && has_taint(n, &key);
    while tokio::time::Instant::now() < deadline {
        let list = api
            .list(&Default::default())
            .await
            .map_err(|e| format!("listing nodes: {e}"))?;
        if list.items.iter().any(matches) {
            return Ok(());
        }
        let version = list.metadata.resource_version.unwrap_or_default();
        let mut stream = api
            .watch(&WatchParams::default(), &version)
            .await
            .map_err(|e| format!("watching nodes: {e}"))?
            .boxed();
        let found = tokio::time::timeout_at(deadline, async {
            while let Ok(Some(ev)) = stream.try_next().await {
                if let WatchEvent::Added(n) | WatchEvent::Modified(n) = ev
                    && matches(&n)
                {
                    return true;
                }
            }
            false
        })
        .await;
        if found == Ok(true) {
            return Ok(());
        }
    }
    Err(format!(
        "no node of {group} got the taint {key} within {within} minutes"
    ))
}

#[then(regex = r#"^no node of "(\S+)" has the taint "(\S+)"(?: within (\d+) minutes?)?$"#)]
async fn no_taint(w: &mut CaWorld, group: String, key: String, within: String) -> StepResult {
    let within: u64 = within.parse().unwrap_or(0);
    let samples = if within == 0 {
        0
    } else {
        w.running().await?.window(minutes(within)).as_secs() / 5
    };
    let mut tainted = Vec::new();
    for i in 0..=samples {
        tainted = w
            .group_nodes(&group)
            .await?
            .into_iter()
            .filter(|n| has_taint(n, &key))
            .filter_map(|n| n.metadata.name)
            .collect();
        if tainted.is_empty() {
            return Ok(());
        }
        if i < samples {
            w.pass(Duration::from_secs(5)).await?;
        }
    }
    Err(format!(
        "nodes of {group} with the taint {key}: {tainted:?}"
    ))
}

// ---- The status ConfigMap ----

/// The status ConfigMap, parsed. CA writes it at the end of its first
/// loop, so it is waited for (up to a scenario minute) while it does not
/// exist yet.
async fn status_config_map(w: &mut CaWorld) -> Result<(ConfigMap, Value, String), String> {
    let mut waited = 0;
    let cm = loop {
        let r = w.running().await?;
        match Api::<ConfigMap>::namespaced(r.cluster.client(), "kube-system")
            .get_opt("cluster-autoscaler-status")
            .await
            .map_err(|e| format!("reading the status ConfigMap: {e}"))?
        {
            Some(cm) => break cm,
            None if waited < 60 => {
                r.pass(Duration::from_secs(5)).await?;
                waited += 5;
            }
            None => {
                return Err(
                    "the status ConfigMap kube-system/cluster-autoscaler-status was not written within a minute"
                        .into(),
                );
            }
        }
    };
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get("status").cloned())
        .ok_or("the status ConfigMap has no status key")?;
    let status = parse_status(&text)?;
    Ok((cm, status, text))
}

/// The status ConfigMap's `status` text (YAML, any CA release's), or why
/// it does not parse, with the text.
pub fn parse_status(text: &str) -> Result<Value, String> {
    serde_saphyr::from_str(text).map_err(|e| format!("the status is not YAML: {e}\n{text}"))
}

/// `a.b.c` in `v`, as text (numbers and strings alike).
pub fn field(v: &Value, path: &str) -> Option<String> {
    let mut cur = v;
    for part in path.split('.') {
        cur = cur.get(part)?;
    }
    Some(match cur {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

async fn status_field(
    w: &mut CaWorld,
    group: Option<&str>,
    path: &str,
) -> Result<(Option<String>, String), String> {
    let (_, status, text) = status_config_map(w).await?;
    let scope = match group {
        None => status,
        Some(g) => status["nodeGroups"]
            .as_array()
            .and_then(|gs| gs.iter().find(|x| x["name"] == w.group_id(g)))
            .cloned()
            .ok_or_else(|| format!("node group {g} is not in the status:\n{text}"))?,
    };
    Ok((field(&scope, path), text))
}

async fn expect_status(
    w: &mut CaWorld,
    group: Option<&str>,
    path: &str,
    want: &str,
    within: u64,
) -> StepResult {
    let mut last = (None, String::new());
    let samples = if within == 0 {
        0
    } else {
        w.running().await?.window(minutes(within)).as_secs() / 5
    };
    for i in 0..=samples {
        // A group may show up in the status only after a loop or two.
        last = match status_field(w, group, path).await {
            Ok(found) => found,
            Err(e) if i < samples => (None, e),
            Err(e) => return Err(e),
        };
        if last.0.as_deref() == Some(want) {
            return Ok(());
        }
        if i < samples {
            w.pass(Duration::from_secs(5)).await?;
        }
    }
    let scope = group.map_or("the cluster".to_string(), |g| format!("node group {g}"));
    Err(format!(
        "status field {path} of {scope} is {:?}, want {want:?}; the status:\n{}",
        last.0, last.1
    ))
}

#[then(
    regex = r#"^the status ConfigMap shows "(\S+)" = "([^"]*)"(?: for node group "(\S+)")?(?: within (\d+) minutes?)?$"#
)]
async fn status_shows(
    w: &mut CaWorld,
    path: String,
    want: String,
    group: String,
    within: String,
) -> StepResult {
    let group = (!group.is_empty()).then_some(group.as_str());
    expect_status(w, group, &path, &want, within.parse().unwrap_or(0)).await
}

#[then(regex = r#"^the status ConfigMap shows node group "(\S+)" with scale-up status "(\S+)"$"#)]
async fn status_scale_up(w: &mut CaWorld, group: String, want: String) -> StepResult {
    expect_status(w, Some(&group), "scaleUp.status", &want, 0).await
}

#[then("the status ConfigMap follows CA's status schema")]
async fn status_schema(w: &mut CaWorld) -> StepResult {
    let (cm, status, text) = status_config_map(w).await?;
    let mut missing = Vec::new();
    for path in [
        "time",
        "autoscalerStatus",
        "clusterWide.health.status",
        "clusterWide.health.nodeCounts.registered.total",
        "clusterWide.health.nodeCounts.registered.ready",
        "clusterWide.health.nodeCounts.longUnregistered",
        "clusterWide.health.lastProbeTime",
        "clusterWide.scaleUp.status",
        "clusterWide.scaleDown.status",
    ] {
        if field(&status, path).is_none() {
            missing.push(path.to_string());
        }
    }
    for g in status["nodeGroups"].as_array().into_iter().flatten() {
        for path in [
            "name",
            "health.status",
            "health.cloudProviderTarget",
            "health.minSize",
            "health.maxSize",
            "scaleUp.status",
            "scaleDown.status",
        ] {
            if field(g, path).is_none() {
                missing.push(format!("nodeGroups[].{path}"));
            }
        }
    }
    let updated = cm
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("cluster-autoscaler.kubernetes.io/last-updated"));
    if updated.is_none_or(|u| !u.ends_with("+0000 UTC")) {
        missing.push(format!(
            "annotation cluster-autoscaler.kubernetes.io/last-updated in Go time format (is {updated:?})"
        ));
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("the status lacks {missing:?}:\n{text}"))
    }
}

#[then("the status ConfigMap is rewritten every loop")]
async fn status_fresh(w: &mut CaWorld) -> StepResult {
    let (_, first, _) = status_config_map(w).await?;
    let mut times = vec![field(&first, "time").unwrap_or_default()];
    // A new loop (one every 10 s scan interval, plus the loop's own time)
    // between samples taken 20 s apart: sampling at the loop's own pace
    // would race it in real time.
    for _ in 0..3 {
        w.pass(Duration::from_secs(20)).await?;
        let (_, s, _) = status_config_map(w).await?;
        times.push(field(&s, "time").unwrap_or_default());
    }
    let distinct: std::collections::BTreeSet<&String> = times.iter().collect();
    if distinct.len() == times.len() {
        Ok(())
    } else {
        Err(format!(
            "the status time did not change between samples 20 seconds apart: {times:?}"
        ))
    }
}

// ---- Metrics, health, decisions ----

/// The autoscaler's `/metrics` text.
pub(super) async fn metrics_text(w: &mut CaWorld) -> Result<String, String> {
    w.running()
        .await?
        .metrics()
        .await
        .map_err(|e| e.to_string())
}

/// A metrics sample: its name, labels and number.
type Sample<'a> = (&'a str, Vec<(String, String)>, Option<f64>);

/// A metrics sample: `name{label="value",...} number`, the labels and
/// the number optional. `None` for comments and lines of another form.
fn parse_sample(line: &str) -> Option<Sample<'_>> {
    if line.starts_with('#') {
        return None;
    }
    let end = line.find(['{', ' ']).unwrap_or(line.len());
    let (name, mut rest) = line.split_at(end);
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices();
        let mut key = String::new();
        let close = loop {
            let (i, c) = chars.next()?;
            match c {
                '}' => break i,
                ',' | ' ' => {}
                '=' => {
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next()?.1 {
                            '\\' => value.push(chars.next()?.1),
                            '"' => break,
                            c => value.push(c),
                        }
                    }
                    labels.push((std::mem::take(&mut key), value));
                }
                c => key.push(c),
            }
        };
        rest = &inner[close + 1..];
    }
    let rest = rest.trim();
    let value = match rest {
        "" => None,
        v => Some(v.split(' ').next()?.parse().ok()?),
    };
    Some((name, labels, value))
}

/// Whether a metrics line has the wanted sample's name, each of its
/// labels (in any order, among others) and its number if it gives one
/// (`1` matches `1.0`).
fn sample_matches(line: &str, want: &Sample<'_>) -> bool {
    let Some((name, labels, value)) = parse_sample(line) else {
        return false;
    };
    name == want.0
        && want.1.iter().all(|l| labels.contains(l))
        && want.2.is_none_or(|w| value == Some(w))
}

#[then(regex = r#"^the autoscaler's metrics show "(.*)"$"#)]
async fn metrics_show(w: &mut CaWorld, line: String) -> StepResult {
    let want = parse_sample(&line).ok_or_else(|| format!("{line:?} is not a metrics sample"))?;
    // Metrics change once per loop: wait up to a minute.
    let mut text = String::new();
    for _ in 0..12 {
        text = metrics_text(w).await?;
        if text.lines().any(|l| sample_matches(l, &want)) {
            return Ok(());
        }
        w.pass(Duration::from_secs(5)).await?;
    }
    let family = line.split(['{', ' ']).next().unwrap_or(&line);
    let related: Vec<&str> = text.lines().filter(|l| l.starts_with(family)).collect();
    Err(format!(
        "no metrics line starts with {line:?}; {family} lines: {related:?}"
    ))
}

/// A metric in seconds the autoscaler measures on its own clock: a
/// binary's real seconds are scaled back to scenario seconds.
#[then(regex = r#"^the autoscaler's metric "(\S+)" reaches (\d+) seconds within (\d+) minutes?$"#)]
async fn metric_reaches_seconds(
    w: &mut CaWorld,
    name: String,
    seconds: u64,
    within: u64,
) -> StepResult {
    let r = w.running().await?;
    let want = r.real(Duration::from_secs(seconds)).as_secs_f64();
    let polls = r.window(minutes(within)).as_secs() / 5 + 1;
    let mut last = None;
    for _ in 0..polls {
        let text = metrics_text(w).await?;
        last = text.lines().find_map(|l| {
            let value = l.strip_prefix(name.as_str())?.strip_prefix(' ')?;
            value.trim().parse::<f64>().ok()
        });
        if last.is_some_and(|v| v >= want) {
            return Ok(());
        }
        w.pass(Duration::from_secs(5)).await?;
    }
    Err(format!(
        "{name} did not reach {seconds} scenario seconds ({want} s of the autoscaler's clock) within {within} minutes; last value: {last:?}"
    ))
}

/// `GET /snapshotz`: the request waits for the autoscaler's next loop.
#[when("a debugging snapshot is requested")]
async fn snapshot_requested(w: &mut CaWorld) -> StepResult {
    let request = w.running().await?.request_snapshot()?;
    w.snapshot_request = Some(request);
    Ok(())
}

/// The answer to the request of the step above, within `within` minutes
/// of scenario time: its status code and, for 200, the nodes its JSON
/// lists (`NodeList`, upcoming nodes included) and its template nodes.
#[then(
    regex = r#"^the debugging snapshot answers (\d+) within (\d+) minutes?(?:, listing (\d+) nodes? and a template for "(\S+)")?$"#
)]
async fn snapshot_answers(
    w: &mut CaWorld,
    code: u16,
    within: u64,
    nodes: String,
    template: String,
) -> StepResult {
    let mut request = w
        .snapshot_request
        .take()
        .ok_or("no debugging snapshot was requested")?;
    let polls = w.running().await?.window(minutes(within)).as_secs();
    for _ in 0..polls {
        if request.is_finished() {
            break;
        }
        w.pass(Duration::from_secs(1)).await?;
    }
    if !request.is_finished() {
        request.abort();
        return Err(format!("/snapshotz did not answer within {within} minutes"));
    }
    let (got, body) = (&mut request)
        .await
        .map_err(|e| format!("the /snapshotz request failed: {e}"))??;
    if got != code {
        return Err(format!("/snapshotz answered {got}, want {code}: {body}"));
    }
    let Ok(want_nodes) = nodes.parse::<usize>() else {
        return Ok(());
    };
    let v: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("/snapshotz JSON: {e}: {body}"))?;
    let listed = v["NodeList"].as_array().map_or(0, Vec::len);
    let keys: Vec<&str> = v
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    if listed != want_nodes {
        return Err(format!(
            "/snapshotz lists {listed} nodes, want {want_nodes} (keys {keys:?})"
        ));
    }
    let id = w.group_id(&template);
    let has_template = v["TemplateNodes"]
        .as_object()
        .is_some_and(|t| t.contains_key(&template) || t.contains_key(&id));
    if !has_template {
        return Err(format!(
            "/snapshotz has no template for {template}: {:?}",
            v["TemplateNodes"]
                .as_object()
                .map(|t| t.keys().collect::<Vec<_>>())
        ));
    }
    Ok(())
}

#[then(regex = r#"^the autoscaler's health check answers (\d+)$"#)]
async fn health(w: &mut CaWorld, want: u16) -> StepResult {
    let (code, body) = w
        .running()
        .await?
        .health()
        .await
        .map_err(|e| e.to_string())?;
    if code == want {
        Ok(())
    } else {
        Err(format!(
            "/health-check answered {code} {body:?}, want {want}"
        ))
    }
}

#[then(regex = r#"^the autoscaler chooses among (".*") for the scale-up$"#)]
async fn options_considered(w: &mut CaWorld, groups: String) -> StepResult {
    let want = quoted_list(&groups);
    let found = watch_decisions(w, 60, |d| {
        want.iter().all(|g| d.options.contains_key(g)) && d.options.len() == want.len()
    })
    .await?;
    found.map_err(|d| format!("the scale-up options were {:?}, want {want:?}", d.options))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_scale_up_reasons_match_in_any_order() {
        let a = "pod didn't trigger scale-up: 1 max node group size reached, 1 node(s) didn't match Pod's node affinity/selector";
        let b = "pod didn't trigger scale-up: 1 node(s) didn't match Pod's node affinity/selector, 1 max node group size reached";
        assert!(Message::Exactly(a).matches(b));
        assert!(
            !Message::Exactly(a)
                .matches("pod didn't trigger scale-up: 1 max node group size reached")
        );
        assert!(
            !Message::Exactly("pod triggered scale-up: [a b]")
                .matches("pod triggered scale-up: [b a]")
        );
    }

    #[test]
    fn metrics_samples_match_by_name_labels_in_any_order_and_number() {
        let want = |s| parse_sample(s).unwrap();
        let ours = r#"cluster_autoscaler_scaled_up_nodes_total{gpu_resource_name="",gpu_name="",dra_drivers="custom.driver"} 1"#;
        let go = r#"cluster_autoscaler_scaled_up_nodes_total{dra_drivers="custom.driver",gpu_name="",gpu_resource_name=""} 1.0"#;
        for line in [ours, go] {
            assert!(sample_matches(
                line,
                &want(r#"cluster_autoscaler_scaled_up_nodes_total{dra_drivers="custom.driver"} 1"#)
            ));
            assert!(sample_matches(
                line,
                &want("cluster_autoscaler_scaled_up_nodes_total")
            ));
            assert!(!sample_matches(
                line,
                &want(r#"cluster_autoscaler_scaled_up_nodes_total{dra_drivers=""}"#)
            ));
            assert!(!sample_matches(
                line,
                &want("cluster_autoscaler_scaled_up_nodes_total 10")
            ));
        }
        assert!(!sample_matches(
            ours,
            &want("cluster_autoscaler_scaled_up_nodes")
        ));
        assert!(sample_matches(
            r#"m{a="x\"y,z"} 2"#,
            &want(r#"m{a="x\"y,z"} 2"#)
        ));
        assert!(sample_matches(
            "cluster_autoscaler_cluster_safe_to_autoscale 1.0",
            &want("cluster_autoscaler_cluster_safe_to_autoscale 1")
        ));
        assert!(parse_sample("# HELP m text").is_none());
    }
}
