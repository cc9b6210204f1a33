//! Test doubles of the outbox's two traits, for the tests of a service that uses the outbox:
//! [`MemoryBroker`], a [`Broker`](crate::Broker) that fails on demand the ways a real one does,
//! and [`MemoryStore`], an [`OutboxStore`](crate::OutboxStore) whose rows behave as tegu-sqlx's
//! `OutboxTable`'s. Both live in memory; no database, no NATS server. With the feature
//! `testing`, off by default: enable it in the `[dev-dependencies]` of the crate whose tests
//! use them.
//!
//! Register each with its `proto()`: the App gets the double, the test keeps a handle to it (a
//! clone shares its state), and the real [`Outbox`](crate::Outbox) runs between them.
//!
//! ```rust,standalone_crate
//! use std::sync::Mutex;
//! use std::time::Duration;
//! use tegu_core::{handlers, singleton_proto, App};
//! use tegu_outbox::Outbox;
//! use tegu_outbox::testing::{MemoryBroker, MemoryStore};
//!
//! #[derive(Debug, serde::Serialize, serde::Deserialize)]
//! pub struct Paid { pub cents: u64 }
//! tegu_outbox::external_event!(Paid = "billing.paid");
//!
//! /// What this instance's handler got.
//! #[singleton_proto]
//! #[derive(Default)]
//! pub struct Ledger { paid: Mutex<Vec<u64>> }
//!
//! #[handlers]
//! impl Ledger {
//!     #[event_handler]
//!     async fn on_paid(&self, paid: &Paid) {
//!         self.paid.lock().unwrap().push(paid.cents);
//!     }
//! }
//!
//! /// Waits (at most 10 s) until `done` holds.
//! async fn until(done: impl Fn() -> bool) {
//!     for _ in 0..1000 {
//!         if done() { return; }
//!         tokio::time::sleep(Duration::from_millis(10)).await;
//!     }
//!     panic!("waited 10 s");
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::error::BoxError> {
//! let (store, broker) = (MemoryStore::new(), MemoryBroker::new());
//! let app = App::builder()
//!     .register(store.proto())
//!     .register(broker.proto())
//!     .register(Outbox::proto())
//!     .config_value("outbox.poll_ms", 10)
//!     .build()
//!     .await?;
//! // The outbox relays once this instance has subscribed.
//! until(|| broker.subscriptions() == 1).await;
//!
//! // The broker fails twice, a passing failure: the event waits in the outbox, then goes out.
//! broker.fail_next(2);
//! let events = app.events();
//! app.try_run_in_context(async { events.emit(Paid { cents: 500 }) }).await?;
//! let ledger = app.get_object::<Ledger>()?;
//! until(|| *ledger.paid.lock().unwrap() == [500]).await;
//! assert_eq!(broker.attempts(), 3);
//! assert_eq!(broker.published()[0].name, "billing.paid");
//! // Kept in the outbox, marked published, should the broker lose it.
//! let rows = store.rows();
//! assert!(rows.len() == 1 && rows[0].published_at.is_some());
//!
//! // The broker loses its store: the outbox subscribes again and publishes the event once
//! // more; this instance recognises it and does not hand it over twice.
//! broker.forget();
//! until(|| broker.published().len() == 1).await;
//! until(|| app.get_object::<Outbox>().unwrap().counts().duplicates == 1).await;
//! assert_eq!(*ledger.paid.lock().unwrap(), [500]);
//! app.shutdown().await?;
//! # Ok(()) }
//! ```

mod broker;
mod store;

pub use broker::{MemoryBroker, Published};
pub use store::{MemoryStore, Row};
