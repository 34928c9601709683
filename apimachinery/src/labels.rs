//! Label selectors (`k8s.io/apimachinery/pkg/labels` and
//! `metav1.LabelSelector`). One set of operators ([`Operator`]) serves every
//! form: the query string, a selector as JSON, the typed `k8s_openapi`
//! selector (evaluated in place, without building anything) and node
//! selector requirements (which add `Gt` and `Lt`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use serde_json::Value;

use crate::validation::{validate_key, validate_value};

/// Labels (or annotations) of an object.
pub type Labels = BTreeMap<String, String>;

static EMPTY: Labels = BTreeMap::new();

/// The labels of an object's metadata, or an empty map.
pub fn labels_of(labels: Option<&Labels>) -> &Labels {
    labels.unwrap_or(&EMPTY)
}

/// A selector that cannot be parsed, with upstream's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

impl From<SelectorError> for String {
    fn from(e: SelectorError) -> Self {
        e.0
    }
}

/// A selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// The label exists and equals one of the values (`=`, `==`, `in`).
    In,
    /// The label is absent or equals none of the values (`!=`, `notin`).
    NotIn,
    /// The label exists.
    Exists,
    /// The label does not exist (`!k`).
    DoesNotExist,
    /// The label is an integer greater than the one value (`>`).
    Gt,
    /// The label is an integer less than the one value (`<`).
    Lt,
}

impl Operator {
    /// The operator of its API name (`In`, `NotIn`, `Exists`,
    /// `DoesNotExist`, `Gt`, `Lt`).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "In" => Self::In,
            "NotIn" => Self::NotIn,
            "Exists" => Self::Exists,
            "DoesNotExist" => Self::DoesNotExist,
            "Gt" => Self::Gt,
            "Lt" => Self::Lt,
            _ => return None,
        })
    }

    /// Whether a label's value (`None`: absent) satisfies the operator with
    /// these values. `Gt` and `Lt` need one integer value and an integer
    /// label; anything else does not match.
    pub fn holds<S: AsRef<str>>(self, value: Option<&str>, values: &[S]) -> bool {
        let contains = |v: &str| values.iter().any(|x| x.as_ref() == v);
        let as_int = |s: &str| s.parse::<i64>().ok();
        match self {
            Self::In => value.is_some_and(contains),
            Self::NotIn => value.is_none_or(|v| !contains(v)),
            Self::Exists => value.is_some(),
            Self::DoesNotExist => value.is_none(),
            Self::Gt | Self::Lt => {
                let (Some(v), [bound]) = (value.and_then(as_int), values) else {
                    return false;
                };
                let Some(bound) = as_int(bound.as_ref()) else {
                    return false;
                };
                if self == Self::Gt {
                    v > bound
                } else {
                    v < bound
                }
            }
        }
    }
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// The operator.
    pub operator: Operator,
    /// Its values (none for `Exists` and `DoesNotExist`).
    pub values: Vec<String>,
}

impl Requirement {
    /// A requirement.
    pub fn new<S: Into<String>>(
        key: &str,
        operator: Operator,
        values: impl IntoIterator<Item = S>,
    ) -> Self {
        Self {
            key: key.to_string(),
            operator,
            values: values.into_iter().map(Into::into).collect(),
        }
    }

    /// Whether the labels satisfy it.
    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key).map(String::as_str);
        self.operator.holds(value, &self.values)
    }
}

impl std::fmt::Display for Requirement {
    /// The string form, as [`LabelSelector::parse`] reads it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let k = &self.key;
        match (self.operator, self.values.as_slice()) {
            (Operator::In, [v]) => write!(f, "{k}={v}"),
            (Operator::NotIn, [v]) => write!(f, "{k}!={v}"),
            (Operator::In, vs) => write!(f, "{k} in ({})", vs.join(",")),
            (Operator::NotIn, vs) => write!(f, "{k} notin ({})", vs.join(",")),
            (Operator::Exists, _) => write!(f, "{k}"),
            (Operator::DoesNotExist, _) => write!(f, "!{k}"),
            (Operator::Gt, vs) => write!(f, "{k}>{}", vs.join(",")),
            (Operator::Lt, vs) => write!(f, "{k}<{}", vs.join(",")),
        }
    }
}

/// A label selector: requirements ANDed. `Nothing` matches no object (a null
/// `metav1.LabelSelector` in a PDB or Service means "select nothing").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelSelector {
    /// All requirements must hold; an empty list matches everything.
    All(Vec<Requirement>),
    /// Matches nothing.
    Nothing,
}

impl LabelSelector {
    /// The selector that matches every object.
    pub fn everything() -> Self {
        LabelSelector::All(Vec::new())
    }

    /// Whether the selector matches these labels.
    pub fn matches(&self, labels: &Labels) -> bool {
        match self {
            LabelSelector::All(reqs) => reqs.iter().all(|r| r.matches(labels)),
            LabelSelector::Nothing => false,
        }
    }

    /// Whether it matches everything (no requirement).
    pub fn is_everything(&self) -> bool {
        matches!(self, LabelSelector::All(r) if r.is_empty())
    }

    /// Parses the string form (`app=web,tier!=db,env in (a,b),!legacy`).
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for term in split_terms(s)? {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            reqs.push(parse_requirement(term)?);
        }
        Ok(LabelSelector::All(reqs))
    }

    /// Builds a selector from a `metav1.LabelSelector` as JSON. `null` or
    /// absent selects nothing; `{}` selects everything.
    pub fn from_value(v: Option<&Value>) -> Result<Self, SelectorError> {
        let Some(v) = v.filter(|v| !v.is_null()) else {
            return Ok(LabelSelector::Nothing);
        };
        let mut reqs = Vec::new();
        if let Some(ml) = v.get("matchLabels").and_then(Value::as_object) {
            for (k, val) in ml {
                let val = val
                    .as_str()
                    .ok_or_else(|| SelectorError(format!("matchLabels[{k}] must be a string")))?;
                reqs.push(Requirement::new(k, Operator::In, [val]));
            }
        }
        if let Some(exprs) = v.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                let field = |name: &str| {
                    e.get(name).and_then(Value::as_str).ok_or_else(|| {
                        SelectorError(format!("matchExpressions: {name} is required"))
                    })
                };
                let (key, op) = (field("key")?, field("operator")?);
                let values: Vec<&str> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|vs| vs.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                reqs.push(expression(key, op, values)?);
            }
        }
        Ok(LabelSelector::All(reqs))
    }
}

impl std::fmt::Display for LabelSelector {
    /// The string form (`<none>` for the selector of nothing).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabelSelector::All(reqs) => {
                let terms: Vec<String> = reqs.iter().map(ToString::to_string).collect();
                f.write_str(&terms.join(","))
            }
            LabelSelector::Nothing => f.write_str("<none>"),
        }
    }
}

/// A `matchExpressions` entry of a `metav1.LabelSelector`, checked as the
/// API server checks it: `In` and `NotIn` need values, `Gt` and `Lt` are
/// not label selector operators.
fn expression(key: &str, op: &str, values: Vec<&str>) -> Result<Requirement, SelectorError> {
    let operator = match Operator::from_name(op) {
        Some(o @ (Operator::In | Operator::NotIn)) if values.is_empty() => {
            return Err(SelectorError(format!(
                "matchExpressions[{key}]: values must be non-empty for {o:?}"
            )));
        }
        Some(o @ (Operator::In | Operator::NotIn | Operator::Exists | Operator::DoesNotExist)) => o,
        _ => {
            return Err(SelectorError(format!(
                "{op:?} is not a valid label selector operator"
            )));
        }
    };
    Ok(Requirement::new(key, operator, values))
}

/// Whether a typed `metav1.LabelSelector` selects `labels`, evaluated in
/// place. An empty selector selects everything; an unknown operator
/// selects nothing.
pub fn selector_matches(selector: &metav1::LabelSelector, labels: &Labels) -> bool {
    selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
        && selector.match_expressions.iter().flatten().all(|r| {
            let value = labels.get(&r.key).map(String::as_str);
            let values = r.values.as_deref().unwrap_or_default();
            match Operator::from_name(&r.operator) {
                Some(
                    op @ (Operator::In
                    | Operator::NotIn
                    | Operator::Exists
                    | Operator::DoesNotExist),
                ) => op.holds(value, values),
                _ => false,
            }
        })
}

/// Splits on commas that are not inside parentheses.
fn split_terms(s: &str) -> Result<Vec<&str>, SelectorError> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(SelectorError(format!(
                        "unable to parse requirement: unbalanced ')' in {s:?}"
                    )));
                }
            }
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorError(format!(
            "unable to parse requirement: unbalanced '(' in {s:?}"
        )));
    }
    out.push(&s[start..]);
    if out.len() > 1 && out.iter().any(|t| t.trim().is_empty()) {
        return Err(SelectorError(format!(
            "unable to parse requirement: empty term in {s:?}"
        )));
    }
    Ok(out)
}

fn parse_requirement(term: &str) -> Result<Requirement, SelectorError> {
    let err = |why: &str| SelectorError(format!("unable to parse requirement: {why}: {term:?}"));
    if let Some(key) = term.strip_prefix('!') {
        let key = key.trim();
        validate_key(key).map_err(|e| err(&e.0))?;
        return Ok(Requirement::new(key, Operator::DoesNotExist, [""; 0]));
    }
    // Set-based: `key in (a,b)` / `key notin (a,b)`.
    for (word, is_in) in [(" notin ", false), (" in ", true)] {
        if let Some(pos) = term.find(word) {
            let key = term[..pos].trim();
            let rest = term[pos + word.len()..].trim();
            let inner = rest
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| err("expected a parenthesised value list"))?;
            validate_key(key).map_err(|e| err(&e.0))?;
            let mut values = Vec::new();
            for v in inner.split(',') {
                let v = v.trim();
                validate_value(v).map_err(|e| err(&e.0))?;
                values.push(v);
            }
            let op = if is_in { Operator::In } else { Operator::NotIn };
            return Ok(Requirement::new(key, op, values));
        }
    }
    for (op, kind) in [("!=", 0), ("==", 1), ("=", 1), (">", 2), ("<", 3)] {
        if let Some(pos) = term.find(op) {
            let key = term[..pos].trim();
            let value = term[pos + op.len()..].trim();
            validate_key(key).map_err(|e| err(&e.0))?;
            return match kind {
                0 | 1 => {
                    validate_value(value).map_err(|e| err(&e.0))?;
                    let op = if kind == 0 {
                        Operator::NotIn
                    } else {
                        Operator::In
                    };
                    Ok(Requirement::new(key, op, [value]))
                }
                _ => {
                    value.parse::<i64>().map_err(|_| {
                        err("for 'Gt', 'Lt' operators, the value must be an integer")
                    })?;
                    let op = if kind == 2 {
                        Operator::Gt
                    } else {
                        Operator::Lt
                    };
                    Ok(Requirement::new(key, op, [value]))
                }
            };
        }
    }
    validate_key(term).map_err(|e| err(&e.0))?;
    Ok(Requirement::new(term, Operator::Exists, [""; 0]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selector_operators() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        for (sel, want) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("app in (web,db)", true),
            ("app in (db)", false),
            ("app notin (db, cache)", true),
            ("app notin (web)", false),
            ("missing notin (web)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("n>4", true),
            ("n<5", false),
            ("app=web,tier=front", true),
            ("app=web,tier=back", false),
            ("", true),
            ("example.com/team", false),
        ] {
            let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(s.matches(&l), want, "{sel}");
        }
    }

    #[test]
    fn malformed_label_selectors_are_errors() {
        for bad in [
            "app in (a",
            "a=b,,c=d",
            "-bad=x",
            "app in web",
            "n>x",
            "a=b c",
            "app=-x",
        ] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad} should not parse");
        }
    }

    #[test]
    fn metav1_label_selector() {
        let l = labels(&[("app", "web")]);
        let s = LabelSelector::from_value(Some(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]
        })))
        .unwrap();
        assert!(s.matches(&l));
        assert!(
            LabelSelector::from_value(Some(&json!({})))
                .unwrap()
                .matches(&l)
        );
        assert!(!LabelSelector::from_value(None).unwrap().matches(&l));
        assert!(
            LabelSelector::from_value(Some(
                &json!({"matchExpressions": [{"key": "a", "operator": "In"}]})
            ))
            .is_err()
        );
    }

    #[test]
    fn typed_selector_operators() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        let sel = |v| serde_json::from_value::<metav1::LabelSelector>(v).unwrap_or_default();
        assert!(selector_matches(&sel(json!({})), &l));
        assert!(selector_matches(
            &sel(json!({"matchLabels": {"app": "web"}})),
            &l
        ));
        assert!(!selector_matches(
            &sel(json!({"matchLabels": {"app": "db"}})),
            &l
        ));
        for (op, values, want) in [
            ("In", json!(["web", "x"]), true),
            ("In", json!(["x"]), false),
            ("NotIn", json!(["x"]), true),
            ("NotIn", json!(["web"]), false),
            ("Exists", json!(null), true),
            ("DoesNotExist", json!(null), false),
            ("Bogus", json!(null), false),
        ] {
            let s = sel(
                json!({"matchExpressions": [{"key": "app", "operator": op, "values": values}]}),
            );
            assert_eq!(selector_matches(&s, &l), want, "{op}");
        }
        let s = sel(
            json!({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}),
        );
        assert!(selector_matches(&s, &l), "NotIn matches a missing key");
    }

    #[test]
    fn selectors_print_as_they_parse() {
        for text in ["app=web,tier!=db,env in (a,b),!legacy,team,n>4", ""] {
            let parsed = LabelSelector::parse(text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(parsed.to_string(), text);
        }
    }

    #[test]
    fn typed_selectors_match_like_the_parsed_ones() {
        let l = labels(&[("app", "web"), ("n", "5")]);
        let typed: metav1::LabelSelector = serde_json::from_value(json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"},
                                 {"key": "app", "operator": "In", "values": ["web", "db"]}]
        }))
        .unwrap_or_default();
        assert!(selector_matches(&typed, &l));
        let parsed =
            LabelSelector::parse("app=web,!tier,app in (web,db)").unwrap_or_else(|e| panic!("{e}"));
        assert!(parsed.matches(&l));
        let gt: metav1::LabelSelector = serde_json::from_value(json!({
            "matchExpressions": [{"key": "n", "operator": "Gt", "values": ["4"]}]
        }))
        .unwrap_or_default();
        assert!(
            !selector_matches(&gt, &l),
            "Gt is not a label selector operator"
        );
        assert!(Operator::Gt.holds(Some("5"), &["4"]));
        assert!(!Operator::Lt.holds(Some("x"), &["4"]));
    }
}
