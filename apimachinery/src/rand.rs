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
}
