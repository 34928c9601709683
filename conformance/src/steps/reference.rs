//! The step reference, `docs/reference/steps.md`, rendered from the steps
//! registered with cucumber (every `#[given]`, `#[when]` and `#[then]` of
//! the step library), grouped by the file that defines them. A test in
//! `conformance/tests/checks/docs.rs` compares the document with [`markdown`], so a
//! step added without its line fails it.

use std::collections::BTreeMap;

use cucumber::codegen::{StepConstructor, WorldInventory};

use crate::world::CaWorld;

/// One registered step: its keyword, its pattern and the file it is in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RegisteredStep {
    /// The file that defines it, from the workspace root.
    pub file: String,
    /// `Given`, `When` or `Then`.
    pub keyword: &'static str,
    /// The regular expression it matches, without its anchors.
    pub pattern: String,
}

fn collect<S: StepConstructor<CaWorld> + 'static>(
    keyword: &'static str,
    steps: impl Iterator<Item = &'static S>,
) -> Vec<RegisteredStep> {
    steps
        .map(|s| {
            let (location, regex, _) = s.inner();
            let source = regex().as_str().to_string();
            let unanchored = source.strip_prefix('^').unwrap_or(&source);
            let pattern = unanchored
                .strip_suffix('$')
                .unwrap_or(unanchored)
                .to_string();
            let file = location.path.trim_start_matches("./").to_string();
            let file = if file.starts_with("conformance/") {
                file
            } else {
                format!("conformance/{file}")
            };
            RegisteredStep {
                file,
                keyword,
                pattern,
            }
        })
        .collect()
}

/// Every registered step, sorted by file, keyword and pattern.
pub fn registered() -> Vec<RegisteredStep> {
    type Given = <CaWorld as WorldInventory>::Given;
    type When = <CaWorld as WorldInventory>::When;
    type Then = <CaWorld as WorldInventory>::Then;
    let mut out = collect(
        "Given",
        cucumber::codegen::inventory::iter::<Given>.into_iter(),
    );
    out.extend(collect(
        "When",
        cucumber::codegen::inventory::iter::<When>.into_iter(),
    ));
    out.extend(collect(
        "Then",
        cucumber::codegen::inventory::iter::<Then>.into_iter(),
    ));
    out.sort();
    out
}

/// `docs/reference/steps.md`.
pub fn markdown() -> String {
    let steps = registered();
    let mut by_file: BTreeMap<&str, Vec<&RegisteredStep>> = BTreeMap::new();
    for s in &steps {
        by_file.entry(s.file.as_str()).or_default().push(s);
    }
    let mut out = String::from("# Steps\n\n");
    out.push_str(
        "Every step the conformance suite registers, as the regular expression it matches \
         (anchors left out), grouped by the file that defines it; each file's documentation \
         says what its steps read and write. A step written as `Given` also matches after \
         `And` or `But` in a `Given` block, and so on. How to use them: \
         [Write a scenario](../suite/writing-scenarios.md). Generated: \
         `UPDATE_REFERENCE=1 cargo test -p conformance --test checks docs::` writes it, and the same \
         test fails when it differs from the code.\n\n",
    );
    out.push_str(&format!(
        "{} steps in {} files.\n",
        steps.len(),
        by_file.len()
    ));
    for (file, steps) in by_file {
        out.push_str(&format!(
            "\n## `{file}`\n\n| keyword | pattern |\n|---|---|\n"
        ));
        for s in steps {
            out.push_str(&format!(
                "| {} | `{}` |\n",
                s.keyword,
                s.pattern.replace('|', "\\|").replace('`', "'")
            ));
        }
    }
    out
}
