//! Why a transaction could not be used, begun or ended.

use std::sync::Arc;

use tegu_core::error::{BoxError, Busy};

/// A transaction error: a propagation's rule broken (naming the method), a data source the App
/// does not have, the database failing, or a transaction the database ended itself.
///
/// A `#[transactional]` method's error type converts from it (`E: From<TxError>`).
///
/// # Examples
///
/// ```
/// use tegu_tx::TxError;
///
/// #[derive(Debug)]
/// enum AppError { Tx(TxError), NotFound }
/// impl From<TxError> for AppError {
///     fn from(error: TxError) -> Self { AppError::Tx(error) }
/// }
/// let error: AppError = TxError::Aborted { data_source: "default".into() }.into();
/// assert!(matches!(error, AppError::Tx(TxError::Aborted { .. })));
/// # let _ = AppError::NotFound;
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TxError {
    /// A `mandatory` method was called with no current transaction.
    #[error(
        "`{call}` is `#[transactional(mandatory)]`, but it was called outside any transaction of data source `{data_source}`"
    )]
    Mandatory {
        /// The method (`my_app::Orders::pay`).
        call: String,
        /// The data source.
        data_source: String,
    },
    /// A `never` method was called inside a transaction.
    #[error(
        "`{call}` is `#[transactional(never)]`, but it was called inside a transaction of data source `{data_source}`"
    )]
    Never {
        /// The method.
        call: String,
        /// The data source.
        data_source: String,
    },
    /// A `requires_new` method called inside a transaction of a data source that runs one
    /// transaction at a time (SQLite): it would wait for the transaction that waits for it.
    #[error(
        "`{call}` is `#[transactional(requires_new)]`, but it was called inside a transaction of data source `{data_source}`, which runs one transaction at a time (SQLite): the new one would wait for the one that waits for it; give it a data source of its own, or call it outside that transaction"
    )]
    OneAtATime {
        /// The method.
        call: String,
        /// The data source.
        data_source: String,
    },
    /// The method names a data source the App does not have, or names none and the App has
    /// none or several.
    #[error("`{call}` is `#[transactional]`: {why}")]
    Source {
        /// The method.
        call: String,
        /// What is wrong, with the data sources the App has.
        why: String,
    },
    /// The database failed while beginning, ending or using a transaction (or a savepoint).
    #[error("{doing} on data source `{data_source}` failed: {error}")]
    Database {
        /// What was being done: `beginning a transaction`, `committing`, ...
        doing: &'static str,
        /// The data source.
        data_source: String,
        /// The driver's error.
        #[source]
        error: BoxError,
    },
    /// No connection or lock of the data source came free in time: its pool stayed exhausted
    /// for its acquire timeout, the database refused more connections, or another connection
    /// held a lock (SQLite's `SQLITE_BUSY` after the busy timeout, `SQLITE_LOCKED` at once). A
    /// failure to try again later, not a fault: a web service answers it `503 Service
    /// Unavailable`.
    #[error(
        "{doing} on data source `{data_source}`: the database is busy (no connection or lock came free in time); try again later"
    )]
    Busy {
        /// What was being done: `beginning a transaction`, `acquiring a connection`, ...
        doing: &'static str,
        /// The data source.
        data_source: String,
        /// What the adapter said.
        #[source]
        error: Busy,
    },
    /// The database ended the transaction itself: PostgreSQL after any failed statement (its
    /// `COMMIT` then rolls back), SQLite after a full disk, an I/O error or a `RAISE(ROLLBACK)`.
    /// Nothing of it is saved, and it takes no more work.
    #[error(
        "the database aborted the transaction of data source `{data_source}` after an earlier error: nothing of it is saved, and it takes no more work"
    )]
    Aborted {
        /// The data source.
        data_source: String,
    },
    /// An event emitted in the transaction could not be made ready for its commit: a
    /// `before_commit` handler failed, or the event transport (an outbox) could not write it.
    /// The transaction was rolled back.
    #[error(
        "an event emitted in the transaction of data source `{data_source}` failed before its commit: {source}; rolled back"
    )]
    Events {
        /// The data source.
        data_source: String,
        /// The handler's or the transport's failure.
        #[source]
        source: Box<tegu_core::DiError>,
    },
    /// A method's transaction outlived its timeout (`#[transactional(timeout_ms = ..)]`): the
    /// method was cancelled and its transaction rolled back.
    #[error("`{call}` ran past its transaction's timeout of {after:?} on data source `{data_source}`; rolled back")]
    TimedOut {
        /// The method.
        call: String,
        /// The data source.
        data_source: String,
        /// The timeout.
        after: std::time::Duration,
    },
    /// The transaction is over: committed, rolled back, or rolled back because the method that
    /// began it failed, panicked or was cancelled.
    #[error("the transaction of data source `{data_source}` is over ({how}); begin another one")]
    Ended {
        /// The data source.
        data_source: String,
        /// How it ended.
        how: &'static str,
    },
}

impl TxError {
    /// `error` of data source `data_source` while `doing`: [`TxError::Busy`] if it is a
    /// [`Busy`] (boxed), else [`TxError::Database`]. What an adapter calls for its driver's
    /// errors, and tegu-tx for a [`TxSource`](crate::TxSource)'s.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_tx::{Busy, TxError};
    ///
    /// let timed_out = Busy("pool timed out".into());
    /// let error = TxError::database("beginning a transaction", "orders", Box::new(timed_out));
    /// assert!(matches!(error, TxError::Busy { .. }));
    /// let error = TxError::database("committing", "orders", "disk I/O error".into());
    /// assert!(matches!(error, TxError::Database { .. }));
    /// ```
    pub fn database(doing: &'static str, data_source: impl Into<String>, error: BoxError) -> TxError {
        let data_source = data_source.into();
        let error = match error.downcast::<Busy>() {
            Ok(busy) => return TxError::Busy { doing, data_source, error: *busy },
            Err(error) => error,
        };
        let aborted = error.downcast_ref::<Classified>().is_some_and(|c| c.class == ErrorClass::Aborted);
        if aborted || error.is::<AbortedByDatabase>() {
            return TxError::Aborted { data_source };
        }
        TxError::Database { doing, data_source, error }
    }

    /// What kind of failure this is, for code that acts on it: a constraint the data broke, a
    /// conflict worth trying the whole transaction again for, a busy or lost database, a
    /// transaction the database aborted, or a rule of `#[transactional]` broken. A
    /// [`TxError::Database`] has the class its adapter gave it ([`Classified`]; tegu-sqlx
    /// classifies SQLite's and PostgreSQL's errors alike), else [`ErrorClass::Other`]. A
    /// [`TxError::Events`] has its cause's: `Busy` for an outbox write that found its pool busy
    /// (what tegu-http answers 503), a `before_commit` handler's statement's class, else `Other`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_tx::{Classified, ErrorClass, TxError};
    ///
    /// let duplicate = Classified { class: ErrorClass::UniqueViolation, error: "duplicate key".into() };
    /// let error = TxError::database("inserting a user", "database", Box::new(duplicate));
    /// assert_eq!(error.class(), ErrorClass::UniqueViolation);
    /// assert!(!error.class().retryable());
    /// let busy = TxError::database("beginning a transaction", "database", Box::new(tegu_tx::Busy("pool timed out".into())));
    /// assert!(busy.class().retryable());
    /// ```
    pub fn class(&self) -> ErrorClass {
        match self {
            TxError::Busy { .. } => ErrorClass::Busy,
            TxError::Aborted { .. } => ErrorClass::Aborted,
            TxError::Ended { .. } => ErrorClass::Ended,
            TxError::TimedOut { .. } => ErrorClass::TimedOut,
            TxError::Database { error, .. } => {
                error.downcast_ref::<Classified>().map_or(ErrorClass::Other, |c| c.class)
            }
            TxError::Events { source, .. } => class_of_cause(source),
            TxError::Mandatory { .. } | TxError::Never { .. } | TxError::OneAtATime { .. } | TxError::Source { .. } => {
                ErrorClass::Usage
            }
        }
    }
}

/// The class of the failure behind an event's ([`TxError::Events`]), found among `error`'s
/// sources: `Busy` for a [`Busy`] (an outbox write that found its pool busy, as tegu-http's
/// `DiError::is_busy` sees it), a [`Classified`] error's class, a [`TxError`]'s class (a
/// `before_commit` handler's statement); else [`ErrorClass::Other`].
fn class_of_cause(error: &tegu_core::DiError) -> ErrorClass {
    if error.is_busy() {
        return ErrorClass::Busy;
    }
    type Shared = Arc<dyn std::error::Error + Send + Sync + 'static>;
    let mut next: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(mut e) = next {
        // A source held in an `Arc` (as `DiError`'s are) shows as the `Arc`: look inside.
        while let Some(inner) = e.downcast_ref::<Shared>() {
            e = &**inner;
        }
        if let Some(classified) = e.downcast_ref::<Classified>() {
            return classified.class;
        }
        if let Some(tx) = e.downcast_ref::<TxError>() {
            return tx.class();
        }
        next = e.source();
    }
    ErrorClass::Other
}

/// What kind of failure a [`TxError`] is ([`TxError::class`]): the same class for the same
/// failure on SQLite and PostgreSQL, whatever each database's own code for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// A unique or primary key already holds the value (PostgreSQL `23505`, SQLite's `UNIQUE`
    /// and `PRIMARY KEY` constraints). On PostgreSQL the transaction is aborted by it.
    UniqueViolation,
    /// A foreign key refers to no row, or a row still referred to was deleted (`23503`,
    /// SQLite's `FOREIGN KEY` constraint; a deferred one fails the `COMMIT`).
    ForeignKeyViolation,
    /// A `NOT NULL` column was given none (`23502`).
    NotNullViolation,
    /// A `CHECK` constraint failed (`23514`).
    CheckViolation,
    /// The database could not serialise the transaction with a concurrent one (PostgreSQL
    /// `40001`, under `REPEATABLE READ` or `SERIALIZABLE`): run the whole transaction again.
    SerializationFailure,
    /// The database broke a deadlock by rolling this transaction back (PostgreSQL `40P01`):
    /// run the whole transaction again.
    Deadlock,
    /// No connection or lock came free in time ([`TxError::Busy`]): try again later.
    Busy,
    /// The database aborted the transaction itself ([`TxError::Aborted`]): nothing of it is
    /// saved.
    Aborted,
    /// The transaction is over ([`TxError::Ended`]): rolled back because the method that
    /// began it failed, or already committed.
    Ended,
    /// The connection to the database was lost (a server that restarted, a network that
    /// failed) before the transaction could be saved: nothing of it is. Lost during a
    /// `COMMIT`, the outcome is [`OutcomeUnknown`](Self::OutcomeUnknown) instead, unless the
    /// adapter asked the database and learnt that the transaction was rolled back (tegu-sqlx
    /// on PostgreSQL with `resolve_commits`).
    ConnectionLost,
    /// The `COMMIT` was sent and its answer never came (the connection lost meanwhile): the
    /// transaction may have been saved or not, and the database could not say in time. Never
    /// retryable: running it again may store it twice. Read the data to learn what happened,
    /// or make the work idempotent.
    OutcomeUnknown,
    /// A rule of `#[transactional]` was broken, or the data source is not in the App: a fault
    /// of the code, not of the database.
    Usage,
    /// The method ran past its transaction's timeout ([`TxError::TimedOut`]), or the database
    /// cancelled a statement at the transaction's `statement_timeout` (PostgreSQL `57014`):
    /// rolled back. Not retryable: the same work would take as long again.
    TimedOut,
    /// Any other failure.
    Other,
}

impl ErrorClass {
    /// Whether running the whole transaction again may succeed: [`SerializationFailure`],
    /// [`Deadlock`], [`Busy`] and [`ConnectionLost`]. Never [`OutcomeUnknown`]: a transaction
    /// whose `COMMIT` may have been applied is not run again blindly.
    ///
    /// [`SerializationFailure`]: Self::SerializationFailure
    /// [`Deadlock`]: Self::Deadlock
    /// [`Busy`]: Self::Busy
    /// [`ConnectionLost`]: Self::ConnectionLost
    /// [`OutcomeUnknown`]: Self::OutcomeUnknown
    pub fn retryable(self) -> bool {
        matches!(self, Self::SerializationFailure | Self::Deadlock | Self::Busy | Self::ConnectionLost)
    }
}

/// A database error with its [`ErrorClass`], as an adapter returns it (boxed) from a
/// [`TxConn`](crate::TxConn) or [`TxSource`](crate::TxSource) operation or hands it to
/// [`TxError::database`], so that [`TxError::class`] can tell it. Displays as the driver's
/// error. An [`ErrorClass::Busy`] one should be a [`Busy`] instead, and an
/// [`ErrorClass::Aborted`] one becomes [`TxError::Aborted`].
#[derive(Debug)]
pub struct Classified {
    /// What kind of failure it is.
    pub class: ErrorClass,
    /// The driver's error.
    pub error: BoxError,
}

impl std::fmt::Display for Classified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for Classified {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// What an adapter's [`TxConn::commit`](crate::TxConn::commit) returns, boxed, when the
/// database did not commit because it had aborted the transaction after an earlier error
/// (PostgreSQL answers such a `COMMIT` with `ROLLBACK`, and no error): tegu-tx reports
/// [`TxError::Aborted`].
#[derive(Debug, thiserror::Error)]
#[error("the database had aborted the transaction after an earlier error; its COMMIT rolled it back")]
pub struct AbortedByDatabase;
