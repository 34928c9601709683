//! The words of the tree: documents, comments and messages speak to the
//! reader about the software, never about how it was made, and the
//! products' errors are typed.
//!
//! - [`history_words`]: the phrases of project history (our issue numbers,
//!   work sessions, review and research records, commit hashes, the word
//!   "helper") in any text file of the tree;
//! - [`string_errors`]: `Result<_, String>` in a product's code outside
//!   tests: `autoscaler/src` has none, its errors are enums that render
//!   their text in one place.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use regex::Regex;

use super::{files, is_test_file, read, repo};

/// What a phrase of project history looks like, and why it is one.
const HISTORY: [(&str, &str); 7] = [
    (r"(?i)\bissues? ?#?\d+", "an issue number"),
    (
        r"(?i)\b(this|last|previous|next|earlier|later|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(st|nd|rd|th)) stop\b|\bstops? \d+\b",
        "a work session",
    ),
    (
        r"(?i:\b(research|closing|review) notes?\b|\bnotes? for\b)|\bNOTE:",
        "a record of how the work was done",
    ),
    (r"(?i)\bhelpers?\b(\.go|_test\.go)?", "the word helper"),
    (r"(?i)\bcommit [0-9a-f]{7,40}\b", "a commit"),
    (r"(?i)\bspec\d+\b", "a work item"),
    (
        r"(?i)\bthe build (after|before) (that|it)\b",
        "an earlier build",
    ),
];

/// The history phrases of a text, as (line, phrase, why). An upstream file
/// named `helpers.go` is a name, not the word.
pub fn history_words(text: &str) -> Vec<(usize, String, &'static str)> {
    let rules: Vec<(Regex, &str)> = HISTORY
        .iter()
        .map(|(re, why)| (Regex::new(re).expect("history pattern"), *why))
        .collect();
    let mut out = vec![];
    for (n, line) in text.lines().enumerate() {
        for (re, why) in &rules {
            for m in re.find_iter(line) {
                if m.as_str().ends_with(".go") {
                    continue;
                }
                out.push((n + 1, m.as_str().to_string(), *why));
            }
        }
    }
    out
}

/// Whether a file's words are checked: the tree's text files, but the
/// generated protobuf field table (Kubernetes' field names) and proptest's
/// regression seeds.
pub fn words_checked(path: &Path) -> bool {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let text_kind = [
        ".rs", ".md", ".toml", ".yaml", ".yml", ".feature", ".sh", ".py", ".tsv", ".tpl", ".json",
    ]
    .iter()
    .any(|e| name.ends_with(e))
        || ["run", "Dockerfile", ".gitignore", "containers.conf"].contains(&name.as_ref());
    text_kind && name != "fields.txt" && !name.ends_with(".proptest-regressions")
}

/// Whether a line of code names `Result<T, String>`: its error argument,
/// after the top-level comma of the brackets, is `String`.
fn names_string_error(line: &str) -> bool {
    line.match_indices("Result<").any(|(at, open)| {
        let mut depth = 0usize;
        let mut comma = None;
        for (i, c) in line[at + open.len()..].char_indices() {
            match c {
                '<' | '(' | '[' => depth += 1,
                ')' | ']' => depth = depth.saturating_sub(1),
                '>' if depth == 0 => {
                    let inside = &line[at + open.len()..at + open.len() + i];
                    return comma.is_some_and(|c: usize| inside[c + 1..].trim() == "String");
                }
                '>' => depth -= 1,
                ',' if depth == 0 => comma = Some(i),
                _ => {}
            }
        }
        false
    })
}

/// The lines of a product's code (comments and test modules left out) that
/// return `Result<_, String>`.
pub fn string_errors(text: &str) -> Vec<usize> {
    let mut out = vec![];
    for (n, line) in super::code_lines(text).iter().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        if names_string_error(line) {
            out.push(n + 1);
        }
    }
    out
}

#[test]
fn no_word_of_project_history() {
    let root = repo();
    let mut checked = files(&root, |_| true);
    checked.extend([".ci/run", ".ci/containers.conf"].map(PathBuf::from));
    let mut found = vec![];
    for f in checked.iter().filter(|f| words_checked(f)) {
        // This test's own patterns and examples are its data.
        if f.starts_with("conformance/tests/checks/tree") {
            continue;
        }
        for (line, phrase, why) in history_words(&read(&root, f)) {
            found.push(format!("{}:{line} {phrase:?} ({why})", f.display()));
        }
    }
    assert!(
        found.is_empty(),
        "words about how the project was made (docs speak about the software; history goes \
         to CHANGELOG.md without them):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_history_checker_catches_each_kind_of_phrase() {
    // Built from parts, so that a search of the tree for these phrases
    // finds only the tree's own text, not this test's data.
    let text = concat!(
        "Fixed in iss",
        "ue 44's seventh st",
        "op.\nSee the res",
        "earch notes.\n",
        "A helper does it.\nMeasured at commit a5fb135.\n(spec42)\n",
        "The build after that was faster.\nNOTE: old.\n"
    );
    let found = history_words(text);
    let lines: BTreeSet<usize> = found.iter().map(|(l, _, _)| *l).collect();
    assert_eq!(lines, (1..=7).collect(), "{found:?}");
    let clean = "Press Ctrl-C to stop.\nUpstream's helpers.go reads it.\n\
                 The event's note field.\nkubernetes/autoscaler#1377 asks for it.\n";
    assert_eq!(history_words(clean), vec![]);
}

#[test]
fn product_errors_are_typed() {
    let root = repo();
    let mut found = vec![];
    for f in files(&root, |n| n.ends_with(".rs")) {
        if !f.starts_with("autoscaler/src") || is_test_file(&f) {
            continue;
        }
        for line in string_errors(&read(&root, &f)) {
            found.push(format!("{}:{line}", f.display()));
        }
    }
    assert!(
        found.is_empty(),
        "{} `Result<_, String>` in autoscaler/src outside tests: give each an error type\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_error_checker_counts_string_errors_outside_tests() {
    let text = "fn a() -> Result<(), String> {}\n\
                // fn b() -> Result<(), String>\n\
                fn c() -> Result<Vec<u8>, ParseError> {}\n\
                fn d(x: u8)\n    -> Result<BTreeMap<String, String>, String> {}\n\
                fn f() -> Result<BTreeMap<String, String>, FlagError> {}\n\
                #[cfg(test)]\nmod tests { fn e() -> Result<(), String> {} }\n";
    assert_eq!(string_errors(text), vec![1, 5]);
}
