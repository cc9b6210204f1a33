//! The broker's state lost and refused events, on real servers: a NATS server of this test's
//! own ([`Own::nats`]), restarted without its JetStream store, and two instances of a service
//! on one SQLite database. The stream and each instance's consumer are created again, what was
//! committed meanwhile reaches both once, and readiness says when an instance is deaf. An event
//! larger than the server takes fails the request that emits it, and one already in the outbox
//! is set aside while the events after it flow.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tegu_core::{App, events::EventBus, handlers, singleton_proto};
use tegu_nats::JetStream;
use tegu_outbox::Outbox;
use tegu_sqlx::{Database, OutboxTable, Sqlite};
use tegu_test_support::servers::Own;
use tegu_test_support::until;
use tegu_tx::TxError;

/// The external event.
#[derive(Debug, Serialize, Deserialize)]
pub struct Paid {
    /// The payment.
    pub id: i64,
    /// A note, as long as a test wants the event to be.
    pub note: String,
}

tegu_outbox::external_event!(Paid = "billing.paid");

/// Counts, per payment, how often this instance handled it; while `open` is false, its
/// handler waits (an instance that lags behind the stream).
#[derive(Debug, Default)]
#[singleton_proto]
pub struct Ledger {
    seen: Mutex<HashMap<i64, usize>>,
    open: Gate,
}

/// Open or closed; open at first.
#[derive(Debug)]
pub struct Gate(tokio::sync::watch::Sender<bool>);

impl Default for Gate {
    fn default() -> Self {
        Gate(tokio::sync::watch::Sender::new(true))
    }
}

impl Gate {
    fn send_replace(&self, open: bool) {
        self.0.send_replace(open);
    }
}

#[handlers]
impl Ledger {
    #[event_handler]
    async fn on_paid(&self, paid: &Paid) {
        let _ = self.open.0.subscribe().wait_for(|open| *open).await;
        *self.seen.lock().unwrap().entry(paid.id).or_default() += 1;
    }
}

impl Ledger {
    fn seen(&self) -> HashMap<i64, usize> {
        self.seen.lock().unwrap().clone()
    }
}

/// Writes a payment and emits `Paid`, in the request's transaction.
#[derive(Debug)]
#[singleton_proto]
pub struct Payments {
    #[inject]
    db: Arc<Database<Sqlite>>,
    #[inject]
    events: Arc<EventBus>,
}

impl Payments {
    /// Pays `id`, with a note of `note_len` bytes in its event.
    #[tegu_tx::transactional]
    pub async fn pay(&self, id: i64, note_len: usize) -> Result<(), TxError> {
        let mut conn = self.db.conn().await?;
        let insert = sqlx::query("INSERT INTO payments (id) VALUES ($1)").bind(id).execute(&mut *conn).await;
        insert.map_err(|e| self.db.error("paying", e))?;
        self.events.emit(Paid { id, note: "n".repeat(note_len) });
        Ok(())
    }
}

/// An instance named `name` on `db` and `nats`.
async fn instance(db: &str, nats: &str, name: &str) -> App {
    App::builder()
        .link::<Database<Sqlite>>()
        .link::<OutboxTable<Sqlite>>()
        .register(Outbox::proto())
        .register(JetStream::proto())
        .config_value("database.url", db)
        .config_value("nats.url", nats)
        .config_value("nats.consumer", name)
        .config_value("outbox.poll_ms", 100)
        .health_cache(Duration::ZERO)
        .build()
        .await
        .unwrap()
}

/// How long a wait of this file's lasts before it fails.
const WITHIN: Duration = Duration::from_secs(60);

/// A database with the payments table, as a URL.
async fn database(test: &str) -> String {
    let url = format!("sqlite://{}?mode=rwc", tegu_test_support::fresh_sqlite(test).display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::query("CREATE TABLE payments (id BIGINT PRIMARY KEY)").execute(&pool).await.unwrap();
    pool.close().await;
    url
}

async fn count(db: &str, table: &str) -> i64 {
    let pool = sqlx::SqlitePool::connect(db).await.unwrap();
    let count = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}")).fetch_one(&pool).await.unwrap();
    pool.close().await;
    count
}

/// NATS comes back without its store: no stream, no consumer, and none of the messages an
/// instance had not fetched yet. Each instance creates the stream and its consumer again (not
/// ready in between), the outbox publishes again what it published lately, and each instance
/// receives once every event committed before, during and after the outage, the one that lagged
/// 300 events behind (more than it fetches at a time) included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_back_without_its_store_gets_its_stream_and_consumers_back() {
    let Ok(mut nats) = Own::nats("restart") else { return };
    let db = database("broker-restart").await;
    let a = instance(&db, &nats.url(), "a").await;
    let b = instance(&db, &nats.url(), "b").await;
    for app in [&a, &b] {
        until("the instance to be ready", WITHIN, async || app.health().await.ready).await;
    }
    let payments = a.get_object::<Payments>().unwrap();
    for id in 1..=5 {
        a.try_run_in_context(payments.pay(id, 0)).await.unwrap().unwrap();
    }
    let expected = |ids: std::ops::RangeInclusive<i64>| ids.map(|id| (id, 1)).collect::<HashMap<i64, usize>>();
    for app in [&a, &b] {
        let ledger = app.get_object::<Ledger>().unwrap();
        until("both to handle the first payments", WITHIN, async || ledger.seen() == expected(1..=5)).await;
    }
    // B lags: 300 payments are published that it has not handled (most not even fetched).
    let b_ledger = b.get_object::<Ledger>().unwrap();
    b_ledger.open.send_replace(false);
    for id in 6..=305 {
        a.try_run_in_context(payments.pay(id, 0)).await.unwrap().unwrap();
    }
    let a_ledger = a.get_object::<Ledger>().unwrap();
    until("A to handle them", WITHIN, async || a_ledger.seen() == expected(1..=305)).await;
    // The server loses its store, with what B had not fetched; payments committed meanwhile
    // wait in the outbox.
    nats.lose_store();
    for id in 306..=310 {
        a.try_run_in_context(payments.pay(id, 0)).await.unwrap().unwrap();
    }
    nats.start().unwrap();
    b_ledger.open.send_replace(true);
    for id in 311..=315 {
        a.try_run_in_context(payments.pay(id, 0)).await.unwrap().unwrap();
    }
    // Each instance finds its consumer gone and subscribes again (not ready in between).
    for app in [&a, &b] {
        let ledger = app.get_object::<Ledger>().unwrap();
        until("both to handle every payment once", WITHIN, async || ledger.seen() == expected(1..=315)).await;
        until("the instance to be ready again", WITHIN, async || app.health().await.ready).await;
    }
    // What each instance published again (once subscribed again) is relayed: the outbox
    // drains, and no handler gets an event twice (their ids are remembered). A marker paid
    // last, relayed after everything before it, tells when all of it has been handled.
    until("the outbox to drain", WITHIN, async || count(&db, "di_outbox WHERE published_at IS NULL").await == 0).await;
    a.try_run_in_context(payments.pay(1000, 0)).await.unwrap().unwrap();
    let mut with_marker = expected(1..=315);
    with_marker.insert(1000, 1);
    let mut republished = 0;
    for app in [&a, &b] {
        let ledger = app.get_object::<Ledger>().unwrap();
        until("the marker", WITHIN, async || ledger.seen().contains_key(&1000)).await;
        assert_eq!(ledger.seen(), with_marker, "an event handled twice");
        let counts = app.get_object::<Outbox>().unwrap().counts();
        assert_eq!(counts.subscriptions, 2, "{counts:?}");
        republished += counts.republished;
    }
    // Both instances make the shared table's recent rows pending again; the one that comes
    // second may find them still pending (the first's relay has not published them yet) and
    // count none, so the count is the two instances' together.
    assert!(republished > 0, "no instance published anything again");
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

/// An event larger than the server's `max_payload` (1 MiB) fails the request that emits it:
/// nothing is stored, and the client is not told it was. One already in the outbox (written
/// before the limit was lowered) is set aside, with the reason, and the events after it reach
/// both instances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_nats_refuses_fails_its_request_or_is_set_aside() {
    let Ok(nats) = Own::nats("refused") else { return };
    let db = database("broker-refused").await;
    let a = instance(&db, &nats.url(), "a").await;
    until("the instance to be ready", WITHIN, async || a.health().await.ready).await;
    let payments = a.get_object::<Payments>().unwrap();
    let refused = a.try_run_in_context(payments.pay(1, 2 << 20)).await;
    let error = refused.unwrap_err().to_string();
    assert!(error.contains("billing.paid") && error.contains("max_payload"), "{error}");
    assert_eq!(count(&db, "payments").await, 0, "nothing of the request is stored");
    // A row too large for the server, already in the outbox, before three payments.
    let pool = sqlx::SqlitePool::connect(&db).await.unwrap();
    let big = serde_json::to_vec(&Paid { id: 99, note: "n".repeat(2 << 20) }).unwrap();
    sqlx::query("INSERT INTO di_outbox (event_id, name, payload) VALUES ('big', 'billing.paid', $1)")
        .bind(big)
        .execute(&pool)
        .await
        .unwrap();
    for id in 2..=4 {
        a.try_run_in_context(payments.pay(id, 10)).await.unwrap().unwrap();
    }
    let ledger = a.get_object::<Ledger>().unwrap();
    let expected: HashMap<i64, usize> = (2..=4).map(|id| (id, 1)).collect();
    until("the payments after the refused event", WITHIN, async || ledger.seen() == expected).await;
    let (id, reason): (String, String) =
        sqlx::query_as("SELECT event_id, error FROM di_outbox_dead_letters").fetch_one(&pool).await.unwrap();
    assert_eq!(id, "big");
    assert!(reason.contains("max payload"), "{reason}");
    assert_eq!(count(&db, "di_outbox WHERE published_at IS NULL").await, 0);
    assert_eq!(a.get_object::<Outbox>().unwrap().counts().set_aside, 1);
    a.shutdown().await.unwrap();
}
