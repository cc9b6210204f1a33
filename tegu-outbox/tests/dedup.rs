//! What an instance receives: each event handed to its handlers once, however often the broker
//! brings it (at-least-once delivery), every one acknowledged; an event of no known type is
//! acknowledged and dropped; one received once the App is gone is not acknowledged. With the
//! in-memory broker and store of `tegu_outbox::testing`.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tegu_core::{App, handlers, singleton_proto};
use tegu_outbox::testing::{MemoryBroker, MemoryStore};
use tegu_outbox::{Broker, Outbox, Outgoing};
use tegu_test_support::until;

/// The external event.
#[derive(Debug, Serialize, Deserialize)]
pub struct Shipped {
    /// The parcel.
    pub parcel: u32,
}

tegu_outbox::external_event!(Shipped = "parcels.shipped");

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

/// How long a wait of this file's lasts before it fails.
const WITHIN: Duration = Duration::from_secs(10);

/// An App with the outbox on an in-memory broker and store, once it has subscribed (a new
/// subscription starts with the events published from then on).
async fn subscribed() -> (MemoryBroker, App) {
    let broker = MemoryBroker::new();
    let app = App::builder()
        .register(MemoryStore::new().proto())
        .register(broker.proto())
        .register(Outbox::proto())
        .build()
        .await
        .unwrap();
    until("the instance to subscribe", WITHIN, async || broker.subscriptions() == 1).await;
    (broker, app)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_event_is_handled_once_and_everything_is_acknowledged() {
    let (broker, app) = subscribed().await;
    // The same event twice (as after a lost acknowledgement), one of an unknown type, another.
    let shipped =
        |id: &'static str, payload: &'static [u8]| Outgoing { id, name: "parcels.shipped", payload, headers: &[] };
    broker.publish(shipped("outbox-1", br#"{"parcel":7}"#)).await.unwrap();
    assert!(broker.redeliver("outbox-1"));
    broker.publish(Outgoing { id: "outbox-2", name: "parcels.lost", payload: b"{}", headers: &[] }).await.unwrap();
    broker.publish(shipped("outbox-3", br#"{"parcel":8}"#)).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while broker.acknowledged() < 4 {
        assert!(Instant::now() < deadline, "acknowledged {}", broker.acknowledged());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let counts = app.get_object::<Outbox>().unwrap().counts();
    assert_eq!((counts.delivered, counts.duplicates), (2, 1), "{counts:?}");
    app.shutdown().await.unwrap();
    assert_eq!(*app.get_object::<Handled>().unwrap().parcels.lock().unwrap(), [7, 8]);
}

/// An App dropped without `shutdown()` (a process's runtime still running its tasks) handles
/// nothing more: what its subscription still receives is left unacknowledged, for the broker
/// to bring again, never taken as handled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_received_after_the_app_is_gone_is_not_acknowledged() {
    let (broker, app) = subscribed().await;
    let outbox = app.get_object::<Outbox>().unwrap();
    drop(app);
    let shipped = Outgoing { id: "outbox-1", name: "parcels.shipped", payload: br#"{"parcel":7}"#, headers: &[] };
    broker.publish(shipped).await.unwrap();
    until("the event to be refused", WITHIN, async || outbox.counts().refused == 1).await;
    assert_eq!(broker.acknowledged(), 0);
    assert_eq!(outbox.counts().delivered, 0);
}
