//! The database: a writer and a reader connection to one SQLite file (a singleton), and the
//! per-request unit of work on them.
//!
//! The trade-off this file shows: a unit of work **ends its transaction in its completion
//! hook**, before the response is sent: COMMIT when the request succeeded, so a COMMIT that
//! fails (a full disk) answers 500 and nothing is acknowledged that was not stored; ROLLBACK
//! when it answered an error, so the writer is free at once. Its **destroy hook** rolls back
//! what no completion hook ended (a panic, a client gone), after the response; `Drop` is the
//! last resort. It follows SQLite's real state: a transaction SQLite rolled back itself after
//! an error aborts the unit of work, which then refuses every write and fails the request.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use di_core::{CheckFuture, ContextRef, HealthCheck, config_proto, context_proto, singleton_proto};
use di_http::RequestHead;
use rusqlite::{Connection, OpenFlags};
use serde::Deserialize;
use tokio::sync::{Mutex, OwnedMutexGuard};

/// The `[db]` section of `config/todos.toml` (`TODOS_DB__PATH`, `TODOS_DB__READERS`).
#[config_proto(prefix = "db")]
#[derive(Debug, Clone, Deserialize)]
pub struct DbConfig {
    /// The SQLite file; a relative path is relative to this example's folder.
    #[serde(default = "default_path")]
    pub path: PathBuf,
    /// How many read-only connections to open.
    #[serde(default = "default_readers")]
    pub readers: usize,
}

fn default_path() -> PathBuf {
    PathBuf::from("todos.sqlite3")
}

fn default_readers() -> usize {
    4
}

impl DbConfig {
    /// The database file, absolute: a relative `path` is taken from this example's folder (a
    /// path relative to the working directory served an empty database when the service was
    /// started elsewhere), so that the start-up line says exactly which file.
    pub fn file(&self) -> PathBuf {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(&self.path);
        std::path::absolute(&path).unwrap_or(path)
    }
}

/// A database error, with what was being done.
#[derive(Debug, thiserror::Error)]
#[error("{doing}: {source}")]
pub struct DbError {
    doing: &'static str,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl DbError {
    pub(crate) fn new(doing: &'static str) -> impl FnOnce(rusqlite::Error) -> DbError {
        move |source| DbError { doing, source: Box::new(source) }
    }

    /// `doing` could not even start: `why`.
    fn refused(doing: &'static str, why: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> DbError {
        DbError { doing, source: why.into() }
    }

    /// A write after the unit of work completed.
    fn completed(doing: &'static str) -> DbError {
        Self::refused(doing, "the request's unit of work has completed; write in a transaction of your own")
    }

    /// A write after SQLite rolled the request's transaction back.
    fn aborted(doing: &'static str) -> DbError {
        Self::refused(
            doing,
            "SQLite rolled the request's transaction back after an earlier error: nothing of it is saved, and it takes no more writes",
        )
    }
}

/// The connections, opened (and the schema created) by the async constructor when the App is
/// built. SQLite runs one write transaction at a time, so units of work that write take turns
/// on the writer, waiting asynchronously. Reads of requests that did not write go through one of
/// a few read-only connections, which in WAL mode never wait for a writer (only for another
/// read on the same connection).
#[derive(Debug)]
pub struct Db {
    file: PathBuf,
    writer: Arc<Mutex<Connection>>,
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
}

#[singleton_proto(provides(dyn HealthCheck))]
impl Db {
    /// Opens the database that `config` names, creating the schema.
    ///
    /// # Errors
    ///
    /// A `DbError` if the file cannot be opened or the schema created: `App::build` fails with
    /// it, naming `Db`.
    pub async fn new(config: Arc<DbConfig>) -> Result<Self, DbError> {
        let file = config.file();
        let readers = config.readers.max(1);
        // SQLite's calls block: open on a blocking thread, not on the runtime's workers.
        let (writer, readers) = tokio::task::spawn_blocking({
            let file = file.clone();
            move || open(&file, readers)
        })
        .await
        .expect("opening the database panicked")?;
        tracing::info!(file = %file.display(), "database open");
        Ok(Db { file, writer: Arc::new(Mutex::new(writer)), readers, next_reader: AtomicUsize::new(0) })
    }

    /// The database file.
    pub fn file(&self) -> &std::path::Path {
        &self.file
    }

    /// Waits for the writer.
    async fn writer(&self) -> OwnedMutexGuard<Connection> {
        Arc::clone(&self.writer).lock_owned().await
    }

    /// Runs `f` on a read-only connection (the next one, round robin).
    async fn read<R>(&self, f: impl FnOnce(&Connection) -> R) -> R {
        let next = self.next_reader.fetch_add(1, Ordering::Relaxed) % self.readers.len();
        f(&*self.readers[next].lock().await)
    }

    /// Runs `f` on the writer between units of work, outside any transaction: for maintenance
    /// (and for tests that need to stand in for the disk, with `Connection::commit_hook`).
    pub async fn with_writer<R>(&self, f: impl FnOnce(&Connection) -> R) -> R {
        f(&*self.writer().await)
    }
}

/// The readiness check `db` (`GET /health/ready`): the database file answers a query on a
/// connection of its own, opened read-only for the check. A file removed or made unreadable
/// fails it, though the open connections would go on working on what they hold.
impl HealthCheck for Db {
    fn check(self: Arc<Self>) -> CheckFuture {
        Box::pin(async move {
            let file = self.file.clone();
            tokio::task::spawn_blocking(move || {
                let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let conn = Connection::open_with_flags(&file, flags)?;
                conn.query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get::<_, i64>(0))
            })
            .await?
            .map(drop)
            .map_err(Into::into)
        })
    }
}

/// The request's unit of work: a write transaction begun on first write, ended in the
/// completion phase (before the response): committed if the request succeeded, rolled back if
/// not.
///
/// It follows SQLite's own state: after any statement, if SQLite has ended the transaction
/// itself (some errors do, a full disk or an I/O error among them, and a `RAISE(ROLLBACK)`),
/// the unit of work is **aborted**: nothing of it is saved, it refuses every later write and
/// savepoint (one would otherwise run outside any transaction and commit on its own), and its
/// completion fails the request (500) unless the request had failed already.
///
/// Once it has completed (or been destroyed) it takes no more writes: work that outlives the
/// response (a background task) needs a transaction of its own, and one that first touches the
/// unit of work after the response is fixed is refused by the container itself
/// (`DiError::LateCompletion`).
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
    /// Ended by the completion or destroy hook (committed or rolled back).
    Completed,
    /// Ended by SQLite itself after an error: nothing saved; the request fails.
    Aborted,
}

impl UnitOfWork {
    /// The current request's unit of work through `handle`, or why there is none: outside a
    /// request, or first asked for once the response is fixed (a background task of the
    /// request), when no commit would follow its writes.
    ///
    /// # Errors
    ///
    /// A `DbError` naming the container's refusal.
    pub fn current(handle: &ContextRef<UnitOfWork>) -> Result<Arc<UnitOfWork>, DbError> {
        handle.try_get().map_err(|e| DbError::refused("reaching the request's unit of work", e))
    }

    /// Runs `f` inside the request's write transaction, beginning it on first use.
    ///
    /// # Errors
    ///
    /// A `DbError` if SQLite fails (and if that ended the transaction, every later write fails
    /// too), or if the unit of work has completed or was aborted.
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
        let (result, ended) = match &*tx {
            // In autocommit mode already: something ended the transaction behind our back.
            Tx::Open(conn) if conn.is_autocommit() => (Err(DbError::aborted(doing)), true),
            Tx::Open(conn) => {
                let result = f(conn).map_err(DbError::new(doing));
                (result, conn.is_autocommit())
            }
            Tx::Aborted => return Err(DbError::aborted(doing)),
            Tx::None | Tx::Completed => return Err(DbError::completed(doing)),
        };
        if ended {
            // The writer goes back with no transaction open; the request's writes are lost.
            *tx = Tx::Aborted;
            tracing::error!(doing, "SQLite ended the request's transaction itself; nothing of it is saved");
            return Err(result.err().unwrap_or_else(|| DbError::aborted(doing)));
        }
        result
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
    /// is rolled back; so does a transaction SQLite aborted, in a request that answered as if
    /// it had succeeded.
    async fn complete(&self) -> Result<(), DbError> {
        let mut tx = self.tx.lock().await;
        let conn = match std::mem::replace(&mut *tx, Tx::Completed) {
            Tx::Open(conn) => conn,
            Tx::Aborted if self.head.succeeded() => return Err(DbError::aborted("completing the request")),
            _ => return Ok(()),
        };
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

    /// The destroy hook: ROLLBACK what no completion hook ended (a panic, a client gone). The
    /// unit of work stays completed: a kept reference cannot write through it.
    async fn roll_back(&self) {
        if let Tx::Open(conn) = std::mem::replace(&mut *self.tx.lock().await, Tx::Completed) {
            end_transaction(&conn);
            tracing::info!(status = ?self.head.response_status(), "transaction rolled back");
        }
    }
}

/// Opens the writer (creating the schema) and `readers` read-only connections on `file`.
fn open(file: &std::path::Path, readers: usize) -> Result<(Connection, Vec<Mutex<Connection>>), DbError> {
    let writer = Connection::open(file).map_err(DbError::new("opening the database"))?;
    writer
        .execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE IF NOT EXISTS todos (
                 id    INTEGER PRIMARY KEY AUTOINCREMENT,
                 user  TEXT    NOT NULL,
                 title TEXT    NOT NULL,
                 done  INTEGER NOT NULL DEFAULT 0,
                 done_at INTEGER
             );
             CREATE INDEX IF NOT EXISTS todos_by_user ON todos (user, id);",
        )
        .map_err(DbError::new("creating the schema"))?;
    // Files made before `done_at` (the purge job's column) gain it.
    let has_done_at = writer
        .prepare("SELECT 1 FROM pragma_table_info('todos') WHERE name = 'done_at'")
        .and_then(|mut stmt| stmt.exists([]))
        .map_err(DbError::new("reading the schema"))?;
    if !has_done_at {
        writer
            .execute_batch("ALTER TABLE todos ADD COLUMN done_at INTEGER")
            .map_err(DbError::new("adding the done_at column"))?;
    }
    let readers = (0..readers)
        .map(|_| {
            let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            Connection::open_with_flags(file, flags).map(Mutex::new)
        })
        .collect::<Result<_, _>>()
        .map_err(DbError::new("opening the database for reading"))?;
    Ok((writer, readers))
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
