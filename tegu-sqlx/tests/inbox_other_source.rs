//! The inbox's record of a handler that works in a transaction of another data source than the
//! outbox's: not written in the handler's scope (it would commit on its own, before the
//! handler's work), but by the outbox once the handler has succeeded. Here the other source's
//! COMMIT fails after the handler returned: the handler failed, so the event is tried again and
//! ends as a dead letter, with no record saying it was handled.

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tegu_core::error::BoxError;
use tegu_core::{App, ProtoDef, handlers, singleton_proto};
use tegu_outbox::testing::MemoryBroker;
use tegu_outbox::{Broker, Outbox, OutboxStore, Outgoing};
use tegu_sqlx::{Database, OutboxTable, Sqlite};
use tegu_test_support::until;
use tegu_tx::{TxConn, TxFuture, TxSource, transactional};

/// The external event.
#[derive(Debug, Serialize, Deserialize)]
pub struct Paid {
    /// The invoice.
    pub invoice: i64,
}

tegu_outbox::external_event!(Paid = "billing.paid");

/// A data source whose COMMIT always fails (a serialization failure, a connection lost).
#[derive(Debug, Default)]
pub struct Refusing;

struct RefusingTx;

impl TxSource for Refusing {
    fn begin(&self) -> TxFuture<'_, Box<dyn TxConn>> {
        Box::pin(async { Ok(Box::new(RefusingTx) as Box<dyn TxConn>) })
    }
}

impl TxConn for RefusingTx {
    fn commit(self: Box<Self>) -> TxFuture<'static, ()> {
        Box::pin(async { Err("the ledger refused the commit".into()) })
    }
    fn rollback(self: Box<Self>) -> TxFuture<'static, ()> {
        Box::pin(async { Ok(()) })
    }
    fn savepoint<'a>(&'a mut self, _: &'a str) -> TxFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn release_savepoint<'a>(&'a mut self, _: &'a str) -> TxFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn rollback_to_savepoint<'a>(&'a mut self, _: &'a str) -> TxFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Books a payment in the ledger (the refusing source).
#[derive(Debug)]
#[singleton_proto]
pub struct Ledger {
    runs: AtomicUsize,
}

#[handlers]
impl Ledger {
    #[event_handler]
    async fn on_paid(&self, paid: &Paid) -> Result<(), BoxError> {
        self.book(paid.invoice).await
    }
}

impl Ledger {
    #[transactional(source = "ledger")]
    async fn book(&self, _invoice: i64) -> Result<(), BoxError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_whose_other_source_fails_to_commit_leaves_no_record() {
    let dir = std::env::temp_dir().join(format!("tegu-sqlx-{}-inbox-other-source", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}/db.sqlite3?mode=rwc", dir.display());
    let broker = MemoryBroker::new();
    let ledger =
        ProtoDef::singleton::<Refusing>(|_| Ok(Refusing)).name("ledger").provides::<Refusing, dyn TxSource>(|l| l);
    let app = App::builder()
        .link::<Database<Sqlite>>()
        .link::<OutboxTable<Sqlite>>()
        .register(ledger)
        .register(broker.proto())
        .register(Outbox::proto())
        .config_value("database.url", url)
        .config_value("outbox.backoff_ms", 5)
        .build()
        .await
        .unwrap();
    until("the instance to subscribe", Duration::from_secs(10), async || broker.subscriptions() == 1).await;
    broker
        .publish(Outgoing { id: "e1", name: "billing.paid", payload: br#"{"invoice":1}"#, headers: &[] })
        .await
        .unwrap();
    until("the event to be acknowledged", Duration::from_secs(20), async || broker.acknowledged() == 1).await;
    assert_eq!(app.get_object::<Ledger>().unwrap().runs.load(Ordering::SeqCst), 3, "three tries");
    let outbox = app.get_object::<Outbox>().unwrap();
    let dead = outbox.dead_letters(0, 10).await.unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].why.handler(), Some("inbox_other_source::Ledger::on_paid"));
    let table = app.get_object::<OutboxTable<Sqlite>>().unwrap();
    assert!(table.handled("instance-0", "e1").await.unwrap().is_empty(), "no record of a failed handler");
    app.shutdown().await.unwrap();
}
