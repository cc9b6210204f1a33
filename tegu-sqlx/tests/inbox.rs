//! The outbox's inbox on SQLite and PostgreSQL: the record that a handler handled an event is
//! written in the handler's transaction, so that what a `#[transactional]` handler writes and
//! the record commit together. A handler that fails after writing, then succeeds, has its
//! effect once; an event brought again after the instance restarted, or published again after
//! the broker lost its store, is not handled twice; old records are purged. Shown with the
//! handler's own rows.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tegu_core::error::BoxError;
use tegu_core::{App, handlers, singleton_proto};
use tegu_outbox::testing::MemoryBroker;
use tegu_outbox::{Broker, DeadLetter, Outbox, OutboxStore, Outgoing, Recorded, Replayed, Why};
use tegu_sqlx::{Database, OutboxTable, Postgres, Sqlite};
use tegu_test_support::until;
use tegu_tx::transactional;

/// The external event.
#[derive(Debug, Serialize, Deserialize)]
pub struct Shipped {
    /// The parcel.
    pub parcel: i64,
}

tegu_outbox::external_event!(Shipped = "parcels.shipped");

/// How long a wait of this file's lasts before it fails.
const WITHIN: Duration = Duration::from_secs(20);

/// Emitted by a handler: its `before_commit` handler fails the handler's scope.
#[derive(Debug)]
pub struct Vetoed;

/// The handler's name, as the inbox records it.
const HANDLER: &str = "inbox::sqlite::Shipments::on_shipped";

/// The tests for database `$db`, a fresh database's URL from `$url`.
macro_rules! tests {
    ($module:ident, $db:ty, $url:path) => {
        mod $module {
            use super::*;

            /// Writes a row per parcel shipped, in the handler scope's transaction; fails after
            /// writing as many times as `fail` says. (The other database's handler, in the
            /// same App, has no database and does nothing.)
            #[derive(Debug)]
            #[singleton_proto]
            pub(crate) struct Shipments {
                #[inject]
                db: Option<Arc<Database<$db>>>,
                #[inject]
                events: Arc<tegu_core::events::EventBus>,
                fail: AtomicUsize,
                runs: AtomicUsize,
            }

            #[handlers]
            impl Shipments {
                #[event_handler(before_commit)]
                async fn veto(&self, _: &Vetoed) -> Result<(), BoxError> {
                    Err("vetoed in the completion phase".into())
                }

                #[event_handler]
                async fn on_shipped(&self, shipped: &Shipped) -> Result<(), BoxError> {
                    if self.db.is_none() {
                        return Ok(());
                    }
                    self.runs.fetch_add(1, Ordering::SeqCst);
                    if shipped.parcel == -1 {
                        // Only reads: its scope's transaction is read-only.
                        return self.read().await.map(drop);
                    }
                    if shipped.parcel == -2 {
                        // Its scope's completion fails after the handler returned.
                        self.events.emit(Vetoed);
                        return Ok(());
                    }
                    self.write(shipped.parcel).await
                }
            }

            impl Shipments {
                #[transactional]
                async fn write(&self, parcel: i64) -> Result<(), BoxError> {
                    let db = self.db.as_ref().expect("the database");
                    let mut conn = db.conn().await?;
                    sqlx::query("INSERT INTO shipments (parcel) VALUES ($1)")
                        .bind(parcel)
                        .execute(&mut *conn)
                        .await
                        .map_err(|e| db.error("writing a shipment", e))?;
                    let failing = self.fail.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
                    if failing.is_ok() {
                        return Err("an injected failure, after writing".into());
                    }
                    Ok(())
                }

                /// Whether the store sees a writable transaction in a read-only one.
                #[transactional(read_only)]
                async fn writable_in_read_only(&self, table: &OutboxTable<$db>) -> Result<bool, BoxError> {
                    Ok(table.in_writable_transaction())
                }

                /// Whether the store sees a writable transaction in a plain one.
                #[transactional]
                async fn writable_in_transaction(&self, table: &OutboxTable<$db>) -> Result<bool, BoxError> {
                    Ok(table.in_writable_transaction())
                }

                /// Reads in a read-only transaction, as a handler that only reads would.
                #[transactional(read_only)]
                async fn read(&self) -> Result<i64, BoxError> {
                    let db = self.db.as_ref().expect("the database");
                    let mut conn = db.conn().await?;
                    let count = sqlx::query_scalar("SELECT COUNT(*) FROM shipments")
                        .fetch_one(&mut *conn)
                        .await
                        .map_err(|e| db.error("counting shipments", e))?;
                    Ok(count)
                }

                /// Records a handled event in a transaction that then rolls back.
                #[transactional]
                async fn record_then_fail(&self, table: &OutboxTable<$db>) -> Result<(), BoxError> {
                    assert_eq!(table.record_handled("a", "e1", "h", 1_000).await?, Recorded::Written);
                    Err("rolled back".into())
                }
            }

            /// An App on `url` with the outbox on `broker` (its consumer: this instance's).
            async fn app(url: &str, broker: &MemoryBroker) -> App {
                App::builder()
                    .link::<Database<$db>>()
                    .link::<OutboxTable<$db>>()
                    .register(broker.proto())
                    .register(Outbox::proto())
                    .config_value("database.url", url)
                    .config_value("outbox.poll_ms", 10)
                    .config_value("outbox.backoff_ms", 5)
                    .build()
                    .await
                    .expect("the App")
            }

            async fn started(url: &str, broker: &MemoryBroker, subscriptions: usize) -> App {
                let app = app(url, broker).await;
                until("the instance to subscribe", WITHIN, async || broker.subscriptions() >= subscriptions).await;
                let db = app.get_object::<Database<$db>>().unwrap();
                sqlx::query("CREATE TABLE IF NOT EXISTS shipments (parcel BIGINT NOT NULL)")
                    .execute(db.pool())
                    .await
                    .unwrap();
                app
            }

            /// The parcels of the rows, in order.
            async fn rows(app: &App) -> Vec<i64> {
                let db = app.get_object::<Database<$db>>().unwrap();
                sqlx::query_scalar("SELECT parcel FROM shipments ORDER BY parcel").fetch_all(db.pool()).await.unwrap()
            }

            fn shipped<'a>(id: &'a str, payload: &'a [u8]) -> Outgoing<'a> {
                Outgoing { id, name: "parcels.shipped", payload, headers: &[] }
            }

            fn handler() -> String {
                HANDLER.replace("sqlite", stringify!($module))
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_handler_that_fails_after_writing_then_succeeds_has_its_effect_once() {
                let Some(url) = $url("inbox_retried").await else { return };
                let broker = MemoryBroker::new();
                let app = started(&url, &broker, 1).await;
                app.get_object::<Shipments>().unwrap().fail.store(2, Ordering::SeqCst);
                broker.publish(shipped("e1", br#"{"parcel":1}"#)).await.unwrap();
                until("the event to be handled", WITHIN, async || broker.acknowledged() == 1).await;
                assert_eq!(app.get_object::<Shipments>().unwrap().runs.load(Ordering::SeqCst), 3);
                assert_eq!(rows(&app).await, [1], "two tries rolled back, the third committed");
                let table = app.get_object::<OutboxTable<$db>>().unwrap();
                assert!(table.handled("instance-0", "e1").await.unwrap().contains(&handler()));
                app.shutdown().await.unwrap();
            }

            /// The instance handles an event, and restarts (its memory of what it handled
            /// gone): the broker brings the event again, then loses its store, and the outbox
            /// publishes what it kept again. Neither is handled twice.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn an_event_brought_again_after_a_restart_is_not_handled_twice() {
                let Some(url) = $url("inbox_restart").await else { return };
                let broker = MemoryBroker::new();
                let first = started(&url, &broker, 1).await;
                // Written through the outbox, so that it keeps it once published.
                first
                    .run_in_context(async {
                        first.events().emit(Shipped { parcel: 7 });
                    })
                    .await;
                until("the event to be handled", WITHIN, async || broker.acknowledged() == 1).await;
                first.shutdown().await.unwrap();
                drop(first);

                let id = broker.published()[0].id.clone();
                assert!(broker.redeliver(&id));
                let second = started(&url, &broker, 2).await;
                until("the event brought again to be acknowledged", WITHIN, async || broker.acknowledged() == 2).await;
                broker.forget();
                until("the event published again to be acknowledged", WITHIN, async || broker.acknowledged() == 3)
                    .await;
                let outbox = second.get_object::<Outbox>().unwrap();
                let counts = outbox.counts();
                assert!(counts.republished >= 1, "{counts:?}");
                assert_eq!((counts.delivered, counts.duplicates), (0, 2), "{counts:?}");
                assert_eq!(second.get_object::<Shipments>().unwrap().runs.load(Ordering::SeqCst), 0);
                assert_eq!(rows(&second).await, [7]);
                second.shutdown().await.unwrap();
            }

            /// A handler whose scope's transaction is read-only cannot write the record in it: the
            /// outbox writes it once the handler has succeeded, and the event is no dead letter.
            /// A handler without a transaction whose scope fails in its completion phase, after
            /// the handler returned: no record is written before the scope's end, so the
            /// failure is a failure (tried again, then a dead letter), not an event taken as
            /// handled.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_scope_that_fails_after_its_handler_returned_leaves_no_record() {
                let Some(url) = $url("inbox_vetoed").await else { return };
                let broker = MemoryBroker::new();
                let app = started(&url, &broker, 1).await;
                broker.publish(shipped("e1", br#"{"parcel":-2}"#)).await.unwrap();
                until("the event to be acknowledged", WITHIN, async || broker.acknowledged() == 1).await;
                let outbox = app.get_object::<Outbox>().unwrap();
                let dead = outbox.dead_letters(0, 10).await.unwrap();
                let handlers: Vec<_> = dead.iter().filter_map(|letter| letter.why.handler()).collect();
                assert!(handlers.contains(&handler().as_str()), "{dead:?}");
                let table = app.get_object::<OutboxTable<$db>>().unwrap();
                assert!(!table.handled("instance-0", "e1").await.unwrap().contains(&handler()));
                app.shutdown().await.unwrap();
            }

            /// A dead letter without a receiver (kept by a store that does not keep one) is
            /// replayed without the inbox; one naming a handler this App does not have is kept.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_replay_without_a_receiver_or_a_handler_here() {
                let Some(url) = $url("inbox_replay_odd").await else { return };
                let broker = MemoryBroker::new();
                let app = started(&url, &broker, 1).await;
                let table = app.get_object::<OutboxTable<$db>>().unwrap();
                let outbox = app.get_object::<Outbox>().unwrap();
                let payload = br#"{"parcel":3}"#.to_vec();
                let why = Why::Failed { handler: handler() };
                let anonymous = DeadLetter::new(why, "e3", "parcels.shipped", payload.clone(), Vec::new());
                let anonymous = table.dead_letter(&anonymous).await.unwrap();
                table.record_handled("instance-0", "e3", &handler(), 1_000).await.unwrap();
                assert_eq!(outbox.replay(anonymous).await.unwrap(), Replayed::Handled);
                assert_eq!(rows(&app).await, [3], "run: no inbox to say otherwise");
                let why = Why::Failed { handler: format!("{}#2", handler()) };
                let mut elsewhere = DeadLetter::new(why, "e4", "parcels.shipped", payload, Vec::new());
                elsewhere.receiver = "instance-0".to_owned();
                let elsewhere = table.dead_letter(&elsewhere).await.unwrap();
                assert!(matches!(outbox.replay(elsewhere).await.unwrap(), Replayed::Refused(_)));
                assert_eq!(outbox.dead_letters(0, 10).await.unwrap().len(), 1, "kept");
                app.shutdown().await.unwrap();
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_read_only_handler_has_its_record_written_after_it_succeeded() {
                let Some(url) = $url("inbox_read_only").await else { return };
                let broker = MemoryBroker::new();
                let app = started(&url, &broker, 1).await;
                broker.publish(shipped("e1", br#"{"parcel":-1}"#)).await.unwrap();
                until("the event to be handled", WITHIN, async || broker.acknowledged() == 1).await;
                let outbox = app.get_object::<Outbox>().unwrap();
                assert_eq!(outbox.counts().dead_letters, 0, "{:?}", outbox.counts());
                let table = app.get_object::<OutboxTable<$db>>().unwrap();
                assert!(table.handled("instance-0", "e1").await.unwrap().contains(&handler()));
                app.shutdown().await.unwrap();
            }

            /// A handler's dead letter replayed, on any instance, reads and writes the inbox of
            /// the receiver that had it: one whose handler has its record (its last try
            /// committed after all) is not run again; one without is run once and recorded.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_replay_reads_and_writes_the_inbox_of_the_receiver_that_had_it() {
                let Some(url) = $url("inbox_replay").await else { return };
                let broker = MemoryBroker::new();
                let app = started(&url, &broker, 1).await;
                let table = app.get_object::<OutboxTable<$db>>().unwrap();
                let letter = |event: &str, parcel: i64| {
                    let why = Why::Failed { handler: handler() };
                    let payload = format!(r#"{{"parcel":{parcel}}}"#).into_bytes();
                    let mut letter = DeadLetter::new(why, event, "parcels.shipped", payload, Vec::new());
                    letter.receiver = "instance-7".to_owned();
                    letter
                };
                let handled = table.dead_letter(&letter("e1", 1)).await.unwrap();
                table.record_handled("instance-7", "e1", &handler(), 1_000).await.unwrap();
                let not_yet = table.dead_letter(&letter("e2", 2)).await.unwrap();
                assert_eq!(table.dead_letter_by_id(not_yet).await.unwrap().unwrap().receiver, "instance-7");
                let outbox = app.get_object::<Outbox>().unwrap();
                assert_eq!(outbox.replay(handled).await.unwrap(), Replayed::Handled);
                assert_eq!(rows(&app).await, Vec::<i64>::new(), "recorded: not run again");
                assert_eq!(outbox.replay(not_yet).await.unwrap(), Replayed::Handled);
                assert_eq!(rows(&app).await, [2]);
                assert!(table.handled("instance-7", "e2").await.unwrap().contains(&handler()));
                assert!(table.handled("instance-0", "e2").await.unwrap().is_empty());
                app.shutdown().await.unwrap();
            }

            /// A record written in a transaction that rolls back is gone with it; one written is
            /// refused a second time; old ones are purged.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_record_follows_its_transaction_and_is_written_once() {
                let Some(url) = $url("inbox_store").await else { return };
                let broker = MemoryBroker::new();
                let app = app(&url, &broker).await;
                let table = app.get_object::<OutboxTable<$db>>().unwrap();
                let shipments = app.get_object::<Shipments>().unwrap();
                assert!(app.run_in_context(shipments.record_then_fail(&table)).await.is_err());
                assert!(table.handled("a", "e1").await.unwrap().is_empty());
                assert_eq!(table.record_handled("a", "e1", "h", 1_000).await.unwrap(), Recorded::Written);
                assert_eq!(table.record_handled("a", "e1", "h", 2_000).await.unwrap(), Recorded::Already);
                assert_eq!(table.record_handled("b", "e1", "h", 3_000).await.unwrap(), Recorded::Written);
                assert!(!table.in_writable_transaction(), "outside any transaction");
                assert!(!app.run_in_context(shipments.writable_in_read_only(&table)).await.unwrap(), "read-only");
                assert!(app.run_in_context(shipments.writable_in_transaction(&table)).await.unwrap());
                assert!(table.handled("c", "e1").await.unwrap().is_empty());
                assert_eq!(table.purge_handled(2_000).await.unwrap(), 1);
                assert!(table.handled("a", "e1").await.unwrap().is_empty());
                assert_eq!(table.handled("b", "e1").await.unwrap(), ["h"]);
                app.shutdown().await.unwrap();
            }
        }
    };
}

tests!(sqlite, Sqlite, crate::common::urls::sqlite);
tests!(postgres, Postgres, crate::common::urls::postgres);
