//! Declarative transactions for tegu-core: `#[transactional]` on an async method runs it in a
//! transaction of a data source, with the propagations of Spring and tegg, and the request's
//! transaction committed in its context scope's completion phase.
//!
//! - **The advice.** `#[transactional]` is an advice (tegu-core's interceptors): the method keeps
//!   its signature, returns `Result<T, E>` with `E: From<TxError>`, and runs inside
//!   the advice [`Transactional`]. It composes with `#[intercept]` in the order written.
//! - **Propagation** ([`Propagation`]): `required` (the default) joins the current transaction
//!   or begins the scope's; `requires_new` begins one of its own on a second connection;
//!   `nested` sets a savepoint; `mandatory` and `never` check.
//! - **The request's transaction.** A `required` method with no transaction to join begins the
//!   scope's: the methods after it, and plain statements through the adapter, use it; it is
//!   committed in the completion phase, before the response leaves (a failed commit turns the
//!   response into a 500), or rolled back if the request failed (tegu-http marks a 4xx or 5xx
//!   answer with [`tegu_core::scope::fail_scope`]) or never completed (a panic, a client gone).
//! - **Data sources** are singletons providing `dyn` [`TxSource`], by object name: tegu-sqlx's
//!   `Database` (SQLite and Postgres), or any driver behind the two small traits.
//! - **Testing.** With the feature `testing`, `tegu_tx::testing::JournalSource` is a data source
//!   whose transactions journal what is done in them (`BEGIN`, what code writes, `COMMIT` or
//!   `ROLLBACK`), for the tests of transactional code that needs no database.
//!
//! # Examples
//!
//! A data source whose transactions write to a log (a real one is tegu-sqlx's), and a service
//! whose methods run in its transactions:
//!
//! ```rust,standalone_crate
//! use std::any::Any;
//! use std::sync::{Arc, Mutex};
//! use tegu_core::{singleton_proto, App, ProtoDef};
//! use tegu_tx::{transactional, TxConn, TxError, TxFuture, TxSource};
//!
//! #[derive(Default)]
//! pub struct Log(Arc<Mutex<Vec<String>>>);
//! struct LogTx(Arc<Mutex<Vec<String>>>);
//! impl TxSource for Log {
//!     fn begin(&self) -> TxFuture<'_, Box<dyn TxConn>> {
//!         self.0.lock().unwrap().push("BEGIN".into());
//!         let log = self.0.clone();
//!         Box::pin(async move { Ok(Box::new(LogTx(log)) as Box<dyn TxConn>) })
//!     }
//! }
//! impl LogTx {
//!     fn say(&self, what: String) -> TxFuture<'static, ()> {
//!         self.0.lock().unwrap().push(what);
//!         Box::pin(async { Ok(()) })
//!     }
//! }
//! impl TxConn for LogTx {
//!     fn commit(self: Box<Self>) -> TxFuture<'static, ()> { self.say("COMMIT".into()) }
//!     fn rollback(self: Box<Self>) -> TxFuture<'static, ()> { self.say("ROLLBACK".into()) }
//!     fn savepoint<'a>(&'a mut self, n: &'a str) -> TxFuture<'a, ()> { self.say(format!("SAVEPOINT {n}")) }
//!     fn release_savepoint<'a>(&'a mut self, n: &'a str) -> TxFuture<'a, ()> { self.say(format!("RELEASE {n}")) }
//!     fn rollback_to_savepoint<'a>(&'a mut self, n: &'a str) -> TxFuture<'a, ()> { self.say(format!("ROLLBACK TO {n}")) }
//!     fn as_any_mut(&mut self) -> &mut dyn Any { self }
//! }
//!
//! /// The service's error: the transaction's, or its own.
//! #[derive(Debug)]
//! pub enum OrderError { Tx(TxError), OutOfStock }
//! impl From<TxError> for OrderError {
//!     fn from(e: TxError) -> Self { OrderError::Tx(e) }
//! }
//!
//! #[singleton_proto]
//! pub struct Orders;
//! impl Orders {
//!     #[transactional]
//!     pub async fn place(&self, in_stock: bool) -> Result<(), OrderError> {
//!         self.audit().await?; // joins this transaction, with a savepoint of its own
//!         if in_stock { Ok(()) } else { Err(OrderError::OutOfStock) }
//!     }
//!     #[transactional(nested)]
//!     pub async fn audit(&self) -> Result<(), OrderError> { Ok(()) }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let log = Arc::new(Mutex::new(Vec::new()));
//! let source = Log(log.clone());
//! let app = App::builder()
//!     .register(ProtoDef::singleton::<Log>(move |_| Ok(Log(source.0.clone()))).name("log").provides::<Log, dyn TxSource>(|l| l))
//!     .build()
//!     .await?;
//! let orders = app.get_object::<Orders>()?;
//! // In a scope (a request), the transaction commits in the scope's completion phase.
//! app.run_in_context(orders.place(true)).await.unwrap();
//! assert_eq!(*log.lock().unwrap(), ["BEGIN", "SAVEPOINT di_sp_1", "RELEASE di_sp_1", "COMMIT"]);
//! log.lock().unwrap().clear();
//! // An `Err` rolls back what the method began.
//! assert!(app.run_in_context(orders.place(false)).await.is_err());
//! assert_eq!(log.lock().unwrap().last().map(String::as_str), Some("ROLLBACK"));
//! # Ok(()) }
//! ```

mod advice;
mod current;
mod error;
mod options;
mod rules;
mod scope;
mod source;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
mod tx;

pub use advice::Transactional;
pub use current::Transactions;
pub use error::{AbortedByDatabase, Classified, ErrorClass, TxError};
pub use options::{Isolation, Propagation, Retry, TxOptions};
/// The context proto that holds a request's transactions: named only to link it into an App
/// built `without_inventory()` (`.link::<tegu_tx::TxScope>()`, with `Transactional` and
/// `Transactions`), as `build()`'s error says.
#[doc(hidden)]
pub use scope::TxScope;
pub use source::{TxConn, TxFuture, TxSource};
/// What an adapter returns, boxed, when its data source has no connection to give in time (a
/// pool exhausted for its acquire timeout, a database refusing more connections), from
/// [`TxSource::begin`] or through [`TxError::database`]: tegu-tx then reports
/// [`TxError::Busy`], which callers can tell from a fault, and tegu-http answers a request whose
/// completion phase failed with it 503. It is tegu-core's.
pub use tegu_core::error::Busy;
pub use tegu_macros::transactional;
pub use tx::{Tx, TxGuard};

/// What the macro's expansion calls.
#[doc(hidden)]
pub mod __private {
    /// The epilogue of a method whose rollback rule (`commit_on`) matched its error.
    pub fn commit_despite_error() {
        crate::rules::commit_despite_error();
    }
}
