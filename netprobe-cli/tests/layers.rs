//! The dependency rule of `ARCHITECTURE.md`, checked on the sources: which module may
//! name which. A line that names a module its layer may not see fails the test with the rule it
//! breaks. Comments and doc comments are not code and are not checked.

use std::path::{Path, PathBuf};

/// (files the rule applies to, text they may not contain in code, why).
const RULES: &[(&[&str], &str, &str)] = &[
    (
        &["spec.rs", "plan/", "mode.rs", "gate.rs", "runner.rs", "lang/", "sinks/"],
        "backend::tracefs",
        "tracefs vocabulary stays in backend/tracefs/ and the commands; the engine speaks the neutral plan",
    ),
    (
        &["backend/"],
        "crate::sinks",
        "a backend hands hits to whoever reads it; it knows no output",
    ),
    (
        &["backend/"],
        "crate::lang",
        "a backend places a checked plan; language rules are done by then",
    ),
    (
        &["backend/"],
        "crate::spec",
        "a backend sees plans, never what users typed",
    ),
    (
        &["spec.rs", "plan/"],
        "crate::lang",
        "specs and plans are below the language rules that fill them",
    ),
    (
        &["spec.rs", "plan/", "lang/", "gate.rs", "backend/"],
        "crate::sinks",
        "planning and placing probes never depend on how hits are printed",
    ),
    (
        &[""],
        "crate::commands",
        "the commands are the top layer (feature `cli`); the engine never calls them",
    ),
    (
        &[""],
        "crate::cli",
        "argument parsing is the top layer (feature `cli`); the engine never depends on it",
    ),
    (
        &[""],
        "clap::",
        "the engine builds without clap (feature `cli` off)",
    ),
];

/// Files exempt from every rule: the top layer itself.
const TOP: &[&str] = &["cli.rs", "commands/", "main.rs", "output.rs"];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Code lines of a file (comment lines dropped), with their numbers.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_start()))
        .filter(|(_, l)| !l.starts_with("//"))
}

#[test]
fn each_module_names_only_what_its_layer_may_see() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(
        files.len() > 20,
        "sources not found under {}",
        root.display()
    );
    let mut broken = Vec::new();
    for file in &files {
        let rel = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if TOP.iter().any(|t| rel.starts_with(t)) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (scope, forbidden, why) in RULES {
            if !scope.iter().any(|s| rel.starts_with(s)) {
                continue;
            }
            for (n, line) in code_lines(&text) {
                if line.contains(forbidden) {
                    broken.push(format!(
                        "src/{rel}:{n} names {forbidden}: {why}\n    {line}"
                    ));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// netprobe-core is pure and below everything: it never names the engine or the command line.
#[test]
fn the_core_names_no_upper_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../netprobe-core/src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(!files.is_empty());
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in code_lines(&text) {
            for forbidden in ["netprobe_cli", "clap::", "uprobe_events"] {
                if line.contains(forbidden) {
                    broken.push(format!("{}:{n} names {forbidden}", file.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}
