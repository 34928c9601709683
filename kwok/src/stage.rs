//! kwok's Stage API (`kwok.x-k8s.io/v1alpha1`, kind `Stage`): which objects a
//! stage applies to, how long it waits, and what it does.
//!
//! Supported: `resourceRef`, `selector` (`matchLabels`, `matchAnnotations`,
//! `matchExpressions` in the `jq` form or the deprecated flat form, with
//! `In`/`NotIn`/`Exists`/`DoesNotExist`), `weight` and `weightFrom`, `delay`
//! (`durationMilliseconds`, `durationFrom`, `jitterDurationMilliseconds`,
//! `jitterDurationFrom`), `steps` (`event`, `finalizers`, `patch` with
//! `subresource`/`root`/`type`, `delete`) and the deprecated `next`
//! (converted to steps in upstream's order, docs/reference/kwok-rules.md §2.6), and
//! `immediateNextStage`. Templates are the subset documented in
//! [`crate::template`]. CEL expressions and `apply` steps are refused when
//! the stage is loaded, with an error naming the stage.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::jq::{JqError, Query};
use crate::template::{Template, TemplateError};

/// Go durations, as `delay.durationFrom` may yield them.
pub use simclock::parse_go_duration;

/// A Stage object.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    /// `kwok.x-k8s.io/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// `Stage`.
    #[serde(default)]
    pub kind: String,
    /// Metadata (the name matters).
    #[serde(default)]
    pub metadata: StageMeta,
    /// The spec.
    pub spec: StageSpec,
}

/// Stage metadata.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct StageMeta {
    /// Stage name.
    #[serde(default)]
    pub name: String,
}

/// `spec` of a Stage.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageSpec {
    /// The kind the stage drives.
    pub resource_ref: ResourceRef,
    /// Which objects it applies to; a stage without one never applies.
    #[serde(default)]
    pub selector: Option<Selector>,
    /// Weight among matching stages.
    #[serde(default)]
    pub weight: i64,
    /// Weight read from the object (falls back to `weight`).
    #[serde(default)]
    pub weight_from: Option<ExpressionFrom>,
    /// Delay before the action.
    #[serde(default)]
    pub delay: Option<Delay>,
    /// The deprecated single action bundle (ignored when `steps` is set).
    #[serde(default)]
    pub next: Next,
    /// Ordered actions.
    #[serde(default)]
    pub steps: Vec<Step>,
    /// Re-evaluate at once after a patch instead of waiting for the watch.
    #[serde(default)]
    pub immediate_next_stage: bool,
}

/// `resourceRef`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRef {
    /// `v1` for core kinds.
    #[serde(default)]
    pub api_group: String,
    /// `Node` or `Pod`.
    pub kind: String,
}

/// `selector`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Selector {
    /// Labels that must be equal.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// Annotations that must be equal.
    #[serde(default)]
    pub match_annotations: BTreeMap<String, String>,
    /// jq expressions.
    #[serde(default)]
    pub match_expressions: Vec<Expression>,
}

/// One `matchExpressions` entry: `{jq: {key, operator, values}}`, or the
/// deprecated flat `{key, operator, values}`; `{cel: ...}` is refused.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Expression {
    /// A jq query on the object (flat form).
    #[serde(default)]
    pub key: Option<String>,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist` (flat form).
    #[serde(default)]
    pub operator: Option<String>,
    /// Values for In/NotIn (flat form).
    #[serde(default)]
    pub values: Vec<String>,
    /// The `jq` form.
    #[serde(default)]
    pub jq: Option<JqSelector>,
    /// The `cel` form (not supported).
    #[serde(default)]
    pub cel: Option<Value>,
}

/// `matchExpressions[].jq`.
#[derive(Debug, Clone, Deserialize)]
pub struct JqSelector {
    /// A jq query on the object.
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`.
    pub operator: String,
    /// Values for In/NotIn.
    #[serde(default)]
    pub values: Vec<String>,
}

/// `delay`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delay {
    /// Fixed delay.
    #[serde(default)]
    pub duration_milliseconds: Option<u64>,
    /// Delay read from the object.
    #[serde(default)]
    pub duration_from: Option<ExpressionFrom>,
    /// Jitter bound.
    #[serde(default)]
    pub jitter_duration_milliseconds: Option<u64>,
    /// Jitter bound read from the object.
    #[serde(default)]
    pub jitter_duration_from: Option<ExpressionFrom>,
}

/// `{jq: {expression}}`, `{cel: {expression}}` or the deprecated
/// `{expressionFrom: <jq>}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpressionFrom {
    /// Deprecated jq form.
    #[serde(default)]
    pub expression_from: Option<String>,
    /// The `jq` form.
    #[serde(default)]
    pub jq: Option<ExpressionText>,
    /// The `cel` form (not supported).
    #[serde(default)]
    pub cel: Option<ExpressionText>,
}

/// `{expression: ...}`.
#[derive(Debug, Clone, Deserialize)]
pub struct ExpressionText {
    /// The expression.
    pub expression: String,
}

/// `next` (deprecated).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Next {
    /// An event to record.
    #[serde(default)]
    pub event: Option<EventSpec>,
    /// Finalizer changes.
    #[serde(default)]
    pub finalizers: Option<Finalizers>,
    /// Patches (when set, `statusTemplate` is not used).
    #[serde(default)]
    pub patches: Vec<PatchSpec>,
    /// Status patch template.
    #[serde(default)]
    pub status_template: Option<String>,
    /// Subresource of the status patch (default `status`).
    #[serde(default)]
    pub status_subresource: Option<String>,
    /// Delete the object (grace 0).
    #[serde(default)]
    pub delete: bool,
}

/// One entry of `steps`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Step {
    /// A patch.
    #[serde(default)]
    pub patch: Option<PatchSpec>,
    /// An event to record.
    #[serde(default)]
    pub event: Option<EventSpec>,
    /// Finalizer changes.
    #[serde(default)]
    pub finalizers: Option<Finalizers>,
    /// Delete the object (grace 0).
    #[serde(default)]
    pub delete: bool,
    /// Server-side apply of a rendered object (not supported).
    #[serde(default)]
    pub apply: Option<Value>,
}

/// A patch (`steps[].patch`, `next.patches[]`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PatchSpec {
    /// Subresource to patch (`status`), or the object itself when empty.
    #[serde(default)]
    pub subresource: Option<String>,
    /// Wrap the rendered document under this key (JSON patch: path prefix).
    #[serde(default)]
    pub root: Option<String>,
    /// The template.
    #[serde(default)]
    pub template: String,
    /// `json`, `merge` or `strategic` (default strategic for nodes and pods).
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
}

/// An event to record.
#[derive(Debug, Clone, Deserialize)]
pub struct EventSpec {
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Reason.
    pub reason: String,
    /// Message.
    #[serde(default)]
    pub message: String,
}

/// Finalizer changes.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Finalizers {
    /// Finalizers to add.
    #[serde(default)]
    pub add: Vec<FinalizerItem>,
    /// Finalizers to remove.
    #[serde(default)]
    pub remove: Vec<FinalizerItem>,
    /// Remove them all.
    #[serde(default)]
    pub empty: bool,
}

/// `{value: <finalizer>}`.
#[derive(Debug, Clone, Deserialize)]
pub struct FinalizerItem {
    /// The finalizer.
    pub value: String,
}

/// How a patch is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// Strategic merge patch.
    Strategic,
    /// JSON merge patch.
    Merge,
    /// JSON patch (the template renders a list of operations).
    Json,
}

/// One action, ready to run.
#[derive(Debug, Clone)]
pub enum Action {
    /// Record an event on the object.
    Event(EventSpec),
    /// Change the finalizers.
    Finalizers(Finalizers),
    /// Send a patch rendered from a template.
    Patch {
        /// The template.
        template: Template,
        /// `Some("status")` for the status subresource.
        subresource: Option<String>,
        /// Wrap under this key.
        root: Option<String>,
        /// Patch type.
        patch_type: PatchType,
    },
    /// Delete with grace period 0.
    Delete,
}

/// A stage with its queries compiled.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The stage.
    pub stage: Stage,
    expressions: Vec<(Query, String, Vec<String>)>,
    weight_from: Option<Query>,
    duration_from: Option<Query>,
    jitter_from: Option<Query>,
    actions: Vec<Action>,
}

impl AsRef<Compiled> for Compiled {
    fn as_ref(&self) -> &Compiled {
        self
    }
}

/// Why a Stage is not usable.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// A jq expression outside the supported subset.
    #[error("stage {stage}: {source}")]
    Jq {
        /// Stage name.
        stage: String,
        /// The jq error.
        source: JqError,
    },
    /// A template outside the supported subset.
    #[error("stage {stage}: {source}")]
    Template {
        /// Stage name.
        stage: String,
        /// The template error.
        source: TemplateError,
    },
    /// An operator kwok does not have.
    #[error(
        "stage {stage}: unknown selector operator {operator:?} (want In, NotIn, Exists or DoesNotExist)"
    )]
    Operator {
        /// Stage name.
        stage: String,
        /// The operator.
        operator: String,
    },
    /// A feature of the Stage API this implementation does not have.
    #[error("stage {stage}: {what} is not supported by this kwok")]
    Unsupported {
        /// Stage name.
        stage: String,
        /// What.
        what: String,
    },
    /// A field that is present but wrong.
    #[error("stage {stage}: {message}")]
    Invalid {
        /// Stage name.
        stage: String,
        /// What is wrong.
        message: String,
    },
    /// Malformed YAML.
    #[error("stage file {file}: {message}")]
    Yaml {
        /// File or source name.
        file: String,
        /// Parser message.
        message: String,
    },
}

impl Compiled {
    /// Compiles a stage's queries and templates.
    pub fn new(stage: Stage) -> Result<Self, StageError> {
        let name = stage.metadata.name.clone();
        let jq = |q: &str| {
            Query::parse(q).map_err(|source| StageError::Jq {
                stage: name.clone(),
                source,
            })
        };
        let unsupported = |what: &str| StageError::Unsupported {
            stage: name.clone(),
            what: what.to_string(),
        };
        let mut expressions = Vec::new();
        for e in stage
            .spec
            .selector
            .iter()
            .flat_map(|s| &s.match_expressions)
        {
            if e.cel.is_some() {
                return Err(unsupported("a CEL selector expression"));
            }
            let (key, operator, values) = match (&e.jq, &e.key, &e.operator) {
                (Some(j), _, _) => (&j.key, &j.operator, &j.values),
                (None, Some(k), Some(op)) => (k, op, &e.values),
                _ => {
                    return Err(StageError::Invalid {
                        stage: name,
                        message:
                            "a matchExpressions entry needs jq: {key, operator} or key and operator"
                                .into(),
                    });
                }
            };
            if !matches!(
                operator.as_str(),
                "In" | "NotIn" | "Exists" | "DoesNotExist"
            ) {
                return Err(StageError::Operator {
                    stage: name,
                    operator: operator.clone(),
                });
            }
            expressions.push((jq(key)?, operator.clone(), values.clone()));
        }
        // A `cel` form is refused, except in jitterDurationFrom where
        // upstream ignores it (docs/reference/kwok-rules.md §2.1).
        let from =
            |e: &Option<ExpressionFrom>, cel_ignored: bool| -> Result<Option<Query>, StageError> {
                let Some(e) = e else { return Ok(None) };
                if let Some(q) =
                    e.jq.as_ref()
                        .map(|j| &j.expression)
                        .or(e.expression_from.as_ref())
                {
                    return jq(q).map(Some);
                }
                if e.cel.is_some() && !cel_ignored {
                    return Err(unsupported("a CEL expression"));
                }
                Ok(None)
            };
        let delay = stage.spec.delay.clone().unwrap_or_default();
        let weight_from = from(&stage.spec.weight_from, false)?;
        let duration_from = from(&delay.duration_from, false)?;
        let jitter_from = from(&delay.jitter_duration_from, true)?;
        let actions = compile_actions(&stage)?;
        Ok(Self {
            stage,
            expressions,
            weight_from,
            duration_from,
            jitter_from,
            actions,
        })
    }

    /// The stage's name.
    pub fn name(&self) -> &str {
        &self.stage.metadata.name
    }

    /// The kind it drives.
    pub fn kind(&self) -> &str {
        &self.stage.spec.resource_ref.kind
    }

    /// The actions, in order (`next` already converted).
    pub fn actions(&self) -> &[Action] {
        &self.actions
    }

    /// Whether a successful patch feeds the object straight back to stage
    /// selection.
    pub fn immediate_next_stage(&self) -> bool {
        self.stage.spec.immediate_next_stage
    }

    /// The weight for this object: `weightFrom` when it yields a value
    /// (a number is truncated, a string parsed as an integer; anything else
    /// is "unknown", `None`), else `weight` (docs/reference/kwok-rules.md §2.1).
    pub fn weight(&self, obj: &Value) -> Option<i64> {
        let fixed = self.stage.spec.weight.max(0);
        let Some(q) = &self.weight_from else {
            return Some(fixed);
        };
        match q.run(obj).into_iter().find(|v| !v.is_null()) {
            None => Some(fixed),
            Some(Value::Number(n)) => n.as_f64().map(|f| (f.trunc() as i64).max(0)),
            Some(Value::String(s)) => s.trim().parse::<i64>().ok().map(|w| w.max(0)),
            Some(_) => None,
        }
    }

    /// Whether the selector matches the object (no selector: never).
    pub fn matches(&self, obj: &Value) -> bool {
        let Some(sel) = &self.stage.spec.selector else {
            return false;
        };
        let meta = |field: &str, k: &str| {
            obj.get("metadata")
                .and_then(|m| m.get(field))
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
        };
        sel.match_labels
            .iter()
            .all(|(k, v)| meta("labels", k) == Some(v.as_str()))
            && sel
                .match_annotations
                .iter()
                .all(|(k, v)| meta("annotations", k) == Some(v.as_str()))
            && self.expressions.iter().all(|(q, op, values)| {
                let found: Vec<String> = q.run(obj).into_iter().map(scalar_string).collect();
                match op.as_str() {
                    "In" => found.iter().any(|f| values.contains(f)),
                    "NotIn" => !found.iter().any(|f| values.contains(f)),
                    "Exists" => !found.is_empty(),
                    _ => found.is_empty(),
                }
            })
    }

    /// The delay for this object (docs/reference/kwok-rules.md §2.5, J ≤ D quirk included).
    pub fn delay(&self, obj: &Value, now: std::time::SystemTime) -> Duration {
        let delay = self.stage.spec.delay.clone().unwrap_or_default();
        let resolve = |q: &Option<Query>, ms: Option<u64>| -> Option<Duration> {
            if let Some(q) = q
                && let Some(v) = q.run(obj).first().copied()
            {
                let s = scalar_string(v);
                if let Some(t) = simclock::parse_rfc3339(&s) {
                    return Some(t.duration_since(now).unwrap_or_default());
                }
                if let Some(d) = parse_go_duration(&s) {
                    return Some(d);
                }
            }
            ms.map(Duration::from_millis)
        };
        let d = resolve(&self.duration_from, delay.duration_milliseconds);
        let j = resolve(&self.jitter_from, delay.jitter_duration_milliseconds);
        match (d, j) {
            (None, None) => Duration::ZERO,
            (Some(d), None) => d,
            (d, Some(j)) => {
                let d = d.unwrap_or_default();
                if j <= d {
                    j
                } else {
                    let span = (j - d).as_millis().max(1) as u64;
                    d + Duration::from_millis(fastrand::u64(0..span))
                }
            }
        }
    }
}

fn scalar_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Chooses among the stages that match the object (docs/reference/kwok-rules.md §2.4): with
/// every weight unknown, or all known weights zero, the pick is uniform;
/// otherwise weighted among positive weights, so a weight-0 stage never
/// wins against a matching stage with a positive weight. The stages are
/// given as held (a `Compiled` or an `Arc` of one).
pub fn choose<'a, S: AsRef<Compiled>>(matching: &[&'a S], obj: &Value) -> Option<&'a S> {
    match matching {
        [] => None,
        [one] => Some(one),
        many => {
            let weights: Vec<Option<i64>> = many.iter().map(|s| s.as_ref().weight(obj)).collect();
            let known: Vec<usize> = (0..many.len()).filter(|&i| weights[i].is_some()).collect();
            if known.is_empty() {
                return Some(many[fastrand::usize(0..many.len())]);
            }
            let total: i64 = weights.iter().flatten().sum();
            if total == 0 {
                return Some(many[known[fastrand::usize(0..known.len())]]);
            }
            let mut pick = fastrand::i64(0..total);
            for (s, w) in many.iter().zip(&weights) {
                let w = w.unwrap_or(0);
                if pick < w {
                    return Some(s);
                }
                pick -= w;
            }
            many.last().copied()
        }
    }
}

/// The actions of a stage: `steps` in order, or the deprecated `next`
/// converted in upstream's order (event, finalizers, patches or the status
/// template, delete).
fn compile_actions(stage: &Stage) -> Result<Vec<Action>, StageError> {
    let name = &stage.metadata.name;
    let default_type = match stage.spec.resource_ref.kind.as_str() {
        "Node" | "Pod" => PatchType::Strategic,
        _ => PatchType::Merge,
    };
    let patch = |p: &PatchSpec| -> Result<Action, StageError> {
        let patch_type = match p.type_.as_deref() {
            None | Some("") => default_type,
            Some("strategic") => PatchType::Strategic,
            Some("merge") => PatchType::Merge,
            Some("json") => PatchType::Json,
            Some(other) => {
                return Err(StageError::Invalid {
                    stage: name.clone(),
                    message: format!(
                        "unknown patch type {other:?} (want json, merge or strategic)"
                    ),
                });
            }
        };
        let template = Template::parse(&p.template).map_err(|source| StageError::Template {
            stage: name.clone(),
            source,
        })?;
        let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        Ok(Action::Patch {
            template,
            subresource: non_empty(&p.subresource),
            root: non_empty(&p.root),
            patch_type,
        })
    };
    let mut actions = Vec::new();
    if !stage.spec.steps.is_empty() {
        for step in &stage.spec.steps {
            if step.apply.is_some() {
                return Err(StageError::Unsupported {
                    stage: name.clone(),
                    what: "an apply step".into(),
                });
            }
            actions.extend(step.event.clone().map(Action::Event));
            actions.extend(step.finalizers.clone().map(Action::Finalizers));
            if let Some(p) = &step.patch {
                actions.push(patch(p)?);
            }
            if step.delete {
                actions.push(Action::Delete);
            }
        }
        return Ok(actions);
    }
    let next = &stage.spec.next;
    actions.extend(next.event.clone().map(Action::Event));
    actions.extend(next.finalizers.clone().map(Action::Finalizers));
    if !next.patches.is_empty() {
        for p in &next.patches {
            actions.push(patch(p)?);
        }
    } else if let Some(t) = &next.status_template {
        actions.push(patch(&PatchSpec {
            subresource: Some(
                next.status_subresource
                    .clone()
                    .unwrap_or_else(|| "status".into()),
            ),
            root: Some("status".into()),
            template: t.clone(),
            type_: None,
        })?);
    }
    if next.delete {
        actions.push(Action::Delete);
    }
    Ok(actions)
}

/// Parses multi-document YAML; keeps the `Stage` documents and ignores the
/// rest (a kwok config file also holds a `KwokConfiguration`).
pub fn parse_stages(yaml: &str, file: &str) -> Result<Vec<Compiled>, StageError> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).map_err(|e| StageError::Yaml {
        file: file.to_string(),
        message: e.to_string(),
    })?;
    docs.into_iter()
        .filter(|d| d.get("kind").and_then(Value::as_str) == Some("Stage"))
        .map(|d| {
            let stage: Stage = serde_json::from_value(d).map_err(|e| StageError::Yaml {
                file: file.to_string(),
                message: e.to_string(),
            })?;
            Compiled::new(stage)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const STUCK: &str = r#"
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: testbed-node-stuck
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchAnnotations: {testbed.example/stuck: "true"}
    matchExpressions:
    - key: .status.phase
      operator: NotIn
      values: [Running]
  weight: 1
  delay:
    durationMilliseconds: 1000
    jitterDurationFrom:
      expressionFrom: .metadata.annotations["testbed.example/jitter"]
"#;

    #[test]
    fn parses_selects_and_delays() {
        let stages = parse_stages(STUCK, "stuck.yaml").unwrap();
        let s = &stages[0];
        assert_eq!(s.name(), "testbed-node-stuck");
        let node = json!({"metadata": {"annotations": {"testbed.example/stuck": "true", "testbed.example/jitter": "3s"}}});
        assert!(s.matches(&node));
        assert!(!s.matches(&json!({"metadata": {}})));
        let d = s.delay(&node, std::time::SystemTime::now());
        assert!(
            d >= Duration::from_secs(1) && d < Duration::from_secs(3),
            "{d:?}"
        );
        let no_jitter = json!({"metadata": {"annotations": {"testbed.example/stuck": "true"}}});
        assert_eq!(
            s.delay(&no_jitter, std::time::SystemTime::now()),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn jitter_below_delay_wins_as_upstream() {
        let mut s: Stage = serde_json::from_value(
            json!({"spec": {"resourceRef": {"kind": "Pod"}, "selector": {},
            "delay": {"durationMilliseconds": 5000, "jitterDurationMilliseconds": 2000}}}),
        )
        .unwrap();
        s.metadata.name = "x".into();
        let c = Compiled::new(s).unwrap();
        assert_eq!(
            c.delay(&json!({}), std::time::SystemTime::now()),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn weights_and_errors() {
        let mk = |name: &str, w: i64| {
            Compiled::new(serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"resourceRef": {"kind": "Node"}, "selector": {}, "weight": w}})).unwrap()).unwrap()
        };
        let (zero, one) = (mk("default", 0), mk("custom", 1));
        for _ in 0..20 {
            assert_eq!(choose(&[&zero, &one], &json!({})).unwrap().name(), "custom");
        }
        assert!(parse_stages("kind: Stage\nspec: [", "bad.yaml").is_err());
        let bad_op = "kind: Stage\nmetadata: {name: b}\nspec:\n  resourceRef: {kind: Node}\n  selector:\n    matchExpressions: [{key: .a, operator: Gt}]\n";
        let err = parse_stages(bad_op, "op.yaml").unwrap_err().to_string();
        assert!(err.contains("unknown selector operator \"Gt\""), "{err}");
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("soon"), None);
    }

    #[test]
    fn next_is_converted_to_steps_in_upstream_order() {
        let yaml = r#"
kind: Stage
metadata: {name: pod-delete-like}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector: {matchExpressions: [{jq: {key: .metadata.deletionTimestamp, operator: Exists}}]}
  next:
    delete: true
    statusTemplate: "phase: Failed"
    finalizers: {empty: true}
    event: {type: Normal, reason: Killing, message: bye}
"#;
        let s = &parse_stages(yaml, "x").unwrap()[0];
        let kinds: Vec<&str> = s
            .actions()
            .iter()
            .map(|a| match a {
                Action::Event(_) => "event",
                Action::Finalizers(_) => "finalizers",
                Action::Patch {
                    subresource,
                    root,
                    patch_type,
                    ..
                } => {
                    assert_eq!(subresource.as_deref(), Some("status"));
                    assert_eq!(root.as_deref(), Some("status"));
                    assert_eq!(*patch_type, PatchType::Strategic);
                    "patch"
                }
                Action::Delete => "delete",
            })
            .collect();
        assert_eq!(kinds, ["event", "finalizers", "patch", "delete"]);
        assert!(s.matches(&json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})));
        assert!(!s.matches(&json!({"metadata": {}})));
    }

    #[test]
    fn steps_keep_their_order_and_patch_types() {
        let yaml = r#"
kind: Stage
metadata: {name: stepper}
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector: {}
  immediateNextStage: true
  steps:
  - patch: {type: json, template: '[{"op": "add", "path": "/metadata/labels/x", "value": "y"}]'}
  - event: {type: Warning, reason: Broken}
  - patch: {type: merge, subresource: status, root: status, template: "phase: Pending"}
"#;
        let s = &parse_stages(yaml, "x").unwrap()[0];
        assert!(s.immediate_next_stage());
        assert!(matches!(
            &s.actions()[0],
            Action::Patch {
                patch_type: PatchType::Json,
                root: None,
                ..
            }
        ));
        assert!(matches!(&s.actions()[1], Action::Event(e) if e.reason == "Broken"));
        assert!(matches!(
            &s.actions()[2],
            Action::Patch {
                patch_type: PatchType::Merge,
                ..
            }
        ));
    }

    #[test]
    fn weight_from_reads_the_object() {
        let yaml = r#"
kind: Stage
metadata: {name: weighted}
spec:
  resourceRef: {kind: Pod}
  selector: {}
  weight: 3
  weightFrom: {jq: {expression: '.metadata.annotations["w"]'}}
"#;
        let s = &parse_stages(yaml, "x").unwrap()[0];
        let with = |w: Value| json!({"metadata": {"annotations": {"w": w}}});
        assert_eq!(s.weight(&with(json!("7"))), Some(7));
        assert_eq!(s.weight(&with(json!(2.9))), Some(2));
        assert_eq!(s.weight(&with(json!("lots"))), None, "unknown");
        assert_eq!(
            s.weight(&json!({"metadata": {}})),
            Some(3),
            "falls back to weight"
        );
        let zero = Compiled::new(serde_json::from_value(json!({"metadata": {"name": "z"}, "spec": {"resourceRef": {"kind": "Pod"}, "selector": {}}})).unwrap()).unwrap();
        // An unknown weight and a zero weight: uniform among the known ones.
        for _ in 0..10 {
            assert_eq!(choose(&[s, &zero], &with(json!("x"))).unwrap().name(), "z");
        }
        // A positive dynamic weight beats the zero one.
        for _ in 0..10 {
            assert_eq!(
                choose(&[s, &zero], &with(json!("5"))).unwrap().name(),
                "weighted"
            );
        }
    }

    #[test]
    fn unsupported_features_are_refused_with_the_stage_name() {
        let cel = "kind: Stage\nmetadata: {name: c}\nspec:\n  resourceRef: {kind: Pod}\n  selector:\n    matchExpressions: [{cel: {expression: 'self.x'}}]\n";
        let err = parse_stages(cel, "c.yaml").unwrap_err().to_string();
        assert!(
            err.contains("stage c: a CEL selector expression is not supported"),
            "{err}"
        );
        let apply = "kind: Stage\nmetadata: {name: a}\nspec:\n  resourceRef: {kind: Pod}\n  selector: {}\n  steps: [{apply: {template: 'x'}}]\n";
        let err = parse_stages(apply, "a.yaml").unwrap_err().to_string();
        assert!(
            err.contains("stage a: an apply step is not supported"),
            "{err}"
        );
        let bad = "kind: Stage\nmetadata: {name: p}\nspec:\n  resourceRef: {kind: Pod}\n  selector: {}\n  steps: [{patch: {type: yaml, template: 'x'}}]\n";
        let err = parse_stages(bad, "p.yaml").unwrap_err().to_string();
        assert!(err.contains("unknown patch type \"yaml\""), "{err}");
        let tpl = "kind: Stage\nmetadata: {name: t}\nspec:\n  resourceRef: {kind: Pod}\n  selector: {}\n  next: {statusTemplate: '{{ range .x }}'}\n";
        let err = parse_stages(tpl, "t.yaml").unwrap_err().to_string();
        assert!(
            err.contains("stage t: unsupported template action"),
            "{err}"
        );
    }
}
