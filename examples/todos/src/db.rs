//! The database: a writer and a reader connection to one SQLite file (a singleton), and the
//! per-request unit of work on them.
//!
//! The trade-off this file shows: a unit of work **ends its transaction in its completion
//! hook**, before the response is sent: COMMIT when the request succeeded, so a COMMIT that
//! fails (a full disk) answers 500 and nothing is acknowledged that was not stored; ROLLBACK
//! when it answered an error, so the writer is free at once. Its **destroy hook** rolls back
//! what no completion hook ended (a panic, a client gone), after the response; `Drop` is the
//! last resort.

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

    /// A write after the unit of work completed.
    fn completed(doing: &'static str) -> DbError {
        let misuse = rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_MISUSE);
        let message = "the request's unit of work has completed; write in a transaction of your own".to_owned();
        DbError { doing, source: rusqlite::Error::SqliteFailure(misuse, Some(message)) }
    }
}

/// The connections, opened (and the schema created) when the App is built. SQLite runs one
/// write transaction at a time, so units of work that write take turns on the writer, waiting
/// asynchronously. Reads of requests that did not write go through one of a few read-only
/// connections, which in WAL mode never wait for a writer (only for another read on the same
/// connection).
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
    readers: Vec<Mutex<Connection>>,
    next_reader: std::sync::atomic::AtomicUsize,
}

/// How many read-only connections `Db` opens.
const READERS: usize = 4;

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
        let readers = (0..READERS)
            .map(|_| {
                let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                Connection::open_with_flags(path, flags).map(Mutex::new)
            })
            .collect::<Result<_, _>>()
            .map_err(DbError::new("opening the database for reading"))?;
        let conns = Conns { writer: Arc::new(Mutex::new(writer)), readers, next_reader: Default::default() };
        let _ = self.conns.set(conns);
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

    /// Runs `f` on a read-only connection (the next one, round robin).
    async fn read<R>(&self, f: impl FnOnce(&Connection) -> R) -> R {
        let conns = self.conns();
        let next = conns.next_reader.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % conns.readers.len();
        f(&*conns.readers[next].lock().await)
    }

    /// Runs `f` on the writer between units of work, outside any transaction: for maintenance
    /// (and for tests that need to stand in for the disk, with `Connection::commit_hook`).
    pub async fn with_writer<R>(&self, f: impl FnOnce(&Connection) -> R) -> R {
        f(&*self.writer().await)
    }
}

/// The request's unit of work: a write transaction begun on first write, ended in the
/// completion phase (before the response): committed if the request succeeded, rolled back if
/// not. Once it has completed it takes no more writes: a background task of the request that
/// writes needs a transaction of its own.
#[context_proto(complete = complete, destroy = roll_back)]
#[derive(Debug)]
pub struct UnitOfWork {
    #[inject]
    db: Arc<Db>,
    #[inject]
    head: Arc<RequestHead>,
    tx: Mutex<Tx>,
}

/// Where the request's transaction stands.
#[derive(Debug, Default)]
enum Tx {
    /// Nothing written yet.
    #[default]
    None,
    /// Open, holding the writer.
    Open(OwnedMutexGuard<Connection>),
    /// Ended by the completion hook.
    Completed,
}

impl UnitOfWork {
    /// Runs `f` inside the request's write transaction, beginning it on first use.
    ///
    /// # Errors
    ///
    /// A `DbError` if SQLite fails, or if the unit of work has already completed.
    pub async fn write<R>(
        &self,
        doing: &'static str,
        f: impl FnOnce(&Connection) -> rusqlite::Result<R>,
    ) -> Result<R, DbError> {
        let mut tx = self.tx.lock().await;
        if matches!(*tx, Tx::None) {
            let conn = self.db.writer().await;
            conn.execute_batch("BEGIN IMMEDIATE").map_err(DbError::new("beginning a transaction"))?;
            *tx = Tx::Open(conn);
        }
        match &*tx {
            Tx::Open(conn) => f(conn).map_err(DbError::new(doing)),
            _ => Err(DbError::completed(doing)),
        }
    }

    /// Runs `f` on what the request can see: its own transaction if it wrote, else the last
    /// committed state through a read-only connection (no write lock taken, no writer waited
    /// for).
    ///
    /// # Errors
    ///
    /// A `DbError` if SQLite fails.
    pub async fn read<R>(
        &self,
        doing: &'static str,
        f: impl FnOnce(&Connection) -> rusqlite::Result<R>,
    ) -> Result<R, DbError> {
        let tx = self.tx.lock().await;
        let result = match &*tx {
            Tx::Open(conn) => f(conn),
            _ => self.db.read(f).await,
        };
        result.map_err(DbError::new(doing))
    }

    /// The completion hook: COMMIT if the request succeeded, else ROLLBACK, freeing the writer
    /// before the response leaves. A failed COMMIT fails the request (di-http answers 500) and
    /// is rolled back.
    async fn complete(&self) -> Result<(), DbError> {
        let mut tx = self.tx.lock().await;
        let Tx::Open(conn) = std::mem::replace(&mut *tx, Tx::Completed) else { return Ok(()) };
        if !self.head.succeeded() {
            end_transaction(&conn);
            tracing::info!(status = ?self.head.response_status(), "transaction rolled back");
            return Ok(());
        }
        let committed = conn.execute_batch("COMMIT").map_err(DbError::new("committing"));
        match &committed {
            Ok(()) => tracing::info!(status = ?self.head.response_status(), "transaction committed"),
            Err(_) => end_transaction(&conn),
        }
        committed
    }

    /// The destroy hook: ROLLBACK what no completion hook ended (a panic, a client gone).
    async fn roll_back(&self) {
        if let Tx::Open(conn) = std::mem::take(&mut *self.tx.lock().await) {
            end_transaction(&conn);
            tracing::info!(status = ?self.head.response_status(), "transaction rolled back");
        }
    }
}

/// Rolls back an open transaction: a writer never goes back with one open.
fn end_transaction(conn: &Connection) {
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
        if let Tx::Open(conn) = std::mem::take(self.tx.get_mut()) {
            end_transaction(&conn);
            tracing::warn!("a unit of work was dropped with its transaction open; rolled back");
        }
    }
}
