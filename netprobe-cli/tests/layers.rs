//! The layering rule of `ARCHITECTURE.md` ("Layers"), checked on the sources as the compiler
//! reads them: every `.rs` file of `netprobe-cli/src` and `netprobe-core/src` is parsed with
//! `syn`, the module tree is built from its `mod` declarations (`mod.rs` folders, `#[path]`,
//! inline modules), and every `use` tree, path in code or type, and path inside a macro's tokens
//! is resolved, through re-exports and glob imports, to the module file that defines what it
//! names (the Rust Reference, "Paths" and "Use declarations":
//! <https://doc.rust-lang.org/reference/paths.html>). Comments and doc comments are not code
//! and are never read. From that graph of module files:
//!
//! - each module names only modules of its own layer or below ([`LAYERS`]), and never what
//!   [`NEVER`] forbids in particular;
//! - no files form an import circle (a folder's `mod.rs` re-exporting its own submodules is its
//!   face, not a use of them);
//! - tracefs vocabulary (`backend::tracefs` and everything defined under it) is named only in
//!   [`TRACEFS_NAMED_IN`];
//! - netprobe-core names nothing of netprobe-cli and never speaks tracing; within the core only
//!   [`CACHE_USERS`] name the image cache;
//! - clap is named only in the top layer (the engine builds without the `cli` feature).
//!
//! Every violation is printed at once, sorted by file, as a to-do list. With
//! `NETPROBE_LAYERS_REPORT=1` (and `-- --nocapture`) the graph's summary is printed too: each
//! file's layer, the edges, the circles; any other value is a path the summary is written to.

use proc_macro2::{TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// The one written order of layers, bottom up: (layer, the modules in it). A module may name
/// modules of its own layer and of the layers before it. A module is named by its path from its
/// crate's root (`backend::tracefs` in netprobe-cli's library); `main` is the binary's root and
/// `netprobe_core` the whole core crate. The longest matching prefix decides, so a submodule
/// can be given a layer of its own. `ARCHITECTURE.md` prints this table (the test checks it).
const LAYERS: &[(&str, &[&str])] = &[
    ("core", &["netprobe_core"]),
    (
        "support",
        &["error", "printable", "shell", "output_file", "launch", "run_as"],
    ),
    ("spec", &["spec", "fetch_type", "mode", "filter"]),
    ("plan", &["plan"]),
    ("lang", &["lang"]),
    ("gate", &["gate", "probe_bytes"]),
    ("backend", &["backend"]),
    (
        "engine",
        &["overhead", "runner", "sinks", "profile", "stacks", "signals"],
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

/// The modules that may name `backend::tracefs` and anything defined under it.
const TRACEFS_NAMED_IN: &[&str] = &["backend", "session", "commands"];
const TRACEFS: &str = "backend::tracefs";

/// The core's image cache, and the only core modules that may name it: the parsers take bytes
/// and know no cache; the cache sits above them.
const CACHE: &str = "netprobe_core::cache";
const CACHE_USERS: &[&str] = &["netprobe_core::cache", "netprobe_core::image::cached"];

/// External crates only the top layer names.
const TOP_ONLY_CRATES: &[&str] = &["clap"];

#[test]
fn each_module_names_only_what_its_layer_may_see() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
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
        ("netprobe-cli/src/lib.rs", "pub mod spec;\npub mod plan;\n"),
        (
            "netprobe-cli/src/spec.rs",
            "// crate::backend::tracefs is a comment\npub struct Spec;\nfn f() { let _ = format!(\"{:?}\", crate::plan::Plan); }\n",
        ),
        (
            "netprobe-cli/src/plan.rs",
            "use crate::spec::Spec;\n#[derive(Debug)]\npub struct Plan;\n",
        ),
    ];
    let graph = Graph::from_sources(
        files
            .iter()
            .map(|(p, s)| (p.to_string(), syn::parse_file(s).unwrap())),
    );
    let found = graph.violations();
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].contains("import circle of 2 files"), "{}", found[0]);
    assert!(
        found[1].starts_with("netprobe-cli/src/spec.rs:3 `crate::plan::Plan`"),
        "{}",
        found[1]
    );
    assert!(found[1].contains("layer spec names layer plan"), "{}", found[1]);
}

/// What a name resolves to.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Res {
    Module(usize),
    /// An item defined in this module.
    Item(usize),
}

impl Res {
    fn module(self) -> usize {
        match self {
            Res::Module(m) | Res::Item(m) => m,
        }
    }
}

struct Module {
    /// Crate-qualified: `netprobe_cli::backend::tracefs`, `main`, `netprobe_core::cache`.
    path: Vec<String>,
    file: usize,
    parent: Option<usize>,
    children: HashMap<String, usize>,
    items: BTreeSet<String>,
    /// (name it binds, path it names); glob imports bind `*`.
    imports: Vec<(String, Vec<String>)>,
}

/// A path found in code: its module, its segments, its line, and whether it is a `pub use`.
struct Ref {
    module: usize,
    segs: Vec<String>,
    line: usize,
    reexport: bool,
}

struct Graph {
    /// Paths relative to the repository: `netprobe-cli/src/plan.rs`.
    files: Vec<String>,
    modules: Vec<Module>,
    refs: Vec<Ref>,
    /// Literals and identifiers of the core that speak tracing: (file, line, text).
    core_tracing: Vec<(usize, usize, String)>,
}

/// One resolved use of a module file by another.
struct Edge {
    from: usize,
    to: usize,
    line: usize,
    path: String,
    reexport: bool,
}

impl Graph {
    fn read(repo: &Path) -> Graph {
        let mut sources = Vec::new();
        for dir in ["netprobe-core/src", "netprobe-cli/src"] {
            let mut files = Vec::new();
            rust_files(&repo.join(dir), &mut files);
            for f in files {
                let rel = f.strip_prefix(repo).unwrap().to_string_lossy().into_owned();
                let text = std::fs::read_to_string(&f).unwrap();
                let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
                sources.push((rel, ast));
            }
        }
        Graph::from_sources(sources.into_iter())
    }

    /// Builds the module tree from the crate roots down, following `mod` declarations; files no
    /// `mod` reaches are not part of any crate and are left out.
    fn from_sources(sources: impl Iterator<Item = (String, syn::File)>) -> Graph {
        let mut asts: BTreeMap<String, syn::File> = sources.collect();
        let mut g = Graph {
            files: Vec::new(),
            modules: Vec::new(),
            refs: Vec::new(),
            core_tracing: Vec::new(),
        };
        let roots = [
            ("netprobe-core/src/lib.rs", "netprobe_core"),
            ("netprobe-cli/src/lib.rs", "netprobe_cli"),
            ("netprobe-cli/src/main.rs", "main"),
        ];
        for (file, name) in roots {
            if let Some(ast) = asts.remove(file) {
                let dir = PathBuf::from(file).parent().unwrap().to_path_buf();
                g.add_file(file, &ast, vec![name.to_string()], None, dir, &mut asts);
            }
        }
        g
    }

    fn add_file(
        &mut self,
        file: &str,
        ast: &syn::File,
        path: Vec<String>,
        parent: Option<usize>,
        child_dir: PathBuf,
        asts: &mut BTreeMap<String, syn::File>,
    ) -> usize {
        self.files.push(file.to_string());
        let f = self.files.len() - 1;
        let m = self.new_module(path, f, parent);
        self.add_items(m, &ast.items, &child_dir, asts);
        m
    }

    fn new_module(&mut self, path: Vec<String>, file: usize, parent: Option<usize>) -> usize {
        self.modules.push(Module {
            path,
            file,
            parent,
            children: HashMap::new(),
            items: BTreeSet::new(),
            imports: Vec::new(),
        });
        self.modules.len() - 1
    }

    fn add_items(
        &mut self,
        m: usize,
        items: &[syn::Item],
        child_dir: &Path,
        asts: &mut BTreeMap<String, syn::File>,
    ) {
        for item in items {
            let name = match item {
                syn::Item::Mod(md) => {
                    let name = md.ident.to_string();
                    let mut path = self.modules[m].path.clone();
                    path.push(name.clone());
                    let child = if let Some((_, inner)) = &md.content {
                        let c = self.new_module(path, self.modules[m].file, Some(m));
                        self.add_items(c, inner, &child_dir.join(&name), asts);
                        c
                    } else {
                        let (file, dir) = module_file(&md.attrs, child_dir, &name, asts);
                        let Some(ast) = asts.remove(&file) else {
                            continue; // declared but not in the sources read (a test tree)
                        };
                        self.add_file(&file, &ast, path, Some(m), dir, asts)
                    };
                    self.modules[m].children.insert(name, child);
                    continue;
                }
                syn::Item::Use(u) => {
                    let public = !matches!(u.vis, syn::Visibility::Inherited);
                    let mut leaves = Vec::new();
                    use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
                    for (bound, segs, line) in leaves {
                        self.modules[m].imports.push((bound, segs.clone()));
                        self.refs.push(Ref {
                            module: m,
                            segs,
                            line,
                            reexport: public,
                        });
                    }
                    self.visit_attrs(m, &u.attrs);
                    continue;
                }
                syn::Item::Const(i) => Some(&i.ident),
                syn::Item::Enum(i) => Some(&i.ident),
                syn::Item::ExternCrate(i) => Some(&i.ident),
                syn::Item::Fn(i) => Some(&i.sig.ident),
                syn::Item::Macro(i) => i.ident.as_ref(),
                syn::Item::Static(i) => Some(&i.ident),
                syn::Item::Struct(i) => Some(&i.ident),
                syn::Item::Trait(i) => Some(&i.ident),
                syn::Item::TraitAlias(i) => Some(&i.ident),
                syn::Item::Type(i) => Some(&i.ident),
                syn::Item::Union(i) => Some(&i.ident),
                _ => None,
            };
            if let Some(name) = name {
                self.modules[m].items.insert(name.to_string());
            }
            let mut v = CodePaths {
                g: self,
                module: m,
            };
            v.visit_item(item);
        }
    }

    fn visit_attrs(&mut self, m: usize, attrs: &[syn::Attribute]) {
        let mut v = CodePaths { g: self, module: m };
        for a in attrs {
            v.visit_attribute(a);
        }
    }

    fn crate_root(&self, mut m: usize) -> usize {
        while let Some(p) = self.modules[m].parent {
            m = p;
        }
        m
    }

    fn root_named(&self, name: &str) -> Option<usize> {
        self.modules
            .iter()
            .position(|md| md.parent.is_none() && md.path[0] == name)
    }

    /// Resolves `segs` as written in module `scope`; `None` when it names nothing of the two
    /// crates (std, a dependency, a generic parameter, a local). A path that runs past what the
    /// tree knows (an enum's variant, an associated item) resolves to the last module reached.
    fn resolve(&self, scope: usize, segs: &[String], depth: usize) -> Option<Res> {
        if depth > 16 || segs.is_empty() {
            return None;
        }
        let (mut res, mut rest) = match segs[0].as_str() {
            "crate" => (Res::Module(self.crate_root(scope)), &segs[1..]),
            "self" => (Res::Module(scope), &segs[1..]),
            "super" => {
                let mut m = scope;
                let mut n = 0;
                while segs.get(n).is_some_and(|s| s == "super") {
                    m = self.modules[m].parent?;
                    n += 1;
                }
                (Res::Module(m), &segs[n..])
            }
            "netprobe_core" | "netprobe_cli" => (Res::Module(self.root_named(&segs[0])?), &segs[1..]),
            first => (self.lookup(scope, first, segs.len() > 1, depth)?, &segs[1..]),
        };
        while let (Res::Module(m), Some(seg)) = (res, rest.first()) {
            match self.lookup(m, seg, rest.len() > 1, depth) {
                Some(r) => res = r,
                None => return Some(res),
            }
            rest = &rest[1..];
        }
        Some(res)
    }

    /// A name in a module's namespace: a submodule, an item defined there, an import (followed
    /// to what it names), or a name a glob import brings.
    fn lookup(&self, m: usize, name: &str, more: bool, depth: usize) -> Option<Res> {
        let md = &self.modules[m];
        let child = md.children.get(name).map(|&c| Res::Module(c));
        let item = md.items.contains(name).then_some(Res::Item(m));
        let own = if more { child.or(item) } else { item.or(child) };
        if own.is_some() {
            return own;
        }
        for (bound, path) in &md.imports {
            if bound == name {
                if let Some(r) = self.resolve(m, path, depth + 1) {
                    return Some(r);
                }
            }
        }
        for (bound, path) in &md.imports {
            if bound == "*" {
                if let Some(Res::Module(g)) = self.resolve(m, path, depth + 1) {
                    if g != m {
                        if let Some(r) = self.lookup(g, name, more, depth + 1) {
                            return Some(r);
                        }
                    }
                }
            }
        }
        None
    }

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

    fn is_descendant(&self, mut m: usize, of: usize) -> bool {
        while let Some(p) = self.modules[m].parent {
            if p == of {
                return true;
            }
            m = p;
        }
        false
    }

    /// Every path of a module resolved to the module it names, with that module.
    fn edges(&self) -> Vec<(Edge, usize, usize)> {
        let mut out = Vec::new();
        for r in &self.refs {
            let Some(res) = self.resolve(r.module, &r.segs, 0) else {
                continue;
            };
            let target = res.module();
            let (from, to) = (self.modules[r.module].file, self.modules[target].file);
            if from == to {
                continue;
            }
            let e = Edge {
                from,
                to,
                line: r.line,
                path: r.segs.join("::"),
                // A module re-exporting its own submodule's item is that submodule's face.
                reexport: r.reexport && self.is_descendant(target, r.module),
            };
            out.push((e, r.module, target));
        }
        out
    }

    fn violations(&self) -> Vec<String> {
        // (file, rule, named file) -> (lines, path at the first line).
        let mut found: BTreeMap<(usize, String, usize), (BTreeSet<usize>, String)> = BTreeMap::new();
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
                add(e, format!(
                    "tracefs vocabulary outside {}: the engine speaks the backend-neutral plan",
                    TRACEFS_NAMED_IN.join(", ")
                ));
            }
            if src_core && !dst_core {
                add(e, "netprobe-core names nothing of netprobe-cli".to_string());
            }
            if src_core && under(&dkey, CACHE) && !CACHE_USERS.iter().any(|p| under(&skey, p)) {
                add(e, format!(
                    "only {} name the image cache: parsers take bytes and know no cache",
                    CACHE_USERS.join(", ")
                ));
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
        let circle_edges: Vec<&Edge> = edges.iter().map(|(e, _, _)| e).filter(|e| !e.reexport).collect();
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
                if circle.contains(&e.from) && circle.contains(&e.to) && seen.insert((e.from, e.to)) {
                    write!(text, "\n    {}:{} `{}` -> {}", self.files[e.from], e.line, e.path, self.files[e.to]).unwrap();
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
        lines_out.sort_by(|a, b| sort_key(a).cmp(&sort_key(b)));
        lines_out
    }

    /// The graph's summary: each file's layer, the files' edges, the circles.
    fn report(&self) -> String {
        let edges = self.edges();
        let mut pairs: BTreeSet<(usize, usize)> = BTreeSet::new();
        for (e, _, _) in &edges {
            if !e.reexport {
                pairs.insert((e.from, e.to));
            }
        }
        let mut out = String::new();
        let core = self.files.iter().filter(|f| f.starts_with("netprobe-core/")).count();
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
            .map(|&(from, to)| Edge { from, to, line: 0, path: String::new(), reexport: false })
            .collect();
        let refs: Vec<&Edge> = pair_edges.iter().collect();
        let cs = circles(self.files.len(), &refs);
        for crate_dir in ["netprobe-core/", "netprobe-cli/"] {
            let mine: Vec<&Vec<usize>> = cs.iter().filter(|c| self.files[c[0]].starts_with(crate_dir)).collect();
            let sizes: Vec<String> = mine.iter().map(|c| c.len().to_string()).collect();
            writeln!(out, "import circles in {crate_dir}: {} (sizes {})", mine.len(), sizes.join(", ")).unwrap();
        }
        for c in &cs {
            let names: Vec<&str> = c.iter().map(|&f| self.files[f].as_str()).collect();
            writeln!(out, "  circle of {}: {}", c.len(), names.join(" ")).unwrap();
        }
        writeln!(out, "layer\tfile").unwrap();
        for (f, name) in self.files.iter().enumerate() {
            let m = self.modules.iter().position(|md| md.file == f).unwrap();
            let layer = self.layer(m).map_or("?".to_string(), |l| format!("{l}:{}", LAYERS[l].0));
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
    key == prefix || key.strip_prefix(prefix).is_some_and(|r| r.starts_with("::"))
}

/// The file a `mod NAME;` declaration loads (`#[path]`, `NAME.rs` or `NAME/mod.rs`), and the
/// folder its own submodules are in.
fn module_file(
    attrs: &[syn::Attribute],
    child_dir: &Path,
    name: &str,
    asts: &BTreeMap<String, syn::File>,
) -> (String, PathBuf) {
    for a in attrs {
        if let syn::Meta::NameValue(nv) = &a.meta {
            if nv.path.is_ident("path") {
                if let syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) = &nv.value {
                    let file = child_dir.join(s.value());
                    let dir = file.parent().unwrap().to_path_buf();
                    return (file.to_string_lossy().into_owned(), dir);
                }
            }
        }
    }
    let flat = child_dir.join(format!("{name}.rs"));
    let flat_s = flat.to_string_lossy().into_owned();
    if asts.contains_key(&flat_s) {
        return (flat_s, child_dir.join(name));
    }
    let folder = child_dir.join(name).join("mod.rs");
    (folder.to_string_lossy().into_owned(), child_dir.join(name))
}

/// The leaves of a `use` tree: (name bound, full path, line). A glob binds `*`; `self` in a group
/// binds the group's last segment.
fn use_leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(String, Vec<String>, usize)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let line = n.ident.span().start().line;
            if n.ident == "self" {
                if let Some(last) = prefix.last() {
                    out.push((last.clone(), prefix.clone(), line));
                }
            } else {
                let mut p = prefix.clone();
                p.push(n.ident.to_string());
                out.push((n.ident.to_string(), p, line));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut p = prefix.clone();
            if r.ident != "self" {
                p.push(r.ident.to_string());
            }
            out.push((r.rename.to_string(), p, r.ident.span().start().line));
        }
        syn::UseTree::Glob(g) => {
            out.push(("*".to_string(), prefix.clone(), g.star_token.span.start().line));
        }
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix, out);
            }
        }
    }
}

/// Collects the paths of code (expressions, types, patterns, attributes' and macros' tokens)
/// of one module; nested `mod` items are left to [`Graph::add_items`].
struct CodePaths<'g> {
    g: &'g mut Graph,
    module: usize,
}

impl CodePaths<'_> {
    fn push(&mut self, segs: Vec<String>, line: usize) {
        self.g.refs.push(Ref {
            module: self.module,
            segs,
            line,
            reexport: false,
        });
    }

    /// Paths in a token stream (`a::b::c`, not preceded by `::`); string literals are not paths.
    fn tokens(&mut self, tokens: TokenStream) {
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tts.len() {
            match &tts[i] {
                TokenTree::Group(gr) => self.tokens(gr.stream()),
                TokenTree::Ident(id) => {
                    let after_colons = i >= 2 && is_colon(&tts[i - 1]) && is_colon(&tts[i - 2]);
                    if !after_colons {
                        let mut segs = vec![id.to_string()];
                        let mut j = i + 1;
                        while j + 2 < tts.len() && is_colon(&tts[j]) && is_colon(&tts[j + 1]) {
                            match &tts[j + 2] {
                                TokenTree::Ident(next) => segs.push(next.to_string()),
                                _ => break,
                            }
                            j += 3;
                        }
                        if segs.len() > 1 {
                            self.push(segs, id.span().start().line);
                        }
                    }
                    self.ident(id);
                }
                TokenTree::Literal(l) => self.literal(&l.to_string(), l.span().start().line),
                TokenTree::Punct(_) => {}
            }
            i += 1;
        }
    }

    fn literal(&mut self, text: &str, line: usize) {
        let core = self.g.modules[self.module].path[0] == "netprobe_core";
        if core && text.contains("uprobe_events") {
            let file = self.g.modules[self.module].file;
            self.g.core_tracing.push((file, line, text.to_string()));
        }
    }

    fn ident(&mut self, id: &proc_macro2::Ident) {
        self.literal(&id.to_string(), id.span().start().line);
    }
}

fn is_colon(t: &TokenTree) -> bool {
    matches!(t, TokenTree::Punct(p) if p.as_char() == ':')
}

impl<'ast> Visit<'ast> for CodePaths<'_> {
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        // A `use` inside a function body: its names are taken as the module's.
        let mut leaves = Vec::new();
        use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
        for (bound, segs, line) in leaves {
            self.g.modules[self.module].imports.push((bound, segs.clone()));
            self.push(segs, line);
        }
    }

    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        if a.path().is_ident("doc") {
            return; // doc comments are not code
        }
        syn::visit::visit_attribute(self, a);
    }

    fn visit_meta_list(&mut self, m: &'ast syn::MetaList) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_meta_list(self, m);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.segments.len() > 1 && p.leading_colon.is_none() {
            let segs = p.segments.iter().map(|s| s.ident.to_string()).collect();
            self.push(segs, p.segments[0].ident.span().start().line);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }

    fn visit_lit_str(&mut self, s: &'ast syn::LitStr) {
        self.literal(&s.value(), s.span().start().line);
    }

    fn visit_ident(&mut self, id: &'ast proc_macro2::Ident) {
        self.ident(id);
    }
}

/// The strongly connected components of more than one file (Tarjan's algorithm), each sorted,
/// largest first.
fn circles(n: usize, edges: &[&Edge]) -> Vec<Vec<usize>> {
    let mut adj = vec![Vec::new(); n];
    for e in edges {
        adj[e.from].push(e.to);
    }
    struct T {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn strong(v: usize, adj: &[Vec<usize>], t: &mut T) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in &adj[v] {
            match t.index[w] {
                None => {
                    strong(w, adj, t);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut c = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on[w] = false;
                c.push(w);
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                c.sort();
                t.out.push(c);
            }
        }
    }
    let mut t = T {
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            strong(v, &adj, &mut t);
        }
    }
    t.out.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    t.out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}
