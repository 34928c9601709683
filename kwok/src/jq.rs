//! The subset of jq that kwok Stage selectors use: field paths
//! (`.status.phase`, `.metadata.labels["a/b"]`), iteration (`.[]`), pipes and
//! `select(.field == "value")`. A query yields zero or more values.

use serde_json::Value;

/// A parsed query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query(Vec<Segment>);

#[derive(Debug, Clone, PartialEq)]
enum Segment {
    /// A path of keys and `[]` iterations.
    Path(Vec<Step>),
    /// `select(<path> == <literal>)` (or `!=`).
    Select {
        path: Vec<Step>,
        equal: bool,
        value: Value,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Iterate,
}

/// Why a query did not parse.
#[derive(Debug, thiserror::Error)]
#[error("unsupported jq expression {query:?}: {reason}")]
pub struct JqError {
    query: String,
    reason: String,
}

impl Query {
    /// Parses a query.
    pub fn parse(query: &str) -> Result<Self, JqError> {
        let err = |reason: &str| JqError {
            query: query.to_string(),
            reason: reason.to_string(),
        };
        let mut segments = Vec::new();
        for part in query.split('|') {
            let part = part.trim();
            if let Some(inner) = part
                .strip_prefix("select(")
                .and_then(|p| p.strip_suffix(')'))
            {
                let (lhs, rhs, equal) = if let Some((l, r)) = inner.split_once("==") {
                    (l, r, true)
                } else if let Some((l, r)) = inner.split_once("!=") {
                    (l, r, false)
                } else {
                    return Err(err("select() needs == or !="));
                };
                let value: Value = serde_json::from_str(rhs.trim())
                    .map_err(|_| err("select() compares with a JSON literal"))?;
                segments.push(Segment::Select {
                    path: parse_path(lhs.trim()).ok_or_else(|| err("bad path in select()"))?,
                    equal,
                    value,
                });
            } else {
                segments.push(Segment::Path(
                    parse_path(part).ok_or_else(|| err("bad path"))?,
                ));
            }
        }
        Ok(Self(segments))
    }

    /// Runs the query on a value: what it yields, borrowed from it (a
    /// query runs on every pod and node event; nothing is copied).
    pub fn run<'a>(&self, input: &'a Value) -> Vec<&'a Value> {
        let mut current = vec![input];
        for seg in &self.0 {
            current = match seg {
                Segment::Path(steps) => current.into_iter().flat_map(|v| walk(v, steps)).collect(),
                Segment::Select { path, equal, value } => current
                    .into_iter()
                    .filter(|v| walk(v, path).into_iter().any(|x| x == value) == *equal)
                    .collect(),
            };
        }
        current.into_iter().filter(|v| !v.is_null()).collect()
    }
}

/// What a missing key yields.
static NULL: Value = Value::Null;

fn walk<'a>(v: &'a Value, steps: &[Step]) -> Vec<&'a Value> {
    let Some((first, rest)) = steps.split_first() else {
        return vec![v];
    };
    match first {
        Step::Key(k) => walk(v.get(k.as_str()).unwrap_or(&NULL), rest),
        Step::Iterate => match v {
            Value::Array(a) => a.iter().flat_map(|x| walk(x, rest)).collect(),
            Value::Object(o) => o.values().flat_map(|x| walk(x, rest)).collect(),
            _ => Vec::new(),
        },
    }
}

/// `.a.b["c/d"].[].e` → steps. `.` alone is the identity.
fn parse_path(s: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    let mut rest = s.strip_prefix('.')?;
    while !rest.is_empty() {
        rest = rest.strip_prefix('.').unwrap_or(rest);
        if let Some(r) = rest.strip_prefix("[]") {
            steps.push(Step::Iterate);
            rest = r;
        } else if let Some(r) = rest.strip_prefix("[\"") {
            let end = r.find("\"]")?;
            steps.push(Step::Key(r[..end].to_string()));
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('"') {
            let end = r.find('"')?;
            steps.push(Step::Key(r[..end].to_string()));
            rest = &r[end + 1..];
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            if end == 0 {
                return None;
            }
            steps.push(Step::Key(rest[..end].to_string()));
            rest = &rest[end..];
        }
    }
    Some(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_queries_of_the_default_stages() {
        let pod = json!({
            "metadata": {"labels": {"a/b": "x"}, "ownerReferences": [{"kind": "Job"}, {"kind": "Other"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]}
        });
        let q = |s: &str| -> Vec<Value> {
            let found = Query::parse(s).unwrap().run(&pod).into_iter().cloned();
            found.collect()
        };
        assert_eq!(q(".status.phase"), vec![json!("Pending")]);
        assert_eq!(q(".metadata.deletionTimestamp"), Vec::<Value>::new());
        assert_eq!(
            q(".metadata.ownerReferences.[].kind"),
            vec![json!("Job"), json!("Other")]
        );
        assert_eq!(
            q(".status.conditions.[] | select( .type == \"Ready\" ) | .status"),
            vec![json!("False")]
        );
        assert_eq!(q(".metadata.labels[\"a/b\"]"), vec![json!("x")]);
        assert_eq!(q(".metadata.labels.\"a/b\""), vec![json!("x")]);
        assert!(Query::parse("length > 1").is_err());
    }
}
