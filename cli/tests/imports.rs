//! No import cycle in any crate of the workspace.
//!
//! Each source file is a node; a file imports another when one of its paths (`use` lines and
//! paths in code: `crate::a::b`, `super::x`, `self::y`, or a child module's name) names an item
//! that the other file defines. A path through a re-export (`pub use`) counts for the file that
//! defines the item, not for the one re-exporting it. `#[cfg(test)]` modules are left out: the
//! check is about the library's layering, and a test may reach anywhere.
//!
//! A parent module counts like any other file: a child that uses a type defined in its parent's
//! `mod.rs` while the parent uses the child is a cycle. Shared definitions then live in a leaf
//! module of their own, and the parent only declares and re-exports.
//!
//! On failure the test prints every cycle with, for each edge inside it, one path that made it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A module path inside one crate: `["transport", "fabric"]`; the crate root is `[]`.
type Module = Vec<String>;

/// The crates of the workspace, by their source roots relative to the workspace root.
const CRATES: &[&str] = &[
    "src",
    "shm/src",
    "fabric/src",
    "verbs/src",
    "pmix/src",
    "derive/src",
    "cli/src",
];

#[test]
fn no_crate_has_an_import_cycle() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut report = String::new();
    for root in CRATES {
        let graph = Graph::read(&workspace.join(root));
        assert!(
            graph.files.len() > 1 || *root == "derive/src",
            "{root}: no sources read"
        );
        for cycle in graph.cycles() {
            report.push_str(&format!("{root}: {}\n", graph.describe(&cycle)));
        }
    }
    assert!(report.is_empty(), "import cycles:\n{report}");
}

#[test]
fn the_check_finds_a_cycle_through_crate_paths() {
    let dir = tree(&[
        ("lib.rs", "mod a; mod b;"),
        ("a.rs", "use crate::b::B; pub struct A;"),
        ("b.rs", "pub struct B; fn f() -> crate::a::A { todo!() }"),
    ]);
    let graph = Graph::read(dir.path());
    let cycles = graph.cycles();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert_eq!(cycles[0].len(), 2);
}

#[test]
fn the_check_finds_a_child_using_its_parent() {
    let dir = tree(&[
        ("lib.rs", "mod p;"),
        ("p/mod.rs", "mod c; pub struct Shared; fn f() { c::g() }"),
        ("p/c.rs", "use super::Shared; pub fn g() {}"),
    ]);
    assert_eq!(Graph::read(dir.path()).cycles().len(), 1);
}

#[test]
fn a_re_export_counts_for_the_defining_file() {
    // The parent re-exports a child's type and a sibling names it through the parent: no
    // cycle, since the sibling depends on the child that defines it, not on the parent.
    let dir = tree(&[
        ("lib.rs", "mod p;"),
        (
            "p/mod.rs",
            "mod c; mod d; pub use c::Shared; pub use d::{User as U};",
        ),
        ("p/c.rs", "pub struct Shared;"),
        ("p/d.rs", "use super::Shared; pub struct User(Shared);"),
    ]);
    let graph = Graph::read(dir.path());
    assert!(graph.cycles().is_empty(), "{:?}", graph.cycles());
    assert_eq!(
        graph.edges[&vec!["p".to_string(), "d".to_string()]].len(),
        1
    );
}

#[test]
fn comments_strings_and_tests_import_nothing() {
    let dir = tree(&[
        ("lib.rs", "mod a; mod b;"),
        (
            "a.rs",
            "// crate::b::B\n/* crate::b::B */ const S: &str = \"crate::b::B\"; \
             const C: char = '\"'; fn f<'x>(_: &'x u8) {}\n\
             #[cfg(test)]\nmod tests { use crate::b::B; }",
        ),
        ("b.rs", "use crate::a::S; pub struct B;"),
    ]);
    assert!(Graph::read(dir.path()).cycles().is_empty());
}

/// Writes `files` under a fresh temporary directory.
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let path = dir.path().join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    dir
}

/// The files of one crate and the imports between them.
struct Graph {
    /// Each module's source, comments, strings and test modules removed.
    files: BTreeMap<Module, String>,
    /// For each module, the modules it imports, each with one path that imports it.
    edges: BTreeMap<Module, BTreeMap<Module, String>>,
}

impl Graph {
    fn read(root: &Path) -> Graph {
        let mut files = BTreeMap::new();
        for path in sources(root) {
            let relative = path.strip_prefix(root).unwrap().with_extension("");
            let mut module: Module = relative
                .iter()
                .map(|part| part.to_string_lossy().into_owned())
                .collect();
            if module.first().is_some_and(|first| first == "bin") {
                continue;
            }
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                module.pop();
            }
            let text = fs::read_to_string(&path).unwrap();
            files.insert(module, without_tests(&strip(&text)));
        }
        let mut graph = Graph {
            files,
            edges: BTreeMap::new(),
        };
        let mut edges = BTreeMap::new();
        for (module, text) in &graph.files {
            let mut to: BTreeMap<Module, String> = BTreeMap::new();
            for path in paths(&without_reexports(text)) {
                if let Some(target) = graph.resolve(module, &path, 0)
                    && target != *module
                {
                    to.entry(target).or_insert(path);
                }
            }
            edges.insert(module.clone(), to);
        }
        graph.edges = edges;
        graph
    }

    /// The file that defines what `path`, written in `module`, names; `None` for paths outside
    /// the crate (`std::`, other crates, local variables' fields).
    fn resolve(&self, module: &Module, path: &str, depth: usize) -> Option<Module> {
        let segments: Vec<&str> = path.split("::").collect();
        let (mut at, mut rest): (Module, &[&str]) = match segments[0] {
            "crate" => (Vec::new(), &segments[1..]),
            "super" | "self" => {
                let mut at = module.clone();
                let mut rest = &segments[..];
                while let Some(&first @ ("super" | "self")) = rest.first() {
                    if first == "super" {
                        at.pop();
                    }
                    rest = &rest[1..];
                }
                (at, rest)
            }
            child if self.files.contains_key(&joined(module, child)) => {
                (module.clone(), &segments[..])
            }
            _ => return None,
        };
        while let Some(next) = rest.first() {
            let deeper = joined(&at, next);
            if !self.files.contains_key(&deeper) {
                break;
            }
            at = deeper;
            rest = &rest[1..];
        }
        let Some(name) = rest.first() else {
            return Some(at);
        };
        let text = &self.files[&at];
        if depth < 8 && !defines(text, name) {
            for export in reexports(text) {
                let (source, alias) = match export.split_once(" as ") {
                    Some((source, alias)) => (source, alias),
                    None => (export.as_str(), export.rsplit("::").next().unwrap()),
                };
                if alias == *name
                    && let Some(found) = self.resolve(&at, source, depth + 1)
                {
                    return Some(found);
                }
            }
        }
        Some(at)
    }

    /// The strongly connected components of more than one file (Tarjan's algorithm).
    fn cycles(&self) -> Vec<Vec<Module>> {
        struct Search<'g> {
            graph: &'g Graph,
            index: BTreeMap<&'g Module, usize>,
            low: BTreeMap<&'g Module, usize>,
            stack: Vec<&'g Module>,
            on_stack: BTreeSet<&'g Module>,
            found: Vec<Vec<Module>>,
        }
        impl<'g> Search<'g> {
            fn visit(&mut self, v: &'g Module) {
                let n = self.index.len();
                self.index.insert(v, n);
                self.low.insert(v, n);
                self.stack.push(v);
                self.on_stack.insert(v);
                for w in self.graph.edges[v].keys() {
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let low = self.low[v].min(self.low[w]);
                        self.low.insert(v, low);
                    } else if self.on_stack.contains(w) {
                        let low = self.low[v].min(self.index[w]);
                        self.low.insert(v, low);
                    }
                }
                if self.low[v] == self.index[v] {
                    let mut component = Vec::new();
                    loop {
                        let w = self.stack.pop().unwrap();
                        self.on_stack.remove(w);
                        component.push(w.clone());
                        if w == v {
                            break;
                        }
                    }
                    if component.len() > 1 {
                        component.sort();
                        self.found.push(component);
                    }
                }
            }
        }
        let mut search = Search {
            graph: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            found: Vec::new(),
        };
        for module in self.files.keys() {
            if !search.index.contains_key(module) {
                search.visit(module);
            }
        }
        search.found
    }

    /// One line per file of `cycle`: the files of the cycle it imports, each with its path.
    fn describe(&self, cycle: &[Module]) -> String {
        let name = |m: &Module| {
            if m.is_empty() {
                "lib".to_string()
            } else {
                m.join("/")
            }
        };
        let mut out = format!("{} files", cycle.len());
        for v in cycle {
            let inside: Vec<String> = self.edges[v]
                .iter()
                .filter(|(w, _)| cycle.contains(w))
                .map(|(w, path)| format!("{} ({path})", name(w)))
                .collect();
            out.push_str(&format!("\n    {} -> {}", name(v), inside.join(", ")));
        }
        out
    }
}

fn joined(module: &Module, child: &str) -> Module {
    let mut out = module.clone();
    out.push(child.to_string());
    out
}

/// Every `.rs` file under `dir`, sorted.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// `text` with comments, string and character literals blanked out.
fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r'
            && matches!(next, Some('"' | '#'))
            && !chars[..i]
                .last()
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            while j < chars.len() {
                if chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && next == Some('\\') {
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `text` without its `#[cfg(test)]` items (a module or function and its braces).
fn without_tests(text: &str) -> String {
    let mut out = text.to_string();
    while let Some(at) = out.find("#[cfg(test)]") {
        let Some(open) = out[at..].find(['{', ';']).map(|o| at + o) else {
            break;
        };
        let mut end = open + 1;
        if out.as_bytes()[open] == b'{' {
            let mut depth = 0;
            for (k, b) in out.bytes().enumerate().skip(open) {
                match b {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = k + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
        }
        out.replace_range(at..end, "");
    }
    out
}

/// Whether `text` defines an item called `name` at any depth.
fn defines(text: &str, name: &str) -> bool {
    const KINDS: &[&str] = &[
        "struct", "enum", "fn", "trait", "type", "const", "static", "union", "mod",
    ];
    let words = words(text);
    words
        .windows(2)
        .any(|w| w[1] == name && KINDS.contains(&w[0]))
        || text.contains(&format!("macro_rules! {name}"))
}

/// The identifiers and keywords of `text`, in order.
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The paths of `text`'s `use` declarations (braces expanded; `a as b` kept whole) and every
/// other path of two or more segments.
fn paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for declaration in uses(text, false) {
        out.extend(declaration.into_iter().map(|p| match p.split_once(" as ") {
            Some((source, _)) => source.to_string(),
            None => p,
        }));
    }
    let chars: Vec<char> = text.chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < chars.len() {
        let starts = ident(chars[i])
            && !(i > 0 && (ident(chars[i - 1]) || chars[i - 1] == ':' || chars[i - 1] == '\''));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        let mut segments = 0;
        loop {
            while j < chars.len() && ident(chars[j]) {
                j += 1;
            }
            segments += 1;
            if chars.get(j) == Some(&':')
                && chars.get(j + 1) == Some(&':')
                && chars.get(j + 2).is_some_and(|c| ident(*c))
            {
                j += 2;
            } else {
                break;
            }
        }
        if segments > 1 {
            out.push(chars[i..j].iter().collect());
        }
        i = j.max(i + 1);
    }
    out
}

/// `text` without its `pub use` declarations.
fn without_reexports(text: &str) -> String {
    let mut out = text.to_string();
    for (at, end) in use_spans(text, true).into_iter().rev() {
        out.replace_range(at..end, "");
    }
    out
}

/// The `pub use` paths of `text`, braces expanded.
fn reexports(text: &str) -> Vec<String> {
    uses(text, true).into_iter().flatten().collect()
}

/// Each `use` declaration of `text` (only the `pub` ones where `public`), expanded to its
/// paths: `a::{b, c::{d as e}}` gives `a::b` and `a::c::d as e`.
fn uses(text: &str, public: bool) -> Vec<Vec<String>> {
    use_spans(text, public)
        .into_iter()
        .map(|(at, end)| {
            let body: String = text[at..end - 1]
                .split_whitespace()
                .skip_while(|w| *w != "use")
                .skip(1)
                .collect::<Vec<_>>()
                .join(" ");
            let body = body.replace(" ::", "::").replace(":: ", "::");
            expand("", body.trim())
        })
        .collect()
}

/// Where each `use` declaration of `text` starts (its `pub`, if any) and ends (after its `;`);
/// only the `pub` ones where `public`.
fn use_spans(text: &str, public: bool) -> Vec<(usize, usize)> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for (at, _) in text.match_indices("use") {
        let before = &text[..at];
        let after = text[at + 3..].chars().next();
        if before.chars().next_back().is_some_and(ident) || after.is_some_and(ident) {
            continue;
        }
        let trimmed = before.trim_end();
        let visibility = match trimmed.strip_suffix(')') {
            Some(restricted) => restricted
                .rsplit_once('(')
                .map_or("", |(v, _)| v.trim_end()),
            None => trimmed,
        };
        let start = if visibility.ends_with("pub")
            && !visibility[..visibility.len() - 3]
                .chars()
                .next_back()
                .is_some_and(ident)
        {
            visibility.len() - 3
        } else if public {
            continue;
        } else {
            at
        };
        let Some(end) = text[at..].find(';') else {
            continue;
        };
        out.push((start, at + end + 1));
    }
    out
}

fn expand(prefix: &str, tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![format!("{prefix}{tree}")];
    };
    let head = &tree[..open];
    let body = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (k, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&body[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    items.push(&body[start..]);
    items
        .into_iter()
        .filter(|item| !item.trim().is_empty())
        .flat_map(|item| expand(&format!("{prefix}{head}"), item))
        .map(|p| p.strip_suffix("::self").map(str::to_string).unwrap_or(p))
        .collect()
}
