//! The documents (every `.md`) and crate docs describe the tree as it is: every `cargo`
//! command they give names a package, binary, test or bench that exists,
//! every `testbed` and `cluster-autoscaler` flag they pass is one the binary
//! takes (read from its `--help`), `features/README.md` lists exactly the
//! feature files with their `Feature:` titles, and the README names the
//! cloud providers the binary implements; the generated references
//! (`docs/reference/flags.md`, `metrics.md`, `steps.md`) are what the code
//! renders now.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use autoscaler::cloudprovider::builder::ProviderName;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The files of the tree (outside `target/` and dot directories) whose
/// name passes `wanted`.
fn files_named(wanted: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut dirs = vec![repo()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    dirs.push(path);
                }
            } else if wanted(&name) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The commands of a markdown file: its code-block lines (with `\`
/// continuations joined) and its inline code that starts with `cargo `.
fn markdown_commands(text: &str) -> Vec<String> {
    let mut out = vec![];
    let mut in_block = false;
    let mut pending = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            let line = line.trim();
            if let Some(head) = line.strip_suffix('\\') {
                pending.push_str(head);
                pending.push(' ');
                continue;
            }
            pending.push_str(line);
            out.push(std::mem::take(&mut pending));
        } else {
            out.extend(inline_cargo_commands(line));
        }
    }
    out
}

/// `` `cargo …` `` spans of a line.
fn inline_cargo_commands(line: &str) -> Vec<String> {
    line.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| span.starts_with("cargo "))
        .map(str::to_string)
        .collect()
}

/// Targets of the workspace's packages: (package, kind) -> names.
fn targets() -> BTreeMap<(String, String), BTreeSet<String>> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--no-deps", "--offline", "--format-version=1"])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut map: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for p in meta["packages"].as_array().unwrap() {
        let package = p["name"].as_str().unwrap().to_string();
        map.entry((package.clone(), "package".into())).or_default();
        for t in p["targets"].as_array().unwrap() {
            for kind in t["kind"].as_array().unwrap() {
                map.entry((package.clone(), kind.as_str().unwrap().to_string()))
                    .or_default()
                    .insert(t["name"].as_str().unwrap().to_string());
            }
        }
    }
    map
}

/// The `--flags` of a command line (names only).
fn flags_of(args: &[&str]) -> Vec<String> {
    args.iter()
        .filter(|a| a.starts_with("--") && a.len() > 2)
        .map(|a| {
            a.trim_start_matches('-')
                .split('=')
                .next()
                .unwrap_or("")
                .replace('_', "-")
        })
        .collect()
}

/// The `--flag` names a help text lists (whole names only).
fn help_flags(help: &str) -> BTreeSet<String> {
    help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter_map(|w| w.strip_prefix("--"))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

fn testbed_help(sub: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_testbed"))
        .args([sub, "--help"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "testbed {sub} --help: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// What is wrong with one command, if anything.
fn check(
    command: &str,
    targets: &BTreeMap<(String, String), BTreeSet<String>>,
    ca_flags: &BTreeSet<String>,
) -> Option<String> {
    // Drop a comment, a trailing `&` and leading VAR=value assignments.
    let command = command.split(" #").next().unwrap_or("").trim();
    let command = command.trim_end_matches('&').trim();
    let words: Vec<&str> = command
        .split_whitespace()
        .skip_while(|w| w.contains('=') && !w.starts_with('-'))
        .collect();
    let (program, rest) = words.split_first()?;
    let (before, after) = match rest.iter().position(|w| *w == "--") {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let value_of = |flag: &str| {
        before
            .iter()
            .position(|w| *w == flag)
            .and_then(|i| before.get(i + 1))
            .map(|s| s.to_string())
    };
    let binary = match *program {
        "cargo" => {
            let package = value_of("-p");
            for (flag, kind) in [("--bin", "bin"), ("--test", "test"), ("--bench", "bench")] {
                if let (Some(p), Some(name)) = (&package, value_of(flag)) {
                    let known = targets.get(&(p.clone(), kind.into()));
                    if !known.is_some_and(|n| n.contains(&name)) {
                        return Some(format!("package {p} has no {kind} target {name:?}"));
                    }
                }
            }
            if let Some(p) = &package
                && !targets.contains_key(&(p.clone(), "package".into()))
            {
                return Some(format!("no package {p}"));
            }
            // Only `cargo run` passes arguments to the binary.
            if before.first() != Some(&"run") {
                return None;
            }
            value_of("--bin")?
        }
        p if p.ends_with("testbed") => "testbed".into(),
        p if p.ends_with("cluster-autoscaler") => "cluster-autoscaler".into(),
        _ => return None,
    };
    let args: Vec<&str> = if *program == "cargo" {
        after.to_vec()
    } else {
        rest.to_vec()
    };
    match binary.as_str() {
        "testbed" => {
            let Some(sub) = args.first() else {
                return Some("testbed without a subcommand".into());
            };
            if ![
                "run",
                "up",
                "compare",
                "bench",
                "whatif",
                "record",
                "synthetic",
            ]
            .contains(sub)
            {
                return Some(format!("testbed has no subcommand {sub:?}"));
            }
            let help = testbed_help(sub);
            let listed = help_flags(&help);
            flags_of(&args[1..])
                .into_iter()
                .find(|f| !listed.contains(f))
                .map(|f| format!("`testbed {sub} --help` has no --{f}"))
        }
        "cluster-autoscaler" => flags_of(&args)
            .into_iter()
            .find(|f| !ca_flags.contains(f))
            .map(|f| format!("cluster-autoscaler has no flag --{f}")),
        _ => None,
    }
}

#[test]
fn every_documented_command_names_what_exists() {
    let targets = targets();
    let ca_flags: BTreeSet<String> = autoscaler::config::Flags::command_with_help()
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect();
    let mut checked = 0;
    let mut wrong = vec![];
    for path in files_named(|n| n.ends_with(".md")) {
        let text = std::fs::read_to_string(&path).unwrap();
        for command in markdown_commands(&text) {
            checked += 1;
            if let Some(why) = check(&command, &targets, &ca_flags) {
                wrong.push(format!("{}: `{command}`: {why}", path.display()));
            }
        }
    }
    for path in files_named(|n| n.ends_with(".rs")) {
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.lines().filter(|l| l.trim_start().starts_with("//!")) {
            for command in inline_cargo_commands(line) {
                checked += 1;
                if let Some(why) = check(&command, &targets, &ca_flags) {
                    wrong.push(format!("{}: `{command}`: {why}", path.display()));
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} commands found");
    assert!(
        wrong.is_empty(),
        "documented commands that do not work:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_checker_catches_what_does_not_exist() {
    let targets = targets();
    let ca_flags = BTreeSet::from(["scan-interval".to_string()]);
    let bad = [
        "cargo test -p conformance --test nothing",
        "cargo run -p nopackage --bin x",
        "cargo run --release -p conformance --bin testbed -- run --no-such-flag",
        "cargo run --release -p conformance --bin testbed -- run --autoscaler-bin x",
        "cargo run --release -p conformance --bin testbed -- launch",
        "cargo run -p autoscaler --bin cluster-autoscaler -- --scan-interval=1s --nope",
    ];
    for command in bad {
        assert!(check(command, &targets, &ca_flags).is_some(), "{command}");
    }
    let good = [
        "cargo test -p conformance --test conformance",
        "cargo build --release -p conformance --bin testbed --features system-allocator",
        "cargo run --release -p conformance --bin testbed -- run --tags @binary",
        "POD_NAMESPACE=kube-system cargo run -p autoscaler --bin cluster-autoscaler -- --scan_interval=1s &",
        "kubectl get nodes",
    ];
    for command in good {
        assert_eq!(check(command, &targets, &ca_flags), None, "{command}");
    }
}

#[test]
fn features_readme_lists_every_feature_file() {
    let dir = repo().join("features");
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".feature") {
            let text = std::fs::read_to_string(&path).unwrap();
            let title = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("Feature:"))
                .unwrap_or_else(|| panic!("{name} has no Feature: line"))
                .trim()
                .to_string();
            files.insert(name, title);
        }
    }
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let listed: BTreeMap<String, String> = readme
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let file = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            file.ends_with(".feature")
                .then(|| (file.to_string(), cells.get(2).unwrap_or(&"").to_string()))
        })
        .collect();
    assert_eq!(
        listed, files,
        "features/README.md's table against features/"
    );
}

#[test]
fn readme_names_the_implemented_cloud_providers() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("Cloud providers implemented: "))
        .expect("README.md has no \"Cloud providers implemented: \" line");
    let listed: Vec<&str> = line
        .trim_start_matches("Cloud providers implemented: ")
        .split(['`', ',', '.', ' '])
        .filter(|w| !w.is_empty())
        .take_while(|w| *w != "(")
        .collect();
    let implemented: Vec<&str> = ProviderName::IMPLEMENTED
        .iter()
        .map(|p| p.as_str())
        .collect();
    assert_eq!(listed, implemented, "README.md: {line}");
}

// ---------------------------------------------------------------- references

/// The generated reference pages and what the code renders for each now.
fn generated_pages() -> Vec<(&'static str, String)> {
    vec![
        (
            "docs/reference/flags.md",
            autoscaler::config::reference::markdown().unwrap(),
        ),
        (
            "docs/reference/metrics.md",
            autoscaler::metrics::reference::markdown(),
        ),
        (
            "docs/reference/steps.md",
            conformance::steps::reference::markdown(),
        ),
    ]
}

/// Where a page differs from what the code renders: the lines the code
/// renders that the page lacks, and the page's lines the code no longer
/// renders (a few of each), or `None` when they are the same.
fn drift(page: &str, written: &str, rendered: &str) -> Option<String> {
    if written == rendered {
        return None;
    }
    let (w, r): (BTreeSet<&str>, BTreeSet<&str>) =
        (written.lines().collect(), rendered.lines().collect());
    let list = |lines: Vec<&&str>| {
        lines
            .iter()
            .take(5)
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let missing: Vec<&&str> = r.difference(&w).collect();
    let stale: Vec<&&str> = w.difference(&r).collect();
    Some(format!(
        "{page} is not what the code renders \
         (UPDATE_REFERENCE=1 cargo test -p conformance --test checks docs:: rewrites it)\n  \
         missing from the page ({}):\n{}\n  no longer rendered ({}):\n{}",
        missing.len(),
        list(missing.clone()),
        stale.len(),
        list(stale.clone()),
    ))
}

#[test]
fn generated_references_match_the_code() {
    let update = std::env::var_os("UPDATE_REFERENCE").is_some();
    let mut drifted = vec![];
    for (page, rendered) in generated_pages() {
        let path = repo().join(page);
        if update {
            std::fs::write(&path, &rendered).unwrap();
            continue;
        }
        let written = std::fs::read_to_string(&path).unwrap_or_default();
        drifted.extend(drift(page, &written, &rendered));
    }
    assert!(drifted.is_empty(), "{}", drifted.join("\n\n"));
}

#[test]
fn every_registered_step_is_in_the_step_reference() {
    let steps = conformance::steps::reference::registered();
    // The step library registers well over a hundred steps: far fewer means
    // the registry was not linked in, and the reference would be empty.
    assert!(steps.len() > 100, "only {} steps registered", steps.len());
    let page = conformance::steps::reference::markdown();
    assert!(page.contains("conformance/src/steps/time.rs"), "{page}");
    assert!(page.contains("minutes? pass"), "{page}");
}

#[test]
fn the_drift_check_names_the_lines_that_differ() {
    let rendered = "# Flags\n| `--a` |\n| `--b` |\n";
    assert_eq!(drift("p.md", rendered, rendered), None);
    let missing_b = "# Flags\n| `--a` |\n";
    let message = drift("p.md", missing_b, rendered).unwrap();
    assert!(
        message.contains("missing from the page (1):\n    | `--b` |"),
        "{message}"
    );
    let changed = "# Flags\n| `--a` | old |\n| `--b` |\n";
    let message = drift("p.md", changed, rendered).unwrap();
    assert!(
        message.contains("no longer rendered (1):\n    | `--a` | old |"),
        "{message}"
    );
}

#[test]
fn ci_runs_the_readme_test_command() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let commands = markdown_commands(&readme);
    let test = commands
        .iter()
        .find(|c| c.starts_with("cargo test"))
        .expect("README.md gives no `cargo test` command");
    let main = commands
        .iter()
        .find(|c| c.contains("--bin testbed -- run"))
        .expect("README.md gives no `testbed run` command");
    assert!(main.starts_with("cargo run"), "{main}");
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    assert!(
        ci.lines()
            .any(|l| l.trim_start().starts_with(test.as_str())),
        ".ci/run does not run the README's test command `{test}`"
    );
}

#[test]
fn the_image_build_copies_every_workspace_member() {
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let members: BTreeSet<String> = manifest
        .split("members = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .unwrap()
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        // A member inside another member's folder comes with it.
        .map(|m| m.split('/').next().unwrap_or(m).to_string())
        .collect();
    let dockerfile = std::fs::read_to_string(repo().join("deploy/Dockerfile")).unwrap();
    let copied: BTreeSet<String> = dockerfile
        .lines()
        .filter_map(|l| l.strip_prefix("COPY "))
        .filter(|l| !l.starts_with("--from"))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    let missing: Vec<&String> = members.difference(&copied).collect();
    assert!(
        missing.is_empty(),
        "deploy/Dockerfile does not copy {missing:?}"
    );
}
