//! A compiled `x-kubernetes-validations` rule: what evaluation needs of it
//! (its program, message, reason, field path), apart from how it is read
//! and checked (`rule.rs`), so that the schema tree (`model.rs`) can hold
//! its rules without depending on the compiler.

use cel::Program;

/// How a failed rule is reported (`reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reason {
    Invalid,
    Forbidden,
    Required,
    Duplicate,
}

/// A compiled rule.
#[derive(Debug)]
pub(super) struct Rule {
    /// `rule`, trimmed.
    pub source: String,
    /// `message`, trimmed, if set.
    pub message: Option<String>,
    /// The compiled `rule`.
    pub program: Program,
    /// The compiled `messageExpression`.
    pub message_expression: Option<Program>,
    /// `reason`.
    pub reason: Reason,
    /// `fieldPath`, normalized (`.a['b']` is `a.b` or `a[b]`).
    pub field_path: Option<String>,
    /// `optionalOldSelf`.
    pub optional_old_self: bool,
    /// Whether it refers to `oldSelf` (a transition rule).
    pub uses_old_self: bool,
}

impl Rule {
    /// apiextensions' `ruleErrorString`: the message, else the rule.
    pub fn describe(&self) -> &str {
        self.message.as_deref().unwrap_or(&self.source)
    }

    /// apiextensions' `ruleMessageOrDefault`.
    pub fn default_message(&self) -> String {
        match &self.message {
            Some(m) => m.clone(),
            None => format!("failed rule: {}", self.source),
        }
    }
}
