//! A test double of [`TxSource`]: [`JournalSource`], a data source whose transactions write
//! what is done in them to a journal, for the tests of transactional code that needs no
//! database (what began, committed or rolled back, and in which order).

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tegu_core::ProtoDef;

use crate::current::Transactions;
use crate::error::TxError;
use crate::options::TxOptions;
use crate::source::{TxConn, TxFuture, TxSource};

type Journal = Arc<Mutex<Vec<String>>>;

/// A data source whose transactions journal what is done in them: `BEGIN`, `COMMIT`,
/// `ROLLBACK`, `SAVEPOINT`, `RELEASE`, `ROLLBACK TO`, and what code writes through
/// [`write`](Self::write). Clones share the journal.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// use tegu_core::{App, singleton_proto};
/// use tegu_tx::testing::JournalSource;
/// use tegu_tx::{Transactions, TxError, transactional};
///
/// #[singleton_proto]
/// pub struct Orders {
///     #[inject]
///     transactions: Arc<Transactions>,
/// }
///
/// impl Orders {
///     #[transactional]
///     async fn place(&self, ok: bool) -> Result<(), TxError> {
///         JournalSource::write(&self.transactions, "journal", "order").await?;
///         if ok { Ok(()) } else { Err(TxError::Ended { data_source: "journal".into(), how: "refused" }) }
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let source = JournalSource::new();
/// let app = App::builder().register(source.proto("journal")).build().await?;
/// let orders = app.get_object::<Orders>()?;
/// app.run_in_context(orders.place(true)).await.unwrap();
/// assert_eq!(source.journal(), ["BEGIN", "write order", "COMMIT"]);
/// assert!(app.run_in_context(orders.place(false)).await.is_err());
/// assert_eq!(source.journal()[3..], ["BEGIN", "write order", "ROLLBACK"]);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct JournalSource {
    journal: Journal,
    /// How many of the next commits fail.
    failing: Arc<AtomicUsize>,
}

impl JournalSource {
    /// A source with an empty journal.
    pub fn new() -> JournalSource {
        JournalSource::default()
    }

    /// What its transactions did so far, in order.
    pub fn journal(&self) -> Vec<String> {
        self.journal.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Makes the next `count` commits fail (journaled `COMMIT failed`), as a database that
    /// refuses them would (a serialization failure, a connection lost).
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_tx::testing::JournalSource;
    /// use tegu_tx::TxSource;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let source = JournalSource::new();
    /// source.fail_next_commits(1);
    /// assert!(source.begin().await.unwrap().commit().await.is_err());
    /// assert!(source.begin().await.unwrap().commit().await.is_ok());
    /// assert_eq!(source.journal(), ["BEGIN", "COMMIT failed", "BEGIN", "COMMIT"]);
    /// # }
    /// ```
    pub fn fail_next_commits(&self, count: usize) {
        self.failing.store(count, Ordering::SeqCst);
    }

    /// Empties the journal.
    pub fn clear(&self) {
        self.journal.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// The singleton that provides this source as `dyn TxSource` under object name `name`,
    /// the data source's name (`#[transactional(data_source = "...")]`; the default one is
    /// the only source, whatever its name).
    pub fn proto(&self, name: &'static str) -> ProtoDef {
        let source = self.clone();
        ProtoDef::singleton::<JournalSource>(move |_| Ok(source.clone()))
            .name(name)
            .provides::<JournalSource, dyn TxSource>(|it| it)
    }

    /// Writes `what` in the current transaction of data source `source` (journaled as
    /// `write {what}`), as a statement would run in it.
    ///
    /// # Errors
    ///
    /// [`TxError::Ended`] if the caller has no transaction of `source`, and what
    /// [`Tx::lock`](crate::Tx::lock) returns.
    pub async fn write(transactions: &Transactions, source: &str, what: &str) -> Result<(), TxError> {
        let Some(tx) = transactions.current(source) else {
            return Err(TxError::Ended { data_source: source.to_owned(), how: "no transaction" });
        };
        let mut conn = tx.lock().await?;
        let Some(conn) = conn.as_any_mut().downcast_mut::<JournalTx>() else {
            return Err(TxError::Ended { data_source: source.to_owned(), how: "not a JournalSource's transaction" });
        };
        conn.say(&format!("write {what}"));
        Ok(())
    }
}

impl TxSource for JournalSource {
    fn begin(&self) -> TxFuture<'_, Box<dyn TxConn>> {
        self.begin_with(&TxOptions::default())
    }

    /// Journals the setup as SQL words: `BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY`, and
    /// ` TIMEOUT 500ms` for a timeout.
    fn begin_with(&self, options: &TxOptions) -> TxFuture<'_, Box<dyn TxConn>> {
        let tx = JournalTx(Arc::clone(&self.journal), Arc::clone(&self.failing));
        let mut begin = String::from("BEGIN");
        if let Some(level) = options.isolation_level() {
            begin.push_str(" ISOLATION LEVEL ");
            begin.push_str(level.sql());
        }
        if options.is_read_only() {
            begin.push_str(" READ ONLY");
        }
        if let Some(timeout) = options.timeout_after() {
            begin.push_str(&format!(" TIMEOUT {timeout:?}"));
        }
        tx.say(&begin);
        Box::pin(async move { Ok(Box::new(tx) as Box<dyn TxConn>) })
    }
}

/// A transaction of a [`JournalSource`], and how many of the next commits fail.
struct JournalTx(Journal, Arc<AtomicUsize>);

impl JournalTx {
    fn say(&self, what: &str) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(what.to_owned());
    }

    fn said(&self, what: &str) -> TxFuture<'static, ()> {
        self.say(what);
        Box::pin(async { Ok(()) })
    }
}

impl TxConn for JournalTx {
    fn commit(self: Box<Self>) -> TxFuture<'static, ()> {
        if self.1.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
            self.say("COMMIT failed");
            return Box::pin(async { Err("the journal's commit fails (JournalSource::fail_next_commits)".into()) });
        }
        self.said("COMMIT")
    }
    fn rollback(self: Box<Self>) -> TxFuture<'static, ()> {
        self.said("ROLLBACK")
    }
    fn savepoint<'a>(&'a mut self, _: &'a str) -> TxFuture<'a, ()> {
        self.said("SAVEPOINT")
    }
    fn release_savepoint<'a>(&'a mut self, _: &'a str) -> TxFuture<'a, ()> {
        self.said("RELEASE")
    }
    fn rollback_to_savepoint<'a>(&'a mut self, _: &'a str) -> TxFuture<'a, ()> {
        self.said("ROLLBACK TO")
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
