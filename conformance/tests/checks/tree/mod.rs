//! The shape of the source tree, read from the files alone:
//!
//! - no source file over [`MAX_FILE_LINES`] lines, but generated ones (a
//!   file that says "generated" in its first lines);
//! - no function over [`MAX_FN_LINES`] lines outside tests;
//! - no import cycle between the files of a crate, from their `use` lines;
//! - every `docs/<name>.md §N` reference names a section of that document,
//!   and no `§` points outside `docs/`;
//! - the folders are layered: nothing under `autoscaler/` or `kwok/`
//!   depends on a crate under `harness/`, nothing under `harness/` on one
//!   under `autoscaler/` (every dependency kind of every member's
//!   `Cargo.toml`, as `cargo tree` shows them);
//! - no phrase of project history in any text file, and no
//!   `Result<_, String>` in `autoscaler/src` outside tests ([`words`]).
//!
//! Each check is a plain function over text, and the `*_catches_*` tests
//! give it a tree that breaks its rule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod words;

/// The longest a hand-written source file may be.
const MAX_FILE_LINES: usize = 1000;
/// The longest a function outside tests may be.
const MAX_FN_LINES: usize = 150;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every file of the tree (outside `target/` and dot directories) whose name
/// passes `wanted`, relative to the root.
fn files(root: &Path, wanted: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    dirs.push(path);
                }
            } else if wanted(&name) {
                out.push(path.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

fn read(root: &Path, file: &Path) -> String {
    std::fs::read_to_string(root.join(file)).unwrap()
}

// ---------------------------------------------------------------- lexing

/// The code of each line with comments removed and the insides of string
/// and char literals blanked, so that braces and `use` can be read off it.
fn code_lines(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = vec![String::new()];
    let mut i = 0;
    let mut block_depth = 0usize;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            out.push(String::new());
            i += 1;
            continue;
        }
        let line = out.last_mut().unwrap();
        if block_depth > 0 {
            if c == '*' && next == Some('/') {
                block_depth -= 1;
                i += 2;
            } else if c == '/' && next == Some('*') {
                block_depth += 1;
                i += 2;
            } else {
                i += 1;
            }
            continue;
        }
        match c {
            '/' if next == Some('/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if next == Some('*') => {
                block_depth += 1;
                i += 2;
            }
            'r' if matches!(next, Some('"') | Some('#'))
                && !prev_is_ident(&chars, i)
                && raw_string_start(&chars, i + 1).is_some() =>
            {
                let (hashes, body) = raw_string_start(&chars, i + 1).unwrap();
                line.push_str("\"\"");
                i = body;
                // Find `"` followed by `hashes` #s.
                while i < chars.len() {
                    if chars[i] == '"' && (0..hashes).all(|k| chars.get(i + 1 + k) == Some(&'#')) {
                        i += 1 + hashes;
                        break;
                    }
                    if chars[i] == '\n' {
                        out.push(String::new());
                    }
                    i += 1;
                }
            }
            '"' => {
                out.last_mut().unwrap().push_str("\"\"");
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    if chars.get(i) == Some(&'\n') {
                        out.push(String::new());
                    }
                    i += 1;
                }
                i += 1;
            }
            '\'' => {
                // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
                if next == Some('\\') {
                    let mut j = i + 2;
                    while j < chars.len() && chars[j] != '\'' {
                        j += 1;
                    }
                    line.push_str("' '");
                    i = j + 1;
                } else if chars.get(i + 2) == Some(&'\'') {
                    line.push_str("' '");
                    i += 3;
                } else {
                    line.push(c);
                    i += 1;
                }
            }
            _ => {
                line.push(c);
                i += 1;
            }
        }
    }
    out
}

fn prev_is_ident(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// At `chars[at]` (just after an `r`): `#*"` opens a raw string; the number
/// of `#`s and the index of its first character.
fn raw_string_start(chars: &[char], at: usize) -> Option<(usize, usize)> {
    let mut j = at;
    while chars.get(j) == Some(&'#') {
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some((j - at, j + 1))
}

// ---------------------------------------------------------------- sizes

/// Whether a file says it is generated in its first lines.
fn is_generated(text: &str) -> bool {
    text.lines()
        .take(3)
        .any(|l| l.to_lowercase().contains("generated"))
}

/// Whether a file holds tests only: integration tests, benches' sibling
/// `tests/` folders and `tests.rs` modules.
fn is_test_file(path: &Path) -> bool {
    path.components().any(|c| c.as_os_str() == "tests") || path.ends_with("tests.rs")
}

/// Functions longer than `max` lines (outside `#[cfg(test)]` modules), as
/// `(name, first line, lines)`.
fn long_functions(text: &str, max: usize) -> Vec<(String, usize, usize)> {
    let lines = code_lines(text);
    let mut out = vec![];
    let mut depth = 0i64;
    // Open functions: (name, first line, depth of their body).
    let mut open: Vec<(String, usize, i64)> = vec![];
    // A function whose signature was seen and whose body has not opened.
    let mut pending: Option<(String, usize)> = None;
    let mut test_module_depth: Option<i64> = None;
    let mut cfg_test = false;
    for (n, line) in lines.iter().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with("#[cfg(test)]") {
            cfg_test = true;
        } else if cfg_test && !trimmed.is_empty() && !trimmed.starts_with("#[") {
            if test_module_depth.is_none() && starts_inline_module(trimmed) {
                test_module_depth = Some(depth);
            }
            cfg_test = false;
        }
        if test_module_depth.is_none()
            && let Some(name) = fn_name(line)
        {
            pending = Some((name, n));
        }
        for c in line.chars() {
            match c {
                '{' => {
                    if let Some((name, first)) = pending.take() {
                        open.push((name, first, depth));
                    }
                    depth += 1;
                }
                '}' => {
                    depth -= 1;
                    if open.last().is_some_and(|(_, _, d)| *d == depth) {
                        let (name, first, _) = open.pop().unwrap();
                        let len = n - first + 1;
                        if len > max {
                            out.push((name, first + 1, len));
                        }
                    }
                    if test_module_depth == Some(depth) {
                        test_module_depth = None;
                    }
                }
                // A declaration without a body (trait methods).
                ';' if !line.contains('{') => pending = None,
                _ => {}
            }
        }
    }
    out
}

fn starts_inline_module(line: &str) -> bool {
    let rest = line.strip_prefix("pub ").unwrap_or(line);
    rest.starts_with("mod ") && line.ends_with('{')
}

/// The name of the function a line declares (`fn name`), if any.
fn fn_name(line: &str) -> Option<String> {
    let mut words = line
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .peekable();
    let bytes = line.find("fn ")?;
    if bytes > 0 {
        let before = line[..bytes].chars().last()?;
        if before.is_alphanumeric() || before == '_' {
            return None;
        }
    }
    while let Some(w) = words.next() {
        if w == "fn" {
            let name = words.peek()?;
            let after = line[line.find(&format!("fn {name}"))? + 3 + name.len()..].trim_start();
            if after.starts_with('(') || after.starts_with('<') {
                return Some((*name).to_string());
            }
        }
    }
    None
}

// ---------------------------------------------------------------- imports

/// A crate's module tree: module path (`["scaleup", "plan"]`) to file.
type Modules = BTreeMap<Vec<String>, PathBuf>;

/// The crate roots of a package folder: `src/lib.rs`, `src/main.rs`,
/// `src/bin/*.rs`, `tests/*.rs`, `benches/*.rs`, each its own crate.
fn crate_roots(root: &Path, package: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    for f in ["src/lib.rs", "src/main.rs", "lib.rs"] {
        if root.join(package).join(f).is_file() {
            out.push(package.join(f));
        }
    }
    for dir in ["src/bin", "tests", "benches"] {
        if let Ok(entries) = std::fs::read_dir(root.join(package).join(dir)) {
            for e in entries {
                let p = e.unwrap().path();
                if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p.strip_prefix(root).unwrap().to_path_buf());
                } else if p.join("main.rs").is_file() {
                    out.push(p.join("main.rs").strip_prefix(root).unwrap().to_path_buf());
                }
            }
        }
    }
    out
}

/// The files of the crate rooted at `root_file`, following `mod x;` lines.
fn module_tree(read: &dyn Fn(&Path) -> Option<String>, root_file: &Path) -> Modules {
    let mut modules = Modules::new();
    let mut todo = vec![(vec![], root_file.to_path_buf())];
    while let Some((path, file)) = todo.pop() {
        let Some(text) = read(&file) else { continue };
        // Where `mod x;` of this file looks: beside a root or `mod.rs`, else
        // in the folder named after the file.
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let dir = if path.is_empty() || name == "mod.rs" {
            file.parent().unwrap().to_path_buf()
        } else {
            file.with_extension("")
        };
        for line in code_lines(&text) {
            if let Some(child) = declared_module(&line) {
                let flat = dir.join(format!("{child}.rs"));
                let nested = dir.join(&child).join("mod.rs");
                let found = [flat, nested].into_iter().find(|f| read(f).is_some());
                if let Some(f) = found {
                    let mut p = path.clone();
                    p.push(child);
                    todo.push((p, f));
                }
            }
        }
        modules.insert(path, file);
    }
    modules
}

/// `x` of a `mod x;` line (any visibility and attributes before it).
fn declared_module(line: &str) -> Option<String> {
    let line = line.trim();
    let line = line.strip_suffix(';')?;
    let at = line.find("mod ")?;
    let name = line[at + 4..].trim();
    (name.chars().all(|c| c.is_alphanumeric() || c == '_') && !name.is_empty())
        .then(|| name.to_string())
}

/// The `use` statements of a file, each joined onto one line, with the
/// inline module path (`mod tests { .. }`) they sit in.
fn use_statements(text: &str) -> Vec<(Vec<String>, String)> {
    let mut out = vec![];
    let mut inline: Vec<(String, i64)> = vec![];
    let mut depth = 0i64;
    let mut current: Option<String> = None;
    for line in code_lines(text) {
        let trimmed = line.trim();
        if current.is_none() {
            let rest = strip_visibility(trimmed);
            if let Some(rest) = rest.strip_prefix("use ") {
                let stmt = rest;
                if let Some(done) = stmt.find(';') {
                    out.push((inline_names(&inline), stmt[..done].to_string()));
                    current = None;
                } else {
                    current = Some(stmt.to_string());
                }
            } else if starts_inline_module(trimmed) {
                let name = trimmed
                    .trim_end_matches('{')
                    .split_whitespace()
                    .last()
                    .unwrap_or("")
                    .to_string();
                inline.push((name, depth));
            }
        } else if let Some(acc) = current.as_mut() {
            if let Some(done) = trimmed.find(';') {
                acc.push_str(&trimmed[..done]);
                out.push((inline_names(&inline), std::mem::take(acc)));
                current = None;
            } else {
                acc.push_str(trimmed);
            }
        }
        for c in line.chars() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if inline.last().is_some_and(|(_, d)| *d == depth) {
                        inline.pop();
                    }
                }
                _ => {}
            }
        }
    }
    out
}

fn inline_names(inline: &[(String, i64)]) -> Vec<String> {
    inline.iter().map(|(n, _)| n.clone()).collect()
}

fn strip_visibility(line: &str) -> &str {
    let Some(rest) = line.strip_prefix("pub") else {
        return line;
    };
    let rest = rest.trim_start();
    if let Some(inner) = rest.strip_prefix('(') {
        inner
            .find(')')
            .map_or(rest, |i| inner[i + 1..].trim_start())
    } else {
        rest
    }
}

/// The paths a `use` tree names: `a::{b, c::d}` is `a::b` and `a::c::d`.
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    let tree: String = strip_aliases(tree)
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let mut out = vec![];
    expand_into(&tree, &mut vec![], &mut out);
    out
}

fn expand_into(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let n = prefix.len();
        prefix.extend(head);
        for part in split_top(inner) {
            expand_into(part, prefix, out);
        }
        prefix.truncate(n);
    } else {
        let mut p = prefix.clone();
        p.extend(
            tree.split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        );
        if !p.is_empty() {
            out.push(p);
        }
    }
}

/// A `use` tree without its renames (`X as Y` is `X`).
fn strip_aliases(tree: &str) -> String {
    let words: Vec<&str> = tree.split(' ').collect();
    let mut out = String::new();
    let mut i = 0;
    while i < words.len() {
        if words[i] == "as" && i + 1 < words.len() {
            // Keep what follows the alias's name (`,` or `}`).
            let alias = words[i + 1];
            let tail = alias.trim_start_matches(|c: char| c.is_alphanumeric() || c == '_');
            out.push_str(tail);
            i += 2;
        } else {
            out.push_str(words[i]);
            out.push(' ');
            i += 1;
        }
    }
    out
}

/// Splits at the commas outside braces.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = vec![];
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter().filter(|p| !p.is_empty()).collect()
}

/// The file-to-file edges of one crate from its `use` lines.
fn import_edges(
    modules: &Modules,
    read: &dyn Fn(&Path) -> Option<String>,
) -> BTreeSet<(PathBuf, PathBuf)> {
    let mut edges = BTreeSet::new();
    for (module, file) in modules {
        let text = read(file).unwrap_or_default();
        for (inline, stmt) in use_statements(&text) {
            // The module the statement is written in (inline modules count).
            let mut here = module.clone();
            here.extend(inline);
            for path in expand_use(&stmt) {
                let Some(target) = resolve(modules, &here, &path) else {
                    continue;
                };
                if &target != file {
                    edges.insert((file.clone(), target));
                }
            }
        }
    }
    edges
}

/// The file of the module a `use` path lands in, if it is in this crate.
fn resolve(modules: &Modules, here: &[String], path: &[String]) -> Option<PathBuf> {
    let mut base: Vec<String> = here.to_vec();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &path[1..];
        }
        Some("self") => rest = &path[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // `use child::X` names a child module of this one; anything else
            // is another crate.
            let mut child = here.to_vec();
            child.push(first.to_string());
            if !modules.contains_key(&child) {
                return None;
            }
        }
        None => return None,
    }
    let mut full = base;
    full.extend(rest.iter().cloned());
    // The longest prefix that is a module file.
    (0..=full.len())
        .rev()
        .find_map(|n| modules.get(&full[..n]).cloned())
}

/// The cycles (strongly connected parts larger than one file) of a graph.
fn cycles(edges: &BTreeSet<(PathBuf, PathBuf)>) -> Vec<Vec<PathBuf>> {
    let nodes: BTreeSet<&PathBuf> = edges.iter().flat_map(|(a, b)| [a, b]).collect();
    let reach = |from: &PathBuf| -> BTreeSet<PathBuf> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for (a, b) in edges {
                if *a == n && seen.insert(b.clone()) {
                    todo.push(b.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&PathBuf, BTreeSet<PathBuf>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = vec![];
    for n in &nodes {
        if done.contains(*n) {
            continue;
        }
        let part: Vec<PathBuf> = nodes
            .iter()
            .filter(|m| reaches[*n].contains(**m) && reaches[**m].contains(*n))
            .map(|m| (*m).clone())
            .collect();
        if part.len() > 1 {
            done.extend(part.iter().cloned());
            out.push(part);
        }
    }
    out
}

/// The import cycles of every crate under `root`.
fn import_cycles(root: &Path) -> Vec<Vec<PathBuf>> {
    let read = |f: &Path| std::fs::read_to_string(root.join(f)).ok();
    let packages: Vec<PathBuf> = files(root, |n| n == "Cargo.toml")
        .into_iter()
        .filter_map(|p| p.parent().map(Path::to_path_buf))
        .collect();
    let mut out = vec![];
    for package in packages {
        for crate_root in crate_roots(root, &package) {
            let modules = module_tree(&read, &crate_root);
            out.extend(cycles(&import_edges(&modules, &read)));
        }
    }
    out
}

// ---------------------------------------------------------------- docs

/// The section numbers (`4`, `4.5`) that a markdown document's headings give.
fn sections(doc: &str) -> BTreeSet<String> {
    doc.lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| l.trim_start_matches('#').trim())
        .filter_map(|l| {
            l.split([' ', '.'])
                .next()
                .filter(|n| !n.is_empty())
                .map(|_| l)
        })
        .map(|l| {
            let number: String = l
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            number.trim_end_matches('.').to_string()
        })
        .filter(|n| !n.is_empty())
        .collect()
}

/// The `docs/<name>.md §N` references of a text, as (line, document,
/// section): every `§N` after `docs/<name>.md` on the same line, up to the
/// next document named.
fn doc_references(text: &str) -> Vec<(usize, String, String)> {
    let mut out = vec![];
    for (n, line) in text.lines().enumerate() {
        for (at, _) in line.match_indices("docs/") {
            let tail = &line[at + 5..];
            let Some(end) = tail.find(".md") else {
                continue;
            };
            let name = &tail[..end];
            let path_like = name
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '/' | '.'));
            if name.is_empty() || !path_like {
                continue;
            }
            let rest = &tail[end + 3..];
            let doc = format!("docs/{name}.md");
            let rest = rest.split(".md").next().unwrap_or(rest);
            for part in rest.split('§').skip(1) {
                let number: String = part
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                let number = number.trim_end_matches('.').to_string();
                if !number.is_empty() {
                    out.push((n + 1, doc.clone(), number));
                }
            }
        }
    }
    out
}

/// The lines with a `§` that no `docs/<name>.md` on the line explains: a
/// reference to a document outside the tree.
fn stray_sections(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains('§') && !(l.contains("docs/") && l.contains(".md")))
        .map(|(n, _)| n + 1)
        .collect()
}

// ---------------------------------------------------------------- layers

/// Each workspace member's folder and the workspace crates it depends on
/// (any dependency kind), by folder.
fn member_dependencies(root: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let manifests = files(root, |n| n == "Cargo.toml");
    let mut folder_of: BTreeMap<String, PathBuf> = BTreeMap::new();
    for m in &manifests {
        let text = read(root, m);
        if let Some(name) = package_name(&text) {
            folder_of.insert(name, m.parent().unwrap().to_path_buf());
        }
    }
    let mut out = BTreeMap::new();
    for m in &manifests {
        let text = read(root, m);
        if package_name(&text).is_none() {
            continue;
        }
        let deps = dependency_names(&text)
            .into_iter()
            .filter_map(|d| folder_of.get(&d).cloned())
            .collect();
        out.insert(m.parent().unwrap().to_path_buf(), deps);
    }
    out
}

fn package_name(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(v) = line.strip_prefix("name") {
            return Some(
                v.trim_start_matches([' ', '='])
                    .trim_matches('"')
                    .to_string(),
            );
        }
    }
    None
}

/// The names in a manifest's `[dependencies]`, `[dev-dependencies]` and
/// `[build-dependencies]` tables.
fn dependency_names(manifest: &str) -> Vec<String> {
    let mut in_deps = false;
    let mut out = vec![];
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line.ends_with("dependencies]") && !line.starts_with("[workspace");
        } else if in_deps && let Some((name, _)) = line.split_once('=') {
            out.push(name.trim().to_string());
        }
    }
    out
}

/// The dependencies that cross the layers.
fn layer_violations(deps: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<String> {
    let under = |p: &Path, top: &str| p.starts_with(top);
    let mut out = vec![];
    for (member, targets) in deps {
        for t in targets {
            let product = under(member, "autoscaler") || under(member, "kwok");
            if product && under(t, "harness") {
                out.push(format!(
                    "{} depends on {}: a product on the testbed",
                    member.display(),
                    t.display()
                ));
            }
            if under(member, "harness") && under(t, "autoscaler") {
                out.push(format!(
                    "{} depends on {}: the testbed on the autoscaler",
                    member.display(),
                    t.display()
                ));
            }
        }
    }
    out
}

// ---------------------------------------------------------------- tests

#[test]
fn no_hand_written_file_is_too_long() {
    let root = repo();
    let long: Vec<String> = files(&root, |n| n.ends_with(".rs"))
        .into_iter()
        .filter_map(|f| {
            let text = read(&root, &f);
            let n = text.lines().count();
            (n > MAX_FILE_LINES && !is_generated(&text))
                .then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn no_function_outside_tests_is_too_long() {
    let root = repo();
    let long: Vec<String> = files(&root, |n| n.ends_with(".rs"))
        .into_iter()
        .filter(|f| !is_test_file(f))
        .flat_map(|f| {
            long_functions(&read(&root, &f), MAX_FN_LINES)
                .into_iter()
                .map(move |(name, line, n)| format!("{}:{line} {name} ({n} lines)", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn no_import_cycle_between_files() {
    let found = import_cycles(&repo());
    let shown: Vec<String> = found
        .iter()
        .map(|c| {
            c.iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(" <-> ")
        })
        .collect();
    assert!(found.is_empty(), "import cycles:\n{}", shown.join("\n"));
}

#[test]
fn doc_references_name_sections_that_exist() {
    let root = repo();
    let mut sections_of: BTreeMap<String, Option<BTreeSet<String>>> = BTreeMap::new();
    let mut missing = vec![];
    let mut stray = vec![];
    let mut count = 0;
    for f in files(&root, |n| {
        [".rs", ".md", ".yaml", ".toml", ".feature", ".sh", ".py"]
            .iter()
            .any(|e| n.ends_with(e))
    }) {
        // This file's examples are the checker's test data.
        if f.starts_with("conformance/tests/checks/tree") {
            continue;
        }
        let text = read(&root, &f);
        for (line, doc, number) in doc_references(&text) {
            count += 1;
            let known = sections_of.entry(doc.clone()).or_insert_with(|| {
                std::fs::read_to_string(root.join(&doc))
                    .ok()
                    .map(|d| sections(&d))
            });
            match known {
                None => missing.push(format!("{}:{line} {doc} (no such document)", f.display())),
                Some(known) if !known.contains(&number) => {
                    missing.push(format!("{}:{line} {doc} §{number}", f.display()))
                }
                Some(_) => {}
            }
        }
        if !f.starts_with("docs") && f.extension().is_some_and(|e| e != "md") {
            stray.extend(
                stray_sections(&text)
                    .into_iter()
                    .map(|l| format!("{}:{l}", f.display())),
            );
        }
    }
    assert!(count > 0, "no docs/<name>.md § reference found at all");
    assert!(
        missing.is_empty(),
        "references to sections that do not exist:\n{}",
        missing.join("\n")
    );
    assert!(
        stray.is_empty(),
        "§ references to documents outside docs/:\n{}",
        stray.join("\n")
    );
    let old: Vec<PathBuf> = files(&root, |n| n.ends_with(".rs"))
        .into_iter()
        .filter(|f| read(&root, f).contains(concat!("ca-", "compat")))
        .collect();
    assert!(old.is_empty(), "references to the old document: {old:?}");
}

#[test]
fn folders_are_layered() {
    let deps = member_dependencies(&repo());
    assert!(deps.len() >= 8, "members found: {deps:?}");
    let found = layer_violations(&deps);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

// The checkers, given trees that break their rules.

#[test]
fn the_lexer_ignores_braces_in_strings_comments_and_chars() {
    let lines = code_lines("let a = \"{\"; // }\nlet b = '{'; /* { */ let c = r#\"}\"#;\n'a");
    assert_eq!(lines[0], "let a = \"\"; ");
    assert_eq!(lines[1], "let b = ' ';  let c = \"\";");
    assert_eq!(lines[2], "'a");
}

#[test]
fn the_function_checker_catches_a_long_function() {
    let body = "    x();\n".repeat(10);
    let text = format!(
        "fn short() {{\n}}\npub async fn long<T>(t: T) -> T {{\n{body}}}\n\
         #[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{body}    }}\n}}\n\
         trait T {{ fn decl(&self); }}\n"
    );
    assert_eq!(long_functions(&text, 5), vec![("long".to_string(), 3, 12)]);
    assert!(long_functions(&text, 12).is_empty());
}

#[test]
fn the_import_checker_catches_a_cycle() {
    let tree: BTreeMap<PathBuf, &str> = [
        ("x/src/lib.rs", "mod a;\nmod b;\nmod c;\npub use a::A;\n"),
        (
            "x/src/a.rs",
            "use crate::b::{B, other::{Y}};\npub struct A;\n",
        ),
        (
            "x/src/b/mod.rs",
            "pub mod other;\nuse super::c::C;\npub struct B;\n",
        ),
        ("x/src/b/other.rs", "pub struct Y;\n"),
        (
            "x/src/c.rs",
            "pub struct C;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use std::fmt;\n}\n",
        ),
    ]
    .into_iter()
    .map(|(p, t)| (PathBuf::from(p), t))
    .collect();
    let read = |f: &Path| tree.get(f).map(|t| t.to_string());
    let modules = module_tree(&read, Path::new("x/src/lib.rs"));
    assert_eq!(modules.len(), 5, "{modules:?}");
    let edges = import_edges(&modules, &read);
    assert!(cycles(&edges).is_empty(), "{edges:?}");
    let p = |s: &str| PathBuf::from(s);
    assert!(edges.contains(&(p("x/src/a.rs"), p("x/src/b/other.rs"))));
    assert!(edges.contains(&(p("x/src/lib.rs"), p("x/src/a.rs"))));

    // c uses a: a -> b -> c -> a.
    let mut cyclic = tree.clone();
    cyclic.insert(p("x/src/c.rs"), "use crate::A;\npub struct C;\n");
    let read = |f: &Path| cyclic.get(f).map(|t| t.to_string());
    let edges = import_edges(&module_tree(&read, Path::new("x/src/lib.rs")), &read);
    let found = cycles(&edges);
    assert_eq!(found.len(), 1, "{edges:?}");
    assert_eq!(found[0].len(), 4, "lib, a, b and c: {found:?}");
}

#[test]
fn the_reference_checker_reads_every_section_of_a_line() {
    let doc = "# Title\n## 3. Scale-down\n### 3.2 Candidates\n### 10.4 Templates\n";
    let known = sections(doc);
    assert_eq!(known, ["3", "3.2", "10.4"].map(String::from).into());
    let text = "//! x (docs/reference/ca-rules.md §3.2–§3.4, see spec/crates.md §10)\n\
                // docs/reference/kwok-rules.md §10.4/§10.5.\n// elsewhere.md §2\n";
    assert_eq!(
        doc_references(text),
        [
            (1, "docs/reference/ca-rules.md", "3.2"),
            (1, "docs/reference/ca-rules.md", "3.4"),
            (2, "docs/reference/kwok-rules.md", "10.4"),
            (2, "docs/reference/kwok-rules.md", "10.5"),
        ]
        .map(|(l, d, n)| (l, d.to_string(), n.to_string()))
    );
    assert_eq!(stray_sections(text), [3]);
}

#[test]
fn the_layer_checker_catches_a_product_on_the_testbed() {
    let deps: BTreeMap<PathBuf, BTreeSet<PathBuf>> = [
        ("autoscaler", vec!["predicates", "harness/apiserver"]),
        ("harness", vec!["kwok", "autoscaler"]),
        ("conformance", vec!["harness", "autoscaler"]),
    ]
    .into_iter()
    .map(|(m, d)| (PathBuf::from(m), d.into_iter().map(PathBuf::from).collect()))
    .collect();
    let found = layer_violations(&deps);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        dependency_names(
            "[package]\nname = \"x\"\n[dev-dependencies]\nharness = { workspace = true }\n[lints]\nunsafe = 1\n"
        ) == ["harness"]
    );
}
