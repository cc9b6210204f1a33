//! A broken graph as `miette` renders it where the source is not on disk (a deployed binary):
//! the help names each site's file and line. In a test binary of its own, since it changes the
//! working folder, which the process shares.

#![allow(missing_docs, missing_debug_implementations)]

#[path = "diagnostic/broken.rs"]
mod broken;

#[tokio::test]
async fn without_the_source_the_help_names_file_and_line() {
    let error = broken::error().await;
    let empty = std::env::temp_dir().join(format!("tegu-diagnostic-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("creates a folder");
    std::env::set_current_dir(&empty).expect("enters it");
    let rendered = broken::render(&error, 200);
    assert!(!rendered.contains("╭─["), "no source shown: {rendered}");
    assert!(rendered.contains("help: at tests/tests/diagnostic/broken.rs:16:19: `notifier` of"), "{rendered}");
    assert!(
        rendered.contains("at tests/tests/diagnostic/broken.rs:14:12: diagnostic_without_source::broken::Signup"),
        "{rendered}"
    );
}
