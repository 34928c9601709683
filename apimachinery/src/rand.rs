//! Random name suffixes (`k8s.io/apimachinery/pkg/util/rand.String`).

/// The characters of generated names: no vowels (no words) and no
/// look-alike characters.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A random suffix of `n` characters, as `generateName` and node group
/// scale-ups append.
pub fn suffix(n: usize) -> String {
    (0..n)
        .map(|_| char::from(ALPHABET[fastrand::usize(..ALPHABET.len())]))
        .collect()
}

/// A leader-election holder identity as client-go programs make it:
/// `<hostname>_<random UUID>`. The host name comes from `$HOSTNAME`, else
/// `/etc/hostname`, else `fallback`.
pub fn holder_identity(fallback: &str) -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| fallback.to_string());
    let hex: String = (0..32)
        .map(|_| char::from_digit(fastrand::u32(0..16), 16).unwrap_or('0'))
        .collect();
    format!(
        "{host}_{}-{}-4{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[13..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_use_the_alphabet_and_differ() {
        let a = suffix(5);
        assert_eq!(a.len(), 5);
        assert!(a.bytes().all(|c| ALPHABET.contains(&c)), "{a}");
        let many: std::collections::HashSet<String> = (0..50).map(|_| suffix(5)).collect();
        assert!(many.len() > 45, "suffixes repeat: {many:?}");
    }

    #[test]
    fn identities_are_a_host_and_a_uuid() {
        let id = holder_identity("fallback");
        let (host, uuid) = id.rsplit_once('_').unwrap_or_else(|| panic!("{id}"));
        assert!(!host.is_empty());
        assert_eq!(uuid.len(), 36, "{id}");
        assert_eq!(uuid.as_bytes()[14], b'4', "a version-4 UUID: {id}");
        assert_ne!(holder_identity("fallback"), id);
    }
}
