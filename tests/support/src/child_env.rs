//! Running a test again in a child process with environment variables set: the only way to set
//! them without `unsafe`, and without leaking them into the tests running beside it.

/// `true` in the child process, where the test body runs with `vars` set; in the parent, runs
/// test `test` of this binary in a child, asserts that it passed, and returns `false`:
///
/// ```ignore
/// if !in_child("my_test", &[("APP_DB__URL", "x")]) { return; }
/// // the body, with APP_DB__URL set
/// ```
pub fn in_child(test: &str, vars: &[(&str, &str)]) -> bool {
    const MARK: &str = "DI_TEST_CHILD";
    if std::env::var_os(MARK).is_some() {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([test, "--exact", "--test-threads=1"])
        .env(MARK, "1")
        .envs(vars.iter().copied())
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child run of {test} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    false
}
