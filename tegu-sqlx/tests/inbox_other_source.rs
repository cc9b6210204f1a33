//! The inbox's record of a handler that works in a transaction of another data source than the
//! outbox's: not written in the handler's scope (it would commit on its own, before the
//! handler's work), but by the outbox once the handler has succeeded. Here the other source's
//! COMMIT fails after the handler returned: the handler failed, so the event is tried again and
//! ends as a dead letter, with no record saying it was handled.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tegu_core::error::BoxError;
use tegu_core::{App, handlers, singleton_proto};
use tegu_outbox::testing::MemoryBroker;
use tegu_outbox::{Broker, Outbox, OutboxStore, Outgoing};
use tegu_sqlx::{Database, OutboxTable, Sqlite};
use tegu_test_support::until;
use tegu_tx::testing::JournalSource;
use tegu_tx::transactional;

/// The external event.
#[derive(Debug, Serialize, Deserialize)]
pub struct Paid {
    /// The invoice.
    pub invoice: i64,
}

tegu_outbox::external_event!(Paid = "billing.paid");

/// Books a payment in the ledger (a source whose commits fail).
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
    // A data source whose COMMIT always fails (a serialization failure, a connection lost).
    let ledger = JournalSource::new();
    ledger.fail_next_commits(usize::MAX);
    let app = App::builder()
        .link::<Database<Sqlite>>()
        .link::<OutboxTable<Sqlite>>()
        .register(ledger.proto("ledger"))
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
    assert_eq!(ledger.journal().iter().filter(|line| *line == "COMMIT failed").count(), 3);
    let outbox = app.get_object::<Outbox>().unwrap();
    let dead = outbox.dead_letters(0, 10).await.unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].why.handler(), Some("inbox_other_source::Ledger::on_paid"));
    let table = app.get_object::<OutboxTable<Sqlite>>().unwrap();
    assert!(table.handled("instance-0", "e1").await.unwrap().is_empty(), "no record of a failed handler");
    app.shutdown().await.unwrap();
}
