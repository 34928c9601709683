//! CapacityBuffers and CapacityQuotas (CA 1.34-1.37's capacity APIs): the
//! CRDs, buffers, quotas, and what CA wrote on them. Buffers and quotas are
//! written as YAML with `the following objects` (upstream's API docs are
//! YAML), or with the short steps below.
//!
//! - `Given the CapacityBuffer and CapacityQuota CRDs are installed`
//! - `Given a CapacityBuffer "spare" of 2 pods of "job"` (`podTemplateRef`
//!   and `replicas`); `When ... is created`
//! - `When the CapacityBuffer "spare" is deleted`
//! - `When creating the following object is refused with "..."` (the API
//!   server's error: the CRD's schema and CEL rules decide)
//! - `Then within 3 minutes the CapacityBuffer "spare" has the condition
//!   "ReadyForProvisioning=True" with reason "AttributesSetSuccessfully"`
//!   (` and message "..."`; also `the CapacityQuota "q"`)
//! - `Then within 3 minutes the CapacityBuffer "spare" has 2 replicas`
//! - `Then within 3 minutes the CapacityQuota "q" reports "cpu=8" used`
//! - `When the CapacityQuota "q" is changed to limit "nodes=3"` (a merge
//!   patch of the spec: its generation goes up)
//! - `Then within 1 minute the CapacityQuota "q" has observed generation 2`
//!   (`status.observedGeneration`, CA 1.37)
//! - `Then no pod of the CapacityBuffer "spare" exists` (its fake pods live
//!   in the simulation only)
//! - `When a ResourceQuota "q" allows "requests.cpu=7" with "requests.cpu=1"
//!   used` (the quota and the status kube-controller-manager would write:
//!   the embedded cluster has no quota controller)

use std::time::Duration;

use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use kube::Api;
use kube::api::{ApiResource, DynamicObject};
use serde_json::{Value, json};

use super::minutes;
use crate::world::{CaWorld, StepResult};

#[given(regex = r"^the CapacityBuffer and CapacityQuota CRDs are installed$")]
async fn crds_installed(w: &mut CaWorld) -> StepResult {
    if w.running.is_some() {
        return Err("install the CRDs before the cluster starts (a Given)".into());
    }
    w.crds.extend(crate::capacity::crds()?);
    Ok(())
}

#[given(regex = r#"^a CapacityBuffer "(\S+)" of (\d+) pods? of "(\S+)"$"#)]
#[when(regex = r#"^a CapacityBuffer "(\S+)" of (\d+) pods? of "(\S+)" is created$"#)]
async fn a_buffer(w: &mut CaWorld, name: String, replicas: i64, template: String) -> StepResult {
    w.create(
        json!({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"podTemplateRef": {"name": template}, "replicas": replicas}}),
    )
    .await
}

#[when(regex = r#"^the CapacityBuffer "(\S+)" is deleted$"#)]
async fn buffer_deleted(w: &mut CaWorld, name: String) -> StepResult {
    let r = w.running().await?;
    api(r.cluster.client(), Kind::Buffer)
        .delete(&name, &Default::default())
        .await
        .map(|_| ())
        .map_err(|e| format!("deleting CapacityBuffer {name}: {e}"))
}

#[when(regex = r#"^the CapacityQuota "(\S+)" is changed to limit "([^"=]+)=([^"]+)"$"#)]
async fn quota_limit_changed(
    w: &mut CaWorld,
    name: String,
    resource: String,
    amount: String,
) -> StepResult {
    let r = w.running().await?;
    let amount = amount
        .parse::<i64>()
        .map_or_else(|_| json!(amount), |n| json!(n));
    let patch = json!({"spec": {"limits": {"resources": {resource: amount}}}});
    api(r.cluster.client(), Kind::Quota)
        .patch(&name, &Default::default(), &kube::api::Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| format!("changing the limits of CapacityQuota {name}: {e}"))
}

#[when(regex = r#"^creating the following object is refused with "(.*)"$"#)]
async fn refused(w: &mut CaWorld, want: String, step: &Step) -> StepResult {
    let text = step
        .docstring
        .as_deref()
        .ok_or("this step needs the object as a YAML doc string")?;
    let obj: Value = serde_saphyr::from_str(text).map_err(|e| format!("the YAML: {e}"))?;
    let r = w.running().await?;
    match r.cluster.create(obj).await {
        Ok(()) => Err("the API server accepted the object".into()),
        Err(e) if e.to_string().contains(&want.replace("\\\"", "\"")) => Ok(()),
        Err(e) => Err(format!("refused, but not with {want:?}: {e}")),
    }
}

/// The two kinds.
#[derive(Clone, Copy)]
enum Kind {
    Buffer,
    Quota,
}

impl Kind {
    fn parse(s: &str) -> Self {
        if s == "CapacityQuota" {
            Self::Quota
        } else {
            Self::Buffer
        }
    }
}

fn api(client: kube::Client, kind: Kind) -> Api<DynamicObject> {
    let (version, k, plural) = match kind {
        Kind::Buffer => ("v1beta1", "CapacityBuffer", "capacitybuffers"),
        Kind::Quota => ("v1beta1", "CapacityQuota", "capacityquotas"),
    };
    let ar = ApiResource {
        group: "autoscaling.x-k8s.io".into(),
        version: version.into(),
        api_version: format!("autoscaling.x-k8s.io/{version}"),
        kind: k.into(),
        plural: plural.into(),
    };
    match kind {
        Kind::Buffer => Api::namespaced_with(client, "default", &ar),
        Kind::Quota => Api::all_with(client, &ar),
    }
}

/// The object's status, as the API server has it.
async fn status(w: &mut CaWorld, kind: Kind, name: &str) -> Result<Value, String> {
    let r = w.running().await?;
    let o = api(r.cluster.client(), kind)
        .get(name)
        .await
        .map_err(|e| format!("reading {name}: {e}"))?;
    Ok(o.data.get("status").cloned().unwrap_or(Value::Null))
}

/// Conditions as `Type=Status (Reason: message)`.
fn shown(status: &Value) -> Vec<String> {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{}={} ({}: {})",
                c["type"].as_str().unwrap_or(""),
                c["status"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// Reads the object every 5 s for `within` minutes until `check` holds of
/// its status; the error shows the last status seen.
async fn eventually(
    w: &mut CaWorld,
    within: u64,
    (kind, name): (Kind, &str),
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> StepResult {
    let window = w.running().await?.window(minutes(within));
    let mut last = Value::Null;
    for _ in 0..=window.as_secs().div_ceil(5) {
        last = status(w, kind, name).await?;
        if check(&last) {
            return Ok(());
        }
        w.pass(Duration::from_secs(5)).await?;
    }
    Err(format!(
        "{name} has no {what} within {within} minutes; its conditions: {:?}; its status: {last}",
        shown(&last)
    ))
}

#[then(
    regex = r#"^within (\d+) minutes? the (CapacityBuffer|CapacityQuota) "(\S+)" has the condition "([\w./-]+=(?:True|False))" with reason "(\w*)"(.*)$"#
)]
async fn has_condition(
    w: &mut CaWorld,
    within: u64,
    kind: String,
    name: String,
    condition: String,
    reason: String,
    rest: String,
) -> StepResult {
    let (type_, state) = condition
        .split_once('=')
        .ok_or_else(|| format!("{condition:?}: want Type=Status"))?;
    let message = match rest.as_str() {
        "" => None,
        _ => Some(
            rest.strip_prefix(" and message \"")
                .and_then(|m| m.strip_suffix('"'))
                .ok_or_else(|| format!("{rest:?}: want ` and message \"...\"`"))?
                .replace("\\\"", "\""),
        ),
    };
    let what = format!("{type_}={state} condition with reason {reason:?} and message {message:?}");
    eventually(w, within, (Kind::parse(&kind), &name), &what, |s| {
        s["conditions"].as_array().into_iter().flatten().any(|c| {
            c["type"] == type_
                && c["status"] == state
                && c["reason"] == reason.as_str()
                && message.as_deref().is_none_or(|m| c["message"] == m)
        })
    })
    .await
}

#[then(regex = r#"^within (\d+) minutes? the CapacityBuffer "(\S+)" has (\d+) replicas?$"#)]
async fn has_replicas(w: &mut CaWorld, within: u64, name: String, replicas: i64) -> StepResult {
    let what = format!("status.replicas {replicas}");
    eventually(w, within, (Kind::Buffer, &name), &what, |s| {
        s["replicas"].as_i64() == Some(replicas)
    })
    .await
}

#[then(
    regex = r#"^within (\d+) minutes? the CapacityQuota "(\S+)" reports "([^"=]+)=([^"]+)" used$"#
)]
async fn reports_used(
    w: &mut CaWorld,
    within: u64,
    name: String,
    resource: String,
    amount: String,
) -> StepResult {
    let what = format!("status.used {resource}={amount}");
    eventually(w, within, (Kind::Quota, &name), &what, |s| {
        s["used"]["resources"][resource.as_str()] == amount.as_str()
    })
    .await
}

#[then(
    regex = r#"^within (\d+) minutes? the CapacityQuota "(\S+)" has observed generation (\d+)$"#
)]
async fn observed_generation(
    w: &mut CaWorld,
    within: u64,
    name: String,
    generation: i64,
) -> StepResult {
    let what = format!("status.observedGeneration {generation}");
    eventually(w, within, (Kind::Quota, &name), &what, |s| {
        s["observedGeneration"].as_i64() == Some(generation)
    })
    .await
}

#[then(regex = r#"^no pod of the CapacityBuffer "(\S+)" exists$"#)]
async fn no_fake_pod(w: &mut CaWorld, name: String) -> StepResult {
    let r = w.running().await?;
    let pods = Api::<k8s_openapi::api::core::v1::Pod>::all(r.cluster.client())
        .list(&Default::default())
        .await
        .map_err(|e| format!("listing pods: {e}"))?;
    let prefix = format!("capacity-buffer-{name}-");
    let fake: Vec<String> = pods
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .filter(|n| n.starts_with(&prefix))
        .collect();
    if fake.is_empty() {
        Ok(())
    } else {
        Err(format!("the cluster has pods of buffer {name}: {fake:?}"))
    }
}

/// `k=v,k=v` as a ResourceList.
fn resource_list(text: &str) -> Result<Value, String> {
    let mut out = serde_json::Map::new();
    for kv in text.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("{kv:?}: want resource=amount"))?;
        out.insert(k.trim().into(), json!(v.trim()));
    }
    Ok(Value::Object(out))
}

/// A namespace ResourceQuota of `default` and its status, as
/// kube-controller-manager's quota controller would write it (the embedded
/// cluster has none): `hard` from the spec and `used` as given.
#[when(regex = r#"^a ResourceQuota "(\S+)" allows "([^"]+)" with "([^"]*)" used$"#)]
async fn resource_quota(w: &mut CaWorld, name: String, hard: String, used: String) -> StepResult {
    let (hard, used) = (resource_list(&hard)?, resource_list(&used)?);
    let r = w.running().await?;
    let api =
        Api::<k8s_openapi::api::core::v1::ResourceQuota>::namespaced(r.cluster.client(), "default");
    let mut q: k8s_openapi::api::core::v1::ResourceQuota =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"hard": hard}}))
            .map_err(|e| e.to_string())?;
    q = api
        .create(&Default::default(), &q)
        .await
        .map_err(|e| format!("creating ResourceQuota {name}: {e}"))?;
    q.status = Some(
        serde_json::from_value(json!({"hard": hard, "used": used})).map_err(|e| e.to_string())?,
    );
    api.replace_status(&name, &Default::default(), &q)
        .await
        .map(|_| ())
        .map_err(|e| format!("writing the status of ResourceQuota {name}: {e}"))
}
