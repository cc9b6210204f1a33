//! Events of a key (`external_event!(.., key = ..)`) are handled in the order they were
//! emitted by a once-per-cluster handler, across two instances and the handler's retries: a
//! later event of the key waits for the earlier one. 1,000 events over 10 keys, emitted on two
//! instances, a handler that fails at random and is tried again, and one event it fails for
//! good (a dead letter, which the key's next events wait for): with the in-memory broker and
//! store, and on PostgreSQL and NATS (two Apps, each its own pool and JetStream consumer; the
//! handler's write and the inbox's records in one transaction).

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tegu_core::{App, events::EventBus, handlers, singleton_proto};
use tegu_nats::JetStream;
use tegu_outbox::Outbox;
use tegu_outbox::testing::{MemoryBroker, MemoryStore};
use tegu_sqlx::{Database, OutboxTable, Postgres, Sqlite};
use tegu_test_support::until;
use tegu_tx::TxError;

/// Step `n` of aggregate `key`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Step {
    /// The aggregate.
    pub key: u32,
    /// The step.
    pub n: u32,
}

tegu_outbox::external_event!(Step = "aggregates.step", key = |step| step.key);

const KEYS: u32 = 10;
const STEPS: u32 = 100;

/// The steps handled, in the order their handler succeeded, in this process (both instances).
static HANDLED: Mutex<Vec<(u32, u32)>> = Mutex::new(Vec::new());
/// When the step after [`DEAD`] was handled, in milliseconds since the epoch.
static AFTER_DEAD_AT: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
/// The tries of each step.
static TRIES: Mutex<BTreeMap<(u32, u32), u32>> = Mutex::new(BTreeMap::new());

/// The step whose handler fails every try: a dead letter, which the key's next steps wait for.
const DEAD: (u32, u32) = (0, 50);

/// Whether try `tried` of step `n` of `key` fails: about one in three, the first three tries
/// at most, the same in every run (a fixed hash, not the process's); every try of [`DEAD`].
fn fails(key: u32, n: u32, tried: u32) -> bool {
    if (key, n) == DEAD {
        return true;
    }
    let mut hasher =
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().build_hasher();
    hasher.write_u32(key);
    hasher.write_u32(n);
    hasher.write_u32(tried);
    tried <= 3 && hasher.finish() % 3 == 0
}

/// Handles each step once in the cluster, writing it (on PostgreSQL, in its transaction).
#[derive(Debug)]
#[singleton_proto]
pub struct Aggregates {
    #[inject]
    db: Option<Arc<Database<Postgres>>>,
    #[inject]
    events: Arc<EventBus>,
}

#[handlers]
impl Aggregates {
    #[event_handler(once_per_cluster)]
    async fn on_step(&self, step: &Step) -> Result<(), TxError> {
        self.apply(step).await
    }
}

impl Aggregates {
    /// Writes the step, then fails if this try is one that fails: the write rolls back.
    #[tegu_tx::transactional]
    async fn apply(&self, step: &Step) -> Result<(), TxError> {
        let tried = {
            let mut tries = TRIES.lock().unwrap();
            let tried = tries.entry((step.key, step.n)).or_default();
            *tried += 1;
            *tried
        };
        if let Some(db) = &self.db {
            let mut conn = db.conn().await?;
            sqlx::query("INSERT INTO steps (key, n) VALUES ($1, $2)")
                .bind(i64::from(step.key))
                .bind(i64::from(step.n))
                .execute(&mut *conn)
                .await
                .map_err(|e| db.error("writing a step", e))?;
        }
        if fails(step.key, step.n, tried) {
            return Err(TxError::Mandatory {
                call: format!("step {} of {}", step.n, step.key),
                data_source: "test".into(),
            });
        }
        if (step.key, step.n) == (DEAD.0, DEAD.1 + 1) {
            AFTER_DEAD_AT.store(now_ms(), std::sync::atomic::Ordering::SeqCst);
        }
        HANDLED.lock().unwrap().push((step.key, step.n));
        Ok(())
    }

    /// Emits steps `steps` of `key`, in order (on PostgreSQL, in the request's transaction,
    /// numbered there).
    #[tegu_tx::transactional]
    async fn steps(&self, key: u32, steps: std::ops::Range<u32>) -> Result<(), TxError> {
        for n in steps {
            self.events.emit(Step { key, n });
        }
        Ok(())
    }
}

/// Emits every step, each key's in order, ten per request (so that the broker has several of a
/// key at once, for the two instances to take), the keys interleaved, the requests alternating
/// between the two instances.
async fn emit_all(apps: &[App; 2]) {
    for chunk in 0..STEPS / 10 {
        for key in 0..KEYS {
            let app = &apps[((chunk + key) % 2) as usize];
            let aggregates = app.get_object::<Aggregates>().unwrap();
            let steps = chunk * 10..chunk * 10 + 10;
            app.try_run_in_context(async { aggregates.steps(key, steps).await }).await.unwrap().unwrap();
        }
    }
}

/// Each key's steps, in the order `handled` has them.
fn by_key(handled: &[(u32, u32)]) -> HashMap<u32, Vec<u32>> {
    let mut by_key: HashMap<u32, Vec<u32>> = HashMap::new();
    for &(key, n) in handled {
        by_key.entry(key).or_default().push(n);
    }
    by_key
}

/// Each key's steps handled in order, all but [`DEAD`].
fn assert_in_order(handled: &[(u32, u32)]) {
    let by_key = by_key(handled);
    assert_eq!(by_key.len(), KEYS as usize);
    for (key, steps) in by_key {
        let expected: Vec<u32> = (0..STEPS).filter(|&n| (key, n) != DEAD).collect();
        assert_eq!(steps, expected, "key {key}'s steps");
    }
    let retried = TRIES.lock().unwrap().values().filter(|&&tries| tries > 1).count();
    assert!(retried > 100, "the handler failed at random and was tried again: {retried} steps retried");
}

/// The one dead letter is [`DEAD`]'s, and the key's next step was handled after it was set
/// aside, not before.
async fn assert_waited_for_the_dead_letter(app: &App) {
    let letters = app.get_object::<Outbox>().unwrap().dead_letters(0, 10).await.unwrap();
    assert_eq!(letters.len(), 1, "{letters:?}");
    let after = AFTER_DEAD_AT.load(std::sync::atomic::Ordering::SeqCst);
    assert!(after >= letters[0].at, "the next step handled at {after}, the dead letter set aside at {}", letters[0].at);
}

fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// An instance on the in-memory `store` and `broker`'s handle, with SQLite `file` as the data
/// source of its transactions, once subscribed (its own subscription and the shared one).
async fn in_memory(store: &MemoryStore, broker: &MemoryBroker, file: &std::path::Path, order_wait_ms: u64) -> App {
    let before = broker.subscriptions();
    let app = App::builder()
        .link::<Database<Sqlite>>()
        .config_value("database.url", format!("sqlite://{}?mode=rwc", file.display()))
        .register(store.proto())
        .register(broker.proto())
        .register(Outbox::proto())
        .config_value("outbox.poll_ms", 10)
        .config_value("outbox.order_wait_ms", order_wait_ms)
        .config_value("outbox.attempts", 10)
        .config_value("outbox.backoff_ms", 5)
        .build()
        .await
        .unwrap();
    until("the instance to subscribe", Duration::from_secs(10), async || broker.subscriptions() >= before + 2).await;
    app
}

/// One test at a time in this file: they share the statics.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_events_are_handled_in_emit_order_across_two_instances_and_retries_in_memory() {
    let _one = ONE_AT_A_TIME.lock().await;
    HANDLED.lock().unwrap().clear();
    TRIES.lock().unwrap().clear();
    let (store, a) = (MemoryStore::new(), MemoryBroker::new());
    let b = a.instance();
    // A data source for the transactions; the outbox's store is the in-memory one.
    let file = tegu_test_support::fresh_sqlite("ordering");
    let mut apps = Vec::new();
    for broker in [&a, &b] {
        apps.push(in_memory(&store, broker, &file, 60_000).await);
    }
    let apps: [App; 2] = apps.try_into().unwrap();
    emit_all(&apps).await;
    let total = (KEYS * STEPS) as usize - 1;
    until("every step handled", Duration::from_secs(60), async || HANDLED.lock().unwrap().len() >= total).await;
    let handled = HANDLED.lock().unwrap().clone();
    assert_eq!(handled.len(), total);
    assert_in_order(&handled);
    assert_waited_for_the_dead_letter(&apps[0]).await;
    for app in apps {
        app.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_events_are_handled_in_emit_order_across_two_instances_and_retries_on_postgres_and_nats() {
    const TEST: &str = "ordering";
    let _one = ONE_AT_A_TIME.lock().await;
    let nats = match tegu_test_support::servers::nats() {
        Ok(url) => url.to_owned(),
        Err(why) => return tegu_test_support::servers::skip(TEST, why),
    };
    let url = match tegu_test_support::servers::postgres_database(&format!("outbox_{}_{TEST}", std::process::id())) {
        Ok(url) => url,
        Err(why) => return tegu_test_support::servers::skip(TEST, why),
    };
    HANDLED.lock().unwrap().clear();
    TRIES.lock().unwrap().clear();
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::query("CREATE TABLE steps (id BIGSERIAL PRIMARY KEY, key BIGINT NOT NULL, n BIGINT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    let stream = format!("O{}_{TEST}", std::process::id());
    let mut apps = Vec::new();
    for consumer in ["a", "b"] {
        let app = App::builder()
            .link::<Database<Postgres>>()
            .link::<OutboxTable<Postgres>>()
            .register(Outbox::proto())
            .register(JetStream::proto())
            .config_value("database.url", &url)
            .config_value("nats.url", &nats)
            .config_value("nats.stream", &stream)
            .config_value("nats.subjects", stream.to_lowercase())
            .config_value("nats.consumer", consumer)
            .config_value("outbox.poll_ms", 50)
            .config_value("outbox.attempts", 10)
            .config_value("outbox.backoff_ms", 5)
            .build()
            .await
            .unwrap();
        let outbox = app.get_object::<Outbox>().unwrap();
        until("the instance to subscribe", Duration::from_secs(20), async || outbox.counts().subscriptions >= 2).await;
        apps.push(app);
    }
    let apps: [App; 2] = apps.try_into().unwrap();
    emit_all(&apps).await;
    let total = i64::from(KEYS * STEPS) - 1;
    let count = async || -> i64 { sqlx::query_scalar("SELECT count(*) FROM steps").fetch_one(&pool).await.unwrap() };
    until("every step written", Duration::from_secs(120), async || count().await >= total).await;
    // In the order they committed: the rows' ids, drawn as each step's write ran.
    let rows: Vec<(i64, i64)> = sqlx::query_as("SELECT key, n FROM steps ORDER BY id").fetch_all(&pool).await.unwrap();
    let written: Vec<(u32, u32)> =
        rows.into_iter().map(|(key, n)| (u32::try_from(key).unwrap(), u32::try_from(n).unwrap())).collect();
    assert_eq!(written.len(), total as usize, "each step written once: the failed tries rolled back");
    assert_in_order(&written);
    assert_in_order(&HANDLED.lock().unwrap().clone());
    assert_waited_for_the_dead_letter(&apps[0]).await;
    for app in apps {
        app.shutdown().await.unwrap();
    }
    pool.close().await;
}

/// A key's event the broker refused for good never reaches a handler: its number is skipped,
/// and the key's next event is handled at once, not after `outbox.order_wait_ms`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_number_the_broker_refused_does_not_hold_the_keys_next_events() {
    const KEY: u32 = 99;
    let _one = ONE_AT_A_TIME.lock().await;
    HANDLED.lock().unwrap().clear();
    TRIES.lock().unwrap().clear();
    let (store, broker) = (MemoryStore::new(), MemoryBroker::new());
    let file = tegu_test_support::fresh_sqlite("ordering-refused");
    let app = in_memory(&store, &broker, &file, 600_000).await;
    // The broker away while the three steps are written; the second's id refused for good.
    broker.set_down(true);
    let aggregates = app.get_object::<Aggregates>().unwrap();
    app.try_run_in_context(async { aggregates.steps(KEY, 1..4).await }).await.unwrap().unwrap();
    let rows = store.rows();
    assert_eq!(rows.len(), 3);
    broker.refuse_id(&rows[1].event.id, "too large, say");
    broker.set_down(false);
    until("steps 1 and 3 handled", Duration::from_secs(10), async || HANDLED.lock().unwrap().len() >= 2).await;
    assert_eq!(*HANDLED.lock().unwrap(), [(KEY, 1), (KEY, 3)]);
    let letters = app.get_object::<Outbox>().unwrap().dead_letters(0, 10).await.unwrap();
    assert_eq!(letters.len(), 1, "the refused one is a dead letter: {letters:?}");
    app.shutdown().await.unwrap();
}
