//! The relay when the broker fails part of a batch: what the broker stored leaves the outbox,
//! the rest stays and goes out in a later round, and nothing is published out of order. With a
//! store and a broker of this test's own.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use di_core::{App, BoxError, ProtoDef};
use di_outbox::{BoxFuture, Broker, Outbox, OutboxStore, Outgoing, Stored, Subscription};

/// Rows 1 to 10 waiting.
struct Table(Mutex<Vec<Stored>>);

impl OutboxStore for Table {
    fn insert<'a>(&'a self, _: &'a str, _: &'a str, _: &'a [u8]) -> BoxFuture<'a, Result<i64, BoxError>> {
        Box::pin(async { Err("not in this test".into()) })
    }
    fn pending(&self, limit: u32) -> BoxFuture<'_, Result<Vec<Stored>, BoxError>> {
        let rows = self.0.lock().unwrap().iter().take(limit as usize).cloned().collect();
        Box::pin(async move { Ok(rows) })
    }
    fn remove<'a>(&'a self, rows: &'a [i64]) -> BoxFuture<'a, Result<(), BoxError>> {
        self.0.lock().unwrap().retain(|stored| !rows.contains(&stored.row));
        Box::pin(async { Ok(()) })
    }
}

/// Fails every third publish; records what it stored.
#[derive(Default)]
struct Flaky {
    calls: AtomicUsize,
    stored: Mutex<Vec<String>>,
}

impl Broker for Flaky {
    fn publish<'a>(&'a self, event: Outgoing<'a>) -> BoxFuture<'a, Result<(), BoxError>> {
        let failed = self.calls.fetch_add(1, Ordering::SeqCst) % 3 == 2;
        if !failed {
            self.stored.lock().unwrap().push(event.id.to_owned());
        }
        Box::pin(async move { if failed { Err("the broker is busy".into()) } else { Ok(()) } })
    }
    fn subscribe(&self) -> BoxFuture<'_, Result<Box<dyn Subscription>, BoxError>> {
        Box::pin(async { Ok(Box::new(Never) as Box<dyn Subscription>) })
    }
}

/// A subscription that brings nothing.
struct Never;

impl Subscription for Never {
    fn next(&mut self) -> BoxFuture<'_, Option<Result<di_outbox::Received, BoxError>>> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_the_broker_fails_halfway_leaves_the_rest_for_the_next_round() {
    let rows = || -> Vec<Stored> {
        (1..=10)
            .map(|row| Stored { row, id: format!("e{row}"), name: "parcels.shipped".into(), payload: b"{}".to_vec() })
            .collect()
    };
    let app = App::builder()
        .register(
            ProtoDef::singleton::<Table>(move |_| Ok(Table(Mutex::new(rows()))))
                .provides::<Table, dyn OutboxStore>(|t| t),
        )
        .register(ProtoDef::singleton::<Flaky>(|_| Ok(Flaky::default())).provides::<Flaky, dyn Broker>(|b| b))
        .register(Outbox::proto())
        .config_value("outbox.poll_ms", 20)
        .build()
        .await
        .unwrap();
    let (table, broker) = (app.get_object::<Table>().unwrap(), app.get_object::<Flaky>().unwrap());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !table.0.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "left: {:?}", table.0.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let expected: Vec<String> = (1..=10).map(|row| format!("e{row}")).collect();
    assert_eq!(*broker.stored.lock().unwrap(), expected, "each once, in order");
    assert!(broker.calls.load(Ordering::SeqCst) >= 14, "some publishes failed and were tried again");
    assert_eq!(app.get_object::<Outbox>().unwrap().counts().relayed, 10);
    app.shutdown().await.unwrap();
}
