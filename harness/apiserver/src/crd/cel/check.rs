//! A light type check of compiled rules, for the compile errors cel-go's
//! checker gives when a CRD is created: references to undeclared
//! identifiers, fields the schema does not declare (`self.nonExistingField`),
//! field selection on scalars, comprehensions over non-iterables, `==`
//! between values of different kinds (`self == true` on an integer), and a
//! result that is not a `bool` (a `string` for `messageExpression`).
//!
//! It infers types only as far as it can tell: whatever it cannot type is
//! `dyn` and passes, so a rule upstream accepts is never refused here.

use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, SelectExpr,
};

use super::model::{Kind, Node};

/// A type as far as the check knows it.
#[derive(Debug, Clone)]
pub(super) enum Ty<'n> {
    Dyn,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    Type,
    Quantity,
    List(Box<Ty<'n>>),
    Map(Box<Ty<'n>>),
    Object(&'n Node),
    Optional(Box<Ty<'n>>),
}

impl<'n> Ty<'n> {
    /// The type of the values of `node`.
    pub fn of(node: &'n Node) -> Ty<'n> {
        let child = |n: &'n Option<Box<Node>>| Box::new(n.as_deref().map_or(Ty::Dyn, Ty::of));
        match node.kind {
            Kind::Object => Ty::Object(node),
            Kind::Map => Ty::Map(child(&node.additional)),
            Kind::List => Ty::List(child(&node.items)),
            Kind::Int => Ty::Int,
            Kind::Double => Ty::Double,
            Kind::String => Ty::String,
            Kind::Bytes => Ty::Bytes,
            Kind::Bool => Ty::Bool,
            Kind::IntOrString | Kind::Hidden => Ty::Dyn,
        }
    }

    /// cel-go's name of the type.
    pub fn name(&self) -> String {
        match self {
            Ty::Dyn => "dyn".into(),
            Ty::Bool => "bool".into(),
            Ty::Int => "int".into(),
            Ty::Uint => "uint".into(),
            Ty::Double => "double".into(),
            Ty::String => "string".into(),
            Ty::Bytes => "bytes".into(),
            Ty::Null => "null_type".into(),
            Ty::Type => "type".into(),
            Ty::Quantity => kubecel::library::QUANTITY_TYPE_NAME.into(),
            Ty::List(e) => format!("list({})", e.name()),
            Ty::Map(v) => format!("map(string, {})", v.name()),
            Ty::Object(_) => "object".into(),
            Ty::Optional(t) => format!("optional_type({})", t.name()),
        }
    }

    /// Whether a value of this type is certainly not of type `want`
    /// (`Bool` or `String`).
    pub fn is_not(&self, want: &Ty<'_>) -> bool {
        !matches!(self, Ty::Dyn) && std::mem::discriminant(self) != std::mem::discriminant(want)
    }

    /// The family `==` compares within: numbers, strings, bools, bytes.
    fn family(&self) -> Option<u8> {
        match self {
            Ty::Int | Ty::Uint | Ty::Double => Some(0),
            Ty::String => Some(1),
            Ty::Bool => Some(2),
            Ty::Bytes => Some(3),
            _ => None,
        }
    }
}

/// A type error at a byte offset of the source.
pub(super) struct Issue {
    /// The id of the expression node it is about.
    pub id: u64,
    /// cel-go's message.
    pub message: String,
}

/// The outcome of checking one expression.
pub(super) struct Checked<'n> {
    /// Whether it refers to `oldSelf` (a transition rule).
    pub uses_old_self: bool,
    /// Its result type.
    pub result: Ty<'n>,
    /// Its type errors.
    pub issues: Vec<Issue>,
}

/// Checks `expr` with `self` of `node`'s type, and `oldSelf` too (optional
/// with `optional_old_self`).
pub(super) fn check<'n>(expr: &IdedExpr, node: &'n Node, optional_old_self: bool) -> Checked<'n> {
    let mut checker = Checker {
        node,
        optional_old_self,
        scopes: Vec::new(),
        issues: Vec::new(),
        uses_old_self: false,
    };
    let result = checker.expr(expr);
    Checked {
        uses_old_self: checker.uses_old_self,
        result,
        issues: checker.issues,
    }
}

/// Identifiers that name types.
const TYPE_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "optional_type",
];

struct Checker<'n> {
    node: &'n Node,
    optional_old_self: bool,
    scopes: Vec<(String, Ty<'n>)>,
    issues: Vec<Issue>,
    uses_old_self: bool,
}

impl<'n> Checker<'n> {
    fn error(&mut self, id: u64, message: String) -> Ty<'n> {
        self.issues.push(Issue { id, message });
        Ty::Dyn
    }

    fn bound(&self, name: &str) -> bool {
        self.scopes.iter().any(|(n, _)| n == name)
            || name == "self"
            || name == "oldSelf"
            || TYPE_NAMES.contains(&name)
    }

    fn expr(&mut self, e: &IdedExpr) -> Ty<'n> {
        match &e.expr {
            Expr::Ident(name) => self.ident(name, e.id),
            Expr::Literal(literal) => literal_type(literal),
            Expr::List(list) => {
                let types: Vec<Ty<'n>> = list.elements.iter().map(|x| self.expr(x)).collect();
                Ty::List(Box::new(types.into_iter().next().unwrap_or(Ty::Dyn)))
            }
            Expr::Map(map) => {
                let mut value = Ty::Dyn;
                for (i, entry) in map.entries.iter().enumerate() {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        self.expr(&entry.key);
                        let t = self.expr(&entry.value);
                        if i == 0 {
                            value = t;
                        }
                    }
                }
                Ty::Map(Box::new(value))
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        self.expr(&field.value);
                    }
                }
                Ty::Dyn
            }
            Expr::Select(select) => self.select(select, e.id),
            Expr::Call(call) => self.call(call, e.id),
            Expr::Comprehension(c) => self.comprehension(c, e.id),
            Expr::Unspecified => Ty::Dyn,
        }
    }

    fn ident(&mut self, name: &str, id: u64) -> Ty<'n> {
        if let Some((_, t)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
            return t.clone();
        }
        match name {
            "self" => Ty::of(self.node),
            "oldSelf" => {
                self.uses_old_self = true;
                let t = Ty::of(self.node);
                if self.optional_old_self {
                    Ty::Optional(Box::new(t))
                } else {
                    t
                }
            }
            _ if TYPE_NAMES.contains(&name) => Ty::Type,
            _ => self.error(
                id,
                format!("undeclared reference to '{name}' (in container '')"),
            ),
        }
    }

    /// The type of field `field` of a value of type `operand`.
    fn field(&mut self, operand: &Ty<'n>, field: &str, id: u64) -> Ty<'n> {
        match operand {
            Ty::Object(node) => match node.field(field) {
                Some(child) => Ty::of(child),
                None => self.error(id, format!("undefined field '{field}'")),
            },
            Ty::Map(value) => (**value).clone(),
            Ty::Dyn | Ty::Optional(_) => Ty::Dyn,
            other => self.error(
                id,
                format!("type '{}' does not support field selection", other.name()),
            ),
        }
    }

    fn select(&mut self, select: &SelectExpr, id: u64) -> Ty<'n> {
        let operand = self.expr(&select.operand);
        let t = self.field(&operand, &select.field, id);
        if select.test { Ty::Bool } else { t }
    }

    fn call(&mut self, call: &CallExpr, id: u64) -> Ty<'n> {
        let target = match call.target.as_deref() {
            // `optional.of(x)`, `sets.contains(a, b)`: a namespace.
            Some(IdedExpr {
                expr: Expr::Ident(ns),
                ..
            }) if !self.bound(ns) => None,
            Some(t) => Some(self.expr(t)),
            None => None,
        };
        let args: Vec<Ty<'n>> = call.args.iter().map(|a| self.expr(a)).collect();
        let arg = |i: usize| args.get(i).cloned().unwrap_or(Ty::Dyn);
        match call.func_name.as_str() {
            "_==_" | "_!=_" => {
                let (a, b) = (arg(0), arg(1));
                if let (Some(x), Some(y)) = (a.family(), b.family())
                    && x != y
                {
                    let message = format!(
                        "found no matching overload for '{}' applied to '({}, {})'",
                        call.func_name,
                        a.name(),
                        b.name()
                    );
                    self.error(id, message);
                }
                Ty::Bool
            }
            "_?_:_" => same(arg(1), arg(2)),
            "_+_" | "_-_" | "_*_" | "_/_" | "_%_" => same(arg(0), arg(1)),
            "-_" => arg(0),
            "_[_]" => match arg(0) {
                Ty::List(e) => *e,
                Ty::Map(v) => *v,
                _ => Ty::Dyn,
            },
            "_?._" => {
                let field = match call.args.get(1).map(|a| &a.expr) {
                    Some(Expr::Literal(LiteralValue::String(s))) => s.inner().to_string(),
                    _ => String::new(),
                };
                Ty::Optional(Box::new(self.field(&arg(0), &field, id)))
            }
            name => result_type(name, target, &args),
        }
    }

    fn comprehension(&mut self, c: &ComprehensionExpr, id: u64) -> Ty<'n> {
        let range = self.expr(&c.iter_range);
        // The variable of `all(x, ...)`, and the two of `all(i, x, ...)`.
        let (single, first, second) = match range {
            Ty::List(e) => ((*e).clone(), Ty::Int, *e),
            Ty::Map(v) => (Ty::String, Ty::String, *v),
            Ty::Dyn => (Ty::Dyn, Ty::Dyn, Ty::Dyn),
            other => {
                let message = format!(
                    "expression of type '{}' cannot be range of a comprehension (must be list, map, or dynamic)",
                    other.name()
                );
                self.error(id, message);
                (Ty::Dyn, Ty::Dyn, Ty::Dyn)
            }
        };
        let accu = self.expr(&c.accu_init);
        let depth = self.scopes.len();
        match &c.iter_var2 {
            None => self.scopes.push((c.iter_var.clone(), single)),
            Some(var2) => {
                self.scopes.push((c.iter_var.clone(), first));
                self.scopes.push((var2.clone(), second));
            }
        }
        self.scopes.push((c.accu_var.clone(), accu));
        self.expr(&c.loop_cond);
        self.expr(&c.loop_step);
        let result = self.expr(&c.result);
        self.scopes.truncate(depth);
        result
    }
}

fn literal_type<'n>(literal: &LiteralValue) -> Ty<'n> {
    match literal {
        LiteralValue::Boolean(_) => Ty::Bool,
        LiteralValue::Bytes(_) => Ty::Bytes,
        LiteralValue::Double(_) => Ty::Double,
        LiteralValue::Int(_) => Ty::Int,
        LiteralValue::Null => Ty::Null,
        LiteralValue::String(_) => Ty::String,
        LiteralValue::UInt(_) => Ty::Uint,
    }
}

/// `a` when `b` is of the same simple type, else `dyn`.
fn same<'n>(a: Ty<'n>, b: Ty<'n>) -> Ty<'n> {
    let simple = |t: &Ty<'_>| {
        !matches!(
            t,
            Ty::List(_) | Ty::Map(_) | Ty::Object(_) | Ty::Optional(_)
        )
    };
    if simple(&a) && std::mem::discriminant(&a) == std::mem::discriminant(&b) {
        a
    } else {
        Ty::Dyn
    }
}

/// The result type of a function call, where the check knows it.
fn result_type<'n>(name: &str, target: Option<Ty<'n>>, args: &[Ty<'n>]) -> Ty<'n> {
    match name {
        "_&&_"
        | "_||_"
        | "!_"
        | "@not_strictly_false"
        | "@in"
        | "_<_"
        | "_<=_"
        | "_>_"
        | "_>=_"
        | "startsWith"
        | "endsWith"
        | "contains"
        | "matches"
        | "isSorted"
        | "isQuantity"
        | "isInteger"
        | "isGreaterThan"
        | "isLessThan"
        | "hasValue"
        | "equivalent"
        | "intersects" => Ty::Bool,
        "size" | "int" | "indexOf" | "lastIndexOf" | "compareTo" | "sign" | "asInteger" => Ty::Int,
        "uint" => Ty::Uint,
        "double" | "asApproximateFloat" => Ty::Double,
        "string" | "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" | "charAt"
        | "join" | "find" | "quote" | "format" => Ty::String,
        "bytes" => Ty::Bytes,
        "split" | "findAll" => Ty::List(Box::new(Ty::String)),
        "quantity" => Ty::Quantity,
        "add" | "sub" if matches!(target, Some(Ty::Quantity)) => Ty::Quantity,
        "type" => Ty::Type,
        "sum" | "min" | "max" => match target {
            Some(Ty::List(e)) => *e,
            _ => Ty::Dyn,
        },
        "value" | "orValue" => match target {
            Some(Ty::Optional(t)) => *t,
            _ => Ty::Dyn,
        },
        "of" if target.is_none() => {
            Ty::Optional(Box::new(args.first().cloned().unwrap_or(Ty::Dyn)))
        }
        "none" if target.is_none() => Ty::Optional(Box::new(Ty::Dyn)),
        _ => Ty::Dyn,
    }
}
