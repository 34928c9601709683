//! The CEL environment of CRD validation rules: the standard library with
//! optional values, cel-go's strings extension, and the Kubernetes libraries
//! CRDs use (k8s.io/apiserver pkg/cel/library): lists (`isSorted`, `sum`,
//! `min`, `max`, `indexOf`, `lastIndexOf`), regex (`find`, `findAll`),
//! quantity (`quantity`, `isQuantity`, comparisons, arithmetic, `isInteger`,
//! `asInteger`...) and cel-go's sets (`sets.contains`, `sets.equivalent`,
//! `sets.intersects`), and semver (`semver`, `isSemver`, `major`, `minor`,
//! `patch`, comparisons), which DRA's version attributes are.

use std::cmp::Ordering;
use std::sync::{Arc, LazyLock};

use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelString, DYN_TYPE, INT_TYPE, LIST_TYPE, STRING_TYPE,
    Type,
};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError, Value};

use crate::quantity::{self, Quantity};
use crate::semver::{self, SEMVER_TYPE_NAME};

/// The CEL type name of quantities, as apiserver names it.
pub const QUANTITY_TYPE_NAME: &str = "kubernetes.Quantity";

/// The environment every rule compiles and runs in, built once.
/// (A declaration failing is a bug the tests catch: the standard library
/// alone is the fallback.)
pub static ENV: LazyLock<Arc<Env>> =
    LazyLock::new(|| Arc::new(build_env().unwrap_or_else(|_| Env::stdlib())));

/// Parses `source` in [`ENV`]; the error is cel-go's rendering of every
/// parse issue (`ERROR: <input>:1:5: Syntax error: ...` with the line and
/// a caret), one per line.
pub fn compile(source: &str) -> Result<cel::Program, String> {
    ENV.compile(source).map_err(|errors| {
        let rendered: Vec<String> = errors
            .errors
            .iter()
            .map(|e| {
                let line = usize::try_from(e.pos.0).unwrap_or(1).max(1);
                let column = usize::try_from(e.pos.1 - 1).unwrap_or(0);
                render_at(source, line, column, &e.msg)
            })
            .collect();
        rendered.join("\n")
    })
}

/// Whether a runtime error is cel-go's "no such overload" (arguments of
/// types no operator or function takes).
pub fn is_no_such_overload(error: &ExecutionError) -> bool {
    matches!(
        error,
        ExecutionError::NoSuchOverload(_)
            | ExecutionError::UnsupportedBinaryOperator(..)
            | ExecutionError::ValuesNotComparable(..)
            | ExecutionError::UnexpectedType { .. }
            | ExecutionError::UnsupportedTargetType { .. }
            | ExecutionError::NotSupportedAsMethod { .. }
            | ExecutionError::UnsupportedIndex(..)
    )
}

/// A runtime error in cel-go's words (`no such key: model`, `division by
/// zero`, ...).
pub fn runtime_error(error: &ExecutionError) -> String {
    match error {
        e if is_no_such_overload(e) => "no such overload".into(),
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::IndexOutOfBounds(index) => {
            let index = match index {
                Value::Int(i) => i.to_string(),
                Value::UInt(u) => u.to_string(),
                Value::Float(f) => f.to_string(),
                other => format!("{other:?}"),
            };
            format!("index out of bounds: {index}")
        }
        ExecutionError::DivisionByZero(_) => "division by zero".into(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        ExecutionError::Overflow(..) => "integer overflow".into(),
        ExecutionError::FunctionError { message, .. } => message.clone(),
        ExecutionError::UndeclaredReference(name) => format!("undeclared reference to '{name}'"),
        other => other.to_string(),
    }
}

/// cel-go's `Error.ToDisplayString` for an issue at byte `offset` of
/// `source`: the message with its location, the source line and a caret
/// under the column.
pub fn render(source: &str, offset: u32, message: &str) -> String {
    let offset = usize::try_from(offset).unwrap_or(0).min(source.len());
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count();
    render_at(source, line, column, message)
}

/// [`render`] at a 1-based line and 0-based column (in characters).
fn render_at(source: &str, line: usize, column: usize, message: &str) -> String {
    let mut out = format!("ERROR: <input>:{line}:{}: {message}", column + 1);
    if let Some(text) = source.lines().nth(line - 1) {
        let text = text.replace('\t', " ");
        out.push_str(&format!("\n | {text}\n | {}^", ".".repeat(column)));
    }
    out
}

/// The standard library, the strings extension and the Kubernetes libraries.
pub fn build_env() -> Result<Env, DeclarationError> {
    let mut env = Env::stdlib();
    env.add_extension(cel::extensions::strings)?;
    env.add_extension(kubernetes)?;
    Ok(env)
}

type Args<'b, 'v> = Vec<CowVal<'b, 'v>>;
type Out<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

fn kubernetes(env: &mut Env) -> Result<(), DeclarationError> {
    let q = || Type::new_opaque_type(QUANTITY_TYPE_NAME);
    let member = |env: &mut Env, name: &str, target: Type, args: Vec<Type>, f| {
        let id = format!("{name}_{}_{}", target.name(), args.len());
        env.add_member_overload(name, &id, target, args, f)
    };
    // Lists.
    member(env, "isSorted", LIST_TYPE, vec![], is_sorted)?;
    member(env, "sum", LIST_TYPE, vec![], sum)?;
    member(env, "min", LIST_TYPE, vec![], min)?;
    member(env, "max", LIST_TYPE, vec![], max)?;
    member(env, "indexOf", LIST_TYPE, vec![DYN_TYPE], index_of)?;
    member(env, "lastIndexOf", LIST_TYPE, vec![DYN_TYPE], last_index_of)?;
    // Regex.
    member(env, "find", STRING_TYPE, vec![STRING_TYPE], find)?;
    member(env, "findAll", STRING_TYPE, vec![STRING_TYPE], find_all)?;
    member(
        env,
        "findAll",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all,
    )?;
    // Sets.
    env.add_overload(
        "sets.contains",
        "sets_contains",
        vec![LIST_TYPE, LIST_TYPE],
        sets_contains,
    )?;
    env.add_overload(
        "sets.equivalent",
        "sets_equivalent",
        vec![LIST_TYPE, LIST_TYPE],
        sets_equivalent,
    )?;
    env.add_overload(
        "sets.intersects",
        "sets_intersects",
        vec![LIST_TYPE, LIST_TYPE],
        sets_intersects,
    )?;
    // Quantity.
    env.add_overload(
        "quantity",
        "string_to_quantity",
        vec![STRING_TYPE],
        to_quantity,
    )?;
    env.add_overload(
        "isQuantity",
        "is_quantity_string",
        vec![STRING_TYPE],
        is_quantity,
    )?;
    env.add_overload("sign", "quantity_sign", vec![q()], quantity_sign)?;
    member(env, "sign", q(), vec![], quantity_sign)?;
    member(env, "isGreaterThan", q(), vec![q()], is_greater_than)?;
    member(env, "isLessThan", q(), vec![q()], is_less_than)?;
    member(env, "compareTo", q(), vec![q()], compare_to)?;
    member(env, "asApproximateFloat", q(), vec![], as_approximate_float)?;
    member(env, "asInteger", q(), vec![], as_integer)?;
    member(env, "isInteger", q(), vec![], is_integer)?;
    env.add_member_overload("add", "quantity_add", q(), vec![q()], add)?;
    env.add_member_overload("add", "quantity_add_int", q(), vec![INT_TYPE], add)?;
    env.add_member_overload("sub", "quantity_sub", q(), vec![q()], sub)?;
    env.add_member_overload("sub", "quantity_sub_int", q(), vec![INT_TYPE], sub)?;
    // Semver.
    let v = || Type::new_opaque_type(SEMVER_TYPE_NAME);
    env.add_overload("semver", "string_to_semver", vec![STRING_TYPE], to_semver)?;
    env.add_overload("isSemver", "is_semver_string", vec![STRING_TYPE], is_semver)?;
    member(env, "major", v(), vec![], major)?;
    member(env, "minor", v(), vec![], minor)?;
    member(env, "patch", v(), vec![], patch)?;
    member(env, "isGreaterThan", v(), vec![v()], is_greater_than)?;
    member(env, "isLessThan", v(), vec![v()], is_less_than)?;
    member(env, "compareTo", v(), vec![v()], compare_to)?;
    Ok(())
}

fn owned<'b, 'v>(val: impl Val + 'v) -> Out<'b, 'v> {
    Ok(CowVal::owned(val))
}

fn overload_error(function: &str, args: &[CowVal<'_, '_>]) -> ExecutionError {
    let types = args
        .iter()
        .map(|a| a.get_type().name().to_string())
        .collect();
    ExecutionError::no_such_member_overload(function, types)
}

/// The elements of a list argument.
fn elements<'b, 'v>(list: &'b CowVal<'_, 'v>) -> Result<Vec<&'b (dyn Val + 'v)>, ExecutionError> {
    let iterable = list.as_ref().as_iterable().ok_or_else(|| {
        ExecutionError::no_such_overload("list", vec![list.get_type().name().into()])
    })?;
    let mut items = iterable.iter();
    let mut out = Vec::new();
    while let Some(item) = items.next() {
        out.push(item);
    }
    Ok(out)
}

fn compare(function: &str, a: &dyn Val, b: &dyn Val) -> Result<Ordering, ExecutionError> {
    a.as_comparer()
        .ok_or_else(|| {
            ExecutionError::no_such_member_overload(function, vec![a.get_type().name().into()])
        })?
        .compare(b)
}

fn is_sorted<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let items = elements(&args[0])?;
    for pair in items.windows(2) {
        if compare("isSorted", pair[0], pair[1])? == Ordering::Greater {
            return owned(CelBool::from(false));
        }
    }
    owned(CelBool::from(true))
}

fn sum<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let items = elements(&args[0])?;
    let Some((first, rest)) = items.split_first() else {
        return owned(CelInt::from(0));
    };
    let mut total = first.clone_as_boxed();
    for item in rest {
        let next = total
            .as_adder()
            .ok_or_else(|| overload_error("sum", &args))?
            .add(*item)?
            .as_ref()
            .clone_as_boxed();
        total = next;
    }
    Ok(CowVal::Owned(total))
}

fn extreme<'b, 'v>(args: Args<'b, 'v>, name: &str, keep: Ordering) -> Out<'b, 'v> {
    let items = elements(&args[0])?;
    let mut best = *items.first().ok_or_else(|| {
        ExecutionError::function_error(name, format!("{name} called on empty list"))
    })?;
    for item in &items[1..] {
        if compare(name, *item, best)? == keep {
            best = *item;
        }
    }
    Ok(CowVal::Owned(best.clone_as_boxed()))
}

fn min<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    extreme(args, "min", Ordering::Less)
}

fn max<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    extreme(args, "max", Ordering::Greater)
}

fn position<'b, 'v>(args: Args<'b, 'v>, last: bool) -> Out<'b, 'v> {
    let items = elements(&args[0])?;
    let target = args[1].as_ref();
    let found = if last {
        items.iter().rposition(|item| item.equals(target))
    } else {
        items.iter().position(|item| item.equals(target))
    };
    owned(CelInt::from(
        found.map_or(-1, |i| i64::try_from(i).unwrap_or(-1)),
    ))
}

fn index_of<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    position(args, false)
}

fn last_index_of<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    position(args, true)
}

fn string_arg<'a>(function: &str, val: &'a CowVal<'_, '_>) -> Result<&'a str, ExecutionError> {
    val.as_ref()
        .downcast_ref::<CelString>()
        .map(|s| s.inner())
        .ok_or_else(|| {
            ExecutionError::no_such_overload(function, vec![val.get_type().name().into()])
        })
}

fn regex(function: &str, pattern: &str) -> Result<regex::Regex, ExecutionError> {
    regex::Regex::new(pattern).map_err(|e| ExecutionError::function_error(function, e.to_string()))
}

fn find<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let text = string_arg("find", &args[0])?;
    let re = regex("find", string_arg("find", &args[1])?)?;
    let found = re
        .find(text)
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    owned(CelString::from(found))
}

fn find_all<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let text = string_arg("findAll", &args[0])?;
    let re = regex("findAll", string_arg("findAll", &args[1])?)?;
    let limit = match args.get(2) {
        Some(n) => n
            .as_ref()
            .downcast_ref::<CelInt>()
            .map(|n| *n.inner())
            .unwrap_or(-1),
        None => -1,
    };
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let found: Vec<Box<dyn Val + 'v>> = re
        .find_iter(text)
        .take(limit)
        .map(|m| Box::new(CelString::from(m.as_str().to_string())) as Box<dyn Val>)
        .collect();
    owned(CelList::from(found))
}

fn contains_all(a: &[&dyn Val], b: &[&dyn Val]) -> bool {
    b.iter().all(|x| a.iter().any(|y| y.equals(*x)))
}

fn sets_contains<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (a, b) = (elements(&args[0])?, elements(&args[1])?);
    owned(CelBool::from(contains_all(&a, &b)))
}

fn sets_equivalent<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (a, b) = (elements(&args[0])?, elements(&args[1])?);
    owned(CelBool::from(contains_all(&a, &b) && contains_all(&b, &a)))
}

fn sets_intersects<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (a, b) = (elements(&args[0])?, elements(&args[1])?);
    owned(CelBool::from(
        a.iter().any(|x| b.iter().any(|y| y.equals(*x))),
    ))
}

/// The quantity a value holds, if it is one.
fn quantity_of(val: &dyn Val) -> Option<Quantity> {
    match Value::try_from(val).ok()? {
        Value::Opaque(opaque) => opaque.downcast_ref::<Quantity>().cloned(),
        _ => None,
    }
}

fn quantity_args(
    function: &str,
    args: &[CowVal<'_, '_>],
) -> Result<(Quantity, Option<Quantity>), ExecutionError> {
    let first = quantity_of(args[0].as_ref()).ok_or_else(|| overload_error(function, args))?;
    let second = match args.get(1) {
        None => None,
        Some(arg) => match arg.as_ref().downcast_ref::<CelInt>() {
            Some(n) => Some(Quantity::from_int(*n.inner())),
            None => Some(quantity_of(arg.as_ref()).ok_or_else(|| overload_error(function, args))?),
        },
    };
    Ok((first, second))
}

fn quantity_out<'b, 'v>(q: Quantity) -> Out<'b, 'v> {
    let val: Box<dyn Val> = Value::Opaque(Arc::new(q)).try_into()?;
    Ok(CowVal::Owned(val))
}

fn to_quantity<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let text = string_arg("quantity", &args[0])?;
    let q = quantity::parse(text).map_err(|e| ExecutionError::function_error("quantity", e))?;
    quantity_out(q)
}

fn is_quantity<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let text = string_arg("isQuantity", &args[0])?;
    owned(CelBool::from(quantity::parse(text).is_ok()))
}

fn quantity_sign<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (q, _) = quantity_args("sign", &args)?;
    owned(CelInt::from(q.sign()))
}

/// How the two arguments of a comparison order: two quantities or two
/// semantic versions.
fn ordering<'b, 'v>(args: Args<'b, 'v>, function: &str) -> Result<Ordering, ExecutionError> {
    if let (Some(a), Some(b)) = (
        semver::of(args[0].as_ref()),
        args.get(1).and_then(|b| semver::of(b.as_ref())),
    ) {
        return Ok(a.cmp(&b));
    }
    match quantity_args(function, &args)? {
        (a, Some(b)) => Ok(a.cmp(&b)),
        _ => Err(overload_error(function, &args)),
    }
}

fn is_greater_than<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    owned(CelBool::from(
        ordering(args, "isGreaterThan")? == Ordering::Greater,
    ))
}

fn is_less_than<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    owned(CelBool::from(
        ordering(args, "isLessThan")? == Ordering::Less,
    ))
}

fn compare_to<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let n = match ordering(args, "compareTo")? {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    };
    owned(CelInt::from(n))
}

fn as_approximate_float<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (q, _) = quantity_args("asApproximateFloat", &args)?;
    owned(CelDouble::from(q.approximate()))
}

fn as_integer<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (q, _) = quantity_args("asInteger", &args)?;
    let n = q.as_integer().ok_or_else(|| {
        ExecutionError::function_error("asInteger", "cannot convert value to integer")
    })?;
    owned(CelInt::from(n))
}

fn is_integer<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (q, _) = quantity_args("isInteger", &args)?;
    owned(CelBool::from(q.as_integer().is_some()))
}

fn arithmetic<'b, 'v>(args: Args<'b, 'v>, function: &str, negate: bool) -> Out<'b, 'v> {
    let (a, b) = quantity_args(function, &args)?;
    let b = b.ok_or_else(|| overload_error(function, &args))?;
    let sum = a
        .add(&b, negate)
        .ok_or_else(|| ExecutionError::function_error(function, "integer overflow"))?;
    quantity_out(sum)
}

fn add<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    arithmetic(args, "add", false)
}

fn sub<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    arithmetic(args, "sub", true)
}

fn to_semver<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let text = string_arg("semver", &args[0])?;
    let version = semver::parse(text).map_err(|e| {
        ExecutionError::function_error("semver", format!("could not parse {text:?} as semver: {e}"))
    })?;
    Ok(CowVal::Owned(semver::to_value(version)?))
}

fn is_semver<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let text = string_arg("isSemver", &args[0])?;
    owned(CelBool::from(semver::parse(text).is_ok()))
}

fn part<'b, 'v>(
    args: &Args<'b, 'v>,
    function: &str,
    pick: fn(&semver::Semver) -> u64,
) -> Out<'b, 'v> {
    let version = semver::of(args[0].as_ref()).ok_or_else(|| {
        ExecutionError::no_such_member_overload(function, vec![args[0].get_type().name().into()])
    })?;
    owned(CelInt::from(
        i64::try_from(pick(&version)).unwrap_or(i64::MAX),
    ))
}

fn major<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    part(&args, "major", |v| v.major)
}

fn minor<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    part(&args, "minor", |v| v.minor)
}

fn patch<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    part(&args, "patch", |v| v.patch)
}
