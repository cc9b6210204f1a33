//! SQLite and Postgres data sources for tegu-tx's `#[transactional]`, on sqlx.
//!
//! - [`Database<DB>`]: a pool (sqlx's) registered as a singleton that provides
//!   `dyn tegu_tx::TxSource`, by object name.
//! - [`Database::conn`]: the connection a statement runs on: the current transaction's
//!   (the innermost `#[transactional]` method's of the task, else the request's), or the pool's
//!   outside any.
//! - SQLite transactions begin `IMMEDIATE` (one writer at a time, waited for); a transaction
//!   SQLite rolls back itself (a full disk, an I/O error, `RAISE(ROLLBACK)`) is seen through a
//!   rollback hook and refuses every later statement, so nothing runs outside it and commits
//!   on its own, and its commit fails the request.
//! - On PostgreSQL, `[database] tenant_setting = "app.tenant"` makes each transaction begin
//!   with `set_config('app.tenant', key, true)`, `key` being the tenant its scope serves (`''`
//!   without one), for row-level security policies (see [`Database`]).
//! - [`ClusterSchedules<DB>`]: the runs of `#[schedule(.., once_per_cluster)]` jobs, claimed in
//!   a table of the database, so that one instance of a service runs each due time.
//! - [`OutboxTable<DB>`] (feature `outbox`, on by default): tegu-outbox's outbox, a table written in
//!   the request's transaction.
//!
//! See tegu-tx for the propagations, and [`Database`] for an example.

mod backend;
mod conn;
mod database;
#[cfg(feature = "outbox")]
mod outbox;
mod schedules;

pub use backend::Backend;
pub use conn::Conn;
pub use database::Database;
#[cfg(feature = "outbox")]
pub use outbox::OutboxTable;
pub use schedules::ClusterSchedules;
#[cfg(feature = "postgres")]
pub use sqlx::Postgres;
#[cfg(feature = "sqlite")]
pub use sqlx::Sqlite;

/// The guide's chapters on transactions and on scheduled jobs (`docs/guide/transactions.md`,
/// `docs/guide/schedules.md`), run as doctests here, where their crates are.
#[cfg(doctest)]
pub mod guide {
    #[doc = include_str!("../../docs/guide/transactions.md")]
    pub struct Transactions;
    #[doc = include_str!("../../docs/guide/schedules.md")]
    pub struct Schedules;
}
