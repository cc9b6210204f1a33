//! `fn main() -> Result<(), DiError>` prints a returned error with `Debug`: a broken graph must
//! show its remedy there, not the variant's fields.

use std::process::Command;

#[test]
fn a_broken_graph_returned_from_main_prints_its_remedy() {
    let output = Command::new(env!("CARGO_BIN_EXE_broken-graph")).output().expect("the program runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the graph is broken: {stderr}");
    assert!(
        stderr.contains(
            "Error: `broken_graph::Signup (\"signup\")` injects `dyn broken_graph::Notifier`, but no proto provides it"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("`#[singleton_proto(provides(dyn Notifier))]`"), "{stderr}");
    assert!(!stderr.contains("Missing {"), "Debug shows the message, not the fields: {stderr}");
}

/// Under the message, where the field and its proto are declared: the field's type and the
/// struct's name, as the compiler locates them.
#[test]
fn a_broken_graph_returned_from_main_points_at_the_field_and_the_proto() {
    let output = Command::new(env!("CARGO_BIN_EXE_broken-graph")).output().expect("the program runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let sites: Vec<&str> = stderr.lines().filter(|line| line.starts_with("  --> ")).collect();
    assert_eq!(
        sites,
        [
            "  --> tests/src/bin/broken_graph.rs:23:20: `_notifier` of broken_graph::Signup (\"signup\")",
            "  --> tests/src/bin/broken_graph.rs:21:12: broken_graph::Signup (\"signup\") is declared here",
        ],
        "{stderr}"
    );
}
