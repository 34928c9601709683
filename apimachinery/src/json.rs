//! JSON Pointer lookups (RFC 6901) as `serde_json::Value::pointer` makes
//! them, without its two string copies per path segment: a segment is
//! unescaped (`~1` is `/`, `~0` is `~`) only when it has a `~`. The API
//! server, kwok and the what-if read a few fields of every object they
//! handle this way (`/metadata/name`, `/spec/nodeName`...).

use serde_json::Value;

/// `Value::pointer`'s lookup, for any JSON value.
pub trait Lookup {
    /// The value at `pointer` (`""` is the value itself; otherwise it
    /// starts with `/`), or `None` when a segment is missing, an array
    /// index is not a number in canonical form, or the path goes through a
    /// scalar.
    fn lookup(&self, pointer: &str) -> Option<&Value>;
}

impl Lookup for Value {
    fn lookup(&self, pointer: &str) -> Option<&Value> {
        if pointer.is_empty() {
            return Some(self);
        }
        pointer
            .strip_prefix('/')?
            .split('/')
            .try_fold(self, |target, segment| {
                if segment.contains('~') {
                    step(target, &segment.replace("~1", "/").replace("~0", "~"))
                } else {
                    step(target, segment)
                }
            })
    }
}

fn step<'a>(target: &'a Value, segment: &str) -> Option<&'a Value> {
    match target {
        Value::Object(map) => map.get(segment),
        Value::Array(list) => index(segment).and_then(|i| list.get(i)),
        _ => None,
    }
}

/// An array index: digits, no sign, no leading zero.
fn index(segment: &str) -> Option<usize> {
    if segment.starts_with('+') || (segment.starts_with('0') && segment.len() != 1) {
        return None;
    }
    segment.parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_what_value_pointer_finds() {
        let v = json!({
            "metadata": {"name": "p", "annotations": {"a/b": "slash", "c~d": "tilde", "": "empty"}},
            "spec": {"containers": [{"name": "c0"}, {"name": "c1"}]},
            "n": 1
        });
        for path in [
            "",
            "/metadata/name",
            "/metadata/annotations/a~1b",
            "/metadata/annotations/c~0d",
            "/metadata/annotations/",
            "/spec/containers/1/name",
            "/spec/containers/01/name",
            "/spec/containers/+1/name",
            "/spec/containers/2",
            "/spec/containers/x",
            "/n/deeper",
            "/missing",
            "metadata",
        ] {
            assert_eq!(v.lookup(path), v.pointer(path), "{path}");
        }
        assert_eq!(
            v.lookup("/metadata/annotations/a~1b"),
            Some(&json!("slash"))
        );
        assert_eq!(v.lookup("/spec/containers/1/name"), Some(&json!("c1")));
        assert_eq!(v.lookup("/spec/containers/01/name"), None);
    }
}
