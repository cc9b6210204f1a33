//! What an instance receives: each event handed to its handlers once, however often the broker
//! brings it (at-least-once delivery), every one acknowledged; an event of no known type is
//! acknowledged and dropped. With a broker and a store of this test's own.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use di_core::futures::BoxFuture;
use di_core::{App, ProtoDef, error::BoxError, handlers, singleton_proto};
use di_outbox::{Ack, Broker, Outbox, OutboxStore, Outgoing, Received, Stored, Subscription};
use serde::{Deserialize, Serialize};

/// The external event.
#[derive(Debug, Serialize, Deserialize)]
pub struct Shipped {
    /// The parcel.
    pub parcel: u32,
}

di_outbox::external_event!(Shipped = "parcels.shipped");

/// Counts what it handles.
#[derive(Debug, Default)]
#[singleton_proto]
pub struct Handled {
    parcels: Mutex<Vec<u32>>,
}

#[handlers]
impl Handled {
    #[event_handler]
    async fn on_shipped(&self, shipped: &Shipped) {
        self.parcels.lock().unwrap().push(shipped.parcel);
    }
}

/// An empty outbox.
struct NoStore;

impl OutboxStore for NoStore {
    fn insert<'a>(&'a self, _: &'a str, _: &'a str, _: &'a [u8]) -> BoxFuture<'a, Result<i64, BoxError>> {
        Box::pin(async { Err("not in this test".into()) })
    }
    fn pending(&self, _: u32) -> BoxFuture<'_, Result<Vec<Stored>, BoxError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn published<'a>(&'a self, _: &'a [i64], _: i64) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async { Ok(()) })
    }
    fn republish(&self, _: i64) -> BoxFuture<'_, Result<u64, BoxError>> {
        Box::pin(async { Ok(0) })
    }
    fn purge(&self, _: i64) -> BoxFuture<'_, Result<u64, BoxError>> {
        Box::pin(async { Ok(0) })
    }
    fn set_aside<'a>(&'a self, _: i64, _: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async { Err("not in this test".into()) })
    }
}

/// Brings the same event twice, then one of an unknown type, then nothing.
#[derive(Default)]
struct Redelivering {
    acks: Arc<AtomicUsize>,
}

struct Queue(VecDeque<Received>);

impl Subscription for Queue {
    fn next(&mut self) -> BoxFuture<'_, Option<Result<Received, BoxError>>> {
        Box::pin(async move {
            match self.0.pop_front() {
                Some(received) => Some(Ok(received)),
                None => std::future::pending().await,
            }
        })
    }
}

struct Counted(Arc<AtomicUsize>);

impl Ack for Counted {
    fn ack(self: Box<Self>) -> BoxFuture<'static, Result<(), BoxError>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    }
}

impl Broker for Redelivering {
    fn publish<'a>(&'a self, _: Outgoing<'a>) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async { Ok(()) })
    }

    fn subscribe(&self) -> BoxFuture<'_, Result<Box<dyn Subscription>, BoxError>> {
        let received = |id: &str, name: &str, payload: &str| Received {
            id: id.to_owned(),
            name: name.to_owned(),
            payload: payload.as_bytes().to_vec(),
            ack: Box::new(Counted(self.acks.clone())),
        };
        let queue = VecDeque::from([
            received("outbox-1", "parcels.shipped", r#"{"parcel":7}"#),
            received("outbox-1", "parcels.shipped", r#"{"parcel":7}"#),
            received("outbox-2", "parcels.lost", r#"{}"#),
            received("outbox-3", "parcels.shipped", r#"{"parcel":8}"#),
        ]);
        Box::pin(async move { Ok(Box::new(Queue(queue)) as Box<dyn Subscription>) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_event_is_handled_once_and_everything_is_acknowledged() {
    let acks = Arc::new(AtomicUsize::new(0));
    let broker = Redelivering { acks: acks.clone() };
    let app = App::builder()
        .register(ProtoDef::singleton::<NoStore>(|_| Ok(NoStore)).provides::<NoStore, dyn OutboxStore>(|s| s))
        .register(
            ProtoDef::singleton::<Redelivering>(move |_| Ok(Redelivering { acks: broker.acks.clone() }))
                .provides::<Redelivering, dyn Broker>(|b| b),
        )
        .register(Outbox::proto())
        .build()
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while acks.load(Ordering::SeqCst) < 4 {
        assert!(Instant::now() < deadline, "acknowledged {}", acks.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let counts = app.get_object::<Outbox>().unwrap().counts();
    assert_eq!((counts.delivered, counts.duplicates), (2, 1), "{counts:?}");
    app.shutdown().await.unwrap();
    assert_eq!(*app.get_object::<Handled>().unwrap().parcels.lock().unwrap(), [7, 8]);
}
