//! Why a transaction could not be used, begun or ended.

use di_core::BoxError;

/// A transaction error: a propagation's rule broken (naming the method), a data source the App
/// does not have, the database failing, or a transaction the database ended itself.
///
/// A `#[transactional]` method's error type converts from it (`E: From<TxError>`).
///
/// # Examples
///
/// ```
/// use di_tx::TxError;
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
    /// No connection of the data source came free in time: its pool stayed exhausted for its
    /// acquire timeout, or the database refused more connections. A failure to try again
    /// later, not a fault: a web service answers it `503 Service Unavailable`.
    #[error(
        "{doing} on data source `{data_source}`: the database is busy (no connection came free in time); try again later"
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
    /// The database ended the transaction itself (SQLite, after a full disk, an I/O error or a
    /// `RAISE(ROLLBACK)`): nothing of it is saved, and it takes no more work.
    #[error(
        "the database rolled back the transaction of data source `{data_source}` itself, after an earlier error: nothing of it is saved, and it takes no more work"
    )]
    Aborted {
        /// The data source.
        data_source: String,
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
    /// errors, and di-tx for a [`TxSource`](crate::TxSource)'s.
    ///
    /// # Examples
    ///
    /// ```
    /// use di_tx::{Busy, TxError};
    ///
    /// let timed_out = Busy("pool timed out".into());
    /// let error = TxError::database("beginning a transaction", "orders", Box::new(timed_out));
    /// assert!(matches!(error, TxError::Busy { .. }));
    /// let error = TxError::database("committing", "orders", "disk I/O error".into());
    /// assert!(matches!(error, TxError::Database { .. }));
    /// ```
    pub fn database(doing: &'static str, data_source: impl Into<String>, error: BoxError) -> TxError {
        let data_source = data_source.into();
        match error.downcast::<Busy>() {
            Ok(busy) => TxError::Busy { doing, data_source, error: *busy },
            Err(error) => TxError::Database { doing, data_source, error },
        }
    }
}

/// What an adapter returns, boxed, when its data source has no connection to give in time (a
/// pool exhausted for its acquire timeout, a database refusing more connections), from
/// [`TxSource::begin`](crate::TxSource::begin) or through [`TxError::database`]: di-tx then
/// reports [`TxError::Busy`], which callers can tell from a fault. Holds the driver's error.
#[derive(Debug, thiserror::Error)]
#[error("no connection came free in time")]
pub struct Busy(#[source] pub BoxError);
