//! What a database adapter implements: a data source that begins transactions, and the
//! transaction it hands out.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;

use tegu_core::error::BoxError;

use crate::options::TxOptions;

/// The future an adapter's transaction operations return.
pub type TxFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send + 'a>>;

/// A data source: a singleton that begins transactions. Register it as providing
/// `dyn TxSource`; its object name is the name `#[transactional(source = "..")]` uses.
/// tegu-sqlx's `Database` is one; implement it for another database (a driver's pool).
///
/// # Examples
///
/// A source whose transactions are a log of what was done to them (a test double):
///
/// ```
/// use std::any::Any;
/// use std::sync::{Arc, Mutex};
/// use tegu_tx::{TxConn, TxFuture, TxSource};
///
/// #[derive(Default)]
/// struct Log(Arc<Mutex<Vec<String>>>);
/// struct LogTx(Arc<Mutex<Vec<String>>>);
///
/// impl TxSource for Log {
///     fn begin(&self) -> TxFuture<'_, Box<dyn TxConn>> {
///         self.0.lock().unwrap().push("BEGIN".into());
///         let log = self.0.clone();
///         Box::pin(async move { Ok(Box::new(LogTx(log)) as Box<dyn TxConn>) })
///     }
/// }
///
/// impl LogTx {
///     fn say(&self, what: String) -> TxFuture<'static, ()> {
///         self.0.lock().unwrap().push(what);
///         Box::pin(async { Ok(()) })
///     }
/// }
///
/// impl TxConn for LogTx {
///     fn commit(self: Box<Self>) -> TxFuture<'static, ()> { self.say("COMMIT".into()) }
///     fn rollback(self: Box<Self>) -> TxFuture<'static, ()> { self.say("ROLLBACK".into()) }
///     fn savepoint<'a>(&'a mut self, name: &'a str) -> TxFuture<'a, ()> { self.say(format!("SAVEPOINT {name}")) }
///     fn release_savepoint<'a>(&'a mut self, name: &'a str) -> TxFuture<'a, ()> { self.say(format!("RELEASE {name}")) }
///     fn rollback_to_savepoint<'a>(&'a mut self, name: &'a str) -> TxFuture<'a, ()> {
///         self.say(format!("ROLLBACK TO {name}"))
///     }
///     fn as_any_mut(&mut self) -> &mut dyn Any { self }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::error::BoxError> {
/// let log = Log::default();
/// let tx = log.begin().await?;
/// tx.commit().await?;
/// assert_eq!(*log.0.lock().unwrap(), ["BEGIN", "COMMIT"]);
/// # Ok(()) }
/// ```
pub trait TxSource: Send + Sync + 'static {
    /// Begins a transaction on a connection of its own.
    fn begin(&self) -> TxFuture<'_, Box<dyn TxConn>>;

    /// Begins a transaction set up as `options` say: its isolation level, read-only, and the
    /// database's side of its timeout (tegu-tx enforces the deadline itself too). What tegu-tx
    /// calls. The default begins a plain one ([`begin`](Self::begin)) when `options` ask for
    /// neither an isolation level nor read-only, and refuses otherwise, so that a source that
    /// cannot honour them never runs a transaction weaker than the method asked for.
    fn begin_with(&self, options: &TxOptions) -> TxFuture<'_, Box<dyn TxConn>> {
        if options.isolation_level().is_none() && !options.is_read_only() {
            return self.begin();
        }
        Box::pin(async {
            Err("this data source cannot begin a transaction with an isolation level or read-only: its adapter does not implement `TxSource::begin_with`".into())
        })
    }

    /// Whether the database runs one transaction at a time, holding it from its beginning
    /// (SQLite, whose transactions tegu-sqlx begins `IMMEDIATE`): then a `requires_new` method
    /// called inside a transaction of the same source would wait for that transaction, which
    /// waits for it, and tegu-tx refuses it at once instead. `false` by default.
    fn one_at_a_time(&self) -> bool {
        false
    }
}

/// An open transaction of a [`TxSource`], on its connection. tegu-tx calls these; the code of a
/// `#[transactional]` method reaches the connection through its adapter (tegu-sqlx's
/// `Database::conn`), which downcasts it with [`as_any_mut`](Self::as_any_mut).
///
/// Dropped without [`commit`](Self::commit) or [`rollback`](Self::rollback) (a method's future
/// cancelled, a panic), it must not commit: a driver's own transaction type rolls back on drop.
pub trait TxConn: Send + 'static {
    /// Commits the transaction.
    fn commit(self: Box<Self>) -> TxFuture<'static, ()>;
    /// Rolls the transaction back.
    fn rollback(self: Box<Self>) -> TxFuture<'static, ()>;
    /// Sets savepoint `name` (an identifier tegu-tx makes: `di_sp_1`, ...).
    fn savepoint<'a>(&'a mut self, name: &'a str) -> TxFuture<'a, ()>;
    /// Releases savepoint `name`, keeping what was done since.
    fn release_savepoint<'a>(&'a mut self, name: &'a str) -> TxFuture<'a, ()>;
    /// Rolls back to savepoint `name` (which stays set).
    fn rollback_to_savepoint<'a>(&'a mut self, name: &'a str) -> TxFuture<'a, ()>;
    /// Whether the database has ended the transaction itself (SQLite rolls a whole transaction
    /// back after a full disk, an I/O error or a `RAISE(ROLLBACK)`): then nothing of it is
    /// saved, and tegu-tx refuses every later use of it, so that no write runs outside it and
    /// commits on its own. `false` by default.
    fn aborted(&mut self) -> bool {
        false
    }
    /// The adapter's own type, for its typed access to the connection.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}
