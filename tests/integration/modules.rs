//! The module graph stays acyclic: a module that builds a structure does not import its
//! users. Checked at every depth: file modules (`pipeline::session`), folders
//! (`pipeline`), and the crate's top modules (`api`, `web`).
//!
//! How: the sources are parsed with `syn`. The modules are found from the crate's root
//! (`lib.rs`) by following its `mod` items, files (`x.rs`, `x/mod.rs`) and inline blocks
//! alike. In each module, every `use` tree (groups, nesting, renames and globs flattened)
//! and every path of the code that starts with `crate`, `self` or `super` (expressions,
//! types, patterns, impl targets) names the module it reaches: the longest module prefix
//! of the path, followed through the `use` bindings of that module to where the item comes
//! from (a folder's `pub use child::Thing` names `child`). Items and `mod`s under
//! `#[cfg(test)]` are left out (tests may reach anywhere); comments and string literals are
//! not code to the parser.
//!
//! Blind spots: a macro's body is a token stream, read only when it parses as
//! comma-separated expressions (`vec![..]`, `format!(..)`, `assert_eq!(..)`); paths in other
//! macro bodies (`macro_rules!` definitions, `json!({..})`, `tokio::select!`) are not seen.
//! Glob imports name their module but are not followed as re-exports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};

/// A module path inside a crate, `[]` for the crate root.
type ModulePath = Vec<String>;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A path as written in module `from`, made absolute (from the crate root) where its head
/// says how: `crate`, `self`, `super`. A `use` path with any other head (`use child::X`,
/// `use std::fmt`) is `bare`: it is `from`'s own child or binding if `from` has one by that
/// name, else another crate's.
#[derive(Clone, Debug)]
struct Named {
    from: ModulePath,
    path: Vec<String>,
    bare: bool,
}

/// What one module names: the paths of its code and `use`s, and its `use` bindings (the
/// name each `use` introduces, to the path it stands for).
#[derive(Default)]
struct Module {
    named: Vec<Named>,
    bindings: BTreeMap<String, Vec<Named>>,
}

type Modules = BTreeMap<ModulePath, Module>;

/// Whether `attrs` hold `#[cfg(test)]` (or `#[cfg(all(test, ..))]`).
fn test_only(attrs: &[syn::Attribute]) -> bool {
    fn is_test(meta: &syn::Meta) -> bool {
        match meta {
            syn::Meta::Path(path) => path.is_ident("test"),
            syn::Meta::List(list) if list.path.is_ident("all") => list
                .parse_args_with(Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated)
                .is_ok_and(|all| all.iter().any(is_test)),
            _ => false,
        }
    }
    attrs
        .iter()
        .any(|attr| attr.path().is_ident("cfg") && attr.parse_args::<syn::Meta>().is_ok_and(|m| is_test(&m)))
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item;
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// `segments` as written in `module`, made absolute; `None` for a `super` above the root
/// or a path from another crate (`::std`).
fn absolute(module: &ModulePath, segments: &[String]) -> Option<Named> {
    let (mut base, mut rest, bare) = match segments.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &segments[1..], false),
        Some("self") => (module.clone(), &segments[1..], false),
        Some("super") => (module.clone(), segments, false),
        _ => (module.clone(), segments, true),
    };
    while let Some(("super", next)) = rest.split_first().map(|(s, n)| (s.as_str(), n)) {
        base.pop()?;
        rest = next;
    }
    base.extend(rest.iter().cloned());
    Some(Named {
        from: module.clone(),
        path: base,
        bare,
    })
}

/// The paths of a `use` tree under `prefix`, each with the name it binds (none for a glob
/// or `as _`).
fn flatten(tree: &syn::UseTree, prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) {
    let with = |ident: &syn::Ident| {
        let mut path = prefix.to_vec();
        // `a::{self, b}`: `self` is `a` itself.
        if ident != "self" {
            path.push(ident.to_string());
        }
        path
    };
    match tree {
        syn::UseTree::Path(p) => flatten(&p.tree, &with(&p.ident), out),
        syn::UseTree::Name(n) => {
            let path = with(&n.ident);
            let name = path.last().cloned();
            out.push((path, name));
        }
        syn::UseTree::Rename(r) => {
            let name = (r.rename != "_").then(|| r.rename.to_string());
            out.push((with(&r.ident), name));
        }
        syn::UseTree::Glob(_) => out.push((prefix.to_vec(), None)),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| flatten(t, prefix, out)),
    }
}

/// Collects what the code of one module names, test-only items left out.
struct Collector<'m> {
    module: &'m ModulePath,
    out: &'m mut Module,
}

impl Collector<'_> {
    /// A `use` item; its bindings count only at the module's top level (a `use` in a
    /// function body binds inside the body).
    fn use_item(&mut self, item: &syn::ItemUse, binds: bool) {
        if test_only(&item.attrs) || item.leading_colon.is_some() {
            return;
        }
        let mut paths = Vec::new();
        flatten(&item.tree, &[], &mut paths);
        for (segments, name) in paths {
            let Some(named) = absolute(self.module, &segments) else {
                continue;
            };
            if let (true, Some(name)) = (binds, name) {
                self.out.bindings.entry(name).or_default().push(named.clone());
            }
            self.out.named.push(named);
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !test_only(item_attrs(item)) {
            visit::visit_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_item(item, false);
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Const(i) => &i.attrs,
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            syn::ImplItem::Macro(i) => &i.attrs,
            _ => return visit::visit_impl_item(self, item),
        };
        if !test_only(attrs) {
            visit::visit_impl_item(self, item);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let head = path.segments.first().map(|s| s.ident.to_string());
        if path.leading_colon.is_none() && matches!(head.as_deref(), Some("crate" | "self" | "super")) {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            if let Some(named) = absolute(self.module, &segments) {
                self.out.named.push(named);
            }
        }
        visit::visit_path(self, path);
    }

    /// `pub(crate)`, `pub(super)`, `pub(in path)` say who may look, not what is used.
    fn visit_vis_restricted(&mut self, _: &'ast syn::VisRestricted) {}

    /// A macro's body, where it parses as comma-separated expressions.
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        visit::visit_macro(self, mac);
        if let Ok(exprs) = mac.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated) {
            exprs.iter().for_each(|e| self.visit_expr(e));
        }
    }
}

/// Reads module `module` (its top-level `items`) and, through its `mod` items, its
/// descendants; `dir` is where the files of its child modules are.
fn read_module(modules: &mut Modules, module: ModulePath, items: &[syn::Item], dir: &Path) {
    let mut out = Module::default();
    let mut children = Vec::new();
    {
        let mut collector = Collector {
            module: &module,
            out: &mut out,
        };
        for item in items {
            match item {
                _ if test_only(item_attrs(item)) => {}
                syn::Item::Mod(m) => children.push(m),
                syn::Item::Use(u) => collector.use_item(u, true),
                _ => collector.visit_item(item),
            }
        }
    }
    modules.insert(module.clone(), out);
    for child in children {
        let name = child.ident.to_string();
        let mut path = module.clone();
        path.push(name.clone());
        // The files of `x`'s children are in `x/`, for `x.rs` and `x/mod.rs` alike.
        let child_dir = dir.join(&name);
        match &child.content {
            Some((_, items)) => read_module(modules, path, items, &child_dir),
            None => {
                let file = [dir.join(format!("{name}.rs")), child_dir.join("mod.rs")]
                    .into_iter()
                    .find(|f| f.is_file())
                    .unwrap_or_else(|| panic!("no file for `mod {name};` in {}", dir.display()));
                read_module(modules, path, &parse(&file).items, &child_dir);
            }
        }
    }
}

fn parse(file: &Path) -> syn::File {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// Every module of the crate whose root is `root_file` (its `lib.rs`).
fn read_crate(root_file: &Path) -> Modules {
    let mut modules = Modules::new();
    let dir: PathBuf = root_file.parent().unwrap().to_path_buf();
    read_module(&mut modules, Vec::new(), &parse(root_file).items, &dir);
    modules
}

/// How many `use` bindings a path is followed through, at most (a guard against loops).
const HOPS: usize = 16;

/// The absolute path `named` stands for, or `None` if it is another crate's.
fn in_tree(modules: &Modules, named: &Named) -> Option<Vec<String>> {
    if named.bare {
        let head = named.path.get(named.from.len())?;
        let mut child = named.from.clone();
        child.push(head.clone());
        let local = modules.contains_key(&child)
            || modules
                .get(&named.from)
                .is_some_and(|m| m.bindings.contains_key(head));
        if !local {
            return None;
        }
    }
    Some(named.path.clone())
}

/// The longest prefix of `path` that is a module (the root at least).
fn longest_module(modules: &Modules, path: &[String]) -> ModulePath {
    (0..=path.len())
        .rev()
        .map(|k| path[..k].to_vec())
        .find(|prefix| modules.contains_key(prefix))
        .expect("the root is a module")
}

/// The modules an absolute `path` reaches: its longest module prefix, or, if the next
/// segment is a `use` binding of that module, where the binding leads; `None` if every
/// binding on the way leads to another crate's item.
fn resolve(modules: &Modules, path: &[String], hops: usize) -> Option<BTreeSet<ModulePath>> {
    let prefix = longest_module(modules, path);
    let bound = path
        .get(prefix.len())
        .and_then(|name| modules[&prefix].bindings.get(name))
        .filter(|_| hops > 0);
    let Some(targets) = bound else {
        return Some(BTreeSet::from([prefix]));
    };
    let mut reached: Option<BTreeSet<ModulePath>> = None;
    for target in targets {
        if let Some(mut next) = in_tree(modules, target) {
            next.extend_from_slice(&path[prefix.len() + 1..]);
            if let Some(found) = resolve(modules, &next, hops - 1) {
                reached.get_or_insert_default().extend(found);
            }
        }
    }
    reached
}

/// The modules `path` names: where its item comes from in the crate, or, for another
/// crate's item re-exported here, the module the path names (its longest module prefix).
fn reach(modules: &Modules, path: &[String]) -> BTreeSet<ModulePath> {
    resolve(modules, path, HOPS).unwrap_or_else(|| BTreeSet::from([longest_module(modules, path)]))
}

/// The module graph of the crate whose root is `root_file`: each module to the modules it
/// names, leaving out a module's own descendants (a parent declares its children).
fn module_graph(root_file: &Path) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    let modules = read_crate(root_file);
    let mut graph = BTreeMap::new();
    for (module, content) in &modules {
        let mut targets = BTreeSet::new();
        for named in &content.named {
            if let Some(path) = in_tree(&modules, named) {
                targets.extend(reach(&modules, &path));
            }
        }
        targets.retain(|target| !target.starts_with(module));
        graph.insert(module.clone(), targets);
    }
    graph
}

/// A cycle of `graph` with its modules cut to their first `depth` components, if any.
fn cycle_at_depth(
    graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>,
    depth: usize,
) -> Option<Vec<ModulePath>> {
    let cut = |m: &ModulePath| m[..m.len().min(depth)].to_vec();
    let mut collapsed: BTreeMap<ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
    for (from, targets) in graph {
        let from = cut(from);
        for to in targets.iter().map(cut) {
            // An edge into one's own ancestor or descendant is a parent's business.
            if !from.starts_with(&to) && !to.starts_with(&from) {
                collapsed.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    // Depth-first search; `on_stack` holds the current path.
    fn visit(
        node: &ModulePath,
        graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>,
        done: &mut BTreeSet<ModulePath>,
        on_stack: &mut Vec<ModulePath>,
    ) -> Option<Vec<ModulePath>> {
        if let Some(at) = on_stack.iter().position(|m| m == node) {
            let mut cycle = on_stack[at..].to_vec();
            cycle.push(node.clone());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        on_stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, done, on_stack) {
                return Some(cycle);
            }
        }
        on_stack.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    collapsed
        .keys()
        .find_map(|node| visit(node, &collapsed, &mut done, &mut Vec::new()))
}

/// A cycle of `graph` at any depth, its modules written `a::b`.
fn any_cycle(graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Option<String> {
    let deepest = graph.keys().map(Vec::len).max().unwrap_or(0);
    (1..=deepest).find_map(|depth| {
        cycle_at_depth(graph, depth).map(|cycle| {
            let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
            names.join(" -> ")
        })
    })
}

fn assert_acyclic(root_file: &Path) {
    let graph = module_graph(root_file);
    assert!(
        graph.len() > 10,
        "read only {} modules from {}",
        graph.len(),
        root_file.display()
    );
    if let Some(cycle) = any_cycle(&graph) {
        panic!("{}: modules import each other: {cycle}", root_file.display());
    }
}

#[test]
fn the_core_crate_has_no_import_cycle() {
    assert_acyclic(&root().join("crates/core/src/lib.rs"));
}

#[test]
fn the_server_crate_has_no_import_cycle() {
    // src/main.rs is the binary, a crate of its own.
    assert_acyclic(&root().join("src/lib.rs"));
}

/// A synthetic crate in a temporary directory: `files` as (path, text), `lib.rs` its root.
fn synthetic(files: &[(&str, &str)]) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    module_graph(&dir.path().join("lib.rs"))
}

fn module(path: &str) -> ModulePath {
    path.split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Two folders `a` and `b` with a file each, `a::one` naming `b::two`; `two`'s text is
/// the case's.
fn two_folders(two: &str) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    synthetic(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a/mod.rs", "pub mod one;\n"),
        (
            "a/one.rs",
            "use crate::b::two::Thing;\npub struct Other;\npub fn f() {}\n",
        ),
        ("b/mod.rs", "pub mod two;\n"),
        ("b/two.rs", two),
    ])
}

#[test]
fn imports_of_a_sibling_that_imports_back_are_a_cycle() {
    let graph = two_folders("use crate::a::{one::Other, self};\npub struct Thing;\n");
    let cycle = any_cycle(&graph).expect("a::one and b::two name each other");
    assert!(cycle.contains("a") && cycle.contains("b"), "{cycle}");
}

#[test]
fn imports_of_test_code_do_not_count() {
    let graph = two_folders(
        "pub struct Thing;\n\
         #[cfg(test)]\nmod tests {\n    use crate::a::one;\n}\n\
         #[cfg(test)]\nfn helper() { crate::a::one::f(); }\n\
         #[cfg(test)]\nuse crate::a::one::Other;\n\
         // use crate::a::one;\n\
         pub const S: &str = \"// crate::a::one\";\n",
    );
    assert_eq!(any_cycle(&graph), None, "{graph:?}");
    assert!(graph[&module("b::two")].is_empty(), "{graph:?}");
}

#[test]
fn a_test_only_module_file_does_not_count() {
    let graph = synthetic(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a.rs", "use crate::b::Thing;\npub struct Other;\n"),
        ("b/mod.rs", "pub struct Thing;\n#[cfg(test)]\nmod reference;\n"),
        ("b/reference.rs", "use crate::a::Other;\n"),
    ]);
    assert_eq!(any_cycle(&graph), None, "{graph:?}");
    assert!(!graph.contains_key(&module("b::reference")), "{graph:?}");
}

#[test]
fn super_super_reaches_the_root() {
    let graph = two_folders("use super::super::a::one;\npub struct Thing;\n");
    assert!(any_cycle(&graph).is_some(), "{graph:?}");
}

#[test]
fn a_cycle_behind_a_folders_re_export_is_found() {
    // `a::one` names `crate::b::Thing`, which `b` re-exports from `b::two`.
    let graph = synthetic(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a/mod.rs", "pub mod one;\npub mod two;\n"),
        ("a/one.rs", "use crate::b::Thing;\n"),
        ("a/two.rs", "pub struct Other;\n"),
        (
            "b/mod.rs",
            "mod two;\nmod three;\npub use two::Thing;\npub(crate) use self::three::{Third as T};\n",
        ),
        ("b/two.rs", "use crate::a::two::Other;\npub struct Thing;\n"),
        ("b/three.rs", "pub struct Third;\n"),
    ]);
    assert!(graph[&module("a::one")].contains(&module("b::two")), "{graph:?}");
    // At depth 1, a -> b -> a; at depth 2, a::one -> b::two -> a::two, no cycle.
    assert!(cycle_at_depth(&graph, 1).is_some(), "{graph:?}");
    assert_eq!(cycle_at_depth(&graph, 2), None, "{graph:?}");

    // A renamed re-export, followed through a group.
    let graph = synthetic(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a.rs", "use crate::b::{T};\npub struct Other;\n"),
        (
            "b/mod.rs",
            "mod three;\npub(crate) use self::three::{Third as T};\n",
        ),
        ("b/three.rs", "pub struct Third;\nfn f(_: crate::a::Other) {}\n"),
    ]);
    assert!(graph[&module("a")].contains(&module("b::three")), "{graph:?}");
}

/// Finding 1: a group right after `crate::` or `super::`.
#[test]
fn a_group_right_after_crate_or_super_is_read() {
    let graph = two_folders("use crate::{a::one::Other};\npub struct Thing;\n");
    assert!(any_cycle(&graph).is_some(), "{graph:?}");
    let graph = synthetic(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a.rs", "use super::{b::Thing};\npub struct Other;\n"),
        ("b.rs", "use super::{a::Other};\npub struct Thing;\n"),
    ]);
    assert!(any_cycle(&graph).is_some(), "{graph:?}");
}

/// Finding 2: every member of nested groups.
#[test]
fn every_member_of_nested_groups_is_read() {
    let graph = synthetic(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a/mod.rs", "pub mod y;\npub mod z;\n"),
        ("a/y.rs", "use crate::b::Thing;\npub struct Y;\n"),
        ("a/z.rs", "pub struct Z;\n"),
        (
            "b.rs",
            "use crate::a::{z::{Z}, y::Y as Why};\npub struct Thing;\n",
        ),
    ]);
    assert!(graph[&module("b")].contains(&module("a::y")), "{graph:?}");
    assert!(graph[&module("b")].contains(&module("a::z")), "{graph:?}");
    assert!(any_cycle(&graph).is_some(), "{graph:?}");
}

/// Finding 3: the crate root is `lib.rs`; a `main.rs` beside it is another crate.
#[test]
fn a_main_rs_beside_lib_rs_is_not_the_root() {
    let graph = synthetic(&[
        ("lib.rs", "pub mod a;\npub mod b;\nuse crate::a::A;\n"),
        ("main.rs", "mod c;\nuse crate::c::C;\nfn main() {}\n"),
        ("c.rs", "pub struct C;\n"),
        ("a.rs", "pub struct A;\n"),
        ("b.rs", "pub struct B;\n"),
    ]);
    let names: Vec<&ModulePath> = graph.keys().collect();
    assert_eq!(names, [&module(""), &module("a"), &module("b")]);
}

/// Finding 4: a path through a re-export of another crate's item names the re-exporting
/// module; a path through a re-export of the crate's own item names where it comes from.
#[test]
fn re_exports_of_outside_items_keep_the_path() {
    let graph = synthetic(&[
        ("lib.rs", "pub mod a;\npub mod b;\npub use std as outside;\n"),
        (
            "a.rs",
            "pub use crate::outside::fmt::{Debug, Display as Shown};\npub use std::io::Read;\n\
             use crate::b::B;\npub struct A;\n",
        ),
        ("b.rs", "use crate::a::{Shown, Read};\npub struct B;\n"),
    ]);
    assert!(graph[&module("b")].contains(&module("a")), "{graph:?}");
    assert!(any_cycle(&graph).is_some(), "{graph:?}");
}

/// A path in an expression, without a `use`, counts.
#[test]
fn a_path_in_an_expression_counts() {
    let graph = synthetic(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a.rs", "pub fn f() -> usize { crate::b::g() }\n"),
        ("b.rs", "use super::a;\npub fn g() -> usize { 0 }\n"),
    ]);
    assert!(graph[&module("a")].contains(&module("b")), "{graph:?}");
    assert!(any_cycle(&graph).is_some(), "{graph:?}");

    // Types, patterns, impl targets, and macro bodies made of expressions.
    let graph = synthetic(&[
        (
            "lib.rs",
            "pub mod a;\npub mod b;\npub mod c;\npub mod d;\npub mod e;\n",
        ),
        ("a.rs", "pub fn f(_: crate::b::B) {}\n"),
        ("b.rs", "pub struct B;\nimpl crate::c::Tr for B {}\n"),
        (
            "c.rs",
            "pub trait Tr {}\npub fn g(x: u8) -> bool { matches!(x, crate::d::X) }\n",
        ),
        (
            "d.rs",
            "pub const X: u8 = 0;\npub fn h() -> Vec<usize> { vec![crate::e::N] }\n",
        ),
        (
            "e.rs",
            "pub const N: usize = 1;\nfn k(o: Option<u8>) { if let Some(super::d::X) = o {} }\n",
        ),
    ]);
    for (from, to) in [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "d")] {
        assert!(
            graph[&module(from)].contains(&module(to)),
            "{from} -> {to}: {graph:?}"
        );
    }
}
