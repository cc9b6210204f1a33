//! The options of a transaction a `#[transactional]` method begins, on SQLite: read-only
//! (`PRAGMA query_only`), a timeout, a rollback rule, and a retry that runs the method again.

// The service serves both databases; a few of its methods are PostgreSQL's only.
#![allow(dead_code)]

#[macro_use]
mod accounts;
mod common;

accounts!(tegu_sqlx::Sqlite);

async fn url(test: &str) -> Option<String> {
    crate::common::urls::sqlite(&format!("tx_options_{test}")).await
}

/// A read-only transaction dropped before its end (its future cut) leaves SQLite's `query_only`
/// on its connection; the pool's one connection is set back before its next use, outside any
/// transaction and in one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_transaction_dropped_before_its_end_leaves_the_connection_writable() {
    use tegu_tx::{Propagation, TxOptions, TxSource};
    let Some((app, accounts, db)) = setup("dropped_read_only", 1).await else { return };
    let read_only = TxOptions::new(Propagation::RequiresNew).read_only();
    let dropped = db.begin_with(&read_only).await.unwrap();
    drop(dropped);
    let mut conn = db.conn().await.unwrap();
    sqlx::query("INSERT INTO accounts (id, balance) VALUES (5, 0)").execute(&mut *conn).await.unwrap();
    drop(conn);
    drop(db.begin_with(&read_only).await.unwrap());
    assert!(matches!(app.run_in_context(accounts.pay(6, true)).await, Err(AccountError::Declined)));
    assert_eq!(ids(&db).await, [1, 5, 6]);
}
