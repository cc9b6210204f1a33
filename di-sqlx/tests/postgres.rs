//! di-tx's propagations on PostgreSQL (`common/mod.rs`), against a real server: the one
//! `DI_TEST_POSTGRES_URL` names (`.ci/run` starts it), else one this test process starts
//! (`di_test_support::servers`), else skipped with the reason printed (failed under
//! `DI_TEST_REQUIRE_SERVERS=1`).

mod common;

suite!(di_sqlx::Postgres, common::urls::postgres);

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
