//! SQLite and Postgres data sources for di-tx's `#[transactional]`, on sqlx.
//!
//! - [`Database<DB>`]: a pool (sqlx's) registered as a singleton that provides
//!   `dyn di_tx::TxSource`, by object name.
//! - [`Database::conn`]: the connection a statement runs on: the current transaction's
//!   (the innermost `#[transactional]` method's of the task, else the request's), or the pool's
//!   outside any.
//! - SQLite transactions begin `IMMEDIATE` (one writer at a time, waited for); a transaction
//!   SQLite rolls back itself (a full disk, an I/O error, `RAISE(ROLLBACK)`) is seen through a
//!   rollback hook and refuses every later statement, so nothing runs outside it and commits
//!   on its own, and its commit fails the request.
//!
//! See di-tx for the propagations, and [`Database`] for an example.

mod backend;
mod conn;
mod database;

pub use backend::Backend;
pub use conn::Conn;
pub use database::Database;
#[cfg(feature = "postgres")]
pub use sqlx::Postgres;
#[cfg(feature = "sqlite")]
pub use sqlx::Sqlite;

/// The guide's chapter on transactions (`docs/guide/transactions.md`), run as doctests here,
/// where its crates are.
#[cfg(doctest)]
pub mod guide {
    #[doc = include_str!("../../docs/guide/transactions.md")]
    pub struct Transactions;
}
