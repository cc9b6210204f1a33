//! The floors of tegu-core (`docs/ARCHITECTURE.md`, "tegu-core's floors", whose table this test
//! checks against [`FLOORS`]): every file of `src/` sits on a floor and imports only the floors
//! below it, the kernel (floor 2) being the one import cycle allowed, and the features (floor 3)
//! never importing each other.
//!
//! Read from the sources as text by `tegu_test_support::layout`, which says what an import is: a
//! path through a re-export of `lib.rs` (`crate::App`) points at `lib.rs`, the top floor, so
//! below it, name the file you import; a `pub use` is no import (the public `config` module
//! shows `ConfigRef` from the `reload` feature).
//!
//! Run with `--nocapture` to see each floor, the import cycles and the longest files, and with
//! `LAYERING_IMPORTS=1` too to see every import.

use std::collections::BTreeMap;
use std::path::Path;

use tegu_test_support::layout::{self, File, cycles, edges, in_module};

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
/// The most lines of code a file of the kernel's cycle may hold: doc comments, comments, blank
/// lines and `#[cfg(test)]` items not counted.
const MOST_LINES: usize = 600;
/// The most lines of code any other file may hold, counted the same way.
const MOST_LINES_OUTSIDE_THE_CYCLE: usize = 500;
/// The modules whose functions are capped at [`MOST_FUNCTION_LINES`]: the composition root and
/// the graph, where a check at build is a pass of its own, not another branch of a long function.
const CAPPED_FUNCTIONS: &[&str] = &["app", "graph"];
/// The most lines of code a function of [`CAPPED_FUNCTIONS`] may hold, from its `fn` line to its
/// closing brace.
const MOST_FUNCTION_LINES: usize = 80;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Floor {
    Vocabulary = 0,
    Leaves = 1,
    Kernel = 2,
    Feature = 3,
    Root = 4,
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
fn the_one_import_cycle_is_the_kernels() {
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
    // The kernel's is the one cycle.
    let kernel_only =
        |c: &[usize]| c.iter().all(|&i| floor_of(&files[i].module).map(|(f, _)| f) == Some(Floor::Kernel));
    let outside: Vec<Vec<&str>> = cycles
        .iter()
        .enumerate()
        .filter(|(n, c)| *n > 0 || !kernel_only(c))
        .map(|(_, c)| c.iter().map(|&i| files[i].rel.as_str()).collect())
        .collect();
    assert!(
        outside.is_empty(),
        "import cycles outside the kernel (break them: the lower file must not name the upper): {outside:?}"
    );
}

#[test]
fn no_file_is_longer_than_the_limit() {
    let files = read_crate();
    let cycle: Vec<usize> = {
        let mut all = cycles(&files);
        all.sort_by_key(|c| std::cmp::Reverse(c.len()));
        all.into_iter().next().unwrap_or_default()
    };
    let mut lines: Vec<(usize, usize, &str)> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let most = if cycle.contains(&i) { MOST_LINES } else { MOST_LINES_OUTSIDE_THE_CYCLE };
            (f.lines_of_code(), most, f.rel.as_str())
        })
        .collect();
    lines.sort_by(|a, b| b.cmp(a));
    for (n, most, rel) in lines.iter().take(8) {
        println!("{n:>5} lines of code (at most {most}): {rel}");
    }
    let long: Vec<String> = lines
        .iter()
        .filter(|(n, most, _)| n > most)
        .map(|(n, most, rel)| format!("{rel}: {n} (at most {most})"))
        .collect();
    assert!(long.is_empty(), "files over their limit of lines of code (split them by type): {long:?}");
}

#[test]
fn no_function_of_the_root_or_the_graph_is_longer_than_the_limit() {
    let files = read_crate();
    let mut found: Vec<(usize, String)> = files
        .iter()
        .filter(|f| CAPPED_FUNCTIONS.iter().any(|m| in_module(&f.module, m)))
        .flat_map(|f| {
            layout::functions(&f.code).into_iter().map(move |g| (g.lines, format!("{}:{} {}", f.rel, g.line, g.name)))
        })
        .collect();
    found.sort_by(|a, b| b.cmp(a));
    for (n, at) in found.iter().take(8) {
        println!("{n:>5} lines of code: {at}");
    }
    let long: Vec<String> =
        found.iter().filter(|(n, _)| *n > MOST_FUNCTION_LINES).map(|(n, at)| format!("{at}: {n}")).collect();
    assert!(
        long.is_empty(),
        "functions over {MOST_FUNCTION_LINES} lines of code (make each check or step a function of its own): {long:?}"
    );
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

/// The floor of `module`, and the top-level module that names its room.
fn floor_of(module: &str) -> Option<(Floor, &'static str)> {
    FLOORS
        .iter()
        .filter(|(prefix, _)| in_module(module, prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(prefix, floor)| (*floor, *prefix))
}

fn read_crate() -> Vec<File> {
    layout::read_crate(Path::new(env!("CARGO_MANIFEST_DIR")), "tegu-core")
}
