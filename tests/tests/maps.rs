//! The maps of the code say what the files are: every source file of a library crate opens with
//! a `//!` line that says what it holds (what a folder's `mod` lines are read with, in place of
//! a prose list of its files that drifts), and every `.rs` path the maps name exists:
//! `docs/ARCHITECTURE.md`'s flows, `CONTRIBUTING.md`, and the module docs of the sources.

use std::path::{Path, PathBuf};

/// The library crates, by folder.
const LIBRARIES: &[&str] =
    &["tegu-core", "tegu-macros", "tegu-http", "tegu-tx", "tegu-sqlx", "tegu-outbox", "tegu-nats", "tegu-otel"];

/// The documents that name files.
const MAPS: &[&str] = &["docs/ARCHITECTURE.md", "CONTRIBUTING.md"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every file under `dir` with extension `ext`, as paths relative to `root` with `/`.
fn files(root: &Path, dir: &Path, ext: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if path.is_dir() {
            if !matches!(&*name, "target" | ".git" | "node_modules") && !name.starts_with('.') {
                files(root, &path, ext, out);
            }
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The `.rs` paths `text` names: words (in backquotes or not) that end in `.rs` and hold a `/`
/// or are a file name alone (`mod.rs`, `check.rs`).
fn named_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '/' | '.' | '*' | '<' | '>'))) {
        let word = word.trim_end_matches('.');
        if let Some(stem) = word.strip_suffix(".rs")
            && !stem.is_empty()
            && !stem.contains(['*', '<', '>'])
            && !stem.ends_with('/')
        {
            out.push(word.to_owned());
        }
    }
    out
}

/// Whether a path a map names is a file: a path from the workspace's root, or the end of one
/// (`scope/carry.rs`, `mod.rs`), under `within` when the map is a crate's own.
fn exists(named: &str, all: &[String], within: &str) -> bool {
    all.iter().filter(|f| f.starts_with(within)).any(|f| f == named || f.ends_with(&format!("/{named}")))
}

/// The paths `text` names that are no file.
fn missing(text: &str, all: &[String], within: &str) -> Vec<String> {
    let mut out: Vec<String> = named_paths(text).into_iter().filter(|p| !exists(p, all, within)).collect();
    out.dedup();
    out
}

fn rust_files() -> Vec<String> {
    let root = workspace();
    let mut all = Vec::new();
    files(&root, &root, "rs", &mut all);
    all
}

#[test]
fn every_source_file_says_what_it_holds() {
    let root = workspace();
    let mut bare = Vec::new();
    for name in LIBRARIES {
        let mut sources = Vec::new();
        files(&root, &root.join(name).join("src"), "rs", &mut sources);
        for file in sources {
            let text = std::fs::read_to_string(root.join(&file)).unwrap();
            if !text.trim_start().starts_with("//!") {
                bare.push(file);
            }
        }
    }
    assert!(bare.is_empty(), "source files that do not open with a `//!` line saying what they hold: {bare:?}");
}

#[test]
fn every_file_the_maps_name_exists() {
    let root = workspace();
    let all = rust_files();
    let mut errors = Vec::new();
    for map in MAPS {
        let text = std::fs::read_to_string(root.join(map)).unwrap();
        for path in missing(&text, &all, "") {
            errors.push(format!("{map} names `{path}`, which is no file"));
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// The module docs of a crate (`//!` lines, and the `//` lines among them) name only files of
/// that crate that exist.
#[test]
fn every_file_a_module_doc_names_exists() {
    let root = workspace();
    let all = rust_files();
    let mut errors = Vec::new();
    for name in LIBRARIES {
        let mut sources = Vec::new();
        files(&root, &root.join(name).join("src"), "rs", &mut sources);
        for file in sources {
            let text = std::fs::read_to_string(root.join(&file)).unwrap();
            let docs: String =
                text.lines().filter(|l| l.trim_start().starts_with("//!")).map(|l| format!("{l}\n")).collect();
            let folder = file.rsplit_once('/').map_or("", |(dir, _)| dir);
            for path in missing(&docs, &all, name) {
                errors.push(format!("{file} names `{path}`, which is no file of {name} (its folder is {folder})"));
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// The checks' own check: a list that drifted (a file renamed) and a flow naming a file that is
/// gone are caught; a path named from the root or by its end, and a pattern, are not.
#[test]
fn the_map_checks_see_a_drifted_list_and_a_missing_file() {
    let all: Vec<String> = [
        "tegu-core/src/app/mod.rs",
        "tegu-core/src/app/assemble.rs",
        "tegu-core/src/scope/carry.rs",
        "tegu-tx/src/tx.rs",
    ]
    .map(String::from)
    .to_vec();
    let module_doc = "//! - `mod.rs`: the App;\n//! - `build.rs`: what `build()` does.\n";
    assert_eq!(missing(module_doc, &all, "tegu-core"), ["build.rs"]);
    let flow = "`Tx::begin` (`tegu-tx/src/tx.rs`), the kernel's `scope/carry.rs`, then `tegu-tx/src/current.rs`.";
    assert_eq!(missing(flow, &all, ""), ["tegu-tx/src/current.rs"]);
    assert_eq!(missing("the tests in `tests/*.rs` and `src/<name>.rs`", &all, ""), Vec::<String>::new());
    assert_eq!(missing("`tx.rs` of another crate", &all, "tegu-core"), ["tx.rs"]);
}
