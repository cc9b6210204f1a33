//! tegu-tx's propagations on PostgreSQL (`common/mod.rs`), against a real server: the one
//! `DI_TEST_POSTGRES_URL` names (`.ci/run` starts it), else one this test process starts
//! (`tegu_test_support::servers`), else skipped with the reason printed (failed under
//! `DI_TEST_REQUIRE_SERVERS=1`).

mod common;

suite!(tegu_sqlx::Postgres, common::urls::postgres);

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

/// PostgreSQL aborts a transaction at its first failed statement, even one the method takes in
/// stride (a duplicate key taken as "already there", which SQLite undoes alone), and answers
/// its `COMMIT` with `ROLLBACK`, not an error. The scope's commit must fail (tegu-http answers
/// 500), not acknowledge what was not stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_postgres_turns_into_a_rollback_fails_the_scope() {
    let Some((app, ledger, db)) = setup("aborted_commit").await else { return };
    let result = app
        .try_run_in_context(async {
            assert_eq!(ledger.key_twice("a", "k").await.unwrap(), tegu_tx::ErrorClass::UniqueViolation);
        })
        .await;
    let error = result.unwrap_err();
    let tegu_core::DiError::Hook { source, .. } = &error else { panic!("{error:?}") };
    let tx = source.downcast_ref::<TxError>().expect("the commit's TxError");
    assert!(matches!(tx, TxError::Aborted { .. }), "{tx:?}");
    assert_eq!(tx.class(), tegu_tx::ErrorClass::Aborted);
    assert_eq!(notes(&db).await, Vec::<String>::new());
    // The connection is sound afterwards: every connection of the pool commits.
    for _ in 0..12 {
        app.run_in_context(ledger.required("next", false)).await.unwrap();
    }
    assert_eq!(notes(&db).await.len(), 12);
}

/// The same in a transaction of the method's own: `requires_new`, and `required` after the
/// completion phase (work after the response). The method fails with `TxError::Aborted`
/// instead of returning `Ok` for a transaction PostgreSQL rolled back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_of_its_own_that_postgres_aborted_fails_the_method() {
    let Some((app, ledger, db)) = setup("aborted_own").await else { return };
    let own = app.run_in_context(ledger.key_twice_new("a", "k")).await;
    let Err(TestError::Tx(TxError::Aborted { .. })) = &own else { panic!("{own:?}") };
    let late = app
        .run_in_context(async {
            tegu_core::scope::complete_scope().await.unwrap();
            ledger.key_twice("b", "k").await
        })
        .await;
    let Err(TestError::Tx(TxError::Aborted { .. })) = &late else { panic!("{late:?}") };
    assert_eq!(notes(&db).await, Vec::<String>::new());
}

/// A nested method whose statement failed, taken in stride: on PostgreSQL its savepoint
/// cannot be released (the transaction is aborted), so the method fails and its savepoint is
/// rolled back to: the caller's transaction goes on, and commits what it did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_savepoint_postgres_aborted_fails_its_method_and_the_outer_goes_on() {
    let Some((app, ledger, db)) = setup("aborted_savepoint").await else { return };
    let inner = app.run_in_context(ledger.outer("a", Inner::NestedKeyTwice("b", "k"), false)).await.unwrap();
    let inner = inner.expect("the nested method failed");
    assert!(inner.contains("Aborted"), "{inner}");
    assert_eq!(notes(&db).await, ["a"]);
}

/// A deadlock and a serialization failure, which only PostgreSQL reports (SQLite's writers take
/// turns), have classes of their own, which say to run the transaction again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlocks_and_serialization_failures_are_classified_as_retryable() {
    let Some((_app, _ledger, db)) = setup("retryable").await else { return };
    sqlx::raw_sql(
        "CREATE TABLE accounts (id INT PRIMARY KEY, balance INT); INSERT INTO accounts VALUES (1, 0), (2, 0)",
    )
    .execute(db.pool())
    .await
    .unwrap();
    let update = "UPDATE accounts SET balance = balance + 1 WHERE id = $1";
    // A deadlock: each transaction holds one row and waits for the other's.
    let (mut a, mut b) = (db.pool().begin().await.unwrap(), db.pool().begin().await.unwrap());
    sqlx::query(update).bind(1).execute(&mut *a).await.unwrap();
    sqlx::query(update).bind(2).execute(&mut *b).await.unwrap();
    let (first, second) =
        tokio::join!(sqlx::query(update).bind(2).execute(&mut *a), sqlx::query(update).bind(1).execute(&mut *b));
    let failed = first.err().or(second.err()).expect("PostgreSQL breaks the deadlock");
    let class = db.error("updating", failed).class();
    assert_eq!(class, tegu_tx::ErrorClass::Deadlock);
    assert!(class.retryable());
    drop((a, b));
    // A serialization failure: two REPEATABLE READ transactions update the same row.
    let (mut a, mut b) = (db.pool().begin().await.unwrap(), db.pool().begin().await.unwrap());
    for tx in [&mut a, &mut b] {
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ").execute(&mut **tx).await.unwrap();
        sqlx::query("SELECT balance FROM accounts WHERE id = 1").execute(&mut **tx).await.unwrap();
    }
    sqlx::query(update).bind(1).execute(&mut *a).await.unwrap();
    a.commit().await.unwrap();
    let failed = sqlx::query(update).bind(1).execute(&mut *b).await.unwrap_err();
    let class = db.error("updating", failed).class();
    assert_eq!(class, tegu_tx::ErrorClass::SerializationFailure);
    assert!(class.retryable());
}

/// A client that goes away during the request's `COMMIT` (its future dropped then, as hyper
/// drops a request whose connection closed): the commit is not cut at an unknown point. It
/// finishes, on a task of the scope's own, and the request's events follow what it did: the
/// row is stored, and the `after_commit` handler runs, not the `after_rollback` one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_during_the_commit_neither_cuts_it_nor_misreports_it() {
    let Some((app, ledger, db)) = setup("gone_during_commit").await else { return };
    // A deferred trigger that makes the COMMIT take 300 ms.
    sqlx::raw_sql(
        "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.3); RETURN NULL; END $$;
         CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON notes DEFERRABLE INITIALLY DEFERRED
             FOR EACH ROW EXECUTE FUNCTION slow();",
    )
    .execute(db.pool())
    .await
    .unwrap();
    let events = app.events();
    let request = Box::pin(app.run_in_context(async {
        ledger.required("a", false).await.unwrap();
        events.emit(Noted("a"));
        tegu_core::scope::complete_scope().await.unwrap();
    }));
    let gone = tokio::time::timeout(std::time::Duration::from_millis(100), request).await;
    assert!(gone.is_err(), "the request ended before the client went away");
    app.shutdown().await.unwrap();
    assert_eq!(notes(&db).await, ["a"]);
    assert_eq!(app.get_object::<Journal>().unwrap().phases.lines(), ["committed:a"]);
}

/// `requires_new` takes a second connection while its request holds one: with as many
/// requests in it at once as the pool has connections, each waits for a connection the others
/// hold. None comes free, and each fails at the pool's acquire timeout as `TxError::Busy` (a
/// 503), rather than waiting for ever; the requests' own transactions go on. The guide says to
/// size the pool above such requests, or give that work a data source of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requires_new_with_every_connection_held_by_its_callers_fails_busy() {
    let settings = [("max_connections", 2), ("acquire_timeout_ms", 300)];
    let Some((app, ledger, db)) = setup_with("requires_new_starved", &settings).await else { return };
    let barrier = tokio::sync::Barrier::new(2);
    let request = |note: &'static str| app.run_in_context(ledger.required_then_new(note, &barrier));
    let (a, b) = tokio::join!(request("a"), request("b"));
    for inner in [a.unwrap(), b.unwrap()] {
        let Err(TestError::Tx(TxError::Busy { doing: "beginning a transaction", .. })) = &inner else {
            panic!("{inner:?}")
        };
    }
    assert_eq!(notes(&db).await, ["a", "b"]);
}

/// A method's own transaction whose caller goes away during its `COMMIT` (a timeout around the
/// call): the commit is not cut, it finishes on a task of the scope's, and the events follow
/// it: the `before_commit` handler's line is stored with the note, and the `after_commit`
/// handler runs, not the `after_rollback` one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_of_its_own_cut_off_during_its_commit_finishes_and_its_events_follow() {
    let Some((app, ledger, db)) = setup("own_cut_off").await else { return };
    sqlx::raw_sql(
        "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.3); RETURN NULL; END $$;
         CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON notes DEFERRABLE INITIALLY DEFERRED
             FOR EACH ROW EXECUTE FUNCTION slow();",
    )
    .execute(db.pool())
    .await
    .unwrap();
    let events = app.events();
    let call = Box::pin(app.run_in_context(ledger.emitting_new("a", false, &events)));
    let gone = tokio::time::timeout(std::time::Duration::from_millis(150), call).await;
    assert!(gone.is_err(), "the call ended before its caller went away");
    app.shutdown().await.unwrap();
    assert_eq!(notes(&db).await, ["a", "journal:a"]);
    assert_eq!(app.get_object::<Journal>().unwrap().phases.lines(), ["committed:a"]);
}
