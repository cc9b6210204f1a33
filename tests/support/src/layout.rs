//! A crate's sources read as text, for the tests that check the code's layout: its module
//! files, the imports between them, the import cycles, the lines of code and the functions.
//!
//! An import is a path in code (comments, strings and `#[cfg(test)]` items left out) that
//! starts with `crate::`, `super::`, `self::` or the name of one of the file's child modules,
//! in a `use` or anywhere else. It points at the deepest module file the path names; a path
//! that goes through a re-export of `lib.rs` (`crate::App`) points at `lib.rs`, the crate's
//! top. A `pub use` is a re-export, part of a module's public face rather than an import of its
//! code: it is no edge itself, and a path through it points at the file it re-exports.
//!
//! # Examples
//!
//! ```
//! use tegu_test_support::layout::{File, cycles};
//!
//! let files = [
//!     File::parse("lib", "mod a; mod b;"),
//!     File::parse("a", "use crate::b::B; pub struct A;"),
//!     File::parse("b", "pub struct B(crate::a::A);"),
//! ];
//! let names: Vec<Vec<&str>> =
//!     cycles(&files).iter().map(|c| c.iter().map(|&i| files[i].module.as_str()).collect()).collect();
//! assert_eq!(names, [["a", "b"]]);
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One source file: its module path (`scope::end`; `lib` for the crate root) and its code with
/// comments, strings and test items blanked out (newlines kept).
#[derive(Debug, Clone)]
pub struct File {
    /// The module path, `lib` for the crate's root.
    pub module: String,
    /// The path shown in messages: the crate's folder name, then the file's path under it.
    pub rel: String,
    /// The code, comments, string contents and `#[cfg(test)]` items blanked out.
    pub code: String,
    /// The names of its child modules (`mod x;`, `mod x { .. }`).
    pub children: BTreeSet<String>,
    /// What its `pub use`s name: the name as imported, and the path it comes from.
    pub reexports: BTreeMap<String, String>,
}

impl File {
    /// A file of module `module` (`lib`, `a`, `a::b`) with source `text`, its `rel` being the
    /// module's path with `.rs`.
    pub fn parse(module: &str, text: &str) -> File {
        let code = strip(text);
        let children = child_modules(&code);
        let reexports = reexports(&code, &children);
        File { module: module.to_owned(), rel: format!("{}.rs", module.replace("::", "/")), code, children, reexports }
    }

    /// Its lines of code: comments, blank lines and `#[cfg(test)]` items not counted.
    pub fn lines_of_code(&self) -> usize {
        lines_of_code(&self.code)
    }
}

/// The lines of `code` (as [`strip`] leaves it) that are not blank.
pub fn lines_of_code(code: &str) -> usize {
    code.lines().filter(|l| !l.trim().is_empty()).count()
}

/// A function with a body, as [`functions`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Its name.
    pub name: String,
    /// The line its `fn` is on, from 1.
    pub line: usize,
    /// Its lines of code, from the `fn` line to the closing brace (blank lines not counted).
    pub lines: usize,
}

/// The functions of `code` (as [`strip`] leaves it) that have a body, nested ones included,
/// each with its lines of code.
pub fn functions(code: &str) -> Vec<Function> {
    let bytes = code.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(found) = code[at..].find("fn") {
        let start = at + found;
        at = start + 2;
        let before_ok = start == 0 || !ident(bytes[start - 1]);
        let after_ok = bytes.get(start + 2).is_some_and(|b| b.is_ascii_whitespace());
        if !before_ok || !after_ok {
            continue;
        }
        let name: String =
            code[start + 2..].trim_start().chars().take_while(|&c| c.is_alphanumeric() || c == '_').collect();
        if name.is_empty() {
            continue;
        }
        // The body opens at the first `{` outside the signature's parentheses and brackets; a
        // `;` first is a declaration without one.
        let mut depth = 0i32;
        let mut open = None;
        for (k, &b) in bytes.iter().enumerate().skip(start) {
            match b {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => break,
                b'{' if depth == 0 => {
                    open = Some(k);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let mut braces = 0i32;
        let mut close = bytes.len();
        for (k, &b) in bytes.iter().enumerate().skip(open) {
            match b {
                b'{' => braces += 1,
                b'}' => {
                    braces -= 1;
                    if braces == 0 {
                        close = k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        let line_start = code[..start].rfind('\n').map_or(0, |n| n + 1);
        out.push(Function {
            name,
            line: code[..start].matches('\n').count() + 1,
            lines: lines_of_code(&code[line_start..close]),
        });
    }
    out
}

/// Whether `module` is `prefix` or one of its sub-modules.
pub fn in_module(module: &str, prefix: &str) -> bool {
    module == prefix || module.strip_prefix(prefix).is_some_and(|rest| rest.starts_with("::"))
}

/// The files of the crate at `root` (its `src/`), sorted by path, their `rel` starting with
/// `name`.
pub fn read_crate(root: &Path, name: &str) -> Vec<File> {
    let src = root.join("src");
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
            File { module, rel: format!("{name}/src/{rel}"), code, children, reexports }
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

/// Every import between `files`: (from, to, the path as written), a file's imports of itself
/// left out.
pub fn edges(files: &[File]) -> Vec<(usize, usize, String)> {
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
pub fn reexports(code: &str, children: &BTreeSet<String>) -> BTreeMap<String, String> {
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
pub fn cycles(files: &[File]) -> Vec<Vec<usize>> {
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
pub fn child_modules(code: &str) -> BTreeSet<String> {
    let tokens = tokens(code);
    tokens.windows(2).filter(|w| w[0] == "mod").map(|w| w[1].to_owned()).filter(|n| is_ident(n)).collect()
}

/// Every path in `code` that starts with `crate`, `super`, `self` or a child module, `use`
/// trees expanded.
pub fn paths(code: &str, children: &BTreeSet<String>) -> Vec<String> {
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
pub fn strip(code: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let want = [
            "crate::a::b::C",
            "crate::a::d",
            "super::e",
            "crate::g::h",
            "child::x",
            "self::child::y",
            "crate::after::raw",
        ];
        assert_eq!(paths, want.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>());
    }

    /// A check of the resolver: a path through a module's `pub use` points at the file re-exported,
    /// one through `lib.rs`'s at `lib.rs`, and the `pub use` line itself is no import.
    #[test]
    fn a_reexport_is_followed_except_the_roots() {
        let file = File::parse;
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

    /// A check of the function reader: bodies measured, declarations without one left out.
    #[test]
    fn functions_are_measured_from_fn_to_their_closing_brace() {
        let code = strip(
            "trait T {\n    fn declared(&self);\n}\nfn short() {}\n\nfn long<T: Into<[u8; 2]>>(x: T)\n    -> u8\n{\n    // a comment\n    let s = \"}\";\n\n    x.into()[0]\n}\n",
        );
        let found: Vec<(String, usize, usize)> =
            functions(&code).into_iter().map(|f| (f.name, f.line, f.lines)).collect();
        assert_eq!(found, [("short".to_owned(), 4, 1), ("long".to_owned(), 6, 6)]);
    }
}
