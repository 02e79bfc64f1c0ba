//! The module graph of `netprobe-cli/src` and `netprobe-core/src` for `tests/layers.rs`: the
//! module tree from the crate roots' `mod` declarations, every `use` and path of code, and each
//! resolved, through re-exports and glob imports, to the module that defines what it names.

use proc_macro2::{TokenStream, TokenTree};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// What a name resolves to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Res {
    Module(usize),
    /// An item defined in this module.
    Item(usize),
}

impl Res {
    pub fn module(self) -> usize {
        match self {
            Res::Module(m) | Res::Item(m) => m,
        }
    }
}

pub struct Module {
    /// Crate-qualified: `netprobe_cli::backend::tracefs`, `main`, `netprobe_core::cache`.
    pub path: Vec<String>,
    pub file: usize,
    pub parent: Option<usize>,
    pub children: HashMap<String, usize>,
    pub items: BTreeSet<String>,
    /// (name it binds, path it names); glob imports bind `*`.
    pub imports: Vec<(String, Vec<String>)>,
}

/// A path found in code: its module, its segments, its line, and whether it is a `pub use`.
pub struct Ref {
    pub module: usize,
    pub segs: Vec<String>,
    pub line: usize,
    pub reexport: bool,
}

pub struct Graph {
    /// Paths relative to the repository: `netprobe-cli/src/plan.rs`.
    pub files: Vec<String>,
    pub modules: Vec<Module>,
    pub refs: Vec<Ref>,
    /// Literals and identifiers of the core that speak tracing: (file, line, text).
    pub core_tracing: Vec<(usize, usize, String)>,
    /// What [`Graph::lookup`] answered, by (module, name, whether more segments follow).
    lookups: RefCell<HashMap<(usize, String, bool), Option<Res>>>,
}

/// One resolved use of a module file by another.
pub struct Edge {
    pub from: usize,
    pub to: usize,
    pub line: usize,
    pub path: String,
    pub reexport: bool,
}

impl Graph {
    pub fn read(repo: &Path) -> Graph {
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
    pub fn from_sources(sources: impl Iterator<Item = (String, syn::File)>) -> Graph {
        let mut asts: BTreeMap<String, syn::File> = sources.collect();
        let mut g = Graph {
            files: Vec::new(),
            modules: Vec::new(),
            refs: Vec::new(),
            core_tracing: Vec::new(),
            lookups: RefCell::new(HashMap::new()),
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
                // Unit tests reach their module through whatever sets it up (a filter's kernel
                // text through the event layout above it); they ship in no build, so they are
                // not part of the layering.
                syn::Item::Mod(md) if is_cfg_test(&md.attrs) => continue,
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
            let mut v = CodePaths { g: self, module: m };
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
    pub fn resolve(&self, scope: usize, segs: &[String], depth: usize) -> Option<Res> {
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
            "netprobe_core" | "netprobe_cli" => {
                (Res::Module(self.root_named(&segs[0])?), &segs[1..])
            }
            first => (
                self.lookup(scope, first, segs.len() > 1, depth)?,
                &segs[1..],
            ),
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
    /// to what it names), or a name a glob import brings. Each answer is remembered: globs that
    /// reach each other (`use Opcode::*` where `Opcode` is a dependency's) would otherwise be
    /// walked again for every path of the module, a number of walks that grows as a power of the
    /// depth. A lookup met again while it is still being answered names nothing on that way.
    pub fn lookup(&self, m: usize, name: &str, more: bool, depth: usize) -> Option<Res> {
        let key = (m, name.to_string(), more);
        if let Some(known) = self.lookups.borrow().get(&key) {
            return *known;
        }
        self.lookups.borrow_mut().insert(key.clone(), None);
        let found = self.lookup_uncached(m, name, more, depth);
        self.lookups.borrow_mut().insert(key, found);
        found
    }

    fn lookup_uncached(&self, m: usize, name: &str, more: bool, depth: usize) -> Option<Res> {
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
    pub fn edges(&self) -> Vec<(Edge, usize, usize)> {
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
                if let syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) = &nv.value
                {
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
fn use_leaves(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(String, Vec<String>, usize)>,
) {
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
            out.push((
                "*".to_string(),
                prefix.clone(),
                g.star_token.span.start().line,
            ));
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
        if core && text.contains(crate::CORE_NEVER_SAYS) {
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
            self.g.modules[self.module]
                .imports
                .push((bound, segs.clone()));
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
pub fn circles(n: usize, edges: &[&Edge]) -> Vec<Vec<usize>> {
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

/// Whether `attrs` hold `#[cfg(test)]`.
fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}
