//! di-tx's propagations on SQLite (`common/mod.rs`), and what only SQLite does: ending a
//! transaction itself after an error.

mod common;

suite!(di_sqlx::Sqlite, common::urls::sqlite);

/// `RAISE(ROLLBACK)` in a trigger: SQLite rolls the whole transaction back and the statement
/// fails. The method goes on as if only the statement had failed; nothing of the transaction
/// may be saved, no later statement may run outside it (committing on its own), and the
/// request fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_sqlite_rolls_back_itself_saves_nothing_and_fails_the_scope() {
    let Some((app, ledger, db)) = setup("sqlite_own_rollback").await else { return };
    sqlx::query(
        "CREATE TRIGGER poison BEFORE INSERT ON notes WHEN NEW.note = 'poison' \
         BEGIN SELECT RAISE(ROLLBACK, 'poisoned'); END",
    )
    .execute(db.pool())
    .await
    .unwrap();
    let result = app
        .try_run_in_context(async {
            ledger.required("a", false).await.unwrap();
            let poisoned = ledger.required("poison", false).await;
            assert!(poisoned.is_err(), "the trigger's statement fails");
            // The next statement is refused: it would run outside any transaction.
            let refused = ledger.required("after", false).await;
            let Err(TestError::Tx(TxError::Aborted { .. })) = refused else { panic!("{refused:?}") };
        })
        .await;
    let error = result.unwrap_err().to_string();
    assert!(error.contains("rolled back the transaction of data source `database` itself"), "{error}");
    assert_eq!(notes(&db).await, Vec::<String>::new());
    // The connection is sound afterwards (sqlx no longer counts a transaction on it, which
    // would turn its next BEGIN into a savepoint's): requests on every connection of the pool
    // (taken in turn) commit.
    for _ in 0..12 {
        app.run_in_context(ledger.required("next", false)).await.unwrap();
    }
    assert_eq!(notes(&db).await.len(), 12);
}

/// SQLite runs one write transaction at a time, held from its `BEGIN IMMEDIATE`: a
/// `requires_new` method of the same database inside a transaction would wait for it forever
/// (until the busy timeout), so it is refused at once, naming the method.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requires_new_inside_a_transaction_of_the_same_sqlite_database_is_refused_at_once() {
    let Some((app, ledger, db)) = setup("requires_new_refused").await else { return };
    let started = std::time::Instant::now();
    let inner = app.run_in_context(ledger.outer("a", Inner::RequiresNew("b", false), false)).await.unwrap();
    let inner = inner.expect("refused");
    assert!(inner.contains("OneAtATime") && inner.contains("Ledger::requires_new"), "{inner}");
    assert!(started.elapsed() < std::time::Duration::from_secs(4), "refused before the busy timeout");
    assert_eq!(notes(&db).await, ["a"]);
    // Alone, it runs.
    app.run_in_context(ledger.requires_new("c", false)).await.unwrap();
    assert_eq!(notes(&db).await, ["a", "c"]);
}

/// Another connection holds SQLite's write lock past the busy timeout: beginning a
/// transaction fails as `TxError::Busy` (`SQLITE_BUSY`), not as a fault; once the lock is
/// released, it begins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_lock_held_past_the_busy_timeout_is_busy() {
    let Some((app, ledger, db)) = setup_with("sqlite_busy", &[("max_connections", 1)]).await else { return };
    sqlx::query("PRAGMA busy_timeout = 100").execute(db.pool()).await.unwrap();
    let file = db.pool().connect_options().get_filename().to_owned();
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(&file);
    let mut other = sqlx::Connection::connect_with(&options).await.map(|c: sqlx::SqliteConnection| c).unwrap();
    sqlx::Executor::execute(&mut other, "BEGIN IMMEDIATE").await.unwrap();
    let began = app.run_in_context(ledger.required("a", false)).await;
    let Err(TestError::Tx(TxError::Busy { doing: "beginning a transaction", .. })) = &began else {
        panic!("{began:?}")
    };
    sqlx::Executor::execute(&mut other, "ROLLBACK").await.unwrap();
    app.run_in_context(ledger.required("a", false)).await.unwrap();
    assert_eq!(notes(&db).await, ["a"]);
}
