//! What `#[transactional(..)]` says: the propagation and the data source.

/// How a `#[transactional]` method relates to the transaction it finds (Spring's and tegg's
/// propagations, the ones a unit of work per request gives a meaning to).
///
/// "The current transaction" is the innermost one of the calling task's `#[transactional]`
/// methods for the data source, else the context scope's (the request's).
///
/// # Examples
///
/// ```
/// use tegu_tx::{Propagation, TxOptions};
///
/// assert_eq!(TxOptions::default().propagation(), Propagation::Required);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Propagation {
    /// Joins the current transaction; without one, begins the scope's (committed in its
    /// completion phase, with the request), or once that phase has begun (work after the
    /// response), one of the method's own. An `Err` or a panic rolls back what the method
    /// began, nothing it joined.
    #[default]
    Required,
    /// Always begins a transaction of its own, on a connection of its own, committed when the
    /// method returns `Ok` and rolled back on `Err` or a panic, whatever the caller's does. On
    /// a data source that runs one transaction at a time (SQLite), refused inside a transaction
    /// of the same source ([`TxError::OneAtATime`](crate::TxError::OneAtATime)).
    RequiresNew,
    /// A savepoint in the current transaction, released on `Ok` and rolled back to on `Err` or a
    /// panic: the method's work is all or nothing, the rest of the transaction goes on. Without
    /// a current transaction, as [`Required`](Self::Required).
    Nested,
    /// Joins the current transaction; fails, naming the method, when there is none.
    Mandatory,
    /// Runs with no transaction; fails, naming the method, when there is one. For the whole
    /// call: a transaction another task of the request begins meanwhile is not the method's
    /// (its statements, and what it calls without a propagation of its own, run outside any).
    Never,
}

/// The options of one `#[transactional]` method, which the macro hands the advice as its
/// call's parameters ([`tegu_core::advice::Call::params`]).
///
/// # Examples
///
/// ```
/// use tegu_tx::{Propagation, TxOptions};
///
/// // What `#[transactional(requires_new, source = "orders")]` gives the advice.
/// const OPTIONS: TxOptions = TxOptions::new(Propagation::RequiresNew).source("orders");
/// assert_eq!(OPTIONS.propagation(), Propagation::RequiresNew);
/// assert_eq!(OPTIONS.source_name(), Some("orders"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxOptions {
    propagation: Propagation,
    source: Option<&'static str>,
}

impl TxOptions {
    /// Options with `propagation`, on the App's one data source.
    pub const fn new(propagation: Propagation) -> Self {
        TxOptions { propagation, source: None }
    }

    /// On the data source whose object name is `name`.
    pub const fn source(mut self, name: &'static str) -> Self {
        self.source = Some(name);
        self
    }

    /// The propagation.
    pub const fn propagation(&self) -> Propagation {
        self.propagation
    }

    /// The data source named, if any.
    pub const fn source_name(&self) -> Option<&'static str> {
        self.source
    }
}
