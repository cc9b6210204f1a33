//! The options of a transaction a `#[transactional]` method begins, on PostgreSQL: serializable
//! transactions that conflict and a retry owned by the method, read-only, a timeout backed by
//! `statement_timeout`, and a rollback rule. The server is the one `DI_TEST_POSTGRES_URL` names
//! (`.ci/run` starts it), else one this process starts, else the tests are skipped with the
//! reason printed (failed under `DI_TEST_REQUIRE_SERVERS=1`).

// The service serves both databases; a few of its methods are PostgreSQL's only.
#![allow(dead_code)]

#[macro_use]
mod accounts;
mod common;

accounts!(tegu_sqlx::Postgres);

async fn url(test: &str) -> Option<String> {
    crate::common::urls::postgres(&format!("tx_options_{test}")).await
}

/// Two serializable transactions that conflict (both read the balance, then both write
/// it): PostgreSQL refuses one, which runs again in a new transaction and commits. Both end
/// committed, the balance counts both, and each deposit's event reached its `after_commit`
/// handler once; the failed try's went to `after_rollback`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_conflicting_serializable_transactions_both_commit_after_a_retry() {
    let Some((app, accounts, db)) = setup("serializable_retry", 4).await else { return };
    let meet = tokio::sync::Barrier::new(2);
    let (a, b) =
        tokio::join!(app.run_in_context(accounts.deposit(1, &meet)), app.run_in_context(accounts.deposit(1, &meet)));
    let mut balances = [a.unwrap(), b.unwrap()];
    balances.sort();
    assert_eq!(balances, [1, 2]);
    let balance: i64 =
        sqlx::query_scalar("SELECT balance FROM accounts WHERE id = 1").fetch_one(db.pool()).await.unwrap();
    assert_eq!(balance, 2);
    let tries = accounts.tries.load(Ordering::SeqCst);
    assert!(tries >= 3, "no retry: {tries} tries");
    // The handlers of the released events have run once the App is shut down.
    app.shutdown().await.unwrap();
    assert_eq!(accounts.committed.load(Ordering::SeqCst), 2);
    assert_eq!(accounts.rolled_back.load(Ordering::SeqCst), tries - 2);
}

/// A statement past the timeout is cancelled by the database (the transaction's
/// `statement_timeout`) while the client gives up at the same deadline: rolled back, and
/// the pool's one connection serves the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_past_the_timeout_is_cancelled_and_rolls_back() {
    let Some((app, accounts, db)) = setup("statement_timeout", 1).await else { return };
    let started = Instant::now();
    let out = app.run_in_context(accounts.slow_statement()).await;
    let Err(AccountError::Tx(error)) = &out else { panic!("{out:?}") };
    assert!(matches!(error.class(), ErrorClass::TimedOut), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(ids(&db).await, [1]);
    assert_eq!(app.run_in_context(accounts.read_only_balance(1)).await.unwrap(), 0);
}
