//! Random name suffixes (`k8s.io/apimachinery/pkg/util/rand.String`) and
//! leader-election identities.
//!
//! Both must differ between processes: two autoscaler replicas started in
//! the same instant must not share a holder identity (each would take the
//! other's Lease as its own), and two processes naming nodes must not pick
//! the same names. `fastrand`'s own generator is seeded from the time and
//! the thread's number only, which two processes can share; ours is seeded
//! once per thread from the operating system's randomness (the keys of
//! std's `RandomState`).

use std::cell::RefCell;
use std::hash::BuildHasher;

thread_local! {
    static RNG: RefCell<fastrand::Rng> = RefCell::new(fastrand::Rng::with_seed(os_seed()));
}

/// A seed from the operating system's randomness.
fn os_seed() -> u64 {
    std::collections::hash_map::RandomState::new().hash_one(std::process::id())
}

/// `f` with this thread's generator.
fn with_rng<T>(f: impl FnOnce(&mut fastrand::Rng) -> T) -> T {
    RNG.with(|rng| f(&mut rng.borrow_mut()))
}

/// Seeds this thread's generators, ours and `fastrand`'s own (the random
/// expander's): the names and choices made on this thread from now on are
/// the same in every run that seeds alike (a what-if run on a
/// single-threaded runtime, compared byte for byte). Two processes that
/// share a cluster must not seed alike.
pub fn seed_this_thread(seed: u64) {
    RNG.with(|rng| rng.borrow_mut().seed(seed));
    fastrand::seed(seed);
}

/// The characters of generated names: no vowels (no words) and no
/// look-alike characters.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A random suffix of `n` characters, as `generateName` and node group
/// scale-ups append.
pub fn suffix(n: usize) -> String {
    with_rng(|rng| {
        (0..n)
            .map(|_| char::from(ALPHABET[rng.usize(..ALPHABET.len())]))
            .collect()
    })
}

/// A leader-election holder identity as client-go programs make it:
/// `<hostname>_<random UUID>`. The hostname is the kernel's, as Go's
/// `os.Hostname` reads it (`/proc/sys/kernel/hostname`: a pod's name, or
/// its UTS namespace's), else `/etc/hostname`, else `$HOSTNAME`, else
/// `fallback`.
pub fn holder_identity(fallback: &str) -> String {
    let file = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|h| h.trim().to_string())
    };
    let host = [
        file("/proc/sys/kernel/hostname"),
        file("/etc/hostname"),
        std::env::var("HOSTNAME").ok(),
    ]
    .into_iter()
    .flatten()
    .find(|h| !h.is_empty())
    .unwrap_or_else(|| fallback.to_string());
    let hex: String = with_rng(|rng| {
        (0..32)
            .map(|_| char::from_digit(rng.u32(0..16), 16).unwrap_or('0'))
            .collect()
    });
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

    #[test]
    fn identities_name_the_kernels_hostname() {
        let Ok(kernel) = std::fs::read_to_string("/proc/sys/kernel/hostname") else {
            eprintln!("SKIPPED: no /proc/sys/kernel/hostname here");
            return;
        };
        let id = holder_identity("fallback");
        assert!(id.starts_with(&format!("{}_", kernel.trim())), "{id}");
    }
}
