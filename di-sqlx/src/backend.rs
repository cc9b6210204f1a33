//! What differs between the databases: how a transaction begins, how a savepoint is written,
//! whether the database can end a transaction itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use di_core::BoxError;
use di_tx::{Busy, TxConn, TxFuture};
use sqlx::{Pool, Transaction};

/// A database di-sqlx runs transactions on: SQLite and Postgres. Sealed.
pub trait Backend: sqlx::Database + sealed::Sealed {
    /// Whether it runs one write transaction at a time, held from its beginning (SQLite).
    #[doc(hidden)]
    const ONE_AT_A_TIME: bool;

    /// Begins a transaction on a connection of `pool`.
    #[doc(hidden)]
    fn begin(pool: &Pool<Self>) -> TxFuture<'_, Box<dyn TxConn>>;

    /// Whether an error of this database with `code` (SQLite's result code, PostgreSQL's
    /// SQLSTATE) says it is busy: it had no connection or lock to give in time.
    #[doc(hidden)]
    fn busy_code(code: &str) -> bool;
}

/// `error` boxed for di-tx: a [`Busy`] (which di-tx reports as `TxError::Busy`) if the pool
/// stayed exhausted for its acquire timeout or the database said it is busy, else as it is.
pub(crate) fn boxed<DB: Backend>(error: sqlx::Error) -> BoxError {
    let busy = matches!(error, sqlx::Error::PoolTimedOut)
        || error.as_database_error().and_then(|e| e.code()).is_some_and(|code| DB::busy_code(&code));
    if busy { Box::new(Busy(Box::new(error))) } else { Box::new(error) }
}

mod sealed {
    pub trait Sealed {}
}

/// A transaction of database `DB`, as di-tx holds it.
pub(crate) struct SqlxTx<DB: sqlx::Database> {
    pub(crate) tx: Transaction<'static, DB>,
    /// Set by SQLite's rollback hook: the database rolled the transaction back (our own
    /// rollbacks end the transaction before they run, so only its own are seen). `None` for
    /// Postgres, which keeps a failed transaction open, refusing statements until rolled back.
    rolled_back: Option<Arc<AtomicBool>>,
    /// The statement running ([`run`](Self::run)).
    sql: String,
}

/// The statements and conversions both databases share.
macro_rules! tx_conn {
    ($db:ty) => {
        impl TxConn for SqlxTx<$db> {
            fn commit(self: Box<Self>) -> TxFuture<'static, ()> {
                Box::pin(async move { Ok(self.tx.commit().await?) })
            }

            fn rollback(mut self: Box<Self>) -> TxFuture<'static, ()> {
                Box::pin(async move {
                    if self.aborted() {
                        // SQLite ended the transaction; sqlx still counts it open, and would
                        // take the connection's next BEGIN for a savepoint's. A BEGIN makes its
                        // ROLLBACK true again, and the connection goes back to the pool sound.
                        sqlx::Executor::execute(&mut *self.tx, "BEGIN").await?;
                    }
                    Ok(self.tx.rollback().await?)
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
            /// Runs `sql` (a savepoint statement di-tx made) on the transaction's connection.
            /// Kept in the transaction while it runs: the driver's future borrows it (an
            /// `async` block awaiting the driver's generic executor is refused as not `Send`
            /// for every lifetime, rust-lang/rust#102211).
            fn run(&mut self, sql: String) -> TxFuture<'_, ()> {
                self.sql = sql;
                let done = sqlx::Executor::execute(&mut *self.tx, self.sql.as_str());
                Box::pin(async move {
                    done.await?;
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

        /// `SQLITE_BUSY` (primary result code 5, any extended one): another connection held
        /// the database past the busy timeout.
        fn busy_code(code: &str) -> bool {
            code.parse::<i32>().is_ok_and(|code| code & 0xff == 5)
        }

        /// `BEGIN IMMEDIATE`: SQLite runs one writer at a time, and a transaction that begins
        /// deferred, reads, then writes, fails with `SQLITE_BUSY` when another wrote meanwhile;
        /// begun immediate, it waits for the writer (the busy timeout) instead. A rollback hook
        /// tells when SQLite ends the transaction itself.
        fn begin(pool: &Pool<Self>) -> TxFuture<'_, Box<dyn TxConn>> {
            Box::pin(async move {
                let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(boxed::<Self>)?;
                let rolled_back = Arc::new(AtomicBool::new(false));
                let flag = Arc::clone(&rolled_back);
                tx.lock_handle().await?.set_rollback_hook(move || flag.store(true, Ordering::Release));
                Ok(Box::new(SqlxTx { tx, rolled_back: Some(rolled_back), sql: String::new() }) as Box<dyn TxConn>)
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

        /// `too_many_connections` (53300) and `cannot_connect_now` (57P03): the server refused
        /// the pool a new connection.
        fn busy_code(code: &str) -> bool {
            code == "53300" || code == "57P03"
        }

        fn begin(pool: &Pool<Self>) -> TxFuture<'_, Box<dyn TxConn>> {
            Box::pin(async move {
                let tx = pool.begin().await.map_err(boxed::<Self>)?;
                Ok(Box::new(SqlxTx { tx, rolled_back: None, sql: String::new() }) as Box<dyn TxConn>)
            })
        }
    }

    tx_conn!(Postgres);
}
