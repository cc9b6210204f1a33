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
    run_in_child(test, None, vars)
}

/// As [`in_child`], with every variable whose name starts with `prefix` removed before `vars`
/// are set: the test sees only the `vars` of that prefix, whatever the shell exported (a
/// developer's `APP_DB__URL` cannot change its result).
///
/// ```ignore
/// if !in_clean_child("my_test", "APP_", &[]) { return; }
/// // the body, with no APP_* variable set
/// ```
pub fn in_clean_child(test: &str, prefix: &str, vars: &[(&str, &str)]) -> bool {
    run_in_child(test, Some(prefix), vars)
}

fn run_in_child(test: &str, clear: Option<&str>, vars: &[(&str, &str)]) -> bool {
    const MARK: &str = "DI_TEST_CHILD";
    if std::env::var_os(MARK).is_some() {
        return true;
    }
    let mut command = std::process::Command::new(std::env::current_exe().expect("the test binary"));
    if let Some(prefix) = clear {
        for (name, _) in std::env::vars_os() {
            if name.to_str().is_some_and(|name| name.starts_with(prefix)) {
                command.env_remove(name);
            }
        }
    }
    let out = command
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
