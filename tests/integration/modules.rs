//! The module graph stays acyclic: a module that builds a structure does not import its
//! users. Read from the sources (`crate::` and `super::` paths, tests and comments left out), at every
//! depth: file modules (`pipeline::session`), folders (`pipeline`), and the crate's top
//! modules (`api`, `web`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module path inside a crate, `[]` for the crate root.
type ModulePath = Vec<String>;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, by module path, with its text up to its test module.
fn modules(dir: &Path) -> BTreeMap<ModulePath, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(dir).unwrap().with_extension("");
            let mut module: ModulePath = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            out.insert(module, without_comments(without_tests(&text)));
        }
    }
    out
}

/// `text` up to its `#[cfg(test)]` module (tests may reach anywhere).
fn without_tests(text: &str) -> &str {
    let cut = text
        .match_indices("#[cfg(test)]\nmod ")
        .map(|(at, _)| at)
        .next()
        .unwrap_or(text.len());
    &text[..cut]
}

/// `text` without its comments (doc links name what they explain, not what the code
/// uses). Line comments only: the sources use no block comments.
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.find("//").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The absolute module paths `text`, the source of `module`, names: `crate::a::b::c`,
/// `super::x` and the members of `crate::a::{b, c::d}` groups, one level deep.
fn named_paths(module: &ModulePath, text: &str) -> Vec<ModulePath> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    for (at, _) in text.match_indices("crate::").chain(text.match_indices("super::")) {
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_' || bytes[at - 1] == b':')
        {
            continue;
        }
        // The head: `crate`, or one or more `super`s.
        let mut rest = &text[at..];
        let mut base: ModulePath = if rest.starts_with("crate::") {
            rest = &rest["crate::".len()..];
            Vec::new()
        } else {
            // `super` of `a::b` (a/b.rs, or a/b/mod.rs) is `a`.
            let mut base = module.clone();
            base.pop();
            rest = &rest["super::".len()..];
            while let Some(next) = rest.strip_prefix("super::") {
                base.pop();
                rest = next;
            }
            base
        };
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let path = rest[..end].trim_end_matches(':');
        base.extend(path.split("::").filter(|s| !s.is_empty()).map(str::to_owned));
        if rest[end..].starts_with('{') && rest[..end].ends_with("::") {
            let group_end = rest[end..].find('}').map_or(rest.len(), |g| end + g);
            for member in rest[end + 1..group_end].split(',') {
                let member = member.split(" as ").next().unwrap_or("").trim();
                let mut full = base.clone();
                full.extend(
                    member
                        .split("::")
                        .filter(|s| !s.is_empty() && *s != "self")
                        .map(str::to_owned),
                );
                out.push(full);
            }
        }
        out.push(base);
    }
    out
}

/// The names each module re-exports (`pub use child::{A, B};`), with the module each
/// comes from: a path through a re-export names the module that defines the item.
fn re_exports(sources: &BTreeMap<ModulePath, String>) -> BTreeMap<(ModulePath, String), ModulePath> {
    let mut out = BTreeMap::new();
    for (module, text) in sources {
        for statement in text.split("pub use ").skip(1) {
            let statement = statement.split(';').next().unwrap_or("");
            let (prefix, names) = match statement.split_once('{') {
                Some((prefix, group)) => (prefix, group.trim_end().trim_end_matches('}').to_owned()),
                None => match statement.rsplit_once("::") {
                    Some((prefix, name)) => (prefix, name.to_owned()),
                    None => continue,
                },
            };
            let mut from: ModulePath = module.clone();
            for part in prefix.split("::").map(str::trim).filter(|s| !s.is_empty()) {
                match part {
                    "crate" => from.clear(),
                    "self" => {}
                    "super" => {
                        from.pop();
                    }
                    name => from.push(name.to_owned()),
                }
            }
            let Some(defining) = longest_module(sources, &from) else {
                continue;
            };
            for name in names.split(',') {
                let name = name.split(" as ").last().unwrap_or("").trim();
                if !name.is_empty() && !name.contains("::") {
                    out.insert((module.clone(), name.to_owned()), defining.clone());
                }
            }
        }
    }
    out
}

/// The longest prefix of `path` that is a module of `sources`.
fn longest_module(sources: &BTreeMap<ModulePath, String>, path: &[String]) -> Option<ModulePath> {
    (0..=path.len())
        .rev()
        .map(|k| path[..k].to_vec())
        .find(|prefix| sources.contains_key(prefix))
}

/// The module graph of the crate whose sources are in `dir`: each module to the modules
/// it names (the longest module prefix of each path, through re-exports), leaving out a
/// module's own descendants (a parent declares its children).
fn module_graph(dir: &Path) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    let sources = modules(dir);
    let exports = re_exports(&sources);
    let mut graph = BTreeMap::new();
    for (module, text) in &sources {
        let mut targets = BTreeSet::new();
        for path in named_paths(module, text) {
            let Some(mut target) = longest_module(&sources, &path) else {
                continue;
            };
            if let Some(name) = path.get(target.len()) {
                if let Some(defining) = exports.get(&(target.clone(), name.clone())) {
                    target = defining.clone();
                }
            }
            if !target.starts_with(module) {
                targets.insert(target);
            }
        }
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

fn assert_acyclic(dir: &Path) {
    let graph = module_graph(dir);
    assert!(
        graph.len() > 10,
        "read only {} modules under {}",
        graph.len(),
        dir.display()
    );
    let deepest = graph.keys().map(Vec::len).max().unwrap_or(0);
    for depth in 1..=deepest {
        if let Some(cycle) = cycle_at_depth(&graph, depth) {
            let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
            panic!(
                "{}: modules import each other: {}",
                dir.display(),
                names.join(" -> ")
            );
        }
    }
}

#[test]
fn the_core_crate_has_no_import_cycle() {
    assert_acyclic(&root().join("crates/core/src"));
}

#[test]
fn the_server_crate_has_no_import_cycle() {
    assert_acyclic(&root().join("src"));
}

/// The check itself finds a cycle: two sibling modules that name each other, and two
/// folders whose files do.
#[test]
fn a_cycle_between_modules_or_folders_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n");
    for name in ["x", "y", "z", "w", "v", "u", "t", "s", "r"] {
        write(&format!("c/{name}.rs"), "");
    }
    write("c/mod.rs", "pub mod x;\n");
    write("a/mod.rs", "pub mod one;\n");
    write("a/one.rs", "use crate::b::two::Thing;\n");
    write("b/mod.rs", "pub mod two;\n");
    write(
        "b/two.rs",
        "pub struct Thing;\n#[cfg(test)]\nmod tests {\n    use crate::a::one;\n}\n",
    );
    let graph = module_graph(dir.path());
    assert_eq!(
        cycle_at_depth(&graph, 1),
        None,
        "a test module's imports do not count"
    );

    write(
        "b/two.rs",
        "use crate::a::{one::Other, self};\npub struct Thing;\n",
    );
    let graph = module_graph(dir.path());
    let cycle = cycle_at_depth(&graph, 1).expect("a::one and b::two name each other");
    assert!(
        cycle.contains(&vec!["a".to_owned()]) && cycle.contains(&vec!["b".to_owned()]),
        "{cycle:?}"
    );

    write("b/two.rs", "pub struct Thing;\n");
    write("b/three.rs", "use super::super::a::one;\n");
    write("b/mod.rs", "pub mod two;\npub mod three;\n");
    let graph = module_graph(dir.path());
    assert!(
        cycle_at_depth(&graph, 1).is_some(),
        "super::super reaches the root"
    );
}
