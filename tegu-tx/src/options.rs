//! What `#[transactional(..)]` says: the propagation, the data source, and how the transaction
//! the method begins is set up, bounded in time, retried, and ended on an error.

use std::time::Duration;

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

/// The isolation level of a transaction a method begins (`#[transactional(isolation = "..")]`).
///
/// On PostgreSQL, `BEGIN ISOLATION LEVEL ..`: under `RepeatableRead` and `Serializable` the
/// database may refuse a transaction that conflicts with a concurrent one (a serialization
/// failure), which the application runs again: see [`Retry`]. SQLite's transactions are
/// serializable whatever is asked (tegu-sqlx begins them `IMMEDIATE`: one writer at a time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// Each statement sees what was committed before it began (PostgreSQL's default).
    ReadCommitted,
    /// Every statement sees what was committed before the transaction's first one.
    RepeatableRead,
    /// As if the transactions ran one after the other.
    Serializable,
}

impl Isolation {
    /// The level as SQL writes it: `SERIALIZABLE`, ...
    pub const fn sql(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "READ COMMITTED",
            Isolation::RepeatableRead => "REPEATABLE READ",
            Isolation::Serializable => "SERIALIZABLE",
        }
    }
}

/// How a `requires_new` method is run again when its transaction fails with a serialization
/// failure or a deadlock ([`ErrorClass::SerializationFailure`], [`ErrorClass::Deadlock`]):
/// the whole method, in a new transaction, up to `retries` more times, waiting `backoff`
/// before the first retry and twice as long before each next one (at most a second), plus a
/// random part of that. `#[transactional(requires_new, retry = 3, backoff_ms = 20)]`.
///
/// Never after a `COMMIT` whose outcome is unknown ([`ErrorClass::OutcomeUnknown`]): the
/// transaction may have committed. The events emitted in a failed try go to their
/// `after_rollback` handlers, never to the others nor to the outbox.
///
/// A failure counts when tegu-tx sees its class: a `BEGIN` or `COMMIT` of its own, or a
/// statement's error the adapter noted on the transaction (tegu-sqlx's `Database::error` notes
/// each; another adapter calls [`Tx::note_failure`](crate::Tx::note_failure)).
///
/// [`ErrorClass::SerializationFailure`]: crate::ErrorClass::SerializationFailure
/// [`ErrorClass::Deadlock`]: crate::ErrorClass::Deadlock
/// [`ErrorClass::OutcomeUnknown`]: crate::ErrorClass::OutcomeUnknown
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tegu_tx::{Propagation, Retry, TxOptions};
///
/// const OPTIONS: TxOptions =
///     TxOptions::new(Propagation::RequiresNew).retry(Retry::new(3, Duration::from_millis(20)));
/// assert_eq!(OPTIONS.retries().map(|r| r.retries()), Some(3));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    retries: u32,
    backoff: Duration,
}

impl Retry {
    /// The wait before the first retry when `backoff_ms` is not given: 10 ms.
    pub const BACKOFF_MS: u64 = 10;

    /// The longest wait between two tries.
    pub const MAX_BACKOFF: Duration = Duration::from_secs(1);

    /// Up to `retries` runs after the first, the first of them after `backoff`.
    pub const fn new(retries: u32, backoff: Duration) -> Retry {
        Retry { retries, backoff }
    }

    /// How many times the method may run again.
    pub const fn retries(&self) -> u32 {
        self.retries
    }

    /// The wait before retry `n` (1 for the first): `backoff · 2ⁿ⁻¹`, at most
    /// [`MAX_BACKOFF`](Self::MAX_BACKOFF), plus up to as much again at random, so that two
    /// transactions that conflicted do not meet again.
    pub fn wait(&self, n: u32) -> Duration {
        let base = self.backoff.saturating_mul(1 << n.saturating_sub(1).min(20)).min(Self::MAX_BACKOFF);
        let random = {
            use std::hash::{BuildHasher, Hasher};
            std::collections::hash_map::RandomState::new().build_hasher().finish()
        };
        let jitter = base.mul_f64((random % 1024) as f64 / 1024.0);
        base + jitter
    }
}

/// The options of one `#[transactional]` method, which the macro hands the advice as its
/// call's parameters ([`tegu_core::advice::Call::params`]).
///
/// The isolation level, `read_only` and the timeout set up a transaction the method begins
/// (always, for `requires_new`; for `required` and `nested`, when it finds none to join): a
/// method that joins a transaction takes it as its beginner set it up.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tegu_tx::{Isolation, Propagation, TxOptions};
///
/// // What `#[transactional(requires_new, source = "orders")]` gives the advice.
/// const OPTIONS: TxOptions = TxOptions::new(Propagation::RequiresNew).source("orders");
/// assert_eq!(OPTIONS.propagation(), Propagation::RequiresNew);
/// assert_eq!(OPTIONS.source_name(), Some("orders"));
///
/// // `#[transactional(read_only, isolation = "serializable", timeout_ms = 500)]`
/// const REPORT: TxOptions = TxOptions::new(Propagation::Required)
///     .read_only()
///     .isolation(Isolation::Serializable)
///     .timeout(Duration::from_millis(500));
/// assert!(REPORT.is_read_only());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxOptions {
    propagation: Propagation,
    source: Option<&'static str>,
    isolation: Option<Isolation>,
    read_only: bool,
    timeout: Option<Duration>,
    retry: Option<Retry>,
    rules: bool,
}

impl TxOptions {
    /// Options with `propagation`, on the App's one data source.
    pub const fn new(propagation: Propagation) -> Self {
        TxOptions {
            propagation,
            source: None,
            isolation: None,
            read_only: false,
            timeout: None,
            retry: None,
            rules: false,
        }
    }

    /// On the data source whose object name is `name`.
    pub const fn source(mut self, name: &'static str) -> Self {
        self.source = Some(name);
        self
    }

    /// A transaction the method begins is read-only: the database refuses its writes
    /// (PostgreSQL's `READ ONLY`; SQLite's `query_only` while it is open).
    pub const fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// A transaction the method begins has isolation level `level`.
    pub const fn isolation(mut self, level: Isolation) -> Self {
        self.isolation = Some(level);
        self
    }

    /// A deadline for a transaction the method begins, from its `BEGIN`: a method still
    /// running at the deadline is cancelled, its transaction rolled back, and its error is
    /// [`TxError::TimedOut`](crate::TxError::TimedOut). Backed on PostgreSQL by the
    /// transaction's `statement_timeout`, which also bounds the `COMMIT`.
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Runs the method again on a serialization failure or a deadlock ([`Retry`]).
    ///
    /// # Panics
    ///
    /// Unless the propagation is [`Propagation::RequiresNew`] (in a constant: a compile
    /// error): only the owner of a transaction may run it again, and a `required` method may
    /// find its transaction committed after it returned, in the scope's completion phase.
    ///
    /// ```compile_fail
    /// use std::time::Duration;
    /// use tegu_tx::{Propagation, Retry, TxOptions};
    ///
    /// const JOINS: TxOptions = TxOptions::new(Propagation::Required).retry(Retry::new(3, Duration::from_millis(5)));
    /// ```
    pub const fn retry(mut self, retry: Retry) -> Self {
        assert!(
            matches!(self.propagation, Propagation::RequiresNew),
            "a retry runs the whole method again in a new transaction: only a `requires_new` method, which owns its transaction, may have one"
        );
        self.retry = Some(retry);
        self
    }

    /// The method has a rollback rule (`commit_on = ..`), which its body applies to its error
    /// (the macro writes it there): an `Err` it matches commits what the method began.
    #[doc(hidden)]
    pub const fn commit_on_rule(mut self) -> Self {
        self.rules = true;
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

    /// The isolation level asked for, if any.
    pub const fn isolation_level(&self) -> Option<Isolation> {
        self.isolation
    }

    /// Whether a transaction the method begins is read-only.
    pub const fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The deadline of a transaction the method begins, if any.
    pub const fn timeout_after(&self) -> Option<Duration> {
        self.timeout
    }

    /// How the method is retried, if it is.
    pub const fn retries(&self) -> Option<Retry> {
        self.retry
    }

    /// Whether the method has a rollback rule.
    pub(crate) const fn has_rules(&self) -> bool {
        self.rules
    }

    /// Whether a transaction begun with these options is set up as a plain `BEGIN` is.
    pub const fn plain_begin(&self) -> bool {
        self.isolation.is_none() && !self.read_only && self.timeout.is_none()
    }
}
