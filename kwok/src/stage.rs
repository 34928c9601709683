//! kwok's Stage API (`kwok.x-k8s.io/v1alpha1`, kind `Stage`): which objects a
//! stage applies to, how long it waits, and what it does.
//!
//! Supported: `resourceRef`, `selector` (`matchLabels`, `matchAnnotations`,
//! `matchExpressions` on jq paths with `In`/`NotIn`/`Exists`/`DoesNotExist`),
//! `weight`, `delay` (`durationMilliseconds`, `durationFrom`,
//! `jitterDurationMilliseconds`, `jitterDurationFrom`), `next` (`event`,
//! `finalizers`, `statusTemplate`, `delete`) and `immediateNextStage`.
//! Templates are the subset documented in [`crate::template`].

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::jq::{JqError, Query};

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
    /// Delay before the action.
    #[serde(default)]
    pub delay: Option<Delay>,
    /// The action.
    #[serde(default)]
    pub next: Next,
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

/// One `matchExpressions` entry.
#[derive(Debug, Clone, Deserialize)]
pub struct Expression {
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

/// `{expressionFrom: <jq>}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpressionFrom {
    /// A jq query yielding a Go duration or an RFC 3339 time.
    pub expression_from: String,
}

/// `next`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Next {
    /// An event to record.
    #[serde(default)]
    pub event: Option<EventSpec>,
    /// Finalizer changes.
    #[serde(default)]
    pub finalizers: Option<Finalizers>,
    /// Status patch template.
    #[serde(default)]
    pub status_template: Option<String>,
    /// Delete the object (grace 0).
    #[serde(default)]
    pub delete: bool,
}

/// `next.event`.
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

/// `next.finalizers`.
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

/// A stage with its queries compiled.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The stage.
    pub stage: Stage,
    expressions: Vec<(Query, String, Vec<String>)>,
    duration_from: Option<Query>,
    jitter_from: Option<Query>,
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
    /// Compiles a stage's queries.
    pub fn new(stage: Stage) -> Result<Self, StageError> {
        let name = stage.metadata.name.clone();
        let jq = |q: &str| {
            Query::parse(q).map_err(|source| StageError::Jq {
                stage: name.clone(),
                source,
            })
        };
        let mut expressions = Vec::new();
        for e in stage
            .spec
            .selector
            .iter()
            .flat_map(|s| &s.match_expressions)
        {
            if !matches!(
                e.operator.as_str(),
                "In" | "NotIn" | "Exists" | "DoesNotExist"
            ) {
                return Err(StageError::Operator {
                    stage: name,
                    operator: e.operator.clone(),
                });
            }
            expressions.push((jq(&e.key)?, e.operator.clone(), e.values.clone()));
        }
        let delay = stage.spec.delay.clone().unwrap_or_default();
        let duration_from = delay
            .duration_from
            .as_ref()
            .map(|d| jq(&d.expression_from))
            .transpose()?;
        let jitter_from = delay
            .jitter_duration_from
            .as_ref()
            .map(|d| jq(&d.expression_from))
            .transpose()?;
        Ok(Self {
            stage,
            expressions,
            duration_from,
            jitter_from,
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
                .map(str::to_string)
        };
        sel.match_labels
            .iter()
            .all(|(k, v)| meta("labels", k).as_deref() == Some(v))
            && sel
                .match_annotations
                .iter()
                .all(|(k, v)| meta("annotations", k).as_deref() == Some(v))
            && self.expressions.iter().all(|(q, op, values)| {
                let found: Vec<String> = q.run(obj).iter().map(scalar_string).collect();
                match op.as_str() {
                    "In" => found.iter().any(|f| values.contains(f)),
                    "NotIn" => !found.iter().any(|f| values.contains(f)),
                    "Exists" => !found.is_empty(),
                    _ => found.is_empty(),
                }
            })
    }

    /// The delay for this object (section 2.5 of kwok-compat, J ≤ D quirk included).
    pub fn delay(&self, obj: &Value, now: std::time::SystemTime) -> Duration {
        let delay = self.stage.spec.delay.clone().unwrap_or_default();
        let resolve = |q: &Option<Query>, ms: Option<u64>| -> Option<Duration> {
            if let Some(q) = q
                && let Some(v) = q.run(obj).first()
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

/// Parses a Go duration (`1h2m3s`, `90s`, `1.5m`, `300ms`).
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let secs = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * secs;
        rest = &rest[unit_end..];
    }
    Some(Duration::from_secs_f64(total))
}

/// Chooses among the stages that match (section 2.4): weight-0 stages lose
/// to any positive weight; ties are broken at random by weight.
pub fn choose<'a>(matching: &[&'a Compiled]) -> Option<&'a Compiled> {
    match matching {
        [] => None,
        [one] => Some(one),
        many => {
            let total: i64 = many.iter().map(|s| s.stage.spec.weight.max(0)).sum();
            if total == 0 {
                return Some(many[fastrand::usize(0..many.len())]);
            }
            let mut pick = fastrand::i64(0..total);
            for s in many {
                let w = s.stage.spec.weight.max(0);
                if pick < w {
                    return Some(s);
                }
                pick -= w;
            }
            many.last().copied()
        }
    }
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
            assert_eq!(choose(&[&zero, &one]).unwrap().name(), "custom");
        }
        assert!(parse_stages("kind: Stage\nspec: [", "bad.yaml").is_err());
        let bad_op = "kind: Stage\nmetadata: {name: b}\nspec:\n  resourceRef: {kind: Node}\n  selector:\n    matchExpressions: [{key: .a, operator: Gt}]\n";
        let err = parse_stages(bad_op, "op.yaml").unwrap_err().to_string();
        assert!(err.contains("unknown selector operator \"Gt\""), "{err}");
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("soon"), None);
    }
}
