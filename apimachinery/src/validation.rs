//! Name validation (`k8s.io/apimachinery/pkg/util/validation`): label keys
//! and values, RFC 1123 DNS labels and subdomains.

/// A label key or value that Kubernetes refuses, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidName(pub String);

impl From<InvalidName> for String {
    fn from(e: InvalidName) -> Self {
        e.0
    }
}

/// Validates a label key (`[prefix/]name`) as Kubernetes does.
pub fn validate_key(key: &str) -> Result<(), InvalidName> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && (p.is_empty() || p.len() > 253 || !is_dns_subdomain(p))
    {
        return Err(InvalidName(format!(
            "prefix part of {key:?} must be a DNS subdomain"
        )));
    }
    if name.is_empty() || name.len() > 63 || !is_qualified_name_part(name) {
        return Err(InvalidName(format!(
            "name part of {key:?} must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (at most 63 characters)"
        )));
    }
    Ok(())
}

/// Validates a label value as Kubernetes does (may be empty).
pub fn validate_value(v: &str) -> Result<(), InvalidName> {
    if v.is_empty() {
        return Ok(());
    }
    if v.len() > 63 || !is_qualified_name_part(v) {
        return Err(InvalidName(format!(
            "label value {v:?} must be 63 characters or less and consist of alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character"
        )));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_rfc_1123_and_label_rules() {
        assert!(is_dns_label("pool-a"));
        assert!(!is_dns_label("Pool"));
        assert!(!is_dns_label("a.b"));
        assert!(is_dns_subdomain("example.com"));
        assert!(!is_dns_subdomain("-x.com"));
        assert!(validate_key("example.com/team").is_ok());
        assert!(validate_key("/team").is_err());
        assert!(validate_value("").is_ok());
        assert!(validate_value("-x").is_err());
    }
}
