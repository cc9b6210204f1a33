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
