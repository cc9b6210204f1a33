//! The database: a writer and a reader connection to one SQLite file (a singleton), and the
//! per-request unit of work on them.
//!
//! The trade-off this file shows: a unit of work **commits in its completion hook**, before the
//! response is sent, so a COMMIT that fails (a full disk) answers 500 and nothing is
//! acknowledged that was not stored; it **rolls back in its destroy hook**, which runs for every
//! request that did not commit (an error status, a panic, a client gone), after the response.

use std::path::PathBuf;
use std::sync::Arc;

use di_core::{context_proto, singleton_proto};
use di_http::RequestHead;
use rusqlite::{Connection, OpenFlags};
use tokio::sync::{Mutex, OwnedMutexGuard};

/// Where the database lives. Override it in tests with `AppBuilder::override_with`.
#[singleton_proto]
#[derive(Debug, Clone)]
pub struct Config {
    /// The SQLite file: `TODOS_DB`, or `todos.sqlite3` beside this example's `Cargo.toml`.
    pub db_path: DbPath,
}

/// The path of the SQLite file, absolute.
#[derive(Debug, Clone)]
pub struct DbPath(pub String);

impl Default for DbPath {
    /// `TODOS_DB`, or `todos.sqlite3` in this example's folder: the same file whatever the
    /// directory the service starts from (a relative default served an empty database when
    /// started elsewhere). Made absolute, so that the start-up line says exactly which file.
    fn default() -> Self {
        let path = std::env::var_os("TODOS_DB")
            .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("todos.sqlite3"), PathBuf::from);
        let path = std::path::absolute(&path).unwrap_or(path);
        DbPath(path.display().to_string())
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

/// The connections, opened (and the schema created) when the App is built. SQLite runs one
/// write transaction at a time, so units of work that write take turns on the writer, waiting
/// asynchronously; reads go through the reader, which in WAL mode never waits for a writer.
#[singleton_proto(init = open)]
#[derive(Debug)]
pub struct Db {
    #[inject]
    config: Arc<Config>,
    /// Set by `open`.
    conns: std::sync::OnceLock<Conns>,
}

#[derive(Debug)]
struct Conns {
    writer: Arc<Mutex<Connection>>,
    reader: Mutex<Connection>,
}

impl Db {
    async fn open(&self) -> Result<(), DbError> {
        let path = &self.config.db_path.0;
        let writer = Connection::open(path).map_err(DbError::new("opening the database"))?;
        writer
            .execute_batch(
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
        let reader =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
                .map_err(DbError::new("opening the database for reading"))?;
        let _ = self.conns.set(Conns { writer: Arc::new(Mutex::new(writer)), reader: Mutex::new(reader) });
        tracing::info!(%path, "database open");
        Ok(())
    }

    fn conns(&self) -> &Conns {
        self.conns.get().expect("Db::open runs when the App is built")
    }

    /// Waits for the writer.
    async fn writer(&self) -> OwnedMutexGuard<Connection> {
        Arc::clone(&self.conns().writer).lock_owned().await
    }

    /// Runs `f` on the writer between units of work, outside any transaction: for maintenance
    /// (and for tests that need to stand in for the disk, with `Connection::commit_hook`).
    pub async fn with_writer<R>(&self, f: impl FnOnce(&Connection) -> R) -> R {
        f(&*self.writer().await)
    }
}

/// The request's unit of work: a write transaction begun on first write, committed when the
/// request succeeded (in the completion phase, before the response), rolled back otherwise.
#[context_proto(complete = commit, destroy = roll_back)]
#[derive(Debug)]
pub struct UnitOfWork {
    #[inject]
    db: Arc<Db>,
    #[inject]
    head: Arc<RequestHead>,
    /// The writer, while this request's transaction is open.
    tx: Mutex<Option<OwnedMutexGuard<Connection>>>,
}

impl UnitOfWork {
    /// Runs `f` inside the request's write transaction, beginning it on first use.
    pub async fn write<R>(
        &self,
        doing: &'static str,
        f: impl FnOnce(&Connection) -> rusqlite::Result<R>,
    ) -> Result<R, DbError> {
        let mut tx = self.tx.lock().await;
        if tx.is_none() {
            let conn = self.db.writer().await;
            conn.execute_batch("BEGIN IMMEDIATE").map_err(DbError::new("beginning a transaction"))?;
            *tx = Some(conn);
        }
        let conn = tx.as_ref().expect("set above");
        f(conn).map_err(DbError::new(doing))
    }

    /// Runs `f` on what the request can see: its own transaction if it wrote, else the last
    /// committed state, through the reader (no write lock taken, no writer waited for).
    pub async fn read<R>(
        &self,
        doing: &'static str,
        f: impl FnOnce(&Connection) -> rusqlite::Result<R>,
    ) -> Result<R, DbError> {
        let tx = self.tx.lock().await;
        let result = match tx.as_ref() {
            Some(conn) => f(conn),
            None => f(&*self.db.conns().reader.lock().await),
        };
        result.map_err(DbError::new(doing))
    }

    /// The completion hook: COMMIT if the request succeeded. A failed COMMIT fails the request
    /// (di-http answers 500); the transaction stays open for `roll_back`.
    async fn commit(&self) -> Result<(), DbError> {
        if !self.head.succeeded() {
            return Ok(());
        }
        let mut tx = self.tx.lock().await;
        let Some(conn) = tx.as_ref() else { return Ok(()) };
        conn.execute_batch("COMMIT").map_err(DbError::new("committing"))?;
        *tx = None;
        tracing::info!(status = ?self.head.response_status(), "transaction committed");
        Ok(())
    }

    /// The destroy hook: ROLLBACK whatever was not committed.
    async fn roll_back(&self) {
        if let Some(conn) = self.tx.lock().await.take() {
            roll_back(&conn);
            tracing::info!(status = ?self.head.response_status(), "transaction rolled back");
        }
    }
}

/// Ends an open transaction; a writer never goes back to the pool with one open.
fn roll_back(conn: &Connection) {
    if !conn.is_autocommit()
        && let Err(error) = conn.execute_batch("ROLLBACK")
    {
        tracing::error!(%error, "rolling back failed");
    }
}

impl Drop for UnitOfWork {
    /// The last line of defence: if the destroy hook did not run (its scope's end was cut, the
    /// runtime went away), the transaction is rolled back here, synchronously.
    fn drop(&mut self) {
        if let Some(conn) = self.tx.get_mut().take() {
            roll_back(&conn);
            tracing::warn!("a unit of work was dropped with its transaction open; rolled back");
        }
    }
}
