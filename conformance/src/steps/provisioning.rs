//! ProvisioningRequests (the FAQ's "How can I use ProvisioningRequest to run
//! batch workloads?"): the CRD, pod templates, requests, and what CA wrote
//! on them.
//!
//! - `Given the ProvisioningRequest CRD is installed` (upstream's CRD,
//!   before the autoscaler starts: CA waits for its list)
//! - `Given the autoscaler runs with CA's default API content type` (drops
//!   a `--kube-api-content-type` given before)
//! - `Given a pod template "job" of pods requesting 3 CPU` (the pod clauses
//!   of [`super::workloads`])
//! - `Given a ProvisioningRequest "batch" of class "check-capacity.autoscaling.x-k8s.io"
//!   for 2 pods of "job"` (more pod sets: `for 2 pods of "a" and 1 pod of
//!   "b"`; ` with parameter "noRetry=true"`); `When ... is created`
//! - `When creating a ProvisioningRequest "bad" of class "..." for 0 pods of
//!   "job" is refused with "..."` (the API server's error, which the CRD's
//!   schema decides)
//! - `Then within 3 minutes the ProvisioningRequest "batch" has the
//!   condition "Provisioned=True" with reason "CapacityIsFound"` (` and
//!   message "..."`)
//! - `Then the ProvisioningRequest "batch" gets no condition for 5 minutes`
//! - `Then within 16 minutes the ProvisioningRequest "batch" is retried 3
//!   times, each wait longer than the last` (the transition times of its
//!   `Provisioned=False` condition, which the API server keeps to the
//!   second)

use std::time::{Duration, SystemTime};

use autoscaler::provisioningrequest::ProvisioningRequest;
use cucumber::{given, then, when};
use kube::Api;
use serde_json::{Value, json};

use super::minutes;
use super::workloads::PodShape;
use crate::world::{CaWorld, StepResult};

#[given(regex = r"^the ProvisioningRequest CRD is installed$")]
async fn crd_installed(w: &mut CaWorld) -> StepResult {
    if w.running.is_some() {
        return Err("install the CRD before the cluster starts (a Given)".into());
    }
    w.crds.push(crate::provreq::crd()?);
    Ok(())
}

/// Drops the Background's `--kube-api-content-type`: the autoscaler talks
/// to the API server in CA's default content type (protobuf).
#[given(regex = r"^the autoscaler runs with CA's default API content type$")]
fn default_content_type(w: &mut CaWorld) {
    w.flags
        .retain(|f| !f.starts_with("--kube-api-content-type"));
}

#[given(regex = r#"^a pod template "(\S+)" of pods requesting (\S+) CPU(.*)$"#)]
#[when(regex = r#"^a pod template "(\S+)" of pods requesting (\S+) CPU(.*) is created$"#)]
async fn pod_template(w: &mut CaWorld, name: String, cpu: String, clauses: String) -> StepResult {
    let shape = PodShape::new(&name, &cpu, &clauses)?;
    w.create(json!({"apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": shape.namespace},
        "template": shape.template()}))
        .await
}

/// A request from the step's words: `2 pods of "a" and 1 pod of "b"`, then
/// ` with parameter "k=v"` and ` in namespace "ns"` clauses.
fn request(name: &str, class: &str, sets: &str) -> Result<Value, String> {
    let (sets, clauses) = match sets
        .find(" with parameter ")
        .or(sets.find(" in namespace "))
    {
        Some(i) => sets.split_at(i),
        None => (sets, ""),
    };
    let set = regex::Regex::new(r#"^(-?\d+) pods? of "([^"]+)"$"#).map_err(|e| e.to_string())?;
    let mut pod_sets = Vec::new();
    for part in sets.split(" and ") {
        let c = set
            .captures(part.trim())
            .ok_or_else(|| format!("{part:?}: want `<count> pods of \"<template>\"`"))?;
        let count: i64 = c[1].parse().map_err(|e| format!("{}: {e}", &c[1]))?;
        pod_sets.push(json!({"podTemplateRef": {"name": &c[2]}, "count": count}));
    }
    let clause = regex::Regex::new(r#" (with parameter|in namespace) "([^"]*)""#)
        .map_err(|e| e.to_string())?;
    let mut parameters = serde_json::Map::new();
    let mut namespace = "default".to_string();
    for c in clause.captures_iter(clauses) {
        if &c[1] == "in namespace" {
            namespace = c[2].to_string();
        } else {
            let (k, v) = c[2]
                .split_once('=')
                .ok_or_else(|| format!("parameter {:?}: want k=v", &c[2]))?;
            parameters.insert(k.into(), json!(v));
        }
    }
    let mut spec = json!({"provisioningClassName": class, "podSets": pod_sets});
    if !parameters.is_empty() {
        spec["parameters"] = Value::Object(parameters);
    }
    Ok(
        json!({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": namespace}, "spec": spec}),
    )
}

#[given(regex = r#"^a ProvisioningRequest "(\S+)" of class "(\S+)" for (.+?)$"#)]
async fn a_request(w: &mut CaWorld, name: String, class: String, sets: String) -> StepResult {
    let pr = request(&name, &class, &sets)?;
    w.create(pr).await
}

#[when(regex = r#"^a ProvisioningRequest "(\S+)" of class "(\S+)" for (.+?) is created$"#)]
async fn request_created(w: &mut CaWorld, name: String, class: String, sets: String) -> StepResult {
    a_request(w, name, class, sets).await
}

#[when(
    regex = r#"^creating a ProvisioningRequest "(\S+)" of class "(\S+)" for (.+?) is refused with "(.*)"$"#
)]
async fn request_refused(
    w: &mut CaWorld,
    name: String,
    class: String,
    sets: String,
    want: String,
) -> StepResult {
    let pr = request(&name, &class, &sets)?;
    let r = w.running().await?;
    match r.cluster.create(pr).await {
        Ok(()) => Err(format!(
            "the API server accepted ProvisioningRequest {name}"
        )),
        Err(e) if e.to_string().contains(&want) => Ok(()),
        Err(e) => Err(format!("refused, but not with {want:?}: {e}")),
    }
}

/// The request as the API server has it.
async fn read(w: &mut CaWorld, name: &str) -> Result<ProvisioningRequest, String> {
    let r = w.running().await?;
    Api::<ProvisioningRequest>::namespaced(r.cluster.client(), "default")
        .get(name)
        .await
        .map_err(|e| format!("reading ProvisioningRequest {name}: {e}"))
}

/// Its conditions as `Type=Status (Reason: message)`.
fn shown(pr: &ProvisioningRequest) -> Vec<String> {
    pr.conditions()
        .iter()
        .map(|c| format!("{}={} ({}: {})", c.type_, c.status, c.reason, c.message))
        .collect()
}

async fn expect_condition(
    w: &mut CaWorld,
    (within, name): (u64, &str),
    (type_, status): (&str, &str),
    reason: &str,
    message: Option<&str>,
) -> StepResult {
    let window = w.running().await?.window(minutes(within));
    let mut last = Vec::new();
    for _ in 0..=window.as_secs().div_ceil(5) {
        let pr = read(w, name).await?;
        let found = pr.conditions().iter().any(|c| {
            c.type_ == type_
                && c.status == status
                && c.reason == reason
                && message.is_none_or(|m| c.message == m)
        });
        if found {
            return Ok(());
        }
        last = shown(&pr);
        w.pass(Duration::from_secs(5)).await?;
    }
    Err(format!(
        "ProvisioningRequest {name} has no {type_}={status} condition with reason {reason}{}; its conditions: {last:?}",
        message
            .map(|m| format!(" and message {m:?}"))
            .unwrap_or_default()
    ))
}

#[then(
    regex = r#"^within (\d+) minutes? the ProvisioningRequest "(\S+)" has the condition "(\w+)=(True|False)" with reason "(\w+)"(.*)$"#
)]
async fn has_condition(
    w: &mut CaWorld,
    within: u64,
    name: String,
    type_: String,
    status: String,
    reason: String,
    rest: String,
) -> StepResult {
    let message = match rest.as_str() {
        "" => None,
        _ => Some(
            rest.strip_prefix(" and message \"")
                .and_then(|m| m.strip_suffix('"'))
                .ok_or_else(|| format!("{rest:?}: want ` and message \"...\"`"))?,
        ),
    };
    expect_condition(w, (within, &name), (&type_, &status), &reason, message).await
}

#[then(
    regex = r#"^within (\d+) minutes?, of the ProvisioningRequests (".*"), (\d+) (?:has|have) the condition "Provisioned=True" with reason "(\w+)" and (\d+) "Provisioned=False" with reason "(\w+)"$"#
)]
async fn split_verdicts(
    w: &mut CaWorld,
    within: u64,
    names: String,
    yes: usize,
    yes_reason: String,
    no: usize,
    no_reason: String,
) -> StepResult {
    let names = super::quoted_list(&names);
    let window = w.running().await?.window(minutes(within));
    let mut seen = Vec::new();
    for _ in 0..=window.as_secs().div_ceil(5) {
        seen.clear();
        for name in &names {
            let pr = read(w, name).await?;
            let provisioned = pr
                .conditions()
                .iter()
                .find(|c| c.type_ == "Provisioned")
                .map(|c| (c.status.clone(), c.reason.clone()));
            seen.push((name.clone(), provisioned));
        }
        if seen.iter().all(|(_, p)| p.is_some()) {
            break;
        }
        w.pass(Duration::from_secs(5)).await?;
    }
    let count = |status: &str, reason: &str| {
        seen.iter()
            .filter(|(_, p)| p.as_ref().is_some_and(|(s, r)| s == status && r == reason))
            .count()
    };
    if count("True", &yes_reason) == yes && count("False", &no_reason) == no {
        Ok(())
    } else {
        Err(format!(
            "want {yes} Provisioned=True ({yes_reason}) and {no} Provisioned=False ({no_reason}); Provisioned conditions: {seen:?}"
        ))
    }
}

#[then(regex = r#"^the ProvisioningRequest "(\S+)" gets no condition for (\d+) minutes?$"#)]
async fn no_condition(w: &mut CaWorld, name: String, during: u64) -> StepResult {
    for i in 0..=(during * 6) {
        let pr = read(w, &name).await?;
        if !pr.conditions().is_empty() {
            return Err(format!(
                "ProvisioningRequest {name} got conditions after {}s: {:?}",
                i * 10,
                shown(&pr)
            ));
        }
        if i < during * 6 {
            w.pass(Duration::from_secs(10)).await?;
        }
    }
    Ok(())
}

#[then(
    regex = r#"^within (\d+) minutes? the ProvisioningRequest "(\S+)" is retried (\d+) times?, each wait longer than the last$"#
)]
async fn retried_with_backoff(
    w: &mut CaWorld,
    within: u64,
    name: String,
    retries: usize,
) -> StepResult {
    let window = w.running().await?.window(minutes(within));
    let mut checks: Vec<SystemTime> = Vec::new();
    for _ in 0..=window.as_secs().div_ceil(5) {
        let pr = read(w, &name).await?;
        let at = pr
            .conditions()
            .iter()
            .find(|c| c.type_ == "Provisioned" && c.status == "False")
            .map(|c| SystemTime::from(c.last_transition_time.0));
        if let Some(at) = at
            && checks.last() != Some(&at)
        {
            checks.push(at);
        }
        if checks.len() > retries {
            break;
        }
        w.pass(Duration::from_secs(5)).await?;
    }
    let waits: Vec<Duration> = checks
        .windows(2)
        .map(|p| p[1].duration_since(p[0]).unwrap_or_default())
        .collect();
    let shown: Vec<String> = waits.iter().map(|d| format!("{}s", d.as_secs())).collect();
    if waits.len() < retries {
        return Err(format!(
            "ProvisioningRequest {name} was retried {} times in {within} minutes (waits {shown:?}), want {retries}",
            waits.len()
        ));
    }
    let growing = waits.windows(2).all(|p| p[1] > p[0]);
    if growing {
        Ok(())
    } else {
        Err(format!(
            "ProvisioningRequest {name}: the waits between retries do not grow: {shown:?}"
        ))
    }
}
