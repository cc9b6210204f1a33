//! The README and the guide read as Markdown (on a forge, in an editor) as well as doctests.
//!
//! - No Rust code block of them has a line that rustdoc hides (`# use ...`, `# Ok(()) }`, a bare
//!   `#`, a `##` escape): a Markdown reader sees such a line as written, and code pasted from it
//!   does not compile. The README, `docs/guide/*.md` and every crate's README are read.
//! - The README's tour of the chapters and the guide's index (`docs/guide/README.md`) list the
//!   chapters in the same order, each once.

use std::fs;
use std::path::{Path, PathBuf};

/// The repository's root: this crate is `tests/`.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is in the repository").to_path_buf()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The Markdown files checked: the README, the guide's chapters and the README of every crate
/// (a folder with a `Cargo.toml`), wherever it is in the repository.
fn markdown_files() -> Vec<PathBuf> {
    let root = root();
    let mut files = vec![root.join("README.md")];
    let mut guide: Vec<PathBuf> = fs::read_dir(root.join("docs/guide"))
        .expect("docs/guide exists")
        .map(|entry| entry.expect("a readable entry of docs/guide").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    guide.sort();
    files.extend(guide);
    crate_readmes(&root, &root, &mut files);
    files
}

/// Adds the `README.md` of every folder under `dir` that holds a `Cargo.toml`, the root's
/// excepted (already listed), and skipping build outputs and hidden folders.
fn crate_readmes(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let readme = dir.join("README.md");
    if dir != root && dir.join("Cargo.toml").is_file() && readme.is_file() {
        out.push(readme);
    }
    let mut children: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.is_dir())
        .filter(|path| {
            let name = path.file_name().and_then(|name| name.to_str()).unwrap_or("");
            !name.starts_with('.') && name != "target" && name != "node_modules"
        })
        .collect();
    children.sort();
    for child in children {
        crate_readmes(root, &child, out);
    }
}

/// Whether a fence's info string (what follows the opening backticks) makes a Rust code block
/// for rustdoc: none, `rust`, `rust,...`, or only rustdoc's own attributes (`no_run`, ...).
fn is_rust(info: &str) -> bool {
    const RUSTDOC: [&str; 9] = [
        "rust",
        "ignore",
        "no_run",
        "should_panic",
        "compile_fail",
        "standalone_crate",
        "test_harness",
        "edition2021",
        "edition2024",
    ];
    let tokens: Vec<&str> = info.split([',', ' ', '\t']).map(str::trim).filter(|t| !t.is_empty()).collect();
    tokens.is_empty()
        || tokens[0] == "rust"
        || tokens.iter().all(|t| RUSTDOC.contains(t) || t.starts_with("edition") || t.starts_with("ignore-"))
}

/// Whether rustdoc hides `line` of a Rust code block (or shows it changed, for `##`): `#`
/// alone, `#` then a space or a tab, or `##`. `#[derive(..)]` and `#![..]` are code.
fn is_hidden(line: &str) -> bool {
    let line = line.trim_start();
    line == "#" || line.starts_with("# ") || line.starts_with("#\t") || line.starts_with("##")
}

/// The lines (1-based numbers, text) of `markdown`'s Rust code blocks that rustdoc hides.
fn hidden_lines(markdown: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    // The open fence: its character, its length, whether it is Rust.
    let mut open: Option<(char, usize, bool)> = None;
    for (index, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        let fence = trimmed.chars().next().filter(|c| *c == '`' || *c == '~').map(|c| {
            let length = trimmed.chars().take_while(|x| *x == c).count();
            (c, length, &trimmed[length..])
        });
        match (open, fence) {
            (None, Some((c, length, info))) if length >= 3 => open = Some((c, length, is_rust(info))),
            (Some((c, length, _)), Some((d, closing, rest)))
                if d == c && closing >= length && rest.trim().is_empty() =>
            {
                open = None;
            }
            (Some((_, _, true)), _) if is_hidden(line) => found.push((index + 1, line.to_owned())),
            _ => {}
        }
    }
    found
}

#[test]
fn no_rust_code_block_has_a_hidden_line() {
    let root = root();
    let mut found = Vec::new();
    for file in markdown_files() {
        let shown = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
        for (line, text) in hidden_lines(&read(&file)) {
            found.push(format!("{shown}:{line}: {text}"));
        }
    }
    assert!(
        found.is_empty(),
        "a Rust code block shows rustdoc's hidden lines as written to a Markdown reader; write them as \
         code (`# foo` -> `foo`, `#` -> an empty line, `##` -> `#`), with a visible `fn main`:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scanner_sees_hidden_lines_in_rust_blocks_only() {
    let markdown = "\
text
# a heading, outside any block
```rust,standalone_crate
#![allow(unused)]
#[derive(Debug)]
struct A;
# fn main() {}
```
```
    # use std::fmt;
#
##[derive(Debug)]
```
```toml
# a TOML comment
```
```sh
# a shell comment
```
````text
# text
```
# still text
````
~~~no_run
# let x = 1;
~~~
";
    let found: Vec<usize> = hidden_lines(markdown).into_iter().map(|(line, _)| line).collect();
    assert_eq!(found, [7, 10, 11, 12, 26]);
}

/// The chapters (`name.md`) that `text` links to, in order.
fn chapter_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut rest = text;
    while let Some(end) = rest.find(".md)") {
        let start = rest[..end].rfind(['(', '/']).map_or(0, |i| i + 1);
        links.push(format!("{}.md", &rest[start..end]));
        rest = &rest[end + 4..];
    }
    links
}

#[test]
fn the_readme_tour_and_the_guide_index_list_the_chapters_in_one_order() {
    let root = root();
    let readme = read(&root.join("README.md"));
    // The tour: the rows of the table under `| chapter |`.
    let tour: Vec<String> = readme
        .lines()
        .skip_while(|line| !line.starts_with("| chapter |"))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .flat_map(|row| chapter_links(row.split('|').nth(1).unwrap_or("")))
        .collect();
    // The index: the numbered list of docs/guide/README.md.
    let index_md = read(&root.join("docs/guide/README.md"));
    let index: Vec<String> = index_md
        .lines()
        .skip_while(|line| !line.starts_with("1. "))
        .take_while(|line| !line.trim().is_empty())
        .flat_map(chapter_links)
        .collect();

    let mut chapters: Vec<String> = fs::read_dir(root.join("docs/guide"))
        .expect("docs/guide exists")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".md") && name != "README.md")
        .collect();
    chapters.sort();
    for (name, list) in [("the README's tour", &tour), ("docs/guide/README.md's index", &index)] {
        let mut sorted = list.clone();
        sorted.sort();
        assert_eq!(sorted, chapters, "{name} lists every chapter of docs/guide once: {list:?}");
    }
    assert_eq!(tour, index, "the README's tour and the guide's index order the chapters alike");
}
