//! The relay when the broker fails: what the broker stored leaves the outbox, the rest stays and
//! goes out in a later round, nothing is published out of order; an event the broker refuses
//! for good is set aside and the events after it flow; one it would refuse fails the request
//! that emits it; an outbox whose oldest event waits too long fails readiness. With the
//! in-memory store and broker of `tegu_outbox::testing`.

use std::time::Duration;

use tegu_core::App;
use tegu_outbox::testing::{MemoryBroker, MemoryStore};
use tegu_outbox::{Outbox, OutboxStore};
use tegu_test_support::until;

/// An external event of this test.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Shipped {
    /// What was shipped.
    pub label: String,
}

tegu_outbox::external_event!(Shipped = "parcels.shipped");

/// An outbox with rows 1 to 10 waiting, ids `e1` to `e10`.
async fn with_ten() -> MemoryStore {
    let store = MemoryStore::new();
    for row in 1..=10 {
        store.insert(&format!("e{row}"), "parcels.shipped", b"{}", &[]).await.unwrap();
    }
    store
}

/// How many events wait to be relayed (the store keeps those published, marked so).
fn pending(store: &MemoryStore) -> usize {
    store.rows().iter().filter(|row| row.published_at.is_none()).count()
}

/// The ids the broker stores, in the order published.
fn ids(broker: &MemoryBroker) -> Vec<String> {
    broker.published().into_iter().map(|published| published.id).collect()
}

/// An App with `store` and `broker`, relaying every 20 ms, its readiness failing once the
/// oldest event has waited `stall_ms`.
async fn app(store: &MemoryStore, broker: &MemoryBroker, stall_ms: u64) -> App {
    App::builder()
        .register(store.proto())
        .register(broker.proto())
        .register(Outbox::proto())
        .config_value("outbox.poll_ms", 20)
        .config_value("outbox.stall_ms", stall_ms)
        .health_cache(Duration::ZERO)
        .build()
        .await
        .unwrap()
}

/// How long a wait of this file's lasts before it fails.
const WITHIN: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_the_broker_fails_halfway_leaves_the_rest_for_the_next_round() {
    // Every third publish fails: a batch fails halfway.
    let (store, broker) = (with_ten().await, MemoryBroker::new());
    broker.fail_every(3);
    let app = app(&store, &broker, 0).await;
    until("the outbox to empty", WITHIN, async || pending(&store) == 0).await;
    let expected: Vec<String> = (1..=10).map(|row| format!("e{row}")).collect();
    assert_eq!((ids(&broker), broker.duplicates()), (expected, 0), "each once, in order");
    assert!(broker.attempts() >= 14, "some publishes failed and were tried again");
    assert_eq!(app.get_object::<Outbox>().unwrap().counts().relayed, 10);
    app.shutdown().await.unwrap();
}

/// The broker refuses one event for good: it is set aside with the broker's reason, and every
/// event after it is published, in order. Before, it was tried first in every round and held
/// every later event back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_the_broker_refuses_for_good_is_set_aside_and_the_rest_flow() {
    let (store, broker) = (with_ten().await, MemoryBroker::new());
    broker.refuse_id("e4", "larger than the broker takes");
    let app = app(&store, &broker, 0).await;
    until("the outbox to empty", WITHIN, async || pending(&store) == 0).await;
    let expected: Vec<String> = (1..=10).filter(|&row| row != 4).map(|row| format!("e{row}")).collect();
    assert_eq!((ids(&broker), broker.duplicates()), (expected, 0));
    // The others reach this instance as events of no type it knows: dead letters of their own.
    let aside: Vec<(String, String)> = store
        .dead()
        .into_iter()
        .filter(|dead| dead.why == tegu_outbox::Why::Refused)
        .map(|dead| (dead.event_id, dead.error))
        .collect();
    assert_eq!(aside.len(), 1);
    assert_eq!(aside[0].0, "e4");
    assert!(aside[0].1.contains("larger than the broker takes"), "{}", aside[0].1);
    let counts = app.get_object::<Outbox>().unwrap().counts();
    assert_eq!((counts.relayed, counts.set_aside), (9, 1), "{counts:?}");
    app.shutdown().await.unwrap();
}

/// An event the broker says it would refuse fails the request that emits it (its completion
/// phase): nothing is written, rather than an event acknowledged and never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_the_broker_would_refuse_fails_the_request_that_emits_it() {
    let (store, broker) = (MemoryStore::new(), MemoryBroker::new());
    broker.limit_payload(64);
    let app = app(&store, &broker, 0).await;
    let events = app.events();
    app.try_run_in_context(async { events.emit(Shipped { label: "small".into() }) }).await.unwrap();
    let refused = app.try_run_in_context(async { events.emit(Shipped { label: "x".repeat(100) }) }).await;
    let error = refused.unwrap_err().to_string();
    assert!(error.contains("parcels.shipped") && error.contains("more than the 64 this broker takes"), "{error}");
    until("the small one to be relayed", WITHIN, async || broker.published().len() == 1).await;
    assert_eq!(app.get_object::<Outbox>().unwrap().counts().written, 1);
    app.shutdown().await.unwrap();
}

/// With `outbox.stall_ms` set, readiness fails once the oldest event has waited that long for a
/// broker that fails, and passes again once the broker takes it; `Outbox::oldest_waiting` says
/// how long it has waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outbox_whose_oldest_event_waits_too_long_is_not_ready() {
    // Every publish fails (a passing failure) until told otherwise; subscribing works.
    let (store, broker) = (with_ten().await, MemoryBroker::new());
    broker.fail_next(usize::MAX);
    let app = app(&store, &broker, 200).await;
    let check = |report: &tegu_core::health::HealthReport| report.checks.iter().find(|c| c.name == "outbox").cloned();
    // Not ready at first (not subscribed yet), then subscribed, then stalled.
    let why = tegu_test_support::eventually(async || {
        let report = app.health().await;
        let why = check(&report).expect("the outbox's check").error?;
        assert!(!report.ready);
        why.contains("oldest event").then_some(why)
    })
    .await;
    assert!(why.contains("row 1") && why.contains("outbox.stall_ms"), "{why}");
    let waited = app.get_object::<Outbox>().unwrap().oldest_waiting().expect("waiting");
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    broker.fail_next(0);
    tegu_test_support::eventually(async || app.health().await.ready.then_some(())).await;
    assert_eq!(pending(&store), 0);
    app.shutdown().await.unwrap();
}

/// The broker ends the subscription (it lost this instance's consumer) and refuses a new one
/// for a while: readiness fails until the instance has subscribed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_whose_subscription_ended_is_not_ready_until_it_subscribes_again() {
    let (store, broker) = (MemoryStore::new(), MemoryBroker::new());
    let app = app(&store, &broker, 0).await;
    tegu_test_support::eventually(async || app.health().await.ready.then_some(())).await;
    broker.set_down(true);
    broker.forget();
    tegu_test_support::eventually(async || (!app.health().await.ready).then_some(())).await;
    broker.set_down(false);
    tegu_test_support::eventually(async || app.health().await.ready.then_some(())).await;
    assert_eq!(app.get_object::<Outbox>().unwrap().counts().subscriptions, 2);
    app.shutdown().await.unwrap();
}

/// An event set aside is counted (`di_outbox_set_aside_total`, by event name), with the
/// feature `metrics`.
#[test]
fn an_event_set_aside_is_counted() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            let (store, broker) = (with_ten().await, MemoryBroker::new());
            broker.refuse_id("e4", "larger than the broker takes");
            let app = app(&store, &broker, 0).await;
            until("the outbox to empty", WITHIN, async || pending(&store) == 0).await;
            app.shutdown().await.unwrap();
        })
    });
    let counted: Vec<(String, DebugValue)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == "di_outbox_set_aside_total")
        .map(|(key, _, _, value)| (key.key().labels().map(|l| format!("{}={}", l.key(), l.value())).collect(), value))
        .collect();
    assert_eq!(counted, [("event=parcels.shipped".to_owned(), DebugValue::Counter(1))]);
}
