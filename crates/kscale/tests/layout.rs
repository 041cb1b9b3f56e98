//! The binary's layers, as docs/README.md and engine/mod.rs state them:
//! the engine never imports a command, and the capacity searches are a
//! client of the planner — only the run's life (lifecycle.rs) calls them,
//! and nothing else under engine/ reaches into engine/capacity.rs.

use std::path::{Path, PathBuf};

fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read engine/").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(sources(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

fn engine() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine")
}

/// Lines of `text` that name module `m` as a path (`m::`, `{m,`, `, m}`…),
/// comments left out.
fn naming(text: &str, m: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//"))
        .filter(|l| {
            l.contains(&format!("{m}::"))
                || (l.starts_with("use ")
                    && l.split(|c: char| !c.is_alphanumeric() && c != '_')
                        .any(|w| w == m))
        })
        .map(String::from)
        .collect()
}

#[test]
fn only_the_runs_life_calls_the_capacity_searches() {
    let mut bad = Vec::new();
    for f in sources(&engine()) {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == "capacity.rs" || name == "lifecycle.rs" || name == "mod.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("read");
        for l in naming(&text, "capacity") {
            bad.push(format!("{}: {l}", f.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "engine files reaching into capacity.rs:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_engine_never_imports_a_command() {
    let mut bad = Vec::new();
    for f in sources(&engine()) {
        let text = std::fs::read_to_string(&f).expect("read");
        for l in text.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
            if l.contains("crate::cmd") {
                bad.push(format!("{}: {l}", f.display()));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_check_sees_what_it_looks_for() {
    assert_eq!(naming("use super::capacity;", "capacity").len(), 1);
    assert_eq!(naming("    super::capacity::run(x)", "capacity").len(), 1);
    assert_eq!(naming("use super::{capacity, gauge};", "capacity").len(), 1);
    assert!(naming("// capacity::run", "capacity").is_empty());
    assert!(naming("let capacity = 3;", "capacity").is_empty());
}

/// The engine's modules (a file under engine/, or a folder with its
/// submodules) and the others each names.
fn engine_imports() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let root = engine();
    let mut files: std::collections::BTreeMap<String, Vec<PathBuf>> = Default::default();
    for f in sources(&root) {
        let rel = f.strip_prefix(&root).expect("under engine/");
        let top = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or("")
            .trim_end_matches(".rs")
            .to_string();
        if top != "mod" {
            files.entry(top).or_default().push(f);
        }
    }
    let names: Vec<String> = files.keys().cloned().collect();
    let mut edges = std::collections::BTreeMap::new();
    for (m, fs) in &files {
        let mut out = std::collections::BTreeSet::new();
        for f in fs {
            let text = std::fs::read_to_string(f).expect("read");
            for o in names.iter().filter(|o| *o != m) {
                let by_path = text
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.starts_with("//"))
                    .any(|l| {
                        l.contains(&format!("super::{o}::"))
                            || l.contains(&format!("engine::{o}::"))
                            || l.contains(&format!("super::{o};"))
                            || l.contains(&format!("engine::{o};"))
                            || ((l.starts_with("use super::{")
                                || l.starts_with("use crate::engine::{"))
                                && l.split(|c: char| !c.is_alphanumeric() && c != '_')
                                    .any(|w| w == o))
                    });
                if by_path {
                    out.insert(o.clone());
                }
            }
        }
        edges.insert(m.clone(), out);
    }
    edges
}

/// The engine's modules depend on each other one way: no module reaches,
/// through others, back to itself (the gauge once read the runner's
/// profile share while the runner read the gauge's pacing).
#[test]
fn the_engine_modules_form_no_circle() {
    let edges = engine_imports();
    assert!(
        edges.contains_key("runner") && edges.contains_key("gauge"),
        "{edges:?}"
    );
    assert!(
        edges["runner"].contains("gauge"),
        "the check misses an import: {edges:?}"
    );
    // Depth-first search for a path back to the start.
    for start in edges.keys() {
        let mut stack: Vec<Vec<&String>> = vec![vec![start]];
        let mut seen = std::collections::BTreeSet::new();
        while let Some(path) = stack.pop() {
            let last = *path.last().expect("a path");
            for next in &edges[last] {
                if next == start {
                    let names: Vec<&str> = path.iter().map(|s| s.as_str()).collect();
                    panic!("a circle: {} -> {start}", names.join(" -> "));
                }
                if seen.insert(next) {
                    let mut p = path.clone();
                    p.push(next);
                    stack.push(p);
                }
            }
        }
    }
}
