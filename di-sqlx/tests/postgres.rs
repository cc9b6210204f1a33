//! di-tx's propagations on PostgreSQL (`common/mod.rs`), against a real server: the one
//! `DI_TEST_POSTGRES_URL` names (`.ci/run` starts it), else one this test process starts
//! (`di_test_support::servers`), else skipped with the reason printed (failed under
//! `DI_TEST_REQUIRE_SERVERS=1`).

mod common;

/// A new database per test on the server.
async fn fresh_url(test: &str) -> Option<String> {
    let admin = match di_test_support::servers::postgres() {
        Ok(url) => url,
        Err(why) => {
            di_test_support::servers::skip(test, why);
            return None;
        }
    };
    // One at a time: PostgreSQL refuses to copy its template while another copy runs.
    static CREATING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one_at_a_time = CREATING.lock().await;
    let name = format!("di_sqlx_{}_{test}", std::process::id());
    let pool = sqlx::PgPool::connect(admin).await.expect("the admin database");
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name}")).execute(&pool).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&pool).await.unwrap();
    pool.close().await;
    Some(format!("{}/{name}", admin.rsplit_once('/').expect("a URL with a database").0))
}

suite!(di_sqlx::Postgres, fresh_url);

/// On Postgres a `requires_new` method of the same data source runs beside its caller's
/// transaction, on a second connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requires_new_commits_while_the_outer_rolls_back_and_the_reverse() {
    let Some((app, ledger, db)) = setup("requires_new").await else { return };
    let failed = app.run_in_context(ledger.outer("a", Inner::RequiresNew("b", false), true)).await;
    assert!(failed.is_err());
    assert_eq!(notes(&db).await, ["b"]);
    app.run_in_context(ledger.outer("c", Inner::RequiresNew("d", true), false)).await.unwrap();
    assert_eq!(notes(&db).await, ["b", "c"]);
}
