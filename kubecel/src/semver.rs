//! Semantic versions (semver 2.0, as blang/semver's strict `Parse`) for
//! apiserver's semver library and DRA's `version` attributes: ordered by
//! major, minor and patch, then a release above its pre-releases, whose
//! identifiers compare numerically when both are numbers, numbers below
//! words, and the shorter list first when one is a prefix of the other.
//! Build metadata is kept but never compared.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::value::Val;
use cel::objects::Opaque;
use cel::{ExecutionError, Value};

/// The CEL type name of semantic versions, as apiserver names it.
pub const SEMVER_TYPE_NAME: &str = "kubernetes.Semver";

/// A parsed semantic version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semver {
    /// The major version.
    pub major: u64,
    /// The minor version.
    pub minor: u64,
    /// The patch version.
    pub patch: u64,
    pre: Vec<Identifier>,
    build: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Identifier {
    Number(u64),
    Word(String),
}

impl Ord for Identifier {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Identifier::Number(a), Identifier::Number(b)) => a.cmp(b),
            (Identifier::Number(_), Identifier::Word(_)) => Ordering::Less,
            (Identifier::Word(_), Identifier::Number(_)) => Ordering::Greater,
            (Identifier::Word(a), Identifier::Word(b)) => a.cmp(b),
        }
    }
}

impl PartialOrd for Identifier {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Semver {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => self.pre.cmp(&other.pre),
            })
    }
}

impl PartialOrd for Semver {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        SEMVER_TYPE_NAME
    }
}

impl std::fmt::Display for Semver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        for (i, id) in self.pre.iter().enumerate() {
            let sep = if i == 0 { '-' } else { '.' };
            match id {
                Identifier::Number(n) => write!(f, "{sep}{n}")?,
                Identifier::Word(w) => write!(f, "{sep}{w}")?,
            }
        }
        if !self.build.is_empty() {
            write!(f, "+{}", self.build)?;
        }
        Ok(())
    }
}

/// A number without leading zeros.
fn number(part: &str, what: &str) -> Result<u64, String> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "Invalid character(s) found in {what} number {part:?}"
        ));
    }
    if part.len() > 1 && part.starts_with('0') {
        return Err(format!(
            "{what} number must not contain leading zeroes {part:?}"
        ));
    }
    part.parse()
        .map_err(|_| format!("Invalid character(s) found in {what} number {part:?}"))
}

fn identifier_chars(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Parses a version, strictly: `MAJOR.MINOR.PATCH[-pre][+build]`.
pub fn parse(text: &str) -> Result<Semver, String> {
    let (rest, build) = match text.split_once('+') {
        Some((r, b)) => {
            if !b.split('.').all(identifier_chars) {
                return Err(format!(
                    "Invalid character(s) found in build meta data {b:?}"
                ));
            }
            (r, b.to_string())
        }
        None => (text, String::new()),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (rest, None),
    };
    let parts: Vec<&str> = core.split('.').collect();
    let [major, minor, patch] = parts[..] else {
        return Err("No Major.Minor.Patch elements found".into());
    };
    let mut version = Semver {
        major: number(major, "major")?,
        minor: number(minor, "minor")?,
        patch: number(patch, "patch")?,
        pre: Vec::new(),
        build,
    };
    if let Some(pre) = pre {
        for id in pre.split('.') {
            if !identifier_chars(id) {
                return Err(format!("Invalid character(s) found in prerelease {id:?}"));
            }
            version.pre.push(if id.bytes().all(|b| b.is_ascii_digit()) {
                Identifier::Number(number(id, "prerelease")?)
            } else {
                Identifier::Word(id.to_string())
            });
        }
    }
    Ok(version)
}

/// The semantic version a CEL value holds, if it is one.
pub fn of(val: &dyn Val) -> Option<Semver> {
    match Value::try_from(val).ok()? {
        Value::Opaque(opaque) => opaque.downcast_ref::<Semver>().cloned(),
        _ => None,
    }
}

/// `version` as a CEL value.
pub fn to_value(version: Semver) -> Result<Box<dyn Val>, ExecutionError> {
    Value::Opaque(Arc::new(version)).try_into()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn versions_order_by_semver_precedence() {
        let v = |s| parse(s).unwrap();
        let ordered = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "1.2.0",
            "1.10.0",
        ];
        for pair in ordered.windows(2) {
            assert!(v(pair[0]) < v(pair[1]), "{} < {}", pair[0], pair[1]);
        }
        assert_eq!(v("1.0.0+a").cmp(&v("1.0.0+b")), Ordering::Equal);
        assert_eq!(v("1.2.3-rc.1+build.5").to_string(), "1.2.3-rc.1+build.5");
    }

    #[test]
    fn malformed_versions_are_refused() {
        for bad in [
            "1.0", "1.0.0.0", "01.0.0", "1.0.0-", "1.0.0-01", "v1.0.0", "1.a.0", "",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
