//! The database: one SQLite connection (a singleton) and the per-request unit of work on it.

use std::sync::Arc;

use di_core::{context_proto, singleton_proto};
use di_http::RequestHead;
use rusqlite::Connection;
use tokio::sync::{Mutex, OwnedMutexGuard};

/// Where the database lives. Override it in tests with `AppBuilder::override_with`.
#[singleton_proto]
#[derive(Debug, Clone)]
pub struct Config {
    /// The SQLite file; `TODOS_DB`, default `todos.sqlite3`.
    pub db_path: DbPath,
}

/// The path of the SQLite file.
#[derive(Debug, Clone)]
pub struct DbPath(pub String);

impl Default for DbPath {
    fn default() -> Self {
        DbPath(std::env::var("TODOS_DB").unwrap_or_else(|_| "todos.sqlite3".to_owned()))
    }
}

/// A database error, with what was being done.
#[derive(Debug, thiserror::Error)]
#[error("{doing}: {source}")]
pub struct DbError {
    doing: &'static str,
    #[source]
    source: rusqlite::Error,
}

impl DbError {
    pub(crate) fn new(doing: &'static str) -> impl FnOnce(rusqlite::Error) -> DbError {
        move |source| DbError { doing, source }
    }
}

/// The connection, opened (and the schema created) when the App is built. SQLite runs one write
/// transaction at a time, so units of work take turns on one connection, waiting asynchronously.
#[singleton_proto(init = open)]
#[derive(Debug)]
pub struct Db {
    #[inject]
    config: Arc<Config>,
    /// Set by `open`.
    conn: std::sync::OnceLock<Arc<Mutex<Connection>>>,
}

impl Db {
    async fn open(&self) -> Result<(), DbError> {
        let conn = Connection::open(&self.config.db_path.0).map_err(DbError::new("opening the database"))?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE IF NOT EXISTS todos (
                 id    INTEGER PRIMARY KEY AUTOINCREMENT,
                 user  TEXT    NOT NULL,
                 title TEXT    NOT NULL,
                 done  INTEGER NOT NULL DEFAULT 0
             );
             CREATE INDEX IF NOT EXISTS todos_by_user ON todos (user, id);",
        )
        .map_err(DbError::new("creating the schema"))?;
        let _ = self.conn.set(Arc::new(Mutex::new(conn)));
        tracing::info!(path = %self.config.db_path.0, "database open");
        Ok(())
    }

    /// Waits for the connection.
    async fn acquire(&self) -> OwnedMutexGuard<Connection> {
        let conn = self.conn.get().expect("Db::open runs when the App is built");
        Arc::clone(conn).lock_owned().await
    }
}

/// The request's unit of work: a transaction begun on first use, committed when the request
/// ends with a success status, rolled back otherwise (an error status, a panic, a client that
/// went away).
#[context_proto(destroy = finish)]
#[derive(Debug)]
pub struct UnitOfWork {
    #[inject]
    db: Arc<Db>,
    #[inject]
    head: Arc<RequestHead>,
    tx: Mutex<Option<OwnedMutexGuard<Connection>>>,
}

impl UnitOfWork {
    /// Runs `f` inside the request's transaction, beginning it on first use.
    pub async fn run<R>(
        &self,
        doing: &'static str,
        f: impl FnOnce(&Connection) -> rusqlite::Result<R>,
    ) -> Result<R, DbError> {
        let mut tx = self.tx.lock().await;
        if tx.is_none() {
            let conn = self.db.acquire().await;
            conn.execute_batch("BEGIN IMMEDIATE").map_err(DbError::new("beginning a transaction"))?;
            *tx = Some(conn);
        }
        let conn = tx.as_ref().expect("set above");
        f(conn).map_err(DbError::new(doing))
    }

    async fn finish(&self) -> Result<(), DbError> {
        let Some(conn) = self.tx.lock().await.take() else { return Ok(()) };
        let (statement, outcome) =
            if self.head.succeeded() { ("COMMIT", "committed") } else { ("ROLLBACK", "rolled back") };
        conn.execute_batch(statement).map_err(DbError::new("ending the transaction"))?;
        tracing::info!(status = ?self.head.response_status(), "transaction {outcome}");
        Ok(())
    }
}
