//! `cluster-autoscaler --help`: upstream's layout (`--flag type  description
//! (default …)`, one flag an entry, the flag and the start of its
//! description on one line for `grep`), grouped by what an operator looks
//! for, and wrapped between words to the terminal's width ([`MAX_WIDTH`] in
//! a pipe or on a wider terminal, never less than [`MIN_WIDTH`]).
//!
//! Types are pflag's names (`duration`, `int`, `float`, `string`,
//! `stringArray`; booleans have none) and defaults are shown as pflag shows
//! them: strings quoted, zero values left out.

use std::any::TypeId;
use std::time::Duration;

use clap::{Arg, ArgAction, Command};

/// No help line is longer than this (the width in a pipe).
pub const MAX_WIDTH: usize = 100;

/// The narrowest layout, whatever the terminal.
pub const MIN_WIDTH: usize = 80;

/// The description column of an entry whose text holds a word too long
/// for the usual column (a long default value).
const LONG_WORD_COLUMN: usize = 8;

/// The widest description column; a longer flag puts its description on
/// the next line.
const MAX_DESCRIPTION_COLUMN: usize = 40;

/// The groups, in the order the help shows them. Every flag has one (a
/// test checks it).
pub const HEADINGS: [&str; 9] = [
    "Scale-up",
    "Scale-down",
    "Node groups",
    "Limits",
    "Cloud provider",
    "Loop, health and status",
    "Client and server",
    "ProvisioningRequests",
    "Logging",
];

/// Flags whose value is a type of its own upstream (not a string): the
/// name pflag prints for it. Their defaults are printed unquoted.
const OWN_TYPES: [(&str, &str); 4] = [
    ("log-backtrace-at", "traceLocation"),
    ("stderrthreshold", "severity"),
    ("cloud-provider-gce-lb-src-cidrs", "cidrs"),
    ("cloud-provider-gce-l7lb-src-cidrs", "cidrs"),
];

/// Flags whose default applies after parsing (whether the flag was given
/// matters: `--max-graceful-termination-sec` with `--drain-priority-config`
/// is an error only when given): the default the help shows.
const DEFAULTS_AFTER_PARSING: [(&str, &str); 1] = [("max-graceful-termination-sec", "600")];

/// pflag's name for the flag's value type; empty for booleans.
pub(crate) fn type_name(arg: &Arg) -> &'static str {
    let id = arg.get_value_parser().type_id();
    let long = arg.get_long().unwrap_or_default();
    if let Some((_, t)) = OWN_TYPES.iter().find(|(flag, _)| *flag == long) {
        t
    } else if !arg.get_action().takes_values() {
        ""
    } else if matches!(arg.get_action(), ArgAction::Append) {
        "stringArray"
    } else if id == TypeId::of::<bool>() {
        ""
    } else if id == TypeId::of::<Duration>() {
        "duration"
    } else if id == TypeId::of::<f64>() {
        "float"
    } else if [
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
    ]
    .iter()
    .any(|t| id == *t)
    {
        "int"
    } else {
        "string"
    }
}

/// The flag's default as pflag prints it (strings unquoted), or `None` for
/// a zero value, which pflag leaves out.
pub(crate) fn default_value(arg: &Arg) -> Option<String> {
    let long = arg.get_long().unwrap_or_default();
    let value = DEFAULTS_AFTER_PARSING
        .iter()
        .find(|(flag, _)| *flag == long)
        .map(|(_, d)| d.to_string())
        .or_else(|| {
            arg.get_default_values()
                .first()
                .map(|v| v.to_string_lossy().into_owned())
        })?;
    (!is_zero_value(&value)).then_some(value)
}

/// Whether pflag counts a default as zero and leaves it out of `--help`
/// (`[]`: an empty list, as upstream's tables write it).
pub(crate) fn is_zero_value(value: &str) -> bool {
    matches!(value, "" | "0" | "false" | "0s" | "[]")
}

/// ` (default …)` as pflag prints it, or nothing for a zero value.
fn default_suffix(arg: &Arg, type_name: &str) -> String {
    match default_value(arg) {
        None => String::new(),
        Some(value) if type_name == "string" => format!(" (default {value:?})"),
        Some(value) => format!(" (default {value})"),
    }
}

/// Splits `text` into lines of at most `width` characters, breaking
/// between words (a word longer than `width` gets a line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// One flag's `  --name type` column.
fn flag_column(arg: &Arg) -> String {
    let name = arg.get_long().unwrap_or_else(|| arg.get_id().as_str());
    let short = arg
        .get_short()
        .map_or("    ".to_string(), |s| format!("-{s}, "));
    match type_name(arg) {
        "" => format!("  {short}--{name}"),
        t => format!("  {short}--{name} {t}"),
    }
}

/// One flag's lines: the flag, then its description from `column` on,
/// wrapped at `width`. A flag wider than the column keeps the description on
/// its line when the whole fits, else the description starts below it.
fn entry(flag: &str, text: &str, column: usize, width: usize) -> Vec<String> {
    let lines = wrap(text, width - column);
    let indent = |l: &String| format!("{:column$}{l}", "");
    if lines.is_empty() {
        vec![flag.to_string()]
    } else if flag.len() + 2 <= column {
        let mut out = vec![format!("{flag:<column$}{}", lines[0])];
        out.extend(lines[1..].iter().map(indent));
        out
    } else if flag.len() + 2 + text.len() <= width {
        vec![format!("{flag}  {text}")]
    } else {
        std::iter::once(flag.to_string())
            .chain(lines.iter().map(indent))
            .collect()
    }
}

/// The width to lay the help out for: the terminal's when standard output
/// is one, else [`MAX_WIDTH`].
pub fn output_width() -> usize {
    terminal_size::terminal_size_of(std::io::stdout())
        .map_or(MAX_WIDTH, |(w, _)| usize::from(w.0))
        .clamp(MIN_WIDTH, MAX_WIDTH)
}

/// The whole help text of `cmd` at `width` columns, flags grouped under
/// [`HEADINGS`] (clap's own `--help` and `--version` last, under "Other").
pub fn render(cmd: &Command, width: usize) -> String {
    let mut out = format!("Usage: {} [flags]\n", cmd.get_name());
    if let Some(about) = cmd.get_about() {
        out.push('\n');
        for line in wrap(&about.to_string(), width) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    let args: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
        .collect();
    let mut sections: Vec<(&str, Vec<&Arg>)> = HEADINGS.iter().map(|h| (*h, vec![])).collect();
    sections.push(("Other", vec![]));
    for arg in args {
        let heading = arg.get_help_heading().unwrap_or("Other");
        let i = sections
            .iter()
            .position(|(h, _)| *h == heading)
            .unwrap_or(sections.len() - 1);
        sections[i].1.push(arg);
    }
    for (heading, args) in sections.iter().filter(|(_, a)| !a.is_empty()) {
        out.push_str(&format!("\n{heading}:\n"));
        let max_column = (width * 2 / 5).min(MAX_DESCRIPTION_COLUMN);
        let column = args
            .iter()
            .map(|a| flag_column(a).len() + 2)
            .filter(|w| *w <= max_column)
            .max()
            .unwrap_or(max_column);
        for arg in args {
            let flag = flag_column(arg);
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            let text = format!("{}{}", help.trim(), default_suffix(arg, type_name(arg)));
            let longest_word = text.split_whitespace().map(str::len).max().unwrap_or(0);
            let column = if longest_word > width - column {
                LONG_WORD_COLUMN
            } else {
                column
            };
            for line in entry(&flag, &text, column, width) {
                out.push_str(&line);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn wrap_breaks_between_words() {
        assert_eq!(
            wrap("one two three four", 9),
            vec!["one two", "three", "four"]
        );
        assert_eq!(wrap("", 9), Vec::<String>::new());
        assert_eq!(wrap("abcdefghijkl x", 5), vec!["abcdefghijkl", "x"]);
    }
}
