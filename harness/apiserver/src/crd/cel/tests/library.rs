//! The Kubernetes CEL libraries (k8s.io/apiserver pkg/cel/library) and
//! cel-go's strings and sets extensions, as CRD rules use them.

use serde_json::json;

use super::{causes_of, object, passes, spec_rules};
use kubecel::library::build_env;
use kubecel::quantity;

fn holds(rule: &str) -> bool {
    passes(json!({"type": "object"}), rule, json!({}))
}

/// The environment declares every library without conflicts.
#[test]
fn environment_builds() {
    assert!(build_env().is_ok());
}

/// library/lists.go: `isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`.
#[test]
fn lists_library() {
    for rule in [
        "[1, 2, 2, 3].isSorted() && !['b', 'a'].isSorted() && [].isSorted()",
        "[1, 3].sum() == 4 && [1.0, 3.0].sum() == 4.0 && [].sum() == 0",
        "[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3 && ['b', 'a'].min() == 'a'",
        "[1, 2, 2, 3].indexOf(2) == 1 && [1, 2, 2, 3].lastIndexOf(2) == 2 && [1].indexOf(5) == -1",
    ] {
        assert!(holds(rule), "{rule}");
    }
}

/// library/lists.go: `min()` of an empty list is an error.
#[test]
fn min_of_empty_list_is_an_error() {
    let causes = causes_of(
        json!({"type": "array", "items": {"type": "integer"}}),
        "self.min() > 0",
        json!([]),
    );
    assert_eq!(
        causes,
        vec![(
            "spec.x".into(),
            "Invalid value: \"array\": min called on empty list evaluating rule: self.min() > 0"
                .into()
        )]
    );
}

/// ext.Strings (v2) and the standard library's string functions.
#[test]
fn strings_library() {
    for rule in [
        "'AbC'.lowerAscii() == 'abc' && 'AbC'.upperAscii() == 'ABC'",
        "'  x '.trim() == 'x'",
        "'a,b'.split(',') == ['a', 'b'] && ['a', 'b'].join('-') == 'a-b'",
        "'abc'.indexOf('c') == 2 && 'abcabc'.lastIndexOf('b') == 4 && 'abc'.charAt(1) == 'b'",
        "'abc'.substring(1) == 'bc' && 'a-b'.replace('-', '_') == 'a_b'",
        "'node-1'.matches('^node-[0-9]+$') && 'x'.startsWith('x') && 'x'.endsWith('x') && 'axb'.contains('x')",
    ] {
        assert!(holds(rule), "{rule}");
    }
}

/// library/regex.go: `find`, `findAll`.
#[test]
fn regex_library() {
    assert!(holds(
        "'abc 123 def 456'.find('[0-9]+') == '123' && 'abc'.find('[0-9]+') == ''"
    ));
    assert!(holds(
        "'a1 b2 c3'.findAll('[a-z][0-9]') == ['a1', 'b2', 'c3']"
    ));
    assert!(holds("'a1 b2 c3'.findAll('[a-z][0-9]', 2) == ['a1', 'b2']"));
}

/// ext.Sets: `sets.contains`, `sets.equivalent`, `sets.intersects`.
#[test]
fn sets_library() {
    assert!(holds(
        "sets.contains([1, 2, 3], [3, 1]) && !sets.contains([1], [2])"
    ));
    assert!(holds(
        "sets.equivalent([1, 2, 2], [2, 1]) && sets.intersects([1, 2], [2, 5])"
    ));
}

/// library/quantity.go: the documented examples.
#[test]
fn quantity_library() {
    for rule in [
        "quantity('200M').compareTo(quantity('0.2G')) == 0",
        "quantity('50M').compareTo(quantity('50Mi')) == -1",
        "quantity('50Mi').compareTo(quantity('50M')) == 1",
        "quantity('150Mi').isGreaterThan(quantity('100Mi')) && !quantity('50Mi').isGreaterThan(quantity('100Mi'))",
        "quantity('50M').isLessThan(quantity('100M'))",
        "quantity('50k').asInteger() == 50000 && quantity('50000000G').isInteger()",
        "!quantity('9999999999999999999999999999999999999G').isInteger()",
        "quantity('50k').sub(20000).asApproximateFloat() == 30000.0",
        "quantity('50k').add(quantity('20k')) == quantity('70k') && quantity('50k').add(20) == quantity('50020')",
        "quantity('50k').add(20).sub(quantity('100k')).sub(-50000) == quantity('20')",
        "isQuantity('1.3G') && isQuantity('1.3Gi') && !isQuantity('1,3G') && !isQuantity('200K')",
        "!isQuantity('Three') && !isQuantity('Mi') && isQuantity('10000k')",
        "quantity('-1').sign() == -1 && quantity('0').sign() == 0 && quantity('5m').sign() == 1",
    ] {
        assert!(holds(rule), "{rule}");
    }
}

/// library/quantity.go: `asInteger()` of a non-integer is an error.
#[test]
fn quantity_as_integer_error() {
    let causes = causes_of(
        json!({"type": "string"}),
        "quantity(self).asInteger() > 0",
        json!("500m"),
    );
    assert_eq!(
        causes,
        vec![(
            "spec.x".into(),
            "Invalid value: \"string\": cannot convert value to integer evaluating rule: quantity(self).asInteger() > 0".into()
        )]
    );
}

/// resource.ParseQuantity's fast path decides `isInteger()`: milli units
/// and fractions are not integers even when whole, nor are large binary
/// suffixes that take the slow path.
#[test]
fn quantity_integers_follow_the_parser() {
    let integer = |s: &str| quantity::parse(s).map(|q| q.as_integer());
    assert_eq!(integer("32Gi"), Ok(Some(32 << 30)));
    assert_eq!(integer("1.5k"), Ok(Some(1500)));
    assert_eq!(integer("2e3"), Ok(Some(2000)));
    assert_eq!(integer("1000m"), Ok(None));
    assert_eq!(integer("1.0"), Ok(None));
    assert_eq!(integer("1Ei"), Ok(None));
    assert_eq!(integer("-3"), Ok(Some(-3)));
    assert!(quantity::parse("").is_err());
    assert!(quantity::parse("1.2.3").is_err());
}

/// The rules of the same schema run on many objects after one compile.
#[test]
fn compiled_rules_are_shareable() {
    fn shareable<T: Send + Sync>(_: &T) {}
    let rules =
        spec_rules(json!({"type": "object", "x-kubernetes-validations": [{"rule": "true"}]}));
    shareable(&rules);
    assert_eq!(rules.validate(&object(json!({})), None), vec![]);
}
