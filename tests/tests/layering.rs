//! No import cycle in any library crate of the workspace but tegu-core's kernel (checked, with
//! tegu-core's floors, by `tegu-core/tests/layout_floors.rs`): in a crate without a cycle, every
//! file can be read, and changed, knowing only the files below it.
//!
//! Read from the sources as text by `tegu_test_support::layout`. Run with `--nocapture` to see
//! each crate's imports counted.

use std::path::{Path, PathBuf};

use tegu_test_support::layout::{File, cycles, edges, read_crate};

/// The library crates checked here, by folder (tegu-core is checked by its own test).
const LIBRARIES: &[&str] =
    &["tegu-macros", "tegu-http", "tegu-tx", "tegu-sqlx", "tegu-outbox", "tegu-nats", "tegu-otel"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The cycles of `files`, each as the files' paths, and what ties each together.
fn cycles_named(files: &[File]) -> Vec<String> {
    let all = edges(files);
    cycles(files)
        .into_iter()
        .map(|cycle| {
            let ties: Vec<String> = all
                .iter()
                .filter(|(f, t, _)| cycle.contains(f) && cycle.contains(t))
                .map(|(f, t, path)| format!("{} -> {}: {path}", files[*f].rel, files[*t].rel))
                .collect();
            format!("a cycle of {} files:\n    {}", cycle.len(), ties.join("\n    "))
        })
        .collect()
}

#[test]
fn no_library_crate_has_an_import_cycle() {
    let mut errors = Vec::new();
    for name in LIBRARIES {
        let files = read_crate(&workspace().join(name), name);
        println!("{name}: {} files, {} imports", files.len(), edges(&files).len());
        errors.extend(cycles_named(&files).into_iter().map(|c| format!("{name}: {c}")));
    }
    assert!(
        errors.is_empty(),
        "import cycles (break each: the file below must not name the one above; move what both need into a file of its own, or pass it in):\n{}",
        errors.join("\n")
    );
}

/// A library crate added to the workspace is checked too.
#[test]
fn every_library_crate_is_checked() {
    let mut unchecked = Vec::new();
    for entry in std::fs::read_dir(workspace()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("tegu-")
            && name != "tegu-core"
            && path.join("src/lib.rs").is_file()
            && !LIBRARIES.contains(&name.as_str())
        {
            unchecked.push(name);
        }
    }
    assert!(unchecked.is_empty(), "library crates not in tests/tests/layering.rs's LIBRARIES: {unchecked:?}");
}

/// The check's own check: it sees a cycle through a child module, `super` and a re-export,
/// and names what ties it.
#[test]
fn the_check_sees_a_cycle() {
    let files = [
        File::parse("lib", "mod layer; mod router; pub use router::Router;"),
        File::parse("layer", "mod future; pub struct Layer; fn call() { future::f(); }"),
        File::parse("layer::future", "fn f() -> crate::Router { todo() }"),
        File::parse("router", "use crate::layer::Layer; pub struct Router(Layer);"),
    ];
    assert_eq!(
        cycles_named(&files),
        Vec::<String>::new(),
        "a path through lib.rs's re-export points at lib.rs, no cycle"
    );
    let files = [
        File::parse("lib", "mod layer; mod router;"),
        File::parse("layer", "mod future; pub struct Layer; fn call() { future::f(); }"),
        File::parse("layer::future", "fn f() -> crate::router::Router { todo() } fn g(_: &super::Layer) {}"),
        File::parse("router", "use crate::layer::Layer; pub struct Router(Layer);"),
    ];
    assert_eq!(
        cycles_named(&files),
        [
            "a cycle of 3 files:\n    layer.rs -> layer/future.rs: future::f\n    layer/future.rs -> router.rs: crate::router::Router\n    layer/future.rs -> layer.rs: super::Layer\n    router.rs -> layer.rs: crate::layer::Layer"
        ]
    );
}
