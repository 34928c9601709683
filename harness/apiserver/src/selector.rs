//! Label and field selectors: the string forms of list/watch query
//! parameters, and `metav1.LabelSelector` objects, with the grammar and
//! semantics of `k8s.io/apimachinery/pkg/labels` and `fields`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq)]
pub enum Requirement {
    /// `k=v`, `k==v`, `k in (v)`: the label exists and equals one of the values.
    In(String, BTreeSet<String>),
    /// `k!=v`, `k notin (a,b)`: the label is absent or has none of the values.
    NotIn(String, BTreeSet<String>),
    /// `k`: the label exists.
    Exists(String),
    /// `!k`: the label does not exist.
    DoesNotExist(String),
    /// `k>n`: the label is an integer greater than n.
    Gt(String, i64),
    /// `k<n`: the label is an integer less than n.
    Lt(String, i64),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
            Requirement::Gt(k, n) => labels
                .get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Requirement::Lt(k, n) => labels
                .get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        }
    }
}

/// A label selector: requirements ANDed. `Nothing` matches no object (a null
/// `metav1.LabelSelector` in a PDB or Service means "select nothing").
#[derive(Debug, Clone, PartialEq)]
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
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
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
    pub fn parse(s: &str) -> Result<Self, String> {
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

    /// Builds a selector from a `metav1.LabelSelector` JSON value. `null` or
    /// absent selects nothing; `{}` selects everything.
    pub fn from_label_selector(v: Option<&Value>) -> Result<Self, String> {
        let Some(v) = v.filter(|v| !v.is_null()) else {
            return Ok(LabelSelector::Nothing);
        };
        let mut reqs = Vec::new();
        if let Some(ml) = v.get("matchLabels").and_then(Value::as_object) {
            for (k, val) in ml {
                let val = val
                    .as_str()
                    .ok_or_else(|| format!("matchLabels[{k}] must be a string"))?;
                reqs.push(Requirement::In(
                    k.clone(),
                    BTreeSet::from([val.to_string()]),
                ));
            }
        }
        if let Some(exprs) = v.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                let key = e
                    .get("key")
                    .and_then(Value::as_str)
                    .ok_or("matchExpressions: key is required")?;
                let op = e
                    .get("operator")
                    .and_then(Value::as_str)
                    .ok_or("matchExpressions: operator is required")?;
                let values: BTreeSet<String> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|vs| {
                        vs.iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                let req = match op {
                    "In" | "NotIn" if values.is_empty() => {
                        return Err(format!(
                            "matchExpressions[{key}]: values must be non-empty for {op}"
                        ));
                    }
                    "In" => Requirement::In(key.into(), values),
                    "NotIn" => Requirement::NotIn(key.into(), values),
                    "Exists" => Requirement::Exists(key.into()),
                    "DoesNotExist" => Requirement::DoesNotExist(key.into()),
                    other => {
                        return Err(format!("{other:?} is not a valid label selector operator"));
                    }
                };
                reqs.push(req);
            }
        }
        Ok(LabelSelector::All(reqs))
    }
}

/// Splits on commas that are not inside parentheses.
fn split_terms(s: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!(
                        "unable to parse requirement: unbalanced ')' in {s:?}"
                    ));
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
        return Err(format!(
            "unable to parse requirement: unbalanced '(' in {s:?}"
        ));
    }
    out.push(&s[start..]);
    if out.len() > 1 && out.iter().any(|t| t.trim().is_empty()) {
        return Err(format!("unable to parse requirement: empty term in {s:?}"));
    }
    Ok(out)
}

fn parse_requirement(term: &str) -> Result<Requirement, String> {
    let err = |why: &str| format!("unable to parse requirement: {why}: {term:?}");
    if let Some(key) = term.strip_prefix('!') {
        let key = key.trim();
        validate_key(key).map_err(|e| err(&e))?;
        return Ok(Requirement::DoesNotExist(key.into()));
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
            validate_key(key).map_err(|e| err(&e))?;
            let mut values = BTreeSet::new();
            for v in inner.split(',') {
                let v = v.trim();
                validate_value(v).map_err(|e| err(&e))?;
                values.insert(v.to_string());
            }
            return Ok(if is_in {
                Requirement::In(key.into(), values)
            } else {
                Requirement::NotIn(key.into(), values)
            });
        }
    }
    for (op, kind) in [("!=", 0), ("==", 1), ("=", 1), (">", 2), ("<", 3)] {
        if let Some(pos) = term.find(op) {
            let key = term[..pos].trim();
            let value = term[pos + op.len()..].trim();
            validate_key(key).map_err(|e| err(&e))?;
            return match kind {
                0 | 1 => {
                    validate_value(value).map_err(|e| err(&e))?;
                    let set = BTreeSet::from([value.to_string()]);
                    Ok(if kind == 0 {
                        Requirement::NotIn(key.into(), set)
                    } else {
                        Requirement::In(key.into(), set)
                    })
                }
                _ => {
                    let n: i64 = value.parse().map_err(|_| {
                        err("for 'Gt', 'Lt' operators, the value must be an integer")
                    })?;
                    Ok(if kind == 2 {
                        Requirement::Gt(key.into(), n)
                    } else {
                        Requirement::Lt(key.into(), n)
                    })
                }
            };
        }
    }
    validate_key(term).map_err(|e| err(&e))?;
    Ok(Requirement::Exists(term.into()))
}

/// Validates a label key (`[prefix/]name`) as Kubernetes does.
pub fn validate_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && (p.is_empty() || p.len() > 253 || !is_dns_subdomain(p))
    {
        return Err(format!("prefix part of {key:?} must be a DNS subdomain"));
    }
    if name.is_empty() || name.len() > 63 || !is_qualified_name_part(name) {
        return Err(format!(
            "name part of {key:?} must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (at most 63 characters)"
        ));
    }
    Ok(())
}

/// Validates a label value as Kubernetes does (may be empty).
pub fn validate_value(v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Ok(());
    }
    if v.len() > 63 || !is_qualified_name_part(v) {
        return Err(format!(
            "label value {v:?} must be 63 characters or less and consist of alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character"
        ));
    }
    Ok(())
}

fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// RFC 1123 subdomain: lowercase alphanumerics, '-' and '.', alphanumeric at both ends.
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// RFC 1123 label: like a subdomain part, at most 63 characters.
pub fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && !s.contains('.') && is_dns_subdomain(s)
}

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldRequirement {
    /// Index of the field in the resource's selectable-field table.
    pub field: usize,
    /// The value compared against.
    pub value: String,
    /// `!=` rather than `=`.
    pub negate: bool,
}

/// A parsed field selector, resolved against a resource's selectable fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector {
    /// Requirements, ANDed.
    pub reqs: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses `a=b,c!=d` against the selectable fields of a resource
    /// (`fields[i]` is the path of field i). Unknown fields are an error, as upstream.
    pub fn parse(s: &str, fields: &[&str]) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for term in split_unescaped(s, ',') {
            if term.is_empty() {
                continue;
            }
            let (name, value, negate) = if let Some((n, v)) = split_once_unescaped(&term, "!=") {
                (n, v, true)
            } else if let Some((n, v)) = split_once_unescaped(&term, "==") {
                (n, v, false)
            } else if let Some((n, v)) = split_once_unescaped(&term, "=") {
                (n, v, false)
            } else {
                return Err(format!(
                    "invalid selector: '{term}'; can't understand '{term}'"
                ));
            };
            let name = name.trim();
            let field = fields
                .iter()
                .position(|f| *f == name)
                .ok_or_else(|| format!("field label not supported: {name}"))?;
            reqs.push(FieldRequirement {
                field,
                value: unescape(value.trim()),
                negate,
            });
        }
        Ok(Self { reqs })
    }

    /// Whether an object with these field values (aligned with the table) matches.
    pub fn matches(&self, values: &[String]) -> bool {
        self.reqs.iter().all(|r| {
            let v = values.get(r.field).map(String::as_str).unwrap_or("");
            (v == r.value) != r.negate
        })
    }
}

fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            cur.push('\\');
            cur.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

fn split_once_unescaped<'a>(s: &'a str, op: &str) -> Option<(&'a str, &'a str)> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if s[i..].starts_with(op) {
            return Some((&s[..i], &s[i + op.len()..]));
        }
        i += 1;
    }
    None
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            out.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else {
            out.push(c);
        }
    }
    out
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
        let s = LabelSelector::from_label_selector(Some(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]
        })))
        .unwrap();
        assert!(s.matches(&l));
        assert!(
            LabelSelector::from_label_selector(Some(&json!({})))
                .unwrap()
                .matches(&l)
        );
        assert!(
            !LabelSelector::from_label_selector(None)
                .unwrap()
                .matches(&l)
        );
        assert!(
            LabelSelector::from_label_selector(Some(
                &json!({"matchExpressions": [{"key": "a", "operator": "In"}]})
            ))
            .is_err()
        );
    }

    #[test]
    fn field_selectors() {
        let fields = ["metadata.name", "spec.nodeName", "status.phase"];
        let s = FieldSelector::parse("spec.nodeName=n1,status.phase!=Failed", &fields).unwrap();
        assert!(s.matches(&["p".into(), "n1".into(), "Running".into()]));
        assert!(!s.matches(&["p".into(), "n1".into(), "Failed".into()]));
        assert!(!s.matches(&["p".into(), "n2".into(), "Running".into()]));
        let unbound = FieldSelector::parse("spec.nodeName=", &fields).unwrap();
        assert!(unbound.matches(&["p".into(), "".into(), "Pending".into()]));
        assert_eq!(
            FieldSelector::parse("spec.bogus=1", &fields).unwrap_err(),
            "field label not supported: spec.bogus"
        );
        let escaped = FieldSelector::parse(r"metadata.name=a\,b", &fields).unwrap();
        assert!(escaped.matches(&["a,b".into(), "".into(), "".into()]));
    }
}
