//! What differs between the databases: how a transaction begins, how a savepoint is written,
//! whether the database can end a transaction itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::{Pool, Transaction};
use tegu_core::error::BoxError;
use tegu_tx::{Busy, Classified, ErrorClass, TxConn, TxFuture, TxOptions};

/// A database tegu-sqlx runs transactions on: SQLite and Postgres. Sealed.
pub trait Backend: sqlx::Database + sealed::Sealed {
    /// Whether it runs one write transaction at a time, held from its beginning (SQLite).
    #[doc(hidden)]
    const ONE_AT_A_TIME: bool;

    /// Whether a transaction can carry a setting of its own: PostgreSQL's
    /// `set_config(name, value, true)`, which `[database] tenant_setting` needs.
    #[doc(hidden)]
    const TX_SETTINGS: bool;

    /// Begins a transaction on a connection of `pool`, set up as `options` say (isolation,
    /// read-only, the statements' timeout), then gives it `setting` (a name checked when the
    /// data source was built, and a value) until it ends: only where
    /// [`TX_SETTINGS`](Self::TX_SETTINGS), `None` elsewhere. With `resolve`, a `COMMIT` whose
    /// answer is lost is resolved against the database (PostgreSQL's `resolve_commits`).
    ///
    /// With `reset` (a read-only transaction was begun on the pool, whose setup a connection
    /// may still carry: one dropped before its end ran), the setup is undone first.
    #[doc(hidden)]
    fn begin(
        pool: &Pool<Self>,
        options: TxOptions,
        setting: Option<(Arc<str>, String)>,
        resolve: bool,
        reset: bool,
    ) -> TxFuture<'_, Box<dyn TxConn>>;

    /// Whether a read-only transaction is set up on its connection (SQLite's `query_only`),
    /// which a connection dropped before the transaction's end may keep.
    #[doc(hidden)]
    const READ_ONLY_ON_CONNECTION: bool;

    /// Undoes on `conn` what a read-only transaction dropped before its end may have left
    /// (SQLite's `query_only`): for a connection of the pool used outside any transaction.
    #[doc(hidden)]
    fn reset(conn: &mut sqlx::pool::PoolConnection<Self>) -> TxFuture<'_, ()>;

    /// The class of an error of this database with `code` (SQLite's extended result code,
    /// PostgreSQL's SQLSTATE) that sqlx's `ErrorKind` does not tell: busy, a serialization
    /// failure, a deadlock, an aborted transaction, a lost connection.
    #[doc(hidden)]
    fn class_of_code(code: &str) -> Option<ErrorClass>;

    /// Commits `tx`; a transaction the database had aborted is [`AbortedByDatabase`]. With
    /// `resolve` (the pool, for a connection of its own), a `COMMIT` whose answer is lost is
    /// resolved against the database; without, it is [`ErrorClass::OutcomeUnknown`].
    #[doc(hidden)]
    fn commit(tx: Transaction<'static, Self>, resolve: Option<Pool<Self>>) -> TxFuture<'static, ()>;
}

/// The class of `error` ([`ErrorClass`]), the same on both databases for the same failure.
pub(crate) fn class_of<DB: Backend>(error: &sqlx::Error) -> ErrorClass {
    match error {
        sqlx::Error::PoolTimedOut => ErrorClass::Busy,
        sqlx::Error::Io(_) | sqlx::Error::Tls(_) | sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed => {
            ErrorClass::ConnectionLost
        }
        sqlx::Error::Database(db) => {
            if let Some(class) = db.code().and_then(|code| DB::class_of_code(&code)) {
                return class;
            }
            match db.kind() {
                sqlx::error::ErrorKind::UniqueViolation => ErrorClass::UniqueViolation,
                sqlx::error::ErrorKind::ForeignKeyViolation => ErrorClass::ForeignKeyViolation,
                sqlx::error::ErrorKind::NotNullViolation => ErrorClass::NotNullViolation,
                sqlx::error::ErrorKind::CheckViolation => ErrorClass::CheckViolation,
                _ => ErrorClass::Other,
            }
        }
        _ => ErrorClass::Other,
    }
}

/// `error` boxed for tegu-tx, with its class: a [`Busy`] (which tegu-tx reports as
/// `TxError::Busy`) if the pool stayed exhausted for its acquire timeout or the database said
/// it is busy, a [`Classified`] error for the other classes (`TxError::class` reads it), else
/// as it is.
pub(crate) fn boxed<DB: Backend>(error: sqlx::Error) -> BoxError {
    match class_of::<DB>(&error) {
        ErrorClass::Busy => Box::new(Busy(Box::new(error))),
        ErrorClass::Other => Box::new(error),
        class => Box::new(Classified { class, error: Box::new(error) }),
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A transaction of database `DB`, as tegu-tx holds it.
pub(crate) struct SqlxTx<DB: sqlx::Database> {
    pub(crate) tx: Transaction<'static, DB>,
    /// Set by SQLite's rollback hook: the database rolled the transaction back (our own
    /// rollbacks end the transaction before they run, so only its own are seen). `None` for
    /// Postgres, which keeps a failed transaction open, refusing statements until rolled back.
    rolled_back: Option<Arc<AtomicBool>>,
    /// The statement running ([`run`](Self::run)).
    sql: String,
    /// The tenant key its `tenant_setting` was set to at `BEGIN` (PostgreSQL, with the setting).
    pub(crate) tenant: Option<String>,
    /// The pool, where a `COMMIT` whose answer is lost is resolved against the database.
    resolve: Option<Pool<DB>>,
    /// A statement that undoes the transaction's setup on its connection before it ends
    /// (SQLite's `PRAGMA query_only = OFF` after a read-only one), so that the connection goes
    /// back to the pool as it came.
    undo: Option<&'static str>,
}

/// The statements and conversions both databases share.
macro_rules! tx_conn {
    ($db:ty) => {
        impl TxConn for SqlxTx<$db> {
            fn commit(mut self: Box<Self>) -> TxFuture<'static, ()> {
                let Some(undo) = self.undo else { return <$db as Backend>::commit(self.tx, self.resolve) };
                Box::pin(async move {
                    sqlx::Executor::execute(&mut *self.tx, undo).await.map_err(boxed::<$db>)?;
                    <$db as Backend>::commit(self.tx, self.resolve).await
                })
            }

            fn rollback(mut self: Box<Self>) -> TxFuture<'static, ()> {
                Box::pin(async move {
                    if let Some(undo) = self.undo {
                        sqlx::Executor::execute(&mut *self.tx, undo).await.map_err(boxed::<$db>)?;
                    }
                    if self.aborted() {
                        // SQLite ended the transaction; sqlx still counts it open, and would
                        // take the connection's next BEGIN for a savepoint's. A BEGIN makes its
                        // ROLLBACK true again, and the connection goes back to the pool sound.
                        sqlx::Executor::execute(&mut *self.tx, "BEGIN").await.map_err(boxed::<$db>)?;
                    }
                    self.tx.rollback().await.map_err(boxed::<$db>)
                })
            }

            fn savepoint<'a>(&'a mut self, name: &'a str) -> TxFuture<'a, ()> {
                self.run(format!("SAVEPOINT {name}"))
            }

            fn release_savepoint<'a>(&'a mut self, name: &'a str) -> TxFuture<'a, ()> {
                self.run(format!("RELEASE SAVEPOINT {name}"))
            }

            fn rollback_to_savepoint<'a>(&'a mut self, name: &'a str) -> TxFuture<'a, ()> {
                self.run(format!("ROLLBACK TO SAVEPOINT {name}"))
            }

            fn aborted(&mut self) -> bool {
                self.rolled_back.as_ref().is_some_and(|flag| flag.load(Ordering::Acquire))
            }

            fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
                self
            }
        }

        impl SqlxTx<$db> {
            /// Runs `sql` (a savepoint statement tegu-tx made) on the transaction's connection.
            /// Kept in the transaction while it runs: the driver's future borrows it (an
            /// `async` block awaiting the driver's generic executor is refused as not `Send`
            /// for every lifetime, rust-lang/rust#102211).
            fn run(&mut self, sql: String) -> TxFuture<'_, ()> {
                self.sql = sql;
                let done = sqlx::Executor::execute(&mut *self.tx, self.sql.as_str());
                Box::pin(async move {
                    done.await.map_err(boxed::<$db>)?;
                    Ok(())
                })
            }
        }
    };
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use sqlx::Sqlite;

    impl sealed::Sealed for Sqlite {}

    impl Backend for Sqlite {
        const ONE_AT_A_TIME: bool = true;

        const READ_ONLY_ON_CONNECTION: bool = true;

        fn reset(conn: &mut sqlx::pool::PoolConnection<Self>) -> TxFuture<'_, ()> {
            let done = sqlx::Executor::execute(&mut **conn, "PRAGMA query_only = OFF");
            Box::pin(async move {
                done.await.map_err(boxed::<Self>)?;
                Ok(())
            })
        }

        /// SQLite has no settings of a transaction's own: `[database] tenant_setting` is
        /// refused when the data source is built.
        const TX_SETTINGS: bool = false;

        /// `SQLITE_BUSY` (primary result code 5, any extended one): another connection held
        /// the database past the busy timeout. `SQLITE_LOCKED` (6, any extended one: a table
        /// or the schema locked by another connection of a shared cache, a deadlock among
        /// them): another connection holds a lock, reported at once; SQLite undoes the
        /// statement, not the transaction, and the same statement succeeds once the lock is
        /// released, as after `SQLITE_BUSY`. Both are `Busy`. The constraints are sqlx's
        /// `ErrorKind`s.
        fn class_of_code(code: &str) -> Option<ErrorClass> {
            const BUSY: i32 = 5;
            const LOCKED: i32 = 6;
            code.parse::<i32>().is_ok_and(|code| matches!(code & 0xff, BUSY | LOCKED)).then_some(ErrorClass::Busy)
        }

        /// SQLite commits or fails, in the process: no answer to lose. A transaction it ended
        /// itself is seen before, through the rollback hook ([`TxConn::aborted`]).
        fn commit(tx: Transaction<'static, Self>, _: Option<Pool<Self>>) -> TxFuture<'static, ()> {
            Box::pin(async move { tx.commit().await.map_err(boxed::<Self>) })
        }

        /// `BEGIN IMMEDIATE`: SQLite runs one writer at a time, and a transaction that begins
        /// deferred, reads, then writes, fails with `SQLITE_BUSY` when another wrote meanwhile;
        /// begun immediate, it waits for the writer (the busy timeout) instead. A read-only one
        /// begins deferred (it takes no write lock, and never writes) with `PRAGMA query_only`
        /// on until it ends. Every isolation level is served: SQLite's transactions are
        /// serializable. A rollback hook tells when SQLite ends the transaction itself.
        fn begin(
            pool: &Pool<Self>,
            options: TxOptions,
            setting: Option<(Arc<str>, String)>,
            _: bool,
            reset: bool,
        ) -> TxFuture<'_, Box<dyn TxConn>> {
            debug_assert!(setting.is_none(), "refused when the data source is built");
            Box::pin(async move {
                let (begin, undo) = match (options.is_read_only(), reset) {
                    (true, _) => ("BEGIN; PRAGMA query_only = ON", Some("PRAGMA query_only = OFF")),
                    (false, true) => ("PRAGMA query_only = OFF; BEGIN IMMEDIATE", None),
                    (false, false) => ("BEGIN IMMEDIATE", None),
                };
                let mut tx = pool.begin_with(begin).await.map_err(boxed::<Self>)?;
                let rolled_back = Arc::new(AtomicBool::new(false));
                let flag = Arc::clone(&rolled_back);
                tx.lock_handle().await?.set_rollback_hook(move || flag.store(true, Ordering::Release));
                Ok(Box::new(SqlxTx {
                    tx,
                    rolled_back: Some(rolled_back),
                    sql: String::new(),
                    tenant: None,
                    resolve: None,
                    undo,
                }) as Box<dyn TxConn>)
            })
        }
    }

    tx_conn!(Sqlite);
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use sqlx::Postgres;

    impl sealed::Sealed for Postgres {}

    impl Backend for Postgres {
        const ONE_AT_A_TIME: bool = false;

        /// `READ ONLY` is the transaction's own: it ends with it.
        const READ_ONLY_ON_CONNECTION: bool = false;

        fn reset(_: &mut sqlx::pool::PoolConnection<Self>) -> TxFuture<'_, ()> {
            Box::pin(async { Ok(()) })
        }

        const TX_SETTINGS: bool = true;

        /// `too_many_connections` (53300) and `cannot_connect_now` (57P03): the server refused
        /// the pool a new connection; `serialization_failure` (40001), `deadlock_detected`
        /// (40P01), `in_failed_sql_transaction` (25P02: a statement in an aborted
        /// transaction), `query_canceled` (57014: the transaction's `statement_timeout`), and the server going away (`admin_shutdown` and the like, class 57P,
        /// and the connection exceptions, class 08).
        fn class_of_code(code: &str) -> Option<ErrorClass> {
            match code {
                "53300" | "57P03" => Some(ErrorClass::Busy),
                "40001" => Some(ErrorClass::SerializationFailure),
                "40P01" => Some(ErrorClass::Deadlock),
                "25P02" => Some(ErrorClass::Aborted),
                "57014" => Some(ErrorClass::TimedOut),
                _ if code.starts_with("57P") || code.starts_with("08") => Some(ErrorClass::ConnectionLost),
                _ => None,
            }
        }

        /// PostgreSQL answers the `COMMIT` of a transaction it aborted (any statement of it
        /// failed, even one the caller took in stride) with the tag `ROLLBACK` and no error,
        /// which sqlx does not read: its `commit()` returns `Ok`. So the commit is sent as
        /// `SELECT 1; COMMIT; BEGIN` in one message, one round trip as a plain `COMMIT`: in an
        /// aborted transaction the `SELECT` fails with `25P02` and the rest is skipped (the
        /// transaction is rolled back when `tx` is dropped); otherwise the `COMMIT` commits,
        /// and the empty transaction the `BEGIN` opens is what `tx`'s drop rolls back, with the
        /// check the pool makes of a connection given back (in the same round trip).
        ///
        /// The connection lost once the `COMMIT` may have been sent, its outcome is unknown:
        /// [`ErrorClass::OutcomeUnknown`]. With `resolve`, the transaction's id is learnt in a
        /// round trip of its own before the `COMMIT` (`pg_current_xact_id_if_assigned()`: one
        /// that wrote nothing has none, and nothing to resolve), and a lost answer is resolved
        /// with `pg_xact_status` on a connection of its own ([`resolve`]).
        fn commit(mut tx: Transaction<'static, Self>, resolve: Option<Pool<Self>>) -> TxFuture<'static, ()> {
            Box::pin(async move {
                let aborted = |error: sqlx::Error| match class_of::<Self>(&error) {
                    ErrorClass::Aborted => Box::new(tegu_tx::AbortedByDatabase) as BoxError,
                    _ => boxed::<Self>(error),
                };
                let Some(pool) = resolve else {
                    // The driver's boxed future: an `async` block awaiting its generic executor
                    // is refused as not `Send` for every lifetime (rust-lang/rust#102211). A
                    // query without arguments is sent as one simple-protocol message.
                    let committed = sqlx::Executor::execute(&mut *tx, "SELECT 1; COMMIT; BEGIN").await;
                    return match committed {
                        Ok(_) => Ok(()),
                        Err(error) if class_of::<Self>(&error) == ErrorClass::ConnectionLost => Err(unknown(error)),
                        Err(error) => Err(aborted(error)),
                    };
                };
                // Before the `COMMIT`, a connection lost means a transaction rolled back.
                let xid: Option<String> =
                    sqlx::Executor::fetch_one(&mut *tx, "SELECT pg_current_xact_id_if_assigned()::text")
                        .await
                        .and_then(|row| sqlx::Row::try_get(&row, 0))
                        .map_err(aborted)?;
                let committed = sqlx::Executor::execute(&mut *tx, "COMMIT; BEGIN").await;
                match committed {
                    Ok(_) => Ok(()),
                    Err(error) if class_of::<Self>(&error) == ErrorClass::ConnectionLost => match xid {
                        // It wrote nothing: whether its `COMMIT` applied changes no data.
                        None => Ok(()),
                        Some(xid) => self::resolve(&pool, &xid, error).await,
                    },
                    Err(error) => Err(aborted(error)),
                }
            })
        }

        /// `BEGIN` with the isolation level and `READ ONLY` asked for, and `SET LOCAL
        /// statement_timeout` to the transaction's timeout, in one message; then, with
        /// `setting`, `SELECT set_config($1, $2, true)`: the setting holds until the transaction
        /// ends (as `SET LOCAL`), so a connection goes back to the pool without it. Name and
        /// value are bind parameters.
        fn begin(
            pool: &Pool<Self>,
            options: TxOptions,
            setting: Option<(Arc<str>, String)>,
            resolve: bool,
            _: bool,
        ) -> TxFuture<'_, Box<dyn TxConn>> {
            Box::pin(async move {
                let mut tx = match begin_sql(&options) {
                    None => pool.begin().await,
                    Some(sql) => pool.begin_with(sql).await,
                }
                .map_err(boxed::<Self>)?;
                let tenant = setting.as_ref().map(|(_, key)| key.clone());
                if let Some((name, value)) = setting {
                    // The driver's boxed future, as in `commit`. If it fails, `tx` is dropped:
                    // rolled back, and the connection goes back to the pool.
                    let query = sqlx::query("SELECT set_config($1, $2, true)").bind(&*name).bind(value.as_str());
                    sqlx::Executor::execute(&mut *tx, query).await.map_err(boxed::<Self>)?;
                }
                let resolve = resolve.then(|| pool.clone());
                Ok(Box::new(SqlxTx { tx, rolled_back: None, sql: String::new(), tenant, resolve, undo: None })
                    as Box<dyn TxConn>)
            })
        }
    }

    tx_conn!(Postgres);

    /// The `BEGIN` of a transaction set up as `options` say, or `None` for a plain one. Made of
    /// the options' own words and a number: nothing from outside.
    fn begin_sql(options: &TxOptions) -> Option<String> {
        if options.plain_begin() {
            return None;
        }
        let mut sql = String::from("BEGIN");
        if let Some(level) = options.isolation_level() {
            sql.push_str(" ISOLATION LEVEL ");
            sql.push_str(level.sql());
        }
        if options.is_read_only() {
            sql.push_str(" READ ONLY");
        }
        if let Some(timeout) = options.timeout_after() {
            // At least a millisecond: `0` would turn the timeout off.
            let ms = timeout.as_millis().clamp(1, i32::MAX as u128);
            sql.push_str(&format!("; SET LOCAL statement_timeout = {ms}"));
        }
        Some(sql)
    }

    /// How long a lost `COMMIT` answer is resolved for: the server may still be writing the
    /// transaction (`pg_xact_status` says `in progress`), or be restarting.
    const RESOLVE_FOR: std::time::Duration = std::time::Duration::from_secs(5);

    /// The outcome of transaction `xid`, whose `COMMIT` lost its answer (`error`), asked on a
    /// connection of its own (the pool may have none to give): `Ok` if committed; a
    /// [`ErrorClass::ConnectionLost`] error (nothing saved: it may run again) if rolled back;
    /// [`ErrorClass::OutcomeUnknown`] if the server could not say within [`RESOLVE_FOR`].
    async fn resolve(pool: &Pool<Postgres>, xid: &str, error: sqlx::Error) -> Result<(), BoxError> {
        use sqlx::ConnectOptions;
        let until = tokio::time::Instant::now() + RESOLVE_FOR;
        let options = pool.connect_options();
        let mut conn: Option<sqlx::PgConnection> = None;
        while tokio::time::Instant::now() < until {
            if conn.is_none() {
                conn = tokio::time::timeout_at(until, options.connect()).await.ok().and_then(Result::ok);
            }
            if let Some(c) = conn.as_mut() {
                let status: Result<Option<String>, sqlx::Error> =
                    sqlx::query_scalar("SELECT pg_xact_status($1::xid8)").bind(xid).fetch_one(&mut *c).await;
                match status.as_ref().map(Option::as_deref) {
                    Ok(Some("committed")) => {
                        tracing::warn!(xid, "a COMMIT's answer was lost; the database says it committed");
                        return Ok(());
                    }
                    Ok(Some("aborted")) => {
                        tracing::warn!(xid, "a COMMIT's answer was lost; the database says it rolled back");
                        return Err(Box::new(Classified { class: ErrorClass::ConnectionLost, error: Box::new(error) }));
                    }
                    // Too old to tell (its status truncated): unknown.
                    Ok(None) => break,
                    Ok(Some(_)) => {}
                    Err(_) => conn = None,
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        tracing::error!(xid, "a COMMIT's answer was lost, and the database could not say whether it committed");
        Err(unknown(error))
    }
}

/// A `COMMIT` whose answer never came: [`ErrorClass::OutcomeUnknown`].
fn unknown(error: sqlx::Error) -> BoxError {
    Box::new(Classified { class: ErrorClass::OutcomeUnknown, error: Box::new(error) })
}
