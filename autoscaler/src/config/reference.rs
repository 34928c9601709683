//! The flag reference, `docs/reference/flags.md`, rendered from the flags'
//! own definitions ([`Flags`]) beside upstream Cluster Autoscaler 1.37's
//! flags ([`UPSTREAM_1_37`], read from its source): each flag's type,
//! default and help, and whether upstream 1.37 has it with the same type and
//! default. A test in `conformance/tests/checks/docs.rs` compares the document with
//! [`markdown`], so a flag added without its line fails it.

use std::collections::BTreeMap;

use clap::{Arg, CommandFactory};

use super::flags::Flags;
use super::help;

/// Upstream Cluster Autoscaler 1.37's flags: `name\ttype\tdefault` lines,
/// the default as its `--help` prints it (comments start with `#`).
pub const UPSTREAM_1_37: &str = include_str!("upstream_flags_1_37.tsv");

/// The prefix of the test framework's flags that upstream's binary
/// carries (its API packages import Ginkgo): listed as one line.
const GINKGO_PREFIX: &str = "ginkgo.";

/// The release the comparison column is about.
pub const UPSTREAM_RELEASE: &str = "1.37";

/// A flag of an upstream release, as its `--help` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamFlag {
    /// pflag's type name (`string`, `duration`, `bool`, ...).
    pub type_name: String,
    /// The default as `--help` prints it (empty for a zero value).
    pub default: String,
}

/// A line of an upstream flag table that is not three tab-separated columns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("upstream flag table, line {line}: {text:?} is not name, type and default")]
pub struct UpstreamTableError {
    /// The line's number, from 1.
    pub line: usize,
    /// The line.
    pub text: String,
}

/// The flags of an upstream table, by name.
pub fn upstream_flags(table: &str) -> Result<BTreeMap<String, UpstreamFlag>, UpstreamTableError> {
    let mut out = BTreeMap::new();
    for (n, line) in table.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        let [name, type_name, default] = cols[..] else {
            return Err(UpstreamTableError {
                line: n + 1,
                text: line.to_string(),
            });
        };
        out.insert(
            name.to_string(),
            UpstreamFlag {
                type_name: type_name.to_string(),
                default: if help::is_zero_value(default) {
                    String::new()
                } else {
                    default.to_string()
                },
            },
        );
    }
    Ok(out)
}

/// How one of our flags compares with upstream's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Comparison {
    /// Upstream has it with the same type and default.
    Same,
    /// Upstream has it with another default (upstream's, as `--help` prints it).
    OtherDefault(String),
    /// Upstream has it with another type (upstream's).
    OtherType(String),
    /// Upstream does not have it.
    Absent,
}

impl Comparison {
    /// The table cell.
    fn cell(&self) -> String {
        match self {
            Self::Same => "same".to_string(),
            Self::OtherDefault(d) if d.is_empty() => "default: none".to_string(),
            Self::OtherDefault(d) => format!("default `{}`", escape(d)),
            Self::OtherType(t) => format!("type `{t}`"),
            Self::Absent => format!("not in {UPSTREAM_RELEASE}"),
        }
    }
}

/// Compares one of our flags with upstream's table.
fn compare(arg: &Arg, upstream: &BTreeMap<String, UpstreamFlag>) -> Comparison {
    let name = arg.get_long().unwrap_or_default();
    let Some(theirs) = upstream.get(name) else {
        return Comparison::Absent;
    };
    let ours_type = match help::type_name(arg) {
        "" => "bool",
        t => t,
    };
    let theirs_type = match theirs.type_name.as_str() {
        "" => "bool",
        t => t,
    };
    if ours_type != theirs_type {
        return Comparison::OtherType(theirs.type_name.clone());
    }
    let ours_default = help::default_value(arg).unwrap_or_default();
    if ours_default != theirs.default {
        return Comparison::OtherDefault(theirs.default.clone());
    }
    Comparison::Same
}

/// A table cell's text: pipes escaped, one line.
fn escape(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// Our flags, as `--help` lists them (clap's own `--help` and `--version`
/// left out).
fn our_flags() -> Vec<Arg> {
    let mut cmd = Flags::command();
    cmd.build();
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter(|a| !matches!(a.get_long(), Some("help" | "version") | None))
        .cloned()
        .collect()
}

/// `docs/reference/flags.md`. Fails only if the upstream table is malformed.
pub fn markdown() -> Result<String, UpstreamTableError> {
    let upstream = upstream_flags(UPSTREAM_1_37)?;
    let ours = our_flags();
    let mut out = String::new();
    out.push_str("# Flags\n\n");
    out.push_str(&format!(
        "Every flag of `cluster-autoscaler`, from the binary's own definitions \
         (`autoscaler/src/config/flags.rs`), grouped as `--help` groups them, beside upstream \
         Cluster Autoscaler {UPSTREAM_RELEASE}'s flags (`autoscaler/src/config/upstream_flags_1_37.tsv`, \
         read from upstream's source). The column *upstream {UPSTREAM_RELEASE}* says `same` when \
         upstream has the flag with the same type and default. Generated: \
         `UPDATE_REFERENCE=1 cargo test -p conformance --test checks docs::` writes it, and the same test \
         fails when it differs from the code.\n\n"
    ));
    let comparisons: Vec<Comparison> = ours.iter().map(|a| compare(a, &upstream)).collect();
    let count = |f: fn(&Comparison) -> bool| comparisons.iter().filter(|c| f(c)).count();
    let missing: Vec<&String> = upstream
        .keys()
        .filter(|name| !ours.iter().any(|a| a.get_long() == Some(name.as_str())))
        .collect();
    out.push_str(&format!(
        "{} flags: {} as upstream {UPSTREAM_RELEASE}, {} with another default, {} with another \
         type, {} not in upstream {UPSTREAM_RELEASE}; {} upstream {UPSTREAM_RELEASE} flags are not \
         taken (listed at the end).\n",
        ours.len(),
        count(|c| *c == Comparison::Same),
        count(|c| matches!(c, Comparison::OtherDefault(_))),
        count(|c| matches!(c, Comparison::OtherType(_))),
        count(|c| *c == Comparison::Absent),
        missing.len(),
    ));
    for heading in help::HEADINGS {
        out.push_str(&format!(
            "\n## {heading}\n\n| flag | type | default | upstream {UPSTREAM_RELEASE} | description |\n|---|---|---|---|---|\n"
        ));
        for (arg, comparison) in ours.iter().zip(&comparisons) {
            if arg.get_help_heading() != Some(heading) {
                continue;
            }
            let default = help::default_value(arg)
                .map(|d| format!("`{}`", escape(&d)))
                .unwrap_or_default();
            let help_text = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            out.push_str(&format!(
                "| `--{}` | {} | {default} | {} | {} |\n",
                arg.get_long().unwrap_or_default(),
                help::type_name(arg),
                comparison.cell(),
                escape(&help_text),
            ));
        }
    }
    out.push_str(&format!(
        "\n## Upstream {UPSTREAM_RELEASE} flags not taken\n\n\
         Given one of these, `cluster-autoscaler` stops with an error naming it.\n\n"
    ));
    if missing.is_empty() {
        out.push_str("None.\n");
    }
    let (ginkgo, missing): (Vec<&String>, Vec<&String>) = missing
        .into_iter()
        .partition(|n| n.starts_with(GINKGO_PREFIX));
    if !ginkgo.is_empty() {
        out.push_str(&format!(
            "- the {} `--{GINKGO_PREFIX}*` flags of the Ginkgo test framework, which upstream's \
             binary registers through an import of its API packages\n",
            ginkgo.len()
        ));
    }
    for name in missing {
        let theirs = &upstream[name];
        let default = if theirs.default.is_empty() {
            String::new()
        } else {
            format!(", default `{}`", escape(&theirs.default))
        };
        out.push_str(&format!("- `--{name}` ({}{default})\n", theirs.type_name));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arg_named(name: &str) -> Arg {
        our_flags()
            .into_iter()
            .find(|a| a.get_long() == Some(name))
            .unwrap_or_else(|| panic!("no flag --{name}"))
    }

    #[test]
    fn the_comparison_tells_same_default_type_and_absence() {
        let table = "# comment\nscan-interval\tduration\t10s\nmax-nodes-total\tint\t0\n\
                     expander\tstring\tpriority\nnamespace\tint\t3\n";
        let upstream = upstream_flags(table).unwrap();
        assert_eq!(
            compare(&arg_named("scan-interval"), &upstream),
            Comparison::Same
        );
        assert_eq!(
            compare(&arg_named("max-nodes-total"), &upstream),
            Comparison::Same
        );
        assert_eq!(
            compare(&arg_named("expander"), &upstream),
            Comparison::OtherDefault("priority".into())
        );
        assert_eq!(
            compare(&arg_named("namespace"), &upstream),
            Comparison::OtherType("int".into())
        );
        assert_eq!(
            compare(&arg_named("address"), &upstream),
            Comparison::Absent
        );
    }

    #[test]
    fn a_malformed_upstream_line_is_an_error_naming_it() {
        let err = upstream_flags("# upstream\nscan-interval duration 10s\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn every_flag_is_in_the_reference_under_its_heading() {
        let doc = markdown().unwrap();
        for arg in our_flags() {
            let line = format!("| `--{}` |", arg.get_long().unwrap());
            assert!(doc.contains(&line), "{line} missing");
        }
    }
}
