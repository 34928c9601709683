//! Field selectors (`k8s.io/apimachinery/pkg/fields`): `a=b`, `a==b`,
//! `a!=b`, comma-separated, with `\\` escapes, resolved against the fields a
//! resource lets clients select on.

use crate::labels::SelectorError;

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
    pub fn parse(s: &str, fields: &[&str]) -> Result<Self, SelectorError> {
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
                return Err(SelectorError(format!(
                    "invalid selector: '{term}'; can't understand '{term}'"
                )));
            };
            let name = name.trim();
            let field = fields
                .iter()
                .position(|f| *f == name)
                .ok_or_else(|| SelectorError(format!("field label not supported: {name}")))?;
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
        // Bytes, not `&s[i..]`: after a backslash `i` may be inside a
        // multi-byte character. `op` is ASCII, so a match starts and ends on
        // character boundaries.
        if bytes[i..].starts_with(op.as_bytes()) {
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

    #[test]
    fn an_escape_before_a_multibyte_character_is_an_error_not_a_panic() {
        // Found by conformance's parser properties: `\é` once sliced inside `é`.
        let fields = ["metadata.name"];
        assert!(FieldSelector::parse("\\ééé=x", &fields).is_err());
        let s = FieldSelector::parse("metadata.name=é\\,x", &fields).unwrap();
        assert!(s.matches(&["é,x".into()]));
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
            FieldSelector::parse("spec.bogus=1", &fields)
                .unwrap_err()
                .to_string(),
            "field label not supported: spec.bogus"
        );
        let escaped = FieldSelector::parse(r"metadata.name=a\,b", &fields).unwrap();
        assert!(escaped.matches(&["a,b".into(), "".into(), "".into()]));
    }
}
