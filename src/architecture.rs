//! The layering in ARCHITECTURE.md, checked: the crate graph in `cargo`'s manifests is the
//! table there, the terminal and server crates are used only where the table says, and inside
//! every crate the top-level modules import one another without a cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every package of the workspace: (package name, directory).
fn packages() -> Vec<(String, PathBuf)> {
    let root = workspace_root();
    let mut dirs = vec![root.clone()];
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    crates.sort();
    dirs.extend(crates);
    dirs.into_iter()
        .map(|dir| {
            let manifest = manifest(&dir);
            let name = manifest["package"]["name"].as_str().unwrap().to_string();
            (name, dir)
        })
        .collect()
}

fn manifest(dir: &Path) -> toml::Table {
    let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    text.parse().unwrap()
}

/// The names of a package's normal (not dev, not build) dependencies.
fn dependencies(dir: &Path) -> BTreeSet<String> {
    let manifest = manifest(dir);
    let mut deps = BTreeSet::new();
    let tables = [manifest.get("dependencies")]
        .into_iter()
        .chain(
            manifest
                .get("target")
                .and_then(|t| t.as_table())
                .into_iter()
                .flat_map(|t| t.values())
                .map(|t| t.get("dependencies")),
        )
        .flatten();
    for table in tables {
        deps.extend(table.as_table().unwrap().keys().cloned());
    }
    deps
}

/// The crate table of ARCHITECTURE.md: `| \`crate\` | \`dep\`, \`dep\` | …`, between the
/// `<!-- crate graph -->` markers.
fn documented_graph() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(workspace_root().join("ARCHITECTURE.md")).unwrap();
    let start = text
        .find("<!-- crate graph -->")
        .expect("ARCHITECTURE.md has a <!-- crate graph --> table");
    let end = text[start..]
        .find("<!-- end crate graph -->")
        .expect("the crate graph table ends with <!-- end crate graph -->");
    let mut graph = BTreeMap::new();
    for line in text[start..start + end].lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 || !cells[1].starts_with('`') {
            continue;
        }
        let name = cells[1].trim_matches('`').to_string();
        let deps = cells[2]
            .split(',')
            .map(|d| d.trim().trim_matches('`').to_string())
            .filter(|d| !d.is_empty() && d != "nothing of ours")
            .collect();
        graph.insert(name, deps);
    }
    graph
}

#[test]
fn the_crate_graph_is_the_documented_one() {
    let actual: BTreeMap<String, BTreeSet<String>> = packages()
        .into_iter()
        .map(|(name, dir)| {
            let ours = dependencies(&dir)
                .into_iter()
                .filter(|d| d.starts_with("convo-"))
                .collect();
            (name, ours)
        })
        .collect();
    assert_eq!(
        actual,
        documented_graph(),
        "the workspace's crate graph (left) differs from ARCHITECTURE.md's table (right)"
    );
}

#[test]
fn terminal_server_and_model_crates_are_used_where_the_table_says() {
    let owners: [(&str, &[&str]); 2] = [
        ("convo-tui", &["ratatui", "crossterm", "ratatui-textarea"]),
        (
            "convo-service",
            &["axum", "tokio-postgres", "deadpool-postgres", "llama-cpp-2"],
        ),
    ];
    for (name, dir) in packages() {
        let deps = dependencies(&dir);
        for (owner, crates) in owners {
            for c in crates {
                assert!(
                    name == owner || !deps.contains(*c),
                    "{name} depends on {c}, which only {owner} may use"
                );
            }
        }
    }
}

/// The top-level module a path inside a crate's `src/` belongs to (`lib.rs`, `main.rs` are the
/// root, `""`), and its module path.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

/// The modules a source file names, as absolute paths, outside its `#[cfg(test)]` code:
/// `crate::a::b` and `super::…` resolved against the file's own path.
fn imports(text: &str, own: &[String]) -> Vec<Vec<String>> {
    let code = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    let mut found = Vec::new();
    for line in code.lines() {
        // Comments name modules too; cut them (a `//` inside a string cuts early, which only
        // misses an import, never invents one).
        let line = line.split("//").next().unwrap_or_default();
        let mut rest = line;
        loop {
            // the earlier of the two
            let (at, is_crate) = match (rest.find("crate::"), rest.find("super::")) {
                (Some(c), Some(s)) if c < s => (c, true),
                (Some(_), Some(s)) => (s, false),
                (Some(c), None) => (c, true),
                (None, Some(s)) => (s, false),
                (None, None) => break,
            };
            let before = rest[..at].chars().last();
            let mut tail = &rest[at + 7..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                rest = tail;
                continue;
            }
            let mut path: Vec<String> = if is_crate { Vec::new() } else { own.to_vec() };
            if !is_crate {
                path.pop();
                while let Some(t) = tail.strip_prefix("super::") {
                    path.pop();
                    tail = t;
                }
            }
            // `a::b::Type`: the lower-case segments are modules.
            loop {
                let ident: String = tail
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if ident.is_empty() || !ident.starts_with(|c: char| c.is_ascii_lowercase()) {
                    break;
                }
                tail = &tail[ident.len()..];
                path.push(ident);
                match tail.strip_prefix("::") {
                    Some(t) => tail = t,
                    None => break,
                }
            }
            rest = tail;
            found.push(path);
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The files of modules declared `#[cfg(test)] mod name;` in `file`.
fn test_module_files(file: &Path, text: &str) -> Vec<PathBuf> {
    let stem = file.file_stem().unwrap().to_string_lossy();
    let dir = if matches!(&*stem, "mod" | "lib" | "main") {
        file.parent().unwrap().to_path_buf()
    } else {
        file.with_extension("")
    };
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("#[cfg(test)]") {
        rest = &rest[i + "#[cfg(test)]".len()..];
        let decl = rest.trim_start();
        let decl = decl.strip_prefix("pub ").unwrap_or(decl);
        if let Some(after) = decl.strip_prefix("mod ") {
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if after[name.len()..].starts_with(';') {
                found.push(dir.join(format!("{name}.rs")));
                found.push(dir.join(&name).join("mod.rs"));
            }
        }
    }
    found
}

/// For one crate, which top-level module uses which, from its sources (test modules aside).
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let tests: BTreeSet<PathBuf> = files
        .iter()
        .flat_map(|f| test_module_files(f, &std::fs::read_to_string(f).unwrap()))
        .collect();
    // A test module's own submodules (`tests/mod.rs` and the files beside it) are tests too.
    let test_dirs: Vec<PathBuf> = tests
        .iter()
        .filter(|t| t.file_stem().is_some_and(|s| s == "mod"))
        .filter_map(|t| t.parent().map(Path::to_path_buf))
        .collect();
    files.retain(|f| !tests.contains(f) && !test_dirs.iter().any(|d| f.starts_with(d)));
    let tops: BTreeSet<String> = files
        .iter()
        .filter_map(|f| module_path(src, f).first().cloned())
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let own = module_path(src, file);
        let Some(top) = own.first() else { continue };
        let text = std::fs::read_to_string(file).unwrap();
        for path in imports(&text, &own) {
            if let Some(to) = path.first()
                && to != top
                && tops.contains(to)
            {
                graph.entry(top.clone()).or_default().insert(to.clone());
            }
        }
    }
    graph
}

/// A cycle in `graph`, if there is one, as the modules along it.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|n| n == node) {
            let mut c = stack[i..].to_vec();
            c.push(node.to_string());
            return Some(c);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, done, stack) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut done, &mut Vec::new()))
}

#[test]
fn no_two_modules_of_a_crate_import_each_other() {
    for (name, dir) in packages() {
        let graph = module_graph(&dir.join("src"));
        if let Some(c) = cycle(&graph) {
            panic!("{name}: the modules {} import one another", c.join(" → "));
        }
    }
}

#[test]
fn imports_are_resolved_against_the_files_own_path() {
    let own = vec!["app".to_string(), "reply".to_string()];
    assert_eq!(
        imports("use super::super::command::Command;", &own),
        vec![vec!["command".to_string()]]
    );
    assert_eq!(
        imports("use crate::view::theme;\n", &own),
        vec![vec!["view".to_string(), "theme".to_string()]]
    );
    assert_eq!(
        imports("use super::state::Focus; // crate::x", &own),
        vec![vec!["app".to_string(), "state".to_string()]]
    );
    assert!(imports("#[cfg(test)]\nuse crate::view;", &own).is_empty());
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(cycle(&g), Some(vec!["a".into(), "b".into(), "a".into()]));
    g.remove("b");
    assert_eq!(cycle(&g), None);
}
