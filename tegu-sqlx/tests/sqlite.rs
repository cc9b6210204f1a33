//! tegu-tx's propagations on SQLite (`common/mod.rs`), and what only SQLite does: ending a
//! transaction itself after an error.

mod common;

suite!(tegu_sqlx::Sqlite, common::urls::sqlite);

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
    assert!(error.contains("aborted the transaction of data source `database`"), "{error}");
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

/// SQLite's `SQLITE_LOCKED` (result code 6, and its extended codes: `SQLITE_LOCKED_SHAREDCACHE`,
/// 262, here): a lock conflict between connections of one shared cache (`cache=shared` in the
/// URL), which SQLite reports at once, not after the busy timeout: here another connection
/// changed the schema in a transaction it has not ended, so no statement of the cache can be
/// prepared. Like `SQLITE_BUSY`, another connection holds the lock and a later try succeeds:
/// `TxError::Busy` (class `Busy`, which tegu-http answers 503 with `Retry-After`), not a fault.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_by_a_connection_of_the_same_shared_cache_is_busy() {
    let Some(url) = common::urls::sqlite("sqlite_locked").await else { return };
    let Some(audit_url) = common::urls::sqlite("audit_of_sqlite_locked").await else { return };
    let app = App::builder()
        .link::<Database<tegu_sqlx::Sqlite>>()
        .config_value("database.url", format!("{url}&cache=shared"))
        .register(Database::<tegu_sqlx::Sqlite>::named("audit", "audit_db"))
        .config_value("audit_db.url", audit_url)
        .build()
        .await
        .unwrap();
    let db = app.get_object_named::<Database<tegu_sqlx::Sqlite>>("database").unwrap();
    sqlx::query("CREATE TABLE notes (note TEXT NOT NULL)").execute(db.pool()).await.unwrap();
    let file = db.pool().connect_options().get_filename().to_owned();
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(&file).shared_cache(true);
    let mut other = sqlx::Connection::connect_with(&options).await.map(|c: sqlx::SqliteConnection| c).unwrap();
    sqlx::Executor::execute(&mut other, "BEGIN").await.unwrap();
    sqlx::Executor::execute(&mut other, "CREATE TABLE drafts (note TEXT)").await.unwrap();
    let read = app
        .run_in_context(async {
            let mut conn = db.conn().await.unwrap();
            let read = sqlx::query_scalar::<_, String>("SELECT note FROM notes").fetch_all(&mut *conn).await;
            read.map_err(|e| db.error("reading the notes", e))
        })
        .await;
    let error = read.expect_err("the schema is locked by the other connection");
    let causes = std::iter::successors(std::error::Error::source(&error), |e| e.source());
    let causes: Vec<String> = causes.map(ToString::to_string).collect();
    assert!(causes.iter().any(|c| c.contains("(code: 262) database schema is locked")), "{causes:?}");
    assert_eq!(error.class(), tegu_tx::ErrorClass::Busy, "{error:?}");
    assert!(matches!(error, TxError::Busy { doing: "reading the notes", .. }), "{error:?}");
    // Once the other connection ends its transaction, the same read succeeds.
    sqlx::Executor::execute(&mut other, "ROLLBACK").await.unwrap();
    let notes: Vec<String> = sqlx::query_scalar("SELECT note FROM notes").fetch_all(db.pool()).await.unwrap();
    assert!(notes.is_empty());
}

/// A full disk: SQLite's `SQLITE_FULL` ("database or disk is full"), here from the database's
/// page limit (`PRAGMA max_page_count`), which fails a write exactly as a full disk does. The
/// statement fails as a database error, the request fails (as tegu-http fails a 5xx answer's
/// scope), and nothing of its transaction is saved, whether SQLite undid the one statement or
/// the whole transaction; once there is room again, the same connection commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_saves_nothing_of_the_request() {
    let Some((app, ledger, db)) = setup_with("sqlite_full", &[("max_connections", 1)]).await else { return };
    let pages: i64 = sqlx::query_scalar("PRAGMA page_count").fetch_one(db.pool()).await.unwrap();
    sqlx::query(&format!("PRAGMA max_page_count = {}", pages + 3)).execute(db.pool()).await.unwrap();
    let note = "x".repeat(2000);
    let failed = app
        .run_in_context(async {
            for written in 0.. {
                if let Err(error) = ledger.required(&note, false).await {
                    tegu_core::scope::fail_scope();
                    return (written, error);
                }
            }
            unreachable!()
        })
        .await;
    let (written, TestError::Tx(TxError::Database { error, .. })) = &failed else { panic!("{failed:?}") };
    assert!(*written > 0, "some notes fit before the disk filled");
    assert!(error.to_string().contains("database or disk is full"), "{error}");
    assert_eq!(notes(&db).await, Vec::<String>::new(), "half-committed");
    sqlx::query("PRAGMA max_page_count = 1073741823").execute(db.pool()).await.unwrap();
    app.run_in_context(ledger.required("after", false)).await.unwrap();
    assert_eq!(notes(&db).await, ["after"]);
}

/// SQLite undoes only a failed statement: a method that takes a duplicate key in stride commits
/// the rest, where PostgreSQL aborts the whole transaction and its commit fails
/// (`postgres.rs`). The same code is correct on one and fails loudly on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_statement_undoes_only_itself_on_sqlite() {
    let Some((app, ledger, db)) = setup("statement_undone").await else { return };
    app.try_run_in_context(async { ledger.key_twice("a", "k").await.unwrap() }).await.unwrap();
    app.run_in_context(ledger.key_twice_new("b", "l")).await.unwrap();
    let inner = app.run_in_context(ledger.outer("c", Inner::NestedKeyTwice("d", "m"), false)).await.unwrap();
    assert_eq!(inner, None);
    assert_eq!(notes(&db).await, ["a", "b", "c", "d"]);
}
