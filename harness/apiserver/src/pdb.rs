//! PodDisruptionBudgets and the `pods/eviction` subresource, as the
//! disruption controller and the eviction REST handler compute them.
//!
//! A budget's status is computed from the pods its selector matches in its
//! namespace: `expectedPods` (the matching pods for an integer
//! `minAvailable`; otherwise the sum of the scale of the pods' controllers),
//! `currentHealthy` (matching pods that are Ready and not terminating, minus
//! pods recently evicted and not yet gone), `desiredHealthy` (from
//! `minAvailable` or `maxUnavailable`, integers or percentages rounded up)
//! and `disruptionsAllowed = max(0, currentHealthy - desiredHealthy)`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use apimachinery::json::Lookup;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::registry::GroupResource;
use crate::server::{DeleteOptions, Deleted, Server, Subresource, WriteOptions};
use crate::store::Stored;
use apimachinery::labels::{LabelSelector, Labels};

/// The pod condition an eviction sets before it deletes the pod.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";

/// How long an evicted pod counts as disrupted while it is still present (upstream: 2 minutes).
const DISRUPTED_POD_TIMEOUT: Duration = Duration::from_secs(120);

/// The computed status of one budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetStatus {
    /// Pods the budget expects.
    pub expected: i64,
    /// Healthy pods now.
    pub current_healthy: i64,
    /// Healthy pods the budget requires.
    pub desired_healthy: i64,
    /// Evictions allowed now.
    pub disruptions_allowed: i64,
    /// Why the budget could not be computed, if it could not.
    pub error: Option<String>,
}

/// What a budget reads of a pod: its readiness and its controller, parsed
/// from the stored JSON without building the whole object.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct PodHealth {
    metadata: PodHealthMeta,
    status: PodHealthStatus,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PodHealthMeta {
    owner_references: Vec<OwnerRef>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct PodHealthStatus {
    conditions: Vec<Condition>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct Condition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

/// A budget's `spec.selector`, parsed from the stored JSON alone.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct BudgetSelector {
    spec: BudgetSpec,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct BudgetSpec {
    selector: Option<Value>,
}

impl BudgetSelector {
    fn of(pdb: &Stored) -> Option<Value> {
        serde_json::from_slice::<BudgetSelector>(&pdb.json)
            .ok()
            .and_then(|b| b.spec.selector)
    }
}

/// An owner reference, as a budget follows it to the pod's controller.
#[derive(Debug, Default, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct OwnerRef {
    api_version: String,
    kind: String,
    name: String,
    uid: String,
    controller: Option<bool>,
}

impl PodHealth {
    fn of(pod: &Stored) -> PodHealth {
        serde_json::from_slice(&pod.json).unwrap_or_default()
    }

    fn ready(&self) -> bool {
        self.status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    }

    fn controller(&self) -> Option<&OwnerRef> {
        self.metadata
            .owner_references
            .iter()
            .find(|r| r.controller == Some(true))
    }
}

/// Resolves an int-or-percent against a total, rounding up as upstream does.
pub fn scaled_value(v: &Value, total: i64) -> Result<i64, String> {
    match v {
        Value::Number(n) => n.as_i64().ok_or_else(|| format!("invalid value {n}")),
        Value::String(s) => match s.strip_suffix('%') {
            Some(p) => {
                let pct: i64 = p.parse().map_err(|_| format!("invalid value for IntOrString: invalid value {s:?}"))?;
                Ok((pct * total + 99) / 100)
            }
            None => s.parse().map_err(|_| format!("invalid value for IntOrString: invalid type: string {s:?}, expected a percentage")),
        },
        other => Err(format!("invalid value {other}")),
    }
}

impl Server {
    /// The pods of namespace `ns` that `selector` matches, with what a
    /// budget reads of each.
    fn pods_matching(
        &self,
        ns: &str,
        selector: &LabelSelector,
    ) -> Vec<(std::sync::Arc<Stored>, PodHealth)> {
        self.store
            .list_selected(&GroupResource::new("", "pods"), ns, selector)
            .into_iter()
            .map(|p| {
                let health = PodHealth::of(&p);
                (p, health)
            })
            .collect()
    }

    /// The replicas of the controller that owns a pod (Deployment through
    /// its ReplicaSet, ReplicaSet, ReplicationController, StatefulSet, or a
    /// custom resource with a scale subresource).
    fn controller_scale(&self, ns: &str, owner: &OwnerRef) -> Option<(String, i64)> {
        let (group, _) = owner
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", &owner.api_version));
        let (kind, name) = (owner.kind.as_str(), owner.name.as_str());
        let def = self.registry.by_kind(group, kind)?;
        let scale = def.scale.clone()?;
        let obj = self.store.get(&def.gr(), ns, name)?;
        let v = obj.value();
        if v.lookup("/metadata/uid").and_then(Value::as_str) != Some(owner.uid.as_str()) {
            return None;
        }
        // A ReplicaSet owned by a Deployment: the Deployment's scale counts.
        if kind == "ReplicaSet"
            && let Some(dep) = v
                .lookup("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .and_then(|refs| {
                    refs.iter()
                        .find(|r| r.get("kind").and_then(Value::as_str) == Some("Deployment"))
                })
        {
            let dname = dep.get("name").and_then(Value::as_str).unwrap_or("");
            if let Some(d) = self
                .store
                .get(&GroupResource::new("apps", "deployments"), ns, dname)
            {
                let dv = d.value();
                return Some((
                    d.uid.clone(),
                    dv.lookup("/spec/replicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(1),
                ));
            }
        }
        let replicas = crate::registry::lookup(&v, &scale.spec_replicas)
            .and_then(Value::as_i64)
            .unwrap_or(0);
        Some((obj.uid.clone(), replicas))
    }

    /// Computes a budget's status from the current pods.
    pub fn budget_status(&self, pdb: &Value) -> BudgetStatus {
        let ns = pdb
            .lookup("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        self.budget_status_of(pdb, ns)
    }

    /// Computes the status of a budget of namespace `ns` from the pods it
    /// selects now.
    fn budget_status_of(&self, pdb: &Value, ns: &str) -> BudgetStatus {
        let fail = |e: String| BudgetStatus {
            expected: 0,
            current_healthy: 0,
            desired_healthy: 0,
            disruptions_allowed: 0,
            error: Some(e),
        };
        let selector = match LabelSelector::from_value(pdb.lookup("/spec/selector")) {
            Ok(s) => s,
            Err(e) => return fail(e.to_string()),
        };
        let pods = self.pods_matching(ns, &selector);
        let now = self.clock.now();
        let disrupted: BTreeSet<String> = pdb
            .lookup("/status/disruptedPods")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter(|(_, t)| {
                        t.as_str()
                            .and_then(simclock::parse_rfc3339)
                            .is_some_and(|t| t + DISRUPTED_POD_TIMEOUT > now)
                    })
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        let healthy = pods
            .iter()
            .filter(|(p, h)| !p.deleting && h.ready() && !disrupted.contains(&p.name))
            .count() as i64;
        let (expected, desired) = match (
            pdb.lookup("/spec/minAvailable"),
            pdb.lookup("/spec/maxUnavailable"),
        ) {
            (Some(Value::Number(n)), _) => (pods.len() as i64, n.as_i64().unwrap_or(0)),
            (min, max) => {
                // Each controller looked up once: its pods share it.
                let mut scales: BTreeMap<&OwnerRef, Option<(String, i64)>> = BTreeMap::new();
                let mut controllers: BTreeMap<String, i64> = BTreeMap::new();
                for (p, h) in &pods {
                    let scale = h.controller().and_then(|owner| {
                        scales
                            .entry(owner)
                            .or_insert_with(|| self.controller_scale(ns, owner))
                            .clone()
                    });
                    match scale {
                        Some((uid, replicas)) => {
                            controllers.insert(uid, replicas);
                        }
                        None => return fail(format!("found no controllers for pod {:?}", p.name)),
                    }
                }
                let expected: i64 = controllers.values().sum();
                let desired = match (min, max) {
                    (Some(m), _) => scaled_value(m, expected),
                    (None, Some(m)) => scaled_value(m, expected).map(|u| (expected - u).max(0)),
                    (None, None) => Ok(expected),
                };
                match desired {
                    Ok(d) => (expected, d),
                    Err(e) => return fail(e),
                }
            }
        };
        BudgetStatus {
            expected,
            current_healthy: healthy,
            desired_healthy: desired,
            disruptions_allowed: (healthy - desired).max(0),
            error: None,
        }
    }

    /// Writes a budget's computed status (and `disruptedPods`) to the store.
    fn write_budget_status(
        &self,
        pdb: &Value,
        st: &BudgetStatus,
        disrupted: Option<(&str, String)>,
    ) -> ApiResult<()> {
        let def = self.def("policy", "poddisruptionbudgets")?;
        let ns = pdb
            .lookup("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        let name = pdb
            .lookup("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut new = pdb.clone();
        let mut disrupted_pods = pdb
            .lookup("/status/disruptedPods")
            .cloned()
            .unwrap_or(json!({}));
        let evicting = disrupted.is_some();
        if let (Some((pod, at)), Some(m)) = (disrupted, disrupted_pods.as_object_mut()) {
            m.insert(pod.to_string(), json!(at));
        }
        let allowed = if evicting {
            st.disruptions_allowed - 1
        } else {
            st.disruptions_allowed
        };
        let now = self.clock.rfc3339();
        let (cond_status, reason, message) = match &st.error {
            Some(e) => ("False", "SyncFailed", e.clone()),
            None if allowed > 0 => ("True", "SufficientPods", String::new()),
            None => ("False", "InsufficientPods", String::new()),
        };
        let generation = pdb
            .lookup("/metadata/generation")
            .cloned()
            .unwrap_or(json!(1));
        // Keep the transition time while the condition's status stays the same.
        let old_cond = pdb.lookup("/status/conditions/0");
        let now = match old_cond {
            Some(c) if c.get("status").and_then(Value::as_str) == Some(cond_status) => c
                .get("lastTransitionTime")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or(now),
            _ => now,
        };
        new["status"] = json!({
            "observedGeneration": generation,
            "disruptedPods": disrupted_pods,
            "disruptionsAllowed": allowed.max(0),
            "currentHealthy": st.current_healthy,
            "desiredHealthy": st.desired_healthy,
            "expectedPods": st.expected,
            "conditions": [{
                "type": "DisruptionAllowed", "status": cond_status, "reason": reason, "message": message,
                "lastTransitionTime": now, "observedGeneration": generation
            }]
        });
        // As the disruption controller: a status that would not change is
        // not written (no new resourceVersion, no watch event).
        if pdb.get("status") == Some(&new["status"]) {
            return Ok(());
        }
        let rv = pdb
            .lookup("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        new["metadata"]["resourceVersion"] = json!(rv);
        self.update(
            &def,
            ns,
            name,
            new,
            Subresource::Status,
            &WriteOptions::default(),
        )?;
        Ok(())
    }

    /// Recomputes and stores the status of every budget in a namespace.
    pub fn refresh_budgets(&self, ns: &str) -> ApiResult<()> {
        self.refresh_budgets_of(ns, None)
    }

    /// Recomputes and stores the status of a namespace's budgets: all of
    /// them, or (given the labels of the pods that changed) those that
    /// select one of those pods.
    pub fn refresh_budgets_of(&self, ns: &str, pods: Option<&BTreeSet<Labels>>) -> ApiResult<()> {
        let def = self.def("policy", "poddisruptionbudgets")?;
        let (_, pdbs) = self.store.list(&def.gr(), Some(ns), None);
        for p in pdbs {
            if let Some(pods) = pods {
                let selects = match LabelSelector::from_value(BudgetSelector::of(&p).as_ref()) {
                    Ok(s) => pods.iter().any(|l| s.matches(l)),
                    // A bad selector: its status says why, refreshed.
                    Err(_) => true,
                };
                if !selects {
                    continue;
                }
            }
            let v = p.value();
            let st = self.budget_status_of(&v, ns);
            match self.write_budget_status(&v, &st, None) {
                Ok(()) => {}
                Err(e) if e.code == 409 || e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The `pods/eviction` subresource: checks every budget that selects the
    /// pod and deletes the pod (with the eviction's delete options) only when
    /// the budget allows it; otherwise 429 naming the budget.
    ///
    /// The body is a `policy/v1` or a `policy/v1beta1` Eviction (every
    /// upstream Cluster Autoscaler up to 1.36 sends v1beta1): the two
    /// versions have the same fields and the same semantics.
    pub fn evict(&self, ns: &str, name: &str, eviction: &Value) -> ApiResult<Value> {
        let type_of = |key: &str| eviction.get(key).and_then(Value::as_str).unwrap_or("");
        let (api_version, kind) = (type_of("apiVersion"), type_of("kind"));
        if !matches!(api_version, "" | "policy/v1" | "policy/v1beta1")
            || !matches!(kind, "" | "Eviction")
        {
            return Err(ApiError::bad_request(format!(
                "the eviction of pod {ns}/{name} must be a policy/v1 or policy/v1beta1 Eviction, not {api_version}, Kind={kind}"
            )));
        }
        let pods = self.def("", "pods")?;
        let pdb_def = self.def("policy", "poddisruptionbudgets")?;
        let mut opts = match eviction.get("deleteOptions").filter(|d| !d.is_null()) {
            Some(d) => DeleteOptions::from_body(d).map_err(ApiError::bad_request)?,
            None => DeleteOptions::default(),
        };
        if let Some(n) = eviction.lookup("/metadata/name").and_then(Value::as_str)
            && n != name
        {
            return Err(ApiError::bad_request(format!(
                "name in URL does not match name in Eviction object ({n} != {name})"
            )));
        }
        for _ in 0..16 {
            let pod = self.get(&pods, ns, name)?;
            let pv = pod.value();
            if opts.precondition_uid.is_none() {
                opts.precondition_uid = Some(pod.uid.clone());
            }
            let phase = pv
                .lookup("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or("");
            let terminating = pv.lookup("/metadata/deletionTimestamp").is_some();
            // Pods that are done, not yet running, or already going need no budget.
            if matches!(phase, "Succeeded" | "Failed" | "Pending") || terminating {
                return self.finish_eviction(&pods, ns, name, &opts);
            }
            let (_, pdbs) = self.store.list(&pdb_def.gr(), Some(ns), None);
            // Only the selectors are read of the namespace's budgets; the
            // matching one is parsed whole.
            let matching: Vec<Value> = pdbs
                .iter()
                .filter(|p| {
                    LabelSelector::from_value(BudgetSelector::of(p).as_ref())
                        .is_ok_and(|s| s.matches(&pod.labels))
                })
                .map(|p| p.value())
                .collect();
            if matching.len() > 1 {
                return Err(ApiError::internal(
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                ));
            }
            let Some(pdb) = matching.into_iter().next() else {
                return self.finish_eviction(&pods, ns, name, &opts);
            };
            let pdb_name = pdb
                .lookup("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let st = self.budget_status(&pdb);
            let unhealthy_ok = !PodHealth::of(&pod).ready()
                && (pdb
                    .lookup("/spec/unhealthyPodEvictionPolicy")
                    .and_then(Value::as_str)
                    == Some("AlwaysAllow")
                    || st.current_healthy >= st.desired_healthy && st.error.is_none());
            if unhealthy_ok {
                return self.finish_eviction(&pods, ns, name, &opts);
            }
            if st.disruptions_allowed <= 0 || st.error.is_some() {
                let detail = match &st.error {
                    Some(e) => {
                        format!("The disruption budget {pdb_name} does not allow evictions: {e}")
                    }
                    None => format!(
                        "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
                        st.desired_healthy, st.current_healthy
                    ),
                };
                let _ = self.write_budget_status(&pdb, &st, None);
                return Err(ApiError::too_many_requests(
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    vec![("DisruptionBudget".into(), detail)],
                ));
            }
            // Record the disruption first; a concurrent eviction then sees it (409 → retry).
            match self.write_budget_status(&pdb, &st, Some((name, self.clock.rfc3339()))) {
                Ok(()) => return self.finish_eviction(&pods, ns, name, &opts),
                Err(e) if e.code == 409 => continue,
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::too_many_requests(
            "Cannot evict pod: the disruption budget kept changing; try again",
            vec![],
        ))
    }

    fn finish_eviction(
        &self,
        pods: &crate::registry::ResourceDef,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> ApiResult<Value> {
        let mut opts = opts.clone();
        if !opts.dry_run {
            self.mark_disruption_target(pods, ns, name, &mut opts)?;
        }
        match self.delete(pods, ns, name, &opts)? {
            Deleted::Gone(_) | Deleted::Pending(_) => {}
        }
        Ok(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        )
    }

    /// As the eviction handler with pod disruption conditions (GA in 1.31):
    /// the pod's status gets the condition `DisruptionTarget` (reason
    /// `EvictionByEvictionAPI`) before it is deleted, so that whoever sees
    /// it go knows an eviction took it. A resourceVersion precondition
    /// moves to the version this write gives; a precondition the pod does
    /// not meet leaves it untouched, for the deletion to refuse.
    fn mark_disruption_target(
        &self,
        pods: &crate::registry::ResourceDef,
        ns: &str,
        name: &str,
        opts: &mut DeleteOptions,
    ) -> ApiResult<()> {
        let pod = self.get(pods, ns, name)?;
        let uid_differs = opts
            .precondition_uid
            .as_ref()
            .is_some_and(|u| *u != pod.uid);
        let rv_differs = opts
            .precondition_rv
            .as_ref()
            .is_some_and(|rv| *rv != pod.rv.to_string());
        if uid_differs || rv_differs {
            return Ok(());
        }
        let mut v = pod.value();
        if !v["status"].is_object() {
            v["status"] = json!({});
        }
        let now = self.clock.rfc3339();
        let condition = json!({"type": DISRUPTION_TARGET, "status": "True",
            "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"});
        let conditions = v
            .pointer_mut("/status")
            .and_then(Value::as_object_mut)
            .map(|st| st.entry("conditions").or_insert_with(|| json!([])));
        let Some(Value::Array(conditions)) = conditions else {
            return Ok(());
        };
        match conditions
            .iter_mut()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(DISRUPTION_TARGET))
        {
            Some(c) => {
                if c.get("status").and_then(Value::as_str) != Some("True") {
                    c["lastTransitionTime"] = json!(now);
                }
                for key in ["status", "reason", "message"] {
                    c[key] = condition[key].clone();
                }
            }
            None => {
                let mut c = condition;
                c["lastTransitionTime"] = json!(now);
                conditions.push(c);
            }
        }
        self.update(
            pods,
            ns,
            name,
            v,
            Subresource::Status,
            &WriteOptions::default(),
        )?;
        if opts.precondition_rv.is_some() {
            opts.precondition_rv = Some(self.get(pods, ns, name)?.rv.to_string());
        }
        Ok(())
    }

    /// The `pods/binding` subresource: assigns an unbound pod to a node.
    pub fn bind(&self, ns: &str, name: &str, binding: &Value) -> ApiResult<Value> {
        let pods = self.def("", "pods")?;
        let node = binding
            .lookup("/target/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                ApiError::invalid(
                    "",
                    "Binding",
                    name,
                    vec![crate::error::Cause::required("target.name")],
                )
            })?
            .to_string();
        if let Some(kind) = binding.lookup("/target/kind").and_then(Value::as_str)
            && !kind.is_empty()
            && kind != "Node"
        {
            return Err(ApiError::invalid(
                "",
                "Binding",
                name,
                vec![crate::error::Cause::invalid(
                    "target.kind",
                    kind,
                    "must be empty or Node",
                )],
            ));
        }
        let uid = binding
            .lookup("/metadata/uid")
            .and_then(Value::as_str)
            .map(str::to_string);
        let now = self.clock.rfc3339();
        loop {
            let cur = self.get(&pods, ns, name)?;
            let mut pod = cur.value();
            if uid
                .as_deref()
                .is_some_and(|u| !u.is_empty() && u != cur.uid)
            {
                return Err(ApiError::conflict(
                    "",
                    "pods",
                    name,
                    "the UID in the binding does not match the pod",
                ));
            }
            if pod.lookup("/metadata/deletionTimestamp").is_some() {
                return Err(ApiError::conflict(
                    "",
                    "pods",
                    name,
                    "pod is being deleted, cannot be assigned to a host",
                ));
            }
            if let Some(existing) = pod
                .lookup("/spec/nodeName")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                return Err(ApiError::conflict(
                    "",
                    "pods",
                    name,
                    &format!("pod {name} is already assigned to node {existing:?}"),
                ));
            }
            pod["spec"]["nodeName"] = json!(node);
            let conds = pod["status"]
                .as_object_mut()
                .map(|s| s.entry("conditions").or_insert(json!([])));
            if let Some(Value::Array(conds)) = conds {
                conds.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
                conds.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}));
            }
            match self.store.update(&pods, cur.rv, pod) {
                Ok(_) => {
                    return Ok(
                        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
                    );
                }
                Err(crate::store::StoreError::Conflict(_)) => continue,
                Err(e) => return Err(ApiError::internal(e.to_string())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn percentages_round_up() {
        assert_eq!(scaled_value(&json!("50%"), 3), Ok(2));
        assert_eq!(scaled_value(&json!("10%"), 10), Ok(1));
        assert_eq!(scaled_value(&json!("34%"), 3), Ok(2));
        assert_eq!(scaled_value(&json!(2), 10), Ok(2));
        assert_eq!(scaled_value(&json!("2"), 10), Ok(2));
        assert!(scaled_value(&json!("x%"), 10).is_err());
    }
}
