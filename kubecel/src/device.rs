//! DRA device selectors (k8s.io/dynamic-resource-allocation `cel`): a CEL
//! expression over one variable, `device`, with
//!
//! - `device.driver`: the driver's name;
//! - `device.attributes[domain][id]`: the device's attributes by domain, a
//!   qualified name `domain/id` under its domain, an unqualified one under
//!   the driver's name; values are `int`, `bool`, `string` or, for
//!   `version`, a semver;
//! - `device.capacity[domain][id]`: its capacities, as quantities.
//!
//! As upstream, a domain the device has nothing under reads as an empty
//! map (so `device.attributes["x.example.com"].model` fails with `no such
//! key: model`, and the allocator reports the CEL runtime error), and the
//! result must be a `bool`. Here the empty maps are made for the domains
//! the expression indexes with a literal, found when it is compiled.
//!
//! [`Selector::compile`] refuses what does not parse, references to
//! anything but `device` and declared functions, and literal results that
//! are not `bool`, in cel-go's rendering.

use std::collections::{BTreeSet, HashMap};

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::common::types::{CelBool, CelInt, CelMap, CelMapKey, CelString};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::{Context, ExecutionError, Program, Value};

use crate::library::ENV;
use crate::{quantity, semver};

/// An attribute value of a device.
#[derive(Debug, Clone, Copy)]
pub enum Attribute<'a> {
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A string.
    String(&'a str),
    /// A semantic version (semver 2.0).
    Version(&'a str),
}

/// What a selector sees of one device.
#[derive(Debug, Clone, Default)]
pub struct Device<'a> {
    /// The driver's name (the domain of unqualified names).
    pub driver: &'a str,
    /// (name, qualified `domain/id` or bare `id`, value).
    pub attributes: Vec<(&'a str, Attribute<'a>)>,
    /// (name, qualified or bare, quantity).
    pub capacity: Vec<(&'a str, &'a str)>,
}

/// A compiled device selector.
#[derive(Debug)]
pub struct Selector {
    program: Program,
    /// The domains the expression indexes `attributes` with.
    attribute_domains: BTreeSet<String>,
    /// The domains the expression indexes `capacity` with.
    capacity_domains: BTreeSet<String>,
}

impl Selector {
    /// Compiles `expression`; the error is cel-go's rendering of what is
    /// wrong with it (`ERROR: <input>:1:1: undeclared reference to 'x'
    /// (in container '')` and the source line with a caret).
    pub fn compile(expression: &str) -> Result<Selector, String> {
        let program = crate::compile(expression)?;
        let mut walk = Walk::default();
        walk.expr(program.expression());
        if let Some((id, message)) = walk.issues.first() {
            let offset = program
                .source_info()
                .offset_for(*id)
                .map_or(0, |(start, _)| start);
            return Err(crate::render(expression, offset, message));
        }
        if let Expr::Literal(literal) = &program.expression().expr
            && !matches!(literal, LiteralValue::Boolean(_))
        {
            return Err(crate::render(
                expression,
                0,
                &format!("expected bool, got {}", literal_type(literal)),
            ));
        }
        Ok(Selector {
            program,
            attribute_domains: walk.attribute_domains,
            capacity_domains: walk.capacity_domains,
        })
    }

    /// Whether `device` matches; an error is the CEL runtime error, in
    /// cel-go's words (`no such key: model`).
    pub fn matches(&self, device: &Device<'_>) -> Result<bool, String> {
        let value = self.device_value(device)?;
        let vars = Vars(value.as_ref());
        let mut context = Context::with_env(ENV.clone());
        context.set_variable_resolver(&vars);
        match self.program.execute(&context) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "expected bool, got {}",
                type_name(&other).unwrap_or("dyn")
            )),
            Err(e) => Err(crate::runtime_error(&e)),
        }
    }

    fn device_value<'a>(&self, device: &Device<'a>) -> Result<Box<dyn Val + 'a>, String> {
        type Domains<'a> = HashMap<String, HashMap<CelMapKey<'a>, Box<dyn Val + 'a>>>;
        let split = |name: &'a str| match name.split_once('/') {
            Some((domain, id)) => (domain.to_string(), id),
            None => (device.driver.to_string(), name),
        };
        let mut attributes: Domains<'a> = HashMap::new();
        for (name, value) in &device.attributes {
            let (domain, id) = split(name);
            let val: Box<dyn Val + 'a> = match *value {
                Attribute::Int(i) => Box::new(CelInt::from(i)),
                Attribute::Bool(b) => Box::new(CelBool::from(b)),
                Attribute::String(s) => Box::new(CelString::from(s)),
                Attribute::Version(v) => match semver::parse(v) {
                    Ok(version) => semver::to_value(version).map_err(|e| e.to_string())?,
                    Err(_) => Box::new(CelString::from(v)),
                },
            };
            attributes
                .entry(domain)
                .or_default()
                .insert(CelMapKey::from(id), val);
        }
        let mut capacity: Domains<'a> = HashMap::new();
        for (name, value) in &device.capacity {
            let (domain, id) = split(name);
            let q = quantity::parse(value).map_err(|e| format!("capacity {name}: {e}"))?;
            let val: Box<dyn Val> = Value::Opaque(std::sync::Arc::new(q))
                .try_into()
                .map_err(|e: ExecutionError| e.to_string())?;
            capacity
                .entry(domain)
                .or_default()
                .insert(CelMapKey::from(id), val);
        }
        for d in &self.attribute_domains {
            attributes.entry(d.clone()).or_default();
        }
        for d in &self.capacity_domains {
            capacity.entry(d.clone()).or_default();
        }
        let by_domain = |domains: Domains<'a>| -> Box<dyn Val + 'a> {
            Box::new(CelMap::from(
                domains
                    .into_iter()
                    .map(|(d, m)| {
                        (
                            CelMapKey::from(d),
                            Box::new(CelMap::from(m)) as Box<dyn Val>,
                        )
                    })
                    .collect::<HashMap<_, _>>(),
            ))
        };
        let mut fields: HashMap<CelMapKey<'a>, Box<dyn Val + 'a>> = HashMap::new();
        fields.insert(
            CelMapKey::from("driver"),
            Box::new(CelString::from(device.driver)),
        );
        fields.insert(CelMapKey::from("attributes"), by_domain(attributes));
        fields.insert(CelMapKey::from("capacity"), by_domain(capacity));
        fields.insert(
            CelMapKey::from("allowMultipleAllocations"),
            Box::new(CelBool::from(false)),
        );
        Ok(Box::new(CelMap::from(fields)))
    }
}

/// The `device` variable.
struct Vars<'a>(&'a (dyn Val + 'a));

impl VariableResolver for Vars<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        (variable == "device").then_some(CowVal::Borrowed(self.0))
    }
}

fn type_name(value: &Value) -> Option<&'static str> {
    Some(match value {
        Value::Int(_) => "int",
        Value::UInt(_) => "uint",
        Value::Float(_) => "double",
        Value::String(_) => "string",
        Value::Bytes(_) => "bytes",
        Value::List(_) => "list",
        Value::Map(_) => "map",
        Value::Null => "null_type",
        _ => return None,
    })
}

fn literal_type(literal: &LiteralValue) -> &'static str {
    match literal {
        LiteralValue::Boolean(_) => "bool",
        LiteralValue::Int(_) => "int",
        LiteralValue::UInt(_) => "uint",
        LiteralValue::Double(_) => "double",
        LiteralValue::String(_) => "string",
        LiteralValue::Bytes(_) => "bytes",
        LiteralValue::Null => "null_type",
    }
}

/// The compile-time walk: undeclared references and the domains indexed.
#[derive(Default)]
struct Walk {
    /// Comprehension variables in scope.
    scopes: Vec<String>,
    issues: Vec<(u64, String)>,
    attribute_domains: BTreeSet<String>,
    capacity_domains: BTreeSet<String>,
}

impl Walk {
    fn expr(&mut self, e: &IdedExpr) {
        match &e.expr {
            Expr::Ident(name) => {
                if name != "device" && !self.scopes.contains(name) {
                    self.issues.push((
                        e.id,
                        format!("undeclared reference to '{name}' (in container '')"),
                    ));
                }
            }
            Expr::List(list) => list.elements.iter().for_each(|x| self.expr(x)),
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        self.expr(&entry.key);
                        self.expr(&entry.value);
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        self.expr(&field.value);
                    }
                }
            }
            Expr::Select(select) => self.expr(&select.operand),
            Expr::Call(call) => {
                if call.func_name == "_[_]" || call.func_name == "_[?_]" {
                    self.index(&call.args);
                }
                match call.target.as_deref() {
                    // `sets.contains(...)`, `optional.of(...)`: a namespace.
                    Some(IdedExpr {
                        expr: Expr::Ident(ns),
                        ..
                    }) if ns != "device" && !self.scopes.contains(ns) => {}
                    Some(t) => self.expr(t),
                    None => {}
                }
                call.args.iter().for_each(|a| self.expr(a));
            }
            Expr::Comprehension(c) => {
                self.expr(&c.iter_range);
                self.expr(&c.accu_init);
                self.scopes.push(c.iter_var.clone());
                if let Some(v) = &c.iter_var2 {
                    self.scopes.push(v.clone());
                }
                self.scopes.push(c.accu_var.clone());
                self.expr(&c.loop_cond);
                self.expr(&c.loop_step);
                self.expr(&c.result);
                self.scopes.pop();
                if c.iter_var2.is_some() {
                    self.scopes.pop();
                }
                self.scopes.pop();
            }
            Expr::Literal(_) | Expr::Unspecified => {}
        }
    }

    /// `device.attributes["domain"]` or `device.capacity["domain"]`.
    fn index(&mut self, args: &[IdedExpr]) {
        let [operand, key] = args else { return };
        let (Expr::Select(select), Expr::Literal(LiteralValue::String(domain))) =
            (&operand.expr, &key.expr)
        else {
            return;
        };
        if !matches!(&select.operand.expr, Expr::Ident(d) if d == "device") {
            return;
        }
        let domain = domain.inner().to_string();
        match select.field.as_str() {
            "attributes" => {
                self.attribute_domains.insert(domain);
            }
            "capacity" => {
                self.capacity_domains.insert(domain);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn gpu() -> Device<'static> {
        Device {
            driver: "gpu.example.com",
            attributes: vec![
                ("model", Attribute::String("a100")),
                ("index", Attribute::Int(3)),
                ("healthy", Attribute::Bool(true)),
                ("driverVersion", Attribute::Version("1.2.3")),
                ("topology.example.com/numa", Attribute::Int(1)),
            ],
            capacity: vec![("memory", "40Gi")],
        }
    }

    fn matches(expression: &str) -> Result<bool, String> {
        Selector::compile(expression)?.matches(&gpu())
    }

    #[test]
    fn attributes_and_capacity_by_domain() {
        for yes in [
            "device.driver == 'gpu.example.com'",
            "device.attributes['gpu.example.com'].model == 'a100'",
            "device.attributes['gpu.example.com'].index > 2 && device.attributes['gpu.example.com'].healthy",
            "device.attributes['topology.example.com'].numa == 1",
            "device.capacity['gpu.example.com'].memory.compareTo(quantity('32Gi')) > 0",
            "device.attributes['gpu.example.com'].driverVersion.isGreaterThan(semver('1.2.0'))",
            "!('model' in device.attributes['other.example.com'])",
        ] {
            assert_eq!(matches(yes), Ok(true), "{yes}");
        }
        assert_eq!(
            matches("device.attributes['gpu.example.com'].model == 'h100'"),
            Ok(false)
        );
    }

    #[test]
    fn a_missing_attribute_is_a_runtime_error() {
        assert_eq!(
            matches("device.attributes['other.example.com'].model == 'a100'"),
            Err("no such key: model".into())
        );
        assert_eq!(
            matches("device.driver"),
            Err("expected bool, got string".into())
        );
    }

    #[test]
    fn what_does_not_compile_is_refused_in_cel_gos_words() {
        let e = Selector::compile("gpu.model == 'a100'").unwrap_err();
        assert!(
            e.starts_with("ERROR: <input>:1:1: undeclared reference to 'gpu'"),
            "{e}"
        );
        assert!(e.contains("\n | gpu.model == 'a100'\n | ^"), "{e}");
        let e = Selector::compile("device.driver ==").unwrap_err();
        assert!(e.starts_with("ERROR: <input>:1:"), "{e}");
        assert!(Selector::compile("'yes'").is_err());
        assert!(Selector::compile("device.attributes.exists(d, d == 'x')").is_ok());
    }
}
