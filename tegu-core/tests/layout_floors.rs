//! The floors of tegu-core (`docs/ARCHITECTURE.md`, "tegu-core's floors", whose table this test
//! checks against [`FLOORS`]): every file of `src/` sits on a floor and imports only the floors
//! below it, the kernel (floor 2) being the one import cycle allowed, and the features (floor 3)
//! never importing each other.
//!
//! Read from the sources as text, in the spirit of `tegu-macros/tests/ui_coverage.rs`: an import
//! is a path in code (comments, strings and `#[cfg(test)]` items left out) that starts with
//! `crate::`, `super::`, `self::` or the name of one of the file's child modules, in a `use` or
//! anywhere else. It points at the deepest module file the path names; a path that goes through
//! a re-export of `lib.rs` (`crate::App`) points at `lib.rs`, the top floor: below it, name the
//! file you import. A `pub use` is a re-export, part of a module's public face rather than an
//! import of its code (the public `config` module shows `ConfigRef` from the `reload` feature):
//! it is no edge itself, and a path through it points at the file it re-exports.
//!
//! Run with `--nocapture` to see each floor, the import cycles and the longest files, and with
//! `LAYERING_IMPORTS=1` too to see every import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floor of each module (its files and sub-modules), by longest prefix.
const FLOORS: &[(&str, Floor)] = &[
    // 0: the vocabulary every floor speaks.
    ("error", Floor::Vocabulary),
    ("erased", Floor::Vocabulary),
    ("isolate", Floor::Vocabulary),
    ("join", Floor::Vocabulary),
    ("local", Floor::Vocabulary),
    ("maps", Floor::Vocabulary),
    ("pending", Floor::Vocabulary),
    ("telemetry", Floor::Vocabulary),
    // 1: what a factory reads besides its dependencies.
    ("config", Floor::Leaves),
    ("keyed", Floor::Leaves),
    ("lineage", Floor::Leaves),
    // 2: the kernel.
    ("proto", Floor::Kernel),
    ("graph", Floor::Kernel),
    ("resolver", Floor::Kernel),
    ("scope", Floor::Kernel),
    ("context_ref", Floor::Kernel),
    ("provider", Floor::Kernel),
    ("runtime", Floor::Kernel),
    // 3: the features, each reaching the kernel through its handle.
    ("advice", Floor::Feature),
    ("events", Floor::Feature),
    ("schedule", Floor::Feature),
    ("export", Floor::Feature),
    ("hosted", Floor::Feature),
    ("health", Floor::Feature),
    ("startup", Floor::Feature),
    ("reload", Floor::Feature),
    ("tenant", Floor::Feature),
    // 4: the composition root.
    ("app", Floor::Root),
    ("private", Floor::Root),
    ("lib", Floor::Root),
];

/// The modules the largest import cycle must not contain (nor their sub-modules).
const NEVER_IN_THE_CYCLE: &[&str] = &["app", "advice", "config", "error", "export", "keyed"];
/// The most files the largest import cycle may hold.
const LARGEST_CYCLE: usize = 11;
/// The most lines of code a file may hold: doc comments, comments, blank lines and
/// `#[cfg(test)]` items not counted.
const MOST_LINES: usize = 600;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Floor {
    Vocabulary = 0,
    Leaves = 1,
    Kernel = 2,
    Feature = 3,
    Root = 4,
}

/// One source file: its module path (`scope::end`; `lib` for the crate root) and its code with
/// comments, strings and test items blanked out (newlines kept).
struct File {
    module: String,
    rel: String,
    code: String,
    children: BTreeSet<String>,
    /// What the file's `pub use`s name: the name as imported, and the path it comes from.
    reexports: BTreeMap<String, String>,
}

#[test]
fn no_file_imports_a_floor_above_its_own() {
    let files = read_crate();
    let mut errors = Vec::new();
    for (from, to, path) in edges(&files) {
        let (f, t) = (floor_of(&files[from].module), floor_of(&files[to].module));
        let (Some((f, f_feature)), Some((t, t_feature))) = (f, t) else { continue };
        if t > f {
            errors.push(format!(
                "{} (floor {}, {f:?}) imports `{path}` from {} (floor {}, {t:?}): a floor imports only the floors below it",
                files[from].rel, f as u8, files[to].rel, t as u8
            ));
        } else if f == Floor::Feature && t == Floor::Feature && f_feature != t_feature {
            errors.push(format!(
                "{} (feature `{f_feature}`) imports `{path}` from {} (feature `{t_feature}`): features never import each other; meet in the kernel's handle instead",
                files[from].rel, files[to].rel
            ));
        }
    }
    assert!(errors.is_empty(), "upward imports in tegu-core:\n{}", errors.join("\n"));
}

#[test]
fn every_file_has_a_floor() {
    let files = read_crate();
    let missing: Vec<&str> = files.iter().filter(|f| floor_of(&f.module).is_none()).map(|f| f.rel.as_str()).collect();
    assert!(
        missing.is_empty(),
        "these files of tegu-core/src have no floor in tests/layout_floors.rs's FLOORS: {missing:?}"
    );
}

/// The floor table of `docs/ARCHITECTURE.md` says what [`FLOORS`] says: one row per module,
/// on the same floor.
#[test]
fn the_architecture_map_shows_these_floors() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/ARCHITECTURE.md");
    let map = std::fs::read_to_string(&path).expect("docs/ARCHITECTURE.md");
    let errors = architecture_disagreements(&map);
    assert!(errors.is_empty(), "docs/ARCHITECTURE.md's floor table and FLOORS disagree:\n{}", errors.join("\n"));
}

/// The check's own check: a map that moves a module, leaves one out or names one too many is
/// caught.
#[test]
fn the_map_check_sees_a_wrong_table() {
    let right: String = FLOORS.iter().map(|(m, f)| format!("| {} {f:?} | `{m}` | a job |\n", *f as u8)).collect();
    let table = |rows: &str| {
        format!(
            "# Map\n\n## tegu-core's floors\n\n| Floor | Module | Its job |\n|---|---|---|\n{rows}\n## Next\n| 9 x | `lib` | not this table |\n"
        )
    };
    assert_eq!(architecture_disagreements(&table(&right)), Vec::<String>::new());
    let moved = right.replace("| 2 Kernel | `graph` |", "| 3 Kernel | `graph` |");
    assert_eq!(architecture_disagreements(&table(&moved)), ["`graph` is on floor 3 in the map, 2 in FLOORS"]);
    let missing = right.replace("| 1 Leaves | `keyed` | a job |\n", "");
    assert_eq!(architecture_disagreements(&table(&missing)), ["`keyed` (floor 1) is not in the map"]);
    let extra = format!("{right}| 3 feature | `gone` | a job |\n");
    assert_eq!(architecture_disagreements(&table(&extra)), ["`gone` is in the map, not in FLOORS"]);
}

/// How the table of the section `## tegu-core's floors` differs from [`FLOORS`].
fn architecture_disagreements(map: &str) -> Vec<String> {
    let section = map.split("\n## ").find(|s| s.starts_with("tegu-core's floors")).unwrap_or("");
    let mut rows = BTreeMap::new();
    let mut errors = Vec::new();
    for line in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let (Some(floor), Some(module)) = (cells.first(), cells.get(1)) else { continue };
        let Some(module) = module.strip_prefix('`').and_then(|m| m.strip_suffix('`')) else { continue };
        let Some(floor) = floor.split_whitespace().next().and_then(|n| n.parse::<u8>().ok()) else { continue };
        if rows.insert(module.to_owned(), floor).is_some() {
            errors.push(format!("`{module}` has two rows in the map"));
        }
    }
    for (module, floor) in FLOORS {
        match rows.remove(*module) {
            Some(f) if f != *floor as u8 => {
                errors.push(format!("`{module}` is on floor {f} in the map, {} in FLOORS", *floor as u8))
            }
            Some(_) => {}
            None => errors.push(format!("`{module}` (floor {}) is not in the map", *floor as u8)),
        }
    }
    errors.extend(rows.keys().map(|m| format!("`{m}` is in the map, not in FLOORS")));
    errors
}

#[test]
fn the_largest_import_cycle_is_the_kernel_only() {
    let files = read_crate();
    let mut cycles = cycles(&files);
    cycles.sort_by_key(|c| std::cmp::Reverse(c.len()));
    for cycle in &cycles {
        let names: Vec<&str> = cycle.iter().map(|&i| files[i].rel.as_str()).collect();
        println!("import cycle of {} files: {}", names.len(), names.join(", "));
    }
    let largest = cycles.first().cloned().unwrap_or_default();
    let names: Vec<&str> = largest.iter().map(|&i| files[i].rel.as_str()).collect();
    assert!(
        largest.len() <= LARGEST_CYCLE,
        "the largest import cycle has {} files (at most {LARGEST_CYCLE}): {names:?}",
        largest.len()
    );
    let banned: Vec<&str> = largest
        .iter()
        .filter(|&&i| NEVER_IN_THE_CYCLE.iter().any(|m| in_module(&files[i].module, m)))
        .map(|&i| files[i].rel.as_str())
        .collect();
    assert!(banned.is_empty(), "the largest import cycle holds {banned:?}, which must stay out of it: {names:?}");
}

#[test]
fn no_file_is_longer_than_the_limit() {
    let files = read_crate();
    let mut lines: Vec<(usize, &str)> =
        files.iter().map(|f| (f.code.lines().filter(|l| !l.trim().is_empty()).count(), f.rel.as_str())).collect();
    lines.sort_by(|a, b| b.cmp(a));
    for (n, rel) in lines.iter().take(8) {
        println!("{n:>5} lines of code: {rel}");
    }
    let long: Vec<String> =
        lines.iter().filter(|(n, _)| *n > MOST_LINES).map(|(n, rel)| format!("{rel}: {n}")).collect();
    assert!(long.is_empty(), "files over {MOST_LINES} lines of code (split them by type): {long:?}");
}

/// The floors, file by file, for `--nocapture`.
#[test]
fn print_the_floors() {
    let files = read_crate();
    let mut by_floor: BTreeMap<Floor, Vec<&str>> = BTreeMap::new();
    for f in &files {
        if let Some((floor, _)) = floor_of(&f.module) {
            by_floor.entry(floor).or_default().push(&f.rel);
        }
    }
    for (floor, rels) in by_floor.iter().rev() {
        println!("floor {} ({floor:?}): {}", *floor as u8, rels.join(", "));
    }
    // Every import, with `LAYERING_IMPORTS=1`: what ties a cycle together.
    if std::env::var_os("LAYERING_IMPORTS").is_some() {
        for (from, to, path) in edges(&files) {
            println!("{} -> {}: {path}", files[from].rel, files[to].rel);
        }
    }
}

/// A check of the reader itself: it must see the imports it exists to catch.
#[test]
fn the_reader_sees_every_kind_of_path() {
    let code = strip(
        r##"
        use crate::a::{b::C, d};   // crate::commented::Out
        use super::e;
        fn f() { let s = "crate::in_a::string"; crate::g::h(); child::x(); self::child::y(); }
        /* crate::block::comment */
        #[cfg(test)]
        mod tests { use crate::test_only::X; }
        fn g<'a>(c: char) -> &'a str { let _ = 'x'; r#"crate::raw"#; crate::after::raw() }
        "##,
    );
    let children = BTreeSet::from(["child".to_owned()]);
    let paths: BTreeSet<String> = paths(&code, &children).into_iter().collect();
    let want =
        ["crate::a::b::C", "crate::a::d", "super::e", "crate::g::h", "child::x", "self::child::y", "crate::after::raw"];
    assert_eq!(paths, want.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>());
}

/// A check of the resolver: a path through a module's `pub use` points at the file re-exported,
/// one through `lib.rs`'s at `lib.rs`, and the `pub use` line itself is no import.
#[test]
fn a_reexport_is_followed_except_the_roots() {
    let file = |module: &str, code: &str| {
        let code = strip(code);
        let children = child_modules(&code);
        let reexports = reexports(&code, &children);
        File { module: module.to_owned(), rel: format!("{module}.rs"), code, children, reexports }
    };
    let files = [
        file("lib", "mod app; mod config; mod reload; mod scope; pub use app::App;"),
        file("app", "pub struct App;"),
        file("config", "pub use crate::reload::ConfigRef;"),
        file("reload", "pub struct ConfigRef;"),
        file("scope", "fn f() { let _ = crate::config::ConfigRef; let _ = crate::App; }"),
    ];
    let named: Vec<(&str, &str, String)> =
        edges(&files).into_iter().map(|(f, t, p)| (files[f].rel.as_str(), files[t].rel.as_str(), p)).collect();
    assert_eq!(
        named,
        [
            ("scope.rs", "reload.rs", "crate::config::ConfigRef".to_owned()),
            ("scope.rs", "lib.rs", "crate::App".to_owned())
        ]
    );
}

fn in_module(module: &str, prefix: &str) -> bool {
    module == prefix || module.strip_prefix(prefix).is_some_and(|rest| rest.starts_with("::"))
}

/// The floor of `module`, and the top-level module that names its room.
fn floor_of(module: &str) -> Option<(Floor, &'static str)> {
    FLOORS
        .iter()
        .filter(|(prefix, _)| in_module(module, prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(prefix, floor)| (*floor, *prefix))
}

fn read_crate() -> Vec<File> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    walk(&src, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let rel = path.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
            let module = match rel.as_str() {
                "lib.rs" => "lib".to_owned(),
                r => r.trim_end_matches(".rs").trim_end_matches("/mod").replace('/', "::"),
            };
            let code = strip(&std::fs::read_to_string(&path).unwrap());
            let children = child_modules(&code);
            let reexports = reexports(&code, &children);
            File { module, rel: format!("tegu-core/src/{rel}"), code, children, reexports }
        })
        .collect()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every import: (from, to, the path as written).
fn edges(files: &[File]) -> Vec<(usize, usize, String)> {
    let by_module: BTreeMap<&str, usize> = files.iter().enumerate().map(|(i, f)| (f.module.as_str(), i)).collect();
    let mut out = Vec::new();
    for (i, file) in files.iter().enumerate() {
        for path in paths(&file.code, &file.children).into_iter().filter(|p| !reexported(file, p)) {
            if let Some(t) = resolve(files, &by_module, i, &path).filter(|&t| t != i) {
                out.push((i, t, path));
            }
        }
    }
    out
}

/// The file that `path`, written in file `from`, points at: the deepest module file it names,
/// or, where its next segment is a `pub use` of that file, the file the re-export names. A
/// re-export of `lib.rs` is not followed: a path through one points at `lib.rs`, the top floor.
fn resolve(files: &[File], by_module: &BTreeMap<&str, usize>, from: usize, path: &str) -> Option<usize> {
    let here = &files[from].module;
    let mut module: Vec<&str> = if here == "lib" { vec![] } else { here.split("::").collect() };
    let mut segs: Vec<&str> = path.split("::").collect();
    if segs.first() == Some(&"crate") {
        module.clear();
        segs.remove(0);
    }
    while let Some(&s) = segs.first() {
        match s {
            "super" => drop(module.pop()),
            "self" => {}
            _ => break,
        }
        segs.remove(0);
    }
    let mut target = None;
    for n in 0..=segs.len() {
        let name: Vec<&str> = module.iter().copied().chain(segs[..n].iter().copied()).collect();
        let name = if name.is_empty() { "lib".to_owned() } else { name.join("::") };
        if let Some(&t) = by_module.get(name.as_str()) {
            target = Some(t);
            let through = segs.get(n).and_then(|s| files[t].reexports.get(*s)).filter(|_| files[t].module != "lib");
            if let Some(source) = through.and_then(|source| resolve(files, by_module, t, source)) {
                return Some(source);
            }
        }
    }
    target
}

/// Whether `path` is one of `file`'s `pub use` re-exports.
fn reexported(file: &File, path: &str) -> bool {
    file.reexports.values().any(|source| source == path)
}

/// The `pub use` items of `code`: each imported name and the path it comes from.
fn reexports(code: &str, children: &BTreeSet<String>) -> BTreeMap<String, String> {
    let tokens = tokens(code);
    let mut out = BTreeMap::new();
    for i in 1..tokens.len() {
        if tokens[i] == "use" && tokens[i - 1] == "pub" {
            let end = tokens[i..].iter().position(|t| *t == ";").map_or(tokens.len(), |p| i + p);
            let mut paths = Vec::new();
            use_tree(&tokens[i + 1..end], String::new(), &mut paths);
            for path in paths {
                let first = path.split("::").next().unwrap_or("");
                if matches!(first, "crate" | "super" | "self") || children.contains(first) {
                    let name = path.rsplit("::").next().unwrap_or("").to_owned();
                    out.insert(name, path);
                }
            }
        }
    }
    out
}

/// The import cycles (strongly connected components of more than one file), by Tarjan.
fn cycles(files: &[File]) -> Vec<Vec<usize>> {
    let mut next: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); files.len()];
    for (from, to, _) in edges(files) {
        next[from].insert(to);
    }
    struct Tarjan<'a> {
        next: &'a [BTreeSet<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on_stack: Vec<bool>,
        count: usize,
        out: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.count);
            self.low[v] = self.count;
            self.count += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            for &w in self.next[v].iter() {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(iw) if self.on_stack[w] => self.low[v] = self.low[v].min(iw),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.out.push(component);
                }
            }
        }
    }
    let n = files.len();
    let mut t = Tarjan {
        next: &next,
        index: vec![None; n],
        low: vec![0; n],
        stack: vec![],
        on_stack: vec![false; n],
        count: 0,
        out: vec![],
    };
    for v in 0..n {
        if t.index[v].is_none() {
            t.visit(v);
        }
    }
    t.out
}

/// The names of `mod x;` and `mod x {` items.
fn child_modules(code: &str) -> BTreeSet<String> {
    let tokens = tokens(code);
    tokens.windows(2).filter(|w| w[0] == "mod").map(|w| w[1].to_owned()).filter(|n| is_ident(n)).collect()
}

/// Every path in `code` that starts with `crate`, `super`, `self` or a child module, `use`
/// trees expanded.
fn paths(code: &str, children: &BTreeSet<String>) -> Vec<String> {
    let tokens = tokens(code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i] == "use" {
            let end = tokens[i..].iter().position(|t| *t == ";").map_or(tokens.len(), |p| i + p);
            use_tree(&tokens[i + 1..end], String::new(), &mut out);
            i = end + 1;
            continue;
        }
        let starts = matches!(tokens[i], "crate" | "super" | "self") || children.contains(tokens[i]);
        let after_path = i > 0 && (tokens[i - 1] == "::" || tokens[i - 1] == "mod");
        if starts && !after_path && tokens.get(i + 1) == Some(&"::") {
            let mut path = tokens[i].to_owned();
            let mut j = i + 1;
            while tokens.get(j) == Some(&"::") && tokens.get(j + 1).is_some_and(|t| is_ident(t)) {
                path.push_str("::");
                path.push_str(tokens[j + 1]);
                j += 2;
            }
            out.push(path);
            i = j;
            continue;
        }
        i += 1;
    }
    out.retain(|p| {
        let first = p.split("::").next().unwrap_or("");
        matches!(first, "crate" | "super" | "self") || children.contains(first)
    });
    out
}

/// Expands a `use` tree (`a::{b::C, d}`) into its paths.
fn use_tree(tokens: &[&str], prefix: String, out: &mut Vec<String>) {
    let mut path = prefix.clone();
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i] {
            "::" => path.push_str("::"),
            "{" => {
                let mut depth = 0;
                let mut start = i + 1;
                for j in i..tokens.len() {
                    match tokens[j] {
                        "{" => depth += 1,
                        "}" => {
                            depth -= 1;
                            if depth == 0 {
                                use_tree(&tokens[start..j], path.clone(), out);
                                return;
                            }
                        }
                        "," if depth == 1 => {
                            use_tree(&tokens[start..j], path.clone(), out);
                            start = j + 1;
                        }
                        _ => {}
                    }
                }
                return;
            }
            "as" | "*" => break,
            t if is_ident(t) => path.push_str(t),
            _ => {}
        }
        i += 1;
    }
    // `a::{self, b}`: the `self` is `a` itself.
    let path = path.trim_end_matches("::").trim_end_matches("::self").trim_start_matches("::");
    if !path.is_empty() {
        out.push(path.to_owned());
    }
}

fn is_ident(t: &str) -> bool {
    t.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && t.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// Identifiers, `::` and single punctuation characters.
fn tokens(code: &str) -> Vec<&str> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push(&code[start..i]);
        } else if c == b':' && bytes.get(i + 1) == Some(&b':') {
            out.push("::");
            i += 2;
        } else if c.is_ascii_whitespace() || !c.is_ascii() {
            i += 1;
        } else {
            out.push(&code[i..i + 1]);
            i += 1;
        }
    }
    out
}

/// `code` with comments, the contents of string and char literals, and `#[cfg(test)]` items
/// blanked out; newlines kept, and a line that held a string keeps a mark.
fn strip(code: &str) -> String {
    let chars: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    let prev_ident = |out: &String| out.chars().last().is_some_and(|c| c.is_alphanumeric() || c == '_');
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
                    if chars[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if c == 'r' && !prev_ident(&out) && matches!(next, Some('"') | Some('#')) && {
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            chars.get(i + 1 + hashes) == Some(&'"')
        } {
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            i += 2 + hashes;
            out.push_str("\"\"");
            while i < chars.len() && !chars[i..].iter().take(close.len()).copied().eq(close.chars()) {
                out.push(if chars[i] == '\n' { '\n' } else { '.' });
                i += 1;
            }
            i += close.len();
        } else if c == '"' {
            out.push_str("\"\"");
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                out.push(if chars.get(i) == Some(&'\n') { '\n' } else { '.' });
                i += 1;
            }
            i += 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A char literal (a lifetime has no closing quote two characters on).
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    drop_test_items(&out)
}

/// `code` without the items marked `#[cfg(test)]` (newlines kept).
fn drop_test_items(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        // The item ends at its first `;` outside braces, or at the brace that closes its body.
        let mut depth = 0;
        let mut end = item.len();
        for (k, ch) in item.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                _ => {}
            }
        }
        out.extend(item[..end].chars().filter(|&c| c == '\n'));
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}
