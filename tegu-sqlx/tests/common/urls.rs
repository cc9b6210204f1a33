//! A fresh, empty database per test, as a URL; or `None`, with the reason printed, where the
//! database cannot be had (failed under `DI_TEST_REQUIRE_SERVERS=1`). Each test binary uses
//! the ones of its databases.

/// A new SQLite file, in a folder of the temporary directory named after the process and the
/// test (emptied first).
#[allow(dead_code)]
pub(crate) async fn sqlite(test: &str) -> Option<String> {
    let dir = std::env::temp_dir().join(format!("tegu-sqlx-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    Some(format!("sqlite://{}/db.sqlite3?mode=rwc", dir.display()))
}

/// A new database on the PostgreSQL server of the tests: the one `DI_TEST_POSTGRES_URL` names
/// (`.ci/run` starts it), else one this test process starts (`tegu_test_support::servers`).
#[allow(dead_code)]
pub(crate) async fn postgres(test: &str) -> Option<String> {
    let name = format!("di_sqlx_{}_{test}", std::process::id());
    match tegu_test_support::servers::postgres_database(&name) {
        Ok(url) => Some(url),
        Err(why) => {
            tegu_test_support::servers::skip(test, why);
            None
        }
    }
}
