//! The outbox end to end, on real servers: two instances of a service (two Apps, each with its
//! own pool and its own JetStream consumer) on one database (SQLite, PostgreSQL) and one NATS
//! server. An event committed on one is handled once by each; a rolled-back request publishes
//! nothing; what an instance that died left in the outbox is relayed by the other.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tegu_core::{App, AppBuilder, events::EventBus, handlers, singleton_proto};
use tegu_nats::JetStream;
use tegu_outbox::Outbox;
use tegu_sqlx::{Database, OutboxTable, Postgres, Sqlite};
use tegu_test_support::until;
use tegu_tx::TxError;

/// The external event.
#[derive(Debug, Serialize, Deserialize)]
pub struct Paid {
    /// The payment.
    pub id: i64,
}

tegu_outbox::external_event!(Paid = "billing.paid");

/// Counts, per payment, how often this instance handled it.
#[derive(Debug, Default)]
#[singleton_proto]
pub struct Ledger {
    seen: Mutex<HashMap<i64, usize>>,
}

#[handlers]
impl Ledger {
    #[event_handler]
    async fn on_paid(&self, paid: &Paid) {
        *self.seen.lock().unwrap().entry(paid.id).or_default() += 1;
    }
}

impl Ledger {
    fn seen(&self) -> HashMap<i64, usize> {
        self.seen.lock().unwrap().clone()
    }
}

/// Writes a payment and emits `Paid`, in the request's transaction; on whichever database the
/// test runs (both are registered under their own object names; one is linked).
#[derive(Debug)]
#[singleton_proto]
pub struct Payments {
    #[inject]
    sqlite: Option<Arc<Database<Sqlite>>>,
    #[inject]
    postgres: Option<Arc<Database<Postgres>>>,
    #[inject]
    events: Arc<EventBus>,
}

impl Payments {
    /// Pays `id`.
    #[tegu_tx::transactional]
    pub async fn pay(&self, id: i64) -> Result<(), TxError> {
        let sql = "INSERT INTO payments (id) VALUES ($1)";
        if let Some(db) = &self.sqlite {
            let mut conn = db.conn().await?;
            sqlx::query(sql).bind(id).execute(&mut *conn).await.map_err(|e| db.error("paying", e))?;
        } else if let Some(db) = &self.postgres {
            let mut conn = db.conn().await?;
            sqlx::query(sql).bind(id).execute(&mut *conn).await.map_err(|e| db.error("paying", e))?;
        }
        self.events.emit(Paid { id });
        Ok(())
    }

    /// Pays `id`, then fails: rolled back, event and all.
    #[tegu_tx::transactional]
    pub async fn pay_then_fail(&self, id: i64) -> Result<(), TxError> {
        self.pay(id).await?;
        Err(TxError::Mandatory { call: "a payment that fails after paying".into(), data_source: "database".into() })
    }
}

/// The database and NATS settings of a test; `None` (skipped) without the servers.
struct Setup {
    postgres: bool,
    url: String,
    nats: String,
    stream: String,
}

impl Setup {
    async fn new(test: &str, postgres: bool) -> Option<Setup> {
        let nats = match tegu_test_support::servers::nats() {
            Ok(url) => url.to_owned(),
            Err(why) => {
                tegu_test_support::servers::skip(test, why);
                return None;
            }
        };
        let url = if postgres {
            match tegu_test_support::servers::postgres_database(&format!("outbox_{}_{test}", std::process::id())) {
                Ok(url) => url,
                Err(why) => {
                    tegu_test_support::servers::skip(test, why);
                    return None;
                }
            }
        } else {
            format!("sqlite://{}?mode=rwc", tegu_test_support::fresh_sqlite(&format!("outbox-{test}")).display())
        };
        let stream = format!("T{}_{test}", std::process::id());
        let setup = Setup { postgres, url, nats, stream };
        setup.execute("CREATE TABLE payments (id BIGINT PRIMARY KEY)").await;
        Some(setup)
    }

    /// An instance: its own consumer on the test's stream.
    fn instance(&self, consumer: &str) -> AppBuilder {
        let builder = if self.postgres {
            App::builder().link::<Database<Postgres>>().link::<OutboxTable<Postgres>>()
        } else {
            App::builder().link::<Database<Sqlite>>().link::<OutboxTable<Sqlite>>()
        };
        builder
            .register(Outbox::proto())
            .register(JetStream::proto())
            .config_value("database.url", &self.url)
            .config_value("nats.url", &self.nats)
            .config_value("nats.stream", &self.stream)
            .config_value("nats.subjects", self.stream.to_lowercase())
            .config_value("nats.consumer", consumer)
            .config_value("outbox.poll_ms", 100)
    }

    async fn execute(&self, sql: &str) {
        if self.postgres {
            let pool = sqlx::PgPool::connect(&self.url).await.unwrap();
            sqlx::query(sql).execute(&pool).await.unwrap();
        } else {
            let pool = sqlx::SqlitePool::connect(&self.url).await.unwrap();
            sqlx::query(sql).execute(&pool).await.unwrap();
        }
    }

    async fn count(&self, table: &str) -> i64 {
        let sql = format!("SELECT count(*) FROM {table}");
        if self.postgres {
            let pool = sqlx::PgPool::connect(&self.url).await.unwrap();
            sqlx::query_scalar(&sql).fetch_one(&pool).await.unwrap()
        } else {
            let pool = sqlx::SqlitePool::connect(&self.url).await.unwrap();
            sqlx::query_scalar(&sql).fetch_one(&pool).await.unwrap()
        }
    }
}

/// How long a wait of this file's lasts before it fails.
const WITHIN: Duration = Duration::from_secs(20);

async fn each_instance_handles_a_committed_event_once(postgres: bool, test: &str) {
    let Some(setup) = Setup::new(test, postgres).await else { return };
    let a = setup.instance("a").build().await.unwrap();
    let b = setup.instance("b").build().await.unwrap();
    // Both subscribed before anything is published (a new consumer starts with what comes).
    for app in [&a, &b] {
        let outbox = app.get_object::<Outbox>().unwrap();
        until("the instance to subscribe", WITHIN, async || {
            tegu_core::health::HealthCheck::check(outbox.clone()).await.is_ok()
        })
        .await;
    }
    let payments = a.get_object::<Payments>().unwrap();
    for id in 1..=20 {
        a.try_run_in_context(payments.pay(id)).await.unwrap().unwrap();
    }
    // A rolled-back request: neither the payment nor its event.
    a.run_in_context(async {
        payments.pay(99).await.unwrap();
        tegu_core::scope::fail_scope();
    })
    .await;
    let expected: HashMap<i64, usize> = (1..=20).map(|id| (id, 1)).collect();
    for app in [&a, &b] {
        let ledger = app.get_object::<Ledger>().unwrap();
        until("both instances to handle the 20 payments", WITHIN, async || ledger.seen() == expected).await;
    }
    until("the outbox to empty", WITHIN, async || setup.count("di_outbox WHERE published_at IS NULL").await == 0).await;
    // Nothing more comes: no duplicate, no rolled-back payment. A marker paid last is relayed
    // after every earlier row (one relay publishes in row order) and handled after every
    // earlier event (one at a time per instance, in the order received): once it is seen,
    // anything else would have been.
    a.try_run_in_context(payments.pay(1000)).await.unwrap().unwrap();
    let mut with_marker = expected.clone();
    with_marker.insert(1000, 1);
    for app in [&a, &b] {
        let ledger = app.get_object::<Ledger>().unwrap();
        until("both instances to handle the marker", WITHIN, async || ledger.seen().contains_key(&1000)).await;
        assert_eq!(ledger.seen(), with_marker);
    }
    assert_eq!(setup.count("payments").await, 21);
    let counts = a.get_object::<Outbox>().unwrap().counts();
    assert_eq!((counts.written, counts.delivered), (21, 21), "{counts:?}");
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_each_instance_handles_a_committed_event_once() {
    each_instance_handles_a_committed_event_once(false, "sqlite_once").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_each_instance_handles_a_committed_event_once() {
    each_instance_handles_a_committed_event_once(true, "postgres_once").await;
}

/// An instance that commits and dies before its relay runs (here: one whose hosted services,
/// the relay and the subscription, never start) loses nothing: the other relays its events.
async fn what_a_dead_instance_left_is_relayed_by_the_other(postgres: bool, test: &str) {
    let Some(setup) = Setup::new(test, postgres).await else { return };
    let dead = setup.instance("dead").without_hosted_services().build().await.unwrap();
    let payments = dead.get_object::<Payments>().unwrap();
    for id in 1..=10 {
        dead.try_run_in_context(payments.pay(id)).await.unwrap().unwrap();
    }
    assert_eq!(
        setup.count("di_outbox WHERE published_at IS NULL").await,
        10,
        "committed with the payments, not relayed"
    );
    let alive = setup.instance("alive").build().await.unwrap();
    let ledger = alive.get_object::<Ledger>().unwrap();
    let expected: HashMap<i64, usize> = (1..=10).map(|id| (id, 1)).collect();
    until("the live instance to relay and handle them", WITHIN, async || ledger.seen() == expected).await;
    until("the outbox to empty", WITHIN, async || setup.count("di_outbox WHERE published_at IS NULL").await == 0).await;
    assert_eq!(alive.get_object::<Outbox>().unwrap().counts().relayed, 10);
    alive.shutdown().await.unwrap();
    dead.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_what_a_dead_instance_left_is_relayed_by_the_other() {
    what_a_dead_instance_left_is_relayed_by_the_other(false, "sqlite_dead").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_what_a_dead_instance_left_is_relayed_by_the_other() {
    what_a_dead_instance_left_is_relayed_by_the_other(true, "postgres_dead").await;
}

/// Work after the response (a task of the request, after its completion phase) runs in a
/// transaction of its own: when it rolls back, its external event is not published, and when
/// it commits, it is.
async fn rolled_back_work_after_the_response_publishes_nothing(postgres: bool, test: &str) {
    let Some(setup) = Setup::new(test, postgres).await else { return };
    let a = setup.instance("a").build().await.unwrap();
    let outbox = a.get_object::<Outbox>().unwrap();
    until("the instance to subscribe", WITHIN, async || {
        tegu_core::health::HealthCheck::check(outbox.clone()).await.is_ok()
    })
    .await;
    let payments = a.get_object::<Payments>().unwrap();
    a.run_in_context(async {
        tegu_core::scope::complete_scope().await.unwrap();
        assert!(payments.pay_then_fail(100).await.is_err());
        payments.pay(101).await.unwrap();
    })
    .await;
    // Relayed in the order written: once 101 is handled, 100 would have been.
    let ledger = a.get_object::<Ledger>().unwrap();
    until("the payment that committed", WITHIN, async || ledger.seen().contains_key(&101)).await;
    assert_eq!(ledger.seen(), HashMap::from([(101, 1)]));
    assert_eq!(setup.count("payments").await, 1);
    a.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_rolled_back_work_after_the_response_publishes_nothing() {
    rolled_back_work_after_the_response_publishes_nothing(false, "sqlite_late").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_rolled_back_work_after_the_response_publishes_nothing() {
    rolled_back_work_after_the_response_publishes_nothing(true, "postgres_late").await;
}
