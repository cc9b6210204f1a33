//! The relay when the broker fails: what the broker stored leaves the outbox, the rest stays and
//! goes out in a later round, nothing is published out of order; an event the broker refuses
//! for good is set aside and the events after it flow; one it would refuse fails the request
//! that emits it; an outbox whose oldest event waits too long fails readiness. With a store and
//! a broker of this test's own.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use di_core::futures::BoxFuture;
use di_core::{App, ProtoDef, error::BoxError};
use di_outbox::{Broker, Outbox, OutboxStore, Outgoing, Refused, Stored, Subscription};

/// An external event of this test.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Shipped {
    /// What was shipped.
    pub label: String,
}

di_outbox::external_event!(Shipped = "parcels.shipped");

/// The outbox: its rows, and those set aside with their reasons.
#[derive(Default)]
struct Table {
    rows: Mutex<Vec<Stored>>,
    aside: Mutex<Vec<(Stored, String)>>,
}

impl Table {
    /// Rows 1 to 10 waiting, ids `e1` to `e10`.
    fn with_ten() -> Table {
        let rows = (1..=10)
            .map(|row| Stored { row, id: format!("e{row}"), name: "parcels.shipped".into(), payload: b"{}".to_vec() })
            .collect();
        Table { rows: Mutex::new(rows), aside: Mutex::default() }
    }

    fn left(&self) -> usize {
        self.rows.lock().unwrap().len()
    }
}

impl OutboxStore for Table {
    fn insert<'a>(&'a self, id: &'a str, name: &'a str, payload: &'a [u8]) -> BoxFuture<'a, Result<i64, BoxError>> {
        let mut rows = self.rows.lock().unwrap();
        let row = rows.last().map_or(1, |last| last.row + 1);
        rows.push(Stored { row, id: id.to_owned(), name: name.to_owned(), payload: payload.to_vec() });
        Box::pin(async move { Ok(row) })
    }
    fn pending(&self, limit: u32) -> BoxFuture<'_, Result<Vec<Stored>, BoxError>> {
        let rows = self.rows.lock().unwrap().iter().take(limit as usize).cloned().collect();
        Box::pin(async move { Ok(rows) })
    }
    /// Published events are deleted at once (no broker of this test loses them).
    fn published<'a>(&'a self, rows: &'a [i64], _: i64) -> BoxFuture<'a, Result<(), BoxError>> {
        self.rows.lock().unwrap().retain(|stored| !rows.contains(&stored.row));
        Box::pin(async { Ok(()) })
    }
    fn republish(&self, _: i64) -> BoxFuture<'_, Result<u64, BoxError>> {
        Box::pin(async { Ok(0) })
    }
    fn purge(&self, _: i64) -> BoxFuture<'_, Result<u64, BoxError>> {
        Box::pin(async { Ok(0) })
    }
    fn set_aside<'a>(&'a self, row: i64, reason: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
        let mut rows = self.rows.lock().unwrap();
        if let Some(at) = rows.iter().position(|stored| stored.row == row) {
            self.aside.lock().unwrap().push((rows.remove(at), reason.to_owned()));
        }
        Box::pin(async { Ok(()) })
    }
}

/// Fails every third publish (`flaky`), refuses the event `refused` for good and any payload
/// over 64 bytes, or fails every publish while `down`; records what it stored. Its
/// subscription ends when `lost` is notified, and none is given while `unsubscribable`.
#[derive(Default)]
struct TestBroker {
    flaky: bool,
    refused: Option<&'static str>,
    down: AtomicBool,
    calls: AtomicUsize,
    stored: Mutex<Vec<String>>,
    /// Ends the subscription.
    lost: std::sync::Arc<tokio::sync::Notify>,
    /// Refuses subscriptions.
    unsubscribable: AtomicBool,
}

impl Broker for TestBroker {
    fn publish<'a>(&'a self, event: Outgoing<'a>) -> BoxFuture<'a, Result<(), BoxError>> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        let result: Result<(), BoxError> = if self.down.load(Ordering::SeqCst) {
            Err("the broker is down".into())
        } else if self.refused == Some(event.id) {
            Err(Box::new(Refused("larger than the broker takes".into())))
        } else if self.flaky && call % 3 == 2 {
            Err("the broker is busy".into())
        } else {
            self.stored.lock().unwrap().push(event.id.to_owned());
            Ok(())
        };
        Box::pin(async move { result })
    }
    fn subscribe(&self) -> BoxFuture<'_, Result<Box<dyn Subscription>, BoxError>> {
        let result: Result<Box<dyn Subscription>, BoxError> = if self.unsubscribable.load(Ordering::SeqCst) {
            Err("the broker is down".into())
        } else {
            Ok(Box::new(Until(self.lost.clone())))
        };
        Box::pin(async move { result })
    }
    fn refuses(&self, event: Outgoing<'_>) -> Option<String> {
        (event.payload.len() > 64).then(|| format!("{} bytes, more than the 64 this broker takes", event.payload.len()))
    }
}

/// A subscription that brings nothing, and ends when told.
struct Until(std::sync::Arc<tokio::sync::Notify>);

impl Subscription for Until {
    fn next(&mut self) -> BoxFuture<'_, Option<Result<di_outbox::Received, BoxError>>> {
        Box::pin(async {
            self.0.notified().await;
            None
        })
    }
}

/// An App with `table` and `broker`, relaying every 20 ms, its readiness failing once the
/// oldest event has waited `stall_ms`.
async fn app(table: Table, broker: TestBroker, stall_ms: u64) -> App {
    let (table, broker) = (Mutex::new(Some(table)), Mutex::new(Some(broker)));
    App::builder()
        .register(
            ProtoDef::singleton::<Table>(move |_| Ok(table.lock().unwrap().take().expect("built once")))
                .provides::<Table, dyn OutboxStore>(|t| t),
        )
        .register(
            ProtoDef::singleton::<TestBroker>(move |_| Ok(broker.lock().unwrap().take().expect("built once")))
                .provides::<TestBroker, dyn Broker>(|b| b),
        )
        .register(Outbox::proto())
        .config_value("outbox.poll_ms", 20)
        .config_value("outbox.stall_ms", stall_ms)
        .health_cache(Duration::ZERO)
        .build()
        .await
        .unwrap()
}

/// Waits (at most 10 s) until `done` holds.
async fn until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done().await {
        assert!(Instant::now() < deadline, "waited 10 s for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_the_broker_fails_halfway_leaves_the_rest_for_the_next_round() {
    let app = app(Table::with_ten(), TestBroker { flaky: true, ..TestBroker::default() }, 0).await;
    let (table, broker) = (app.get_object::<Table>().unwrap(), app.get_object::<TestBroker>().unwrap());
    until("the outbox to empty", async || table.left() == 0).await;
    let expected: Vec<String> = (1..=10).map(|row| format!("e{row}")).collect();
    assert_eq!(*broker.stored.lock().unwrap(), expected, "each once, in order");
    assert!(broker.calls.load(Ordering::SeqCst) >= 14, "some publishes failed and were tried again");
    assert_eq!(app.get_object::<Outbox>().unwrap().counts().relayed, 10);
    app.shutdown().await.unwrap();
}

/// The broker refuses one event for good: it is set aside with the broker's reason, and every
/// event after it is published, in order. Before, it was tried first in every round and held
/// every later event back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_the_broker_refuses_for_good_is_set_aside_and_the_rest_flow() {
    let broker = TestBroker { refused: Some("e4"), ..TestBroker::default() };
    let app = app(Table::with_ten(), broker, 0).await;
    let (table, broker) = (app.get_object::<Table>().unwrap(), app.get_object::<TestBroker>().unwrap());
    until("the outbox to empty", async || table.left() == 0).await;
    let expected: Vec<String> = (1..=10).filter(|&row| row != 4).map(|row| format!("e{row}")).collect();
    assert_eq!(*broker.stored.lock().unwrap(), expected);
    let aside: Vec<(String, String)> =
        table.aside.lock().unwrap().iter().map(|(stored, reason)| (stored.id.clone(), reason.clone())).collect();
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
    let app = app(Table::default(), TestBroker::default(), 0).await;
    let events = app.events();
    app.try_run_in_context(async { events.emit(Shipped { label: "small".into() }) }).await.unwrap();
    let refused = app.try_run_in_context(async { events.emit(Shipped { label: "x".repeat(100) }) }).await;
    let error = refused.unwrap_err().to_string();
    assert!(error.contains("parcels.shipped") && error.contains("more than the 64 this broker takes"), "{error}");
    let broker = app.get_object::<TestBroker>().unwrap();
    until("the small one to be relayed", async || broker.stored.lock().unwrap().len() == 1).await;
    assert_eq!(app.get_object::<Outbox>().unwrap().counts().written, 1);
    app.shutdown().await.unwrap();
}

/// With `outbox.stall_ms` set, readiness fails once the oldest event has waited that long for a
/// broker that fails, and passes again once the broker takes it; `Outbox::oldest_waiting` says
/// how long it has waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outbox_whose_oldest_event_waits_too_long_is_not_ready() {
    let broker = TestBroker::default();
    broker.down.store(true, Ordering::SeqCst);
    let app = app(Table::with_ten(), broker, 200).await;
    let check = |report: &di_core::health::HealthReport| report.checks.iter().find(|c| c.name == "outbox").cloned();
    // Not ready at first (not subscribed yet), then subscribed, then stalled.
    let why = di_test_support::eventually(async || {
        let report = app.health().await;
        let why = check(&report).expect("the outbox's check").error?;
        assert!(!report.ready);
        why.contains("oldest event").then_some(why)
    })
    .await;
    assert!(why.contains("row 1") && why.contains("outbox.stall_ms"), "{why}");
    let waited = app.get_object::<Outbox>().unwrap().oldest_waiting().expect("waiting");
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    app.get_object::<TestBroker>().unwrap().down.store(false, Ordering::SeqCst);
    di_test_support::eventually(async || app.health().await.ready.then_some(())).await;
    assert_eq!(app.get_object::<Table>().unwrap().left(), 0);
    app.shutdown().await.unwrap();
}

/// The broker ends the subscription (it lost this instance's consumer) and refuses a new one
/// for a while: readiness fails until the instance has subscribed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_whose_subscription_ended_is_not_ready_until_it_subscribes_again() {
    let app = app(Table::default(), TestBroker::default(), 0).await;
    di_test_support::eventually(async || app.health().await.ready.then_some(())).await;
    let broker = app.get_object::<TestBroker>().unwrap();
    broker.unsubscribable.store(true, Ordering::SeqCst);
    broker.lost.notify_one();
    di_test_support::eventually(async || (!app.health().await.ready).then_some(())).await;
    broker.unsubscribable.store(false, Ordering::SeqCst);
    di_test_support::eventually(async || app.health().await.ready.then_some(())).await;
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
            let broker = TestBroker { refused: Some("e4"), ..TestBroker::default() };
            let app = app(Table::with_ten(), broker, 0).await;
            let table = app.get_object::<Table>().unwrap();
            until("the outbox to empty", async || table.left() == 0).await;
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
