//! The layering rule of `ARCHITECTURE.md` ("Layers"), checked on the sources as the compiler
//! reads them: every `.rs` file of `netprobe-cli/src` and `netprobe-core/src` is parsed with
//! `syn`, the module tree is built from its `mod` declarations (`mod.rs` folders, `#[path]`,
//! inline modules), and every `use` tree, path in code or type, and path inside a macro's tokens
//! is resolved, through re-exports and glob imports, to the module file that defines what it
//! names (`layers/graph.rs`; the Rust Reference, "Paths" and "Use declarations":
//! <https://doc.rust-lang.org/reference/paths.html>). Comments and doc comments are not code
//! and are never read. From that graph of module files:
//!
//! - each module names only modules of its own layer or below ([`LAYERS`]), and never what
//!   [`NEVER`] forbids in particular;
//! - no files form an import circle (a folder's `mod.rs` is its face and the files under it its
//!   rooms: their uses of each other are the folder's inside, not a circle between modules);
//! - tracefs vocabulary (`backend::tracefs` and everything defined under it) is named only in
//!   [`TRACEFS_NAMED_IN`];
//! - netprobe-core names nothing of netprobe-cli and never speaks tracing; within the core only
//!   [`CACHE_USERS`] name the image cache;
//! - clap is named only in the top layer (the engine builds without the `cli` feature).
//!
//! Every violation is printed at once, sorted by file, as a to-do list. With
//! `NETPROBE_LAYERS_REPORT=1` (and `-- --nocapture`) the graph's summary is printed too: each
//! file's layer, the edges, the circles; any other value is a path the summary is written to.
//! `NETPROBE_LAYERS_REPO=DIR` checks the sources of another checkout instead.

#[path = "layers/graph.rs"]
mod graph;

use graph::{circles, Edge, Graph};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// The one written order of layers, bottom up: (layer, the modules in it). A module may name
/// modules of its own layer and of the layers before it. A module is named by its path from its
/// crate's root (`backend::tracefs` in netprobe-cli's library); `main` is the binary's root and
/// `netprobe_core` the whole core crate. The longest matching prefix decides, so a submodule
/// can be given a layer of its own. `ARCHITECTURE.md` prints this table (the test checks it).
const LAYERS: &[(&str, &[&str])] = &[
    ("core", &["netprobe_core"]),
    (
        "support",
        &[
            "error",
            "printable",
            "shell",
            "output_file",
            "launch",
            "run_as",
        ],
    ),
    ("vocabulary", &["fetch_type", "mode", "filter"]),
    ("plan", &["plan"]),
    ("spec", &["spec"]),
    ("lang", &["lang"]),
    ("gate", &["gate", "probe_bytes"]),
    ("backend", &["backend"]),
    (
        "engine",
        &[
            "overhead", "runner", "sinks", "profile", "stacks", "signals",
        ],
    ),
    ("session", &["session"]),
    ("demo", &["demo"]),
    ("cli", &["cli", "commands", "output", "main"]),
];

/// Pairs the order alone allows but the design forbids: (module, module it never names, why).
const NEVER: &[(&str, &str, &str)] = &[
    (
        "backend",
        "spec",
        "a backend sees checked plans, never what users typed",
    ),
    (
        "backend",
        "lang",
        "a backend places a checked plan; language rules are done by then",
    ),
];

/// Whether one of the two files is a folder's `mod.rs` and the other lies under that folder: a
/// folder is one module whose `mod.rs` is its face and whose files are its rooms (blazesym's
/// layout); they share the module's private items by design, so their uses of each other are
/// not a circle between modules. Circles between sibling files, or across folders, count.
fn face_and_room(a: &str, b: &str) -> bool {
    let under = |face: &str, room: &str| {
        face.strip_suffix("mod.rs")
            .is_some_and(|dir| dir.ends_with('/') && room.starts_with(dir) && room != face)
    };
    under(a, b) || under(b, a)
}

/// The modules that may name `backend::tracefs` and anything defined under it.
const TRACEFS_NAMED_IN: &[&str] = &["backend", "session", "commands"];
const TRACEFS: &str = "backend::tracefs";

/// The core's image cache, and the only core modules that may name it: the parsers take bytes
/// and know no cache; the cache sits above them, and so do the entry points that take one
/// (`image`: the cached parts and the symbol listing by path; `resolve`: names to file offsets).
const CACHE: &str = "netprobe_core::cache";
const CACHE_USERS: &[&str] = &[
    "netprobe_core::cache",
    "netprobe_core::image",
    "netprobe_core::resolve",
];

/// What netprobe-core's literals and identifiers never say: the core never touches tracing.
pub const CORE_NEVER_SAYS: &str = "uprobe_events";

/// External crates only the top layer names.
const TOP_ONLY_CRATES: &[&str] = &["clap"];

#[test]
fn each_module_names_only_what_its_layer_may_see() {
    // Another checkout's sources with NETPROBE_LAYERS_REPO (the "before" figures of
    // ARCHITECTURE.md are this test's report on an older commit).
    let repo = std::env::var_os("NETPROBE_LAYERS_REPO")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    let graph = Graph::read(&repo);
    assert!(
        graph.files.len() > 100,
        "sources not found under {}",
        repo.display()
    );
    let found = graph.violations();
    if let Ok(to) = std::env::var("NETPROBE_LAYERS_REPORT") {
        let report = graph.report();
        if to == "1" {
            println!("{report}");
        } else {
            std::fs::write(&to, report).unwrap();
        }
    }
    assert!(
        found.is_empty(),
        "{} layering violations:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// `ARCHITECTURE.md` prints [`LAYERS`] as it is: the order is written once, in the test, and
/// the document is checked against it.
#[test]
fn architecture_md_prints_the_layer_table() {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md");
    let doc = std::fs::read_to_string(doc).unwrap();
    let mut table = String::from("| layer (bottom up) | modules |\n|---|---|\n");
    for (layer, modules) in LAYERS {
        let modules: Vec<String> = modules.iter().map(|m| format!("`{m}`")).collect();
        writeln!(table, "| {layer} | {} |", modules.join(", ")).unwrap();
    }
    assert!(
        doc.contains(&table),
        "ARCHITECTURE.md must hold the layer table of tests/layers.rs, verbatim:\n\n{table}"
    );
}

/// The checker itself, on a small tree: a circle, a layer crossed, a path inside a macro, a
/// comment that is not code.
#[test]
fn the_checker_finds_what_it_is_built_for() {
    let files = [
        ("netprobe-cli/src/lib.rs", "pub mod plan;\npub mod spec;\n"),
        (
            "netprobe-cli/src/plan.rs",
            "// crate::backend::tracefs is a comment\npub struct Plan;\nfn f() { let _ = format!(\"{:?}\", crate::spec::Spec); }\n",
        ),
        (
            "netprobe-cli/src/spec.rs",
            "use crate::plan::Plan;\n#[derive(Debug)]\npub struct Spec;\n",
        ),
    ];
    let graph = Graph::from_sources(
        files
            .iter()
            .map(|(p, s)| (p.to_string(), syn::parse_file(s).unwrap())),
    );
    let found = graph.violations();
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].contains("import circle of 2 files"),
        "{}",
        found[0]
    );
    assert!(
        found[1].starts_with("netprobe-cli/src/plan.rs:3 `crate::spec::Spec`"),
        "{}",
        found[1]
    );
    assert!(
        found[1].contains("layer plan names layer spec"),
        "{}",
        found[1]
    );
}

impl Graph {
    /// The module's key in [`LAYERS`]: its path, without `netprobe_cli::` for the library.
    fn key(&self, m: usize) -> String {
        let p = &self.modules[m].path;
        if p[0] == "netprobe_cli" {
            p[1..].join("::")
        } else {
            p.join("::")
        }
    }

    /// The layer (index into [`LAYERS`]) of a module: the longest prefix that matches its key.
    fn layer(&self, m: usize) -> Option<usize> {
        let key = self.key(m);
        let mut best: Option<(usize, usize)> = None;
        for (i, (_, prefixes)) in LAYERS.iter().enumerate() {
            for p in *prefixes {
                if under(&key, p) && best.is_none_or(|(len, _)| p.len() > len) {
                    best = Some((p.len(), i));
                }
            }
        }
        best.map(|(_, i)| i)
    }

    fn violations(&self) -> Vec<String> {
        // (file, rule, named file) -> (lines, path at the first line).
        let mut found: BTreeMap<(usize, String, usize), (BTreeSet<usize>, String)> =
            BTreeMap::new();
        let mut add = |e: &Edge, rule: String| {
            let v = found
                .entry((e.from, rule, e.to))
                .or_insert_with(|| (BTreeSet::new(), e.path.clone()));
            if v.0.first().is_none_or(|&l| e.line < l) {
                v.1 = e.path.clone();
            }
            v.0.insert(e.line);
        };
        let mut lines_out = Vec::new();
        for m in 0..self.modules.len() {
            let md = &self.modules[m];
            if self.layer(m).is_none() && md.parent.is_some() && md.path[0] != "netprobe_core" {
                let above = md.parent.is_some_and(|p| self.modules[p].file == md.file);
                if !above {
                    lines_out.push(format!(
                        "{}:1 module `{}` has no layer in LAYERS (tests/layers.rs): give it one, or move it into a module that has one",
                        self.files[md.file],
                        self.key(m)
                    ));
                }
            }
        }
        let edges = self.edges();
        for (e, src, dst) in &edges {
            let (skey, dkey) = (self.key(*src), self.key(*dst));
            let src_core = self.modules[*src].path[0] == "netprobe_core";
            let dst_core = self.modules[*dst].path[0] == "netprobe_core";
            let cli_root = self.modules[*src].parent.is_none() && !src_core && skey.is_empty();
            if !e.reexport && !cli_root {
                if let (Some(ls), Some(ld)) = (self.layer(*src), self.layer(*dst)) {
                    if ld > ls {
                        add(e, format!(
                            "layer {} names layer {} (above it): a module names only its own layer and those below (ARCHITECTURE.md, Layers)",
                            LAYERS[ls].0, LAYERS[ld].0
                        ));
                    }
                }
            }
            for (from, never, why) in NEVER {
                if under(&skey, from) && under(&dkey, never) {
                    add(e, format!("`{from}` never names `{never}`: {why}"));
                }
            }
            if !dst_core
                && under(&dkey, TRACEFS)
                && !TRACEFS_NAMED_IN.iter().any(|p| under(&skey, p))
            {
                add(
                    e,
                    format!(
                        "tracefs vocabulary outside {}: the engine speaks the backend-neutral plan",
                        TRACEFS_NAMED_IN.join(", ")
                    ),
                );
            }
            if src_core && !dst_core {
                add(e, "netprobe-core names nothing of netprobe-cli".to_string());
            }
            if src_core && under(&dkey, CACHE) && !CACHE_USERS.iter().any(|p| under(&skey, p)) {
                add(
                    e,
                    format!(
                        "only {} name the image cache: parsers take bytes and know no cache",
                        CACHE_USERS.join(", ")
                    ),
                );
            }
        }
        for (file, line, text) in &self.core_tracing {
            lines_out.push(format!(
                "{}:{line} `{text}`: netprobe-core is pure and never touches tracing",
                self.files[*file]
            ));
        }
        for r in &self.refs {
            let first = r.segs[0].as_str();
            let top = self.layer(r.module) == Some(LAYERS.len() - 1);
            if TOP_ONLY_CRATES.contains(&first)
                && !top
                && self.lookup(r.module, first, true, 0).is_none()
            {
                lines_out.push(format!(
                    "{}:{} `{}`: only the top layer names {first} (the engine builds without feature `cli`)",
                    self.files[self.modules[r.module].file],
                    r.line,
                    r.segs.join("::")
                ));
            }
        }
        let circle_edges: Vec<&Edge> = edges
            .iter()
            .map(|(e, _, _)| e)
            .filter(|e| !e.reexport && !face_and_room(&self.files[e.from], &self.files[e.to]))
            .collect();
        for circle in circles(self.files.len(), &circle_edges) {
            let names: Vec<&str> = circle.iter().map(|&f| self.files[f].as_str()).collect();
            let mut text = format!(
                "{}:1 import circle of {} files: {}; cut one of its uses:",
                names[0],
                circle.len(),
                names.join(", ")
            );
            let mut seen = BTreeSet::new();
            for e in &circle_edges {
                if circle.contains(&e.from) && circle.contains(&e.to) && seen.insert((e.from, e.to))
                {
                    write!(
                        text,
                        "\n    {}:{} `{}` -> {}",
                        self.files[e.from], e.line, e.path, self.files[e.to]
                    )
                    .unwrap();
                }
            }
            lines_out.push(text);
        }
        for ((from, rule, to), (lines, path)) in found {
            let first = lines.first().unwrap();
            let mut text = format!(
                "{}:{first} `{path}` -> {}: {rule}",
                self.files[from], self.files[to]
            );
            if lines.len() > 1 {
                let more: Vec<String> = lines.iter().skip(1).map(|l| l.to_string()).collect();
                write!(text, " (also lines {})", more.join(", ")).unwrap();
            }
            lines_out.push(text);
        }
        lines_out.sort_by_key(|a| sort_key(a));
        lines_out
    }

    /// The graph's summary: each file's layer, the files' edges, the circles.
    fn report(&self) -> String {
        let edges = self.edges();
        let mut pairs: BTreeSet<(usize, usize)> = BTreeSet::new();
        for (e, _, _) in &edges {
            if !e.reexport && !face_and_room(&self.files[e.from], &self.files[e.to]) {
                pairs.insert((e.from, e.to));
            }
        }
        let mut out = String::new();
        let core = self
            .files
            .iter()
            .filter(|f| f.starts_with("netprobe-core/"))
            .count();
        writeln!(
            out,
            "files: {} ({core} netprobe-core, {} netprobe-cli); file-to-file uses: {}",
            self.files.len(),
            self.files.len() - core,
            pairs.len()
        )
        .unwrap();
        let pair_edges: Vec<Edge> = pairs
            .iter()
            .map(|&(from, to)| Edge {
                from,
                to,
                line: 0,
                path: String::new(),
                reexport: false,
            })
            .collect();
        let refs: Vec<&Edge> = pair_edges.iter().collect();
        let cs = circles(self.files.len(), &refs);
        for crate_dir in ["netprobe-core/", "netprobe-cli/"] {
            let mine: Vec<&Vec<usize>> = cs
                .iter()
                .filter(|c| self.files[c[0]].starts_with(crate_dir))
                .collect();
            let sizes: Vec<String> = mine.iter().map(|c| c.len().to_string()).collect();
            writeln!(
                out,
                "import circles in {crate_dir}: {} (sizes {})",
                mine.len(),
                sizes.join(", ")
            )
            .unwrap();
        }
        for c in &cs {
            let names: Vec<&str> = c.iter().map(|&f| self.files[f].as_str()).collect();
            writeln!(out, "  circle of {}: {}", c.len(), names.join(" ")).unwrap();
        }
        writeln!(out, "layer\tfile").unwrap();
        for (f, name) in self.files.iter().enumerate() {
            let m = self.modules.iter().position(|md| md.file == f).unwrap();
            let layer = self
                .layer(m)
                .map_or("?".to_string(), |l| format!("{l}:{}", LAYERS[l].0));
            writeln!(out, "{layer}\t{name}").unwrap();
        }
        writeln!(out, "uses\tfrom\tto").unwrap();
        for (from, to) in pairs {
            writeln!(out, "use\t{}\t{}", self.files[from], self.files[to]).unwrap();
        }
        out
    }
}

fn sort_key(line: &str) -> (String, usize) {
    let mut parts = line.splitn(3, ':');
    let file = parts.next().unwrap_or_default().to_string();
    let n = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    (file, n)
}

/// `key` is `prefix` or a module under it.
fn under(key: &str, prefix: &str) -> bool {
    key == prefix
        || key
            .strip_prefix(prefix)
            .is_some_and(|r| r.starts_with("::"))
}
