//! A once-per-cluster handler runs with each event in one instance of the service, through a
//! subscription the instances share; what an instance had not acknowledged when it died goes
//! to another; the handlers every instance runs still run in each. With the in-memory broker
//! and store of `tegu_outbox::testing`, the instances being Apps of one process.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tegu_core::{App, handlers, singleton_proto};
use tegu_outbox::testing::{MemoryBroker, MemoryStore};
use tegu_outbox::{Broker, EventId, Outbox, Outgoing, Replayed, Subscription, Why};
use tegu_test_support::until;

/// The external event.
#[derive(Debug, Serialize, Deserialize)]
pub struct Shipped {
    /// The parcel.
    pub parcel: u32,
}

tegu_outbox::external_event!(Shipped = "parcels.shipped");

/// The parcel whose first mail hangs until [`HUNG`] is set: an instance dying mid-handling.
const HANGS: u32 = 1_000;
/// Lets the hung mail go on.
static HUNG: AtomicBool = AtomicBool::new(false);
/// Whether parcel [`HANGS`] was mailed once already (the hang is the first mail's).
static HANGS_ONCE: AtomicBool = AtomicBool::new(false);
/// The parcel whose mail fails until [`FIXED`] is set.
const FAILS: u32 = 2_000;
static FIXED: AtomicBool = AtomicBool::new(false);

/// Mails once per shipment in the whole cluster; counts each shipment in each instance.
#[derive(Debug, Default)]
#[singleton_proto]
pub struct Shipping {
    /// What this instance mailed.
    mailed: Mutex<Vec<u32>>,
    /// What this instance counted.
    counted: Mutex<Vec<u32>>,
    /// The event id each try of a mail saw in its scope's lineage ([`EventId`]).
    ids: Mutex<Vec<Option<String>>>,
}

#[handlers]
impl Shipping {
    #[event_handler(once_per_cluster)]
    async fn mail(&self, shipped: &Shipped) -> Result<(), String> {
        let id = EventId::current().map(|id| id.as_str().to_owned());
        self.ids.lock().unwrap().push(id);
        if shipped.parcel == HANGS && !HANGS_ONCE.swap(true, Ordering::SeqCst) {
            while !HUNG.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        if shipped.parcel == FAILS && !FIXED.load(Ordering::SeqCst) {
            return Err("the mail server said no".into());
        }
        self.mailed.lock().unwrap().push(shipped.parcel);
        Ok(())
    }

    #[event_handler]
    async fn count(&self, shipped: &Shipped) {
        self.counted.lock().unwrap().push(shipped.parcel);
    }
}

const MAIL: &str = "once_per_cluster::Shipping::mail";
const WITHIN: Duration = Duration::from_secs(20);

/// An instance: an App on `broker`'s handle and the cluster's store, once subscribed (its
/// own subscription and the mailer's shared one).
async fn instance(broker: &MemoryBroker, store: &MemoryStore) -> App {
    let before = broker.subscriptions();
    let app = App::builder()
        .register(store.proto())
        .register(broker.proto())
        .register(Outbox::proto())
        .config_value("outbox.poll_ms", 10)
        .config_value("outbox.attempts", 2)
        .config_value("outbox.backoff_ms", 1)
        .build()
        .await
        .unwrap();
    until("the instance to subscribe twice", WITHIN, async || broker.subscriptions() >= before + 2).await;
    app
}

fn mailed(apps: &[&App]) -> Vec<u32> {
    let mut all: Vec<u32> =
        apps.iter().flat_map(|app| app.get_object::<Shipping>().unwrap().mailed.lock().unwrap().clone()).collect();
    all.sort_unstable();
    all
}

fn counted(app: &App) -> Vec<u32> {
    let mut counted = app.get_object::<Shipping>().unwrap().counted.lock().unwrap().clone();
    counted.sort_unstable();
    counted
}

async fn ship(app: &App, parcel: u32) {
    let events = app.events();
    app.try_run_in_context(async { events.emit(Shipped { parcel }) }).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_event_is_mailed_once_in_the_cluster_and_counted_in_every_instance() {
    let (store, a) = (MemoryStore::new(), MemoryBroker::new());
    let (b, c) = (a.instance(), a.instance());
    let apps = [instance(&a, &store).await, instance(&b, &store).await, instance(&c, &store).await];
    for parcel in 0..300 {
        ship(&apps[parcel as usize % 3], parcel).await;
    }
    let all: Vec<&App> = apps.iter().collect();
    until("300 mails", WITHIN, async || mailed(&all).len() >= 300).await;
    for app in &apps {
        until("each instance to count 300", WITHIN, async || counted(app).len() >= 300).await;
    }
    // Nothing more comes.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(mailed(&all), (0..300).collect::<Vec<_>>());
    for app in &apps {
        assert_eq!(counted(app), (0..300).collect::<Vec<_>>());
    }
    for app in apps {
        app.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_an_instance_held_when_it_died_is_mailed_by_another() {
    let (store, a) = (MemoryStore::new(), MemoryBroker::new());
    let first = instance(&a, &store).await;
    // Only A shares the mailer's subscription: it takes the parcel, and hangs.
    ship(&first, HANGS).await;
    until("A to count the parcel", WITHIN, async || counted(&first) == [HANGS]).await;
    until("A to take the mail", WITHIN, async || HANGS_ONCE.load(Ordering::SeqCst)).await;
    let b = a.instance();
    let second = instance(&b, &store).await;
    assert!(mailed(&[&first, &second]).is_empty());
    // A's connection is gone: B takes the event over.
    a.disconnect();
    until("B to mail the parcel", WITHIN, async || mailed(&[&second]) == [HANGS]).await;
    HUNG.store(true, Ordering::SeqCst);
    for app in [first, second] {
        app.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mail_brought_again_to_another_instance_is_not_sent_twice() {
    let (store, a) = (MemoryStore::new(), MemoryBroker::new());
    let first = instance(&a, &store).await;
    ship(&first, 5).await;
    until("the mail", WITHIN, async || mailed(&[&first]) == [5]).await;
    let id = a.published()[0].id.clone();
    // B joins and A leaves: only B shares the mailer's subscription, and the broker brings the
    // event again (a lost acknowledgement). B has no memory of it: its inbox has.
    let b = a.instance();
    let second = instance(&b, &store).await;
    first.shutdown().await.unwrap();
    assert!(a.redeliver(&id));
    let outbox = second.get_object::<Outbox>().unwrap();
    until("B to recognise it", WITHIN, async || outbox.counts().duplicates >= 1).await;
    assert!(mailed(&[&second]).is_empty());
    second.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_mail_is_a_dead_letter_of_the_cluster_replayed_once() {
    let (store, a) = (MemoryStore::new(), MemoryBroker::new());
    let b = a.instance();
    let (first, second) = (instance(&a, &store).await, instance(&b, &store).await);
    ship(&first, FAILS).await;
    let outbox = first.get_object::<Outbox>().unwrap();
    until("a dead letter", WITHIN, async || !outbox.dead_letters(0, 10).await.unwrap().is_empty()).await;
    let letters = outbox.dead_letters(0, 10).await.unwrap();
    assert_eq!(letters.len(), 1, "one letter for the cluster, not one per instance: {letters:?}");
    let letter = &letters[0];
    assert_eq!(letter.why, Why::Failed { handler: MAIL.to_owned() });
    assert_eq!(letter.receiver, format!("cluster:{MAIL}"));
    assert_eq!(letter.attempts, 2);
    for app in [&first, &second] {
        until("each instance to count it", WITHIN, async || counted(app) == [FAILS]).await;
    }
    // Fixed; replayed from either instance: mailed once, counted no more.
    FIXED.store(true, Ordering::SeqCst);
    let replayed = second.get_object::<Outbox>().unwrap().replay(letter.id).await.unwrap();
    assert_eq!(replayed, Replayed::Handled);
    assert_eq!(mailed(&[&first, &second]), [FAILS]);
    assert_eq!((counted(&first), counted(&second)), (vec![FAILS], vec![FAILS]));
    // Each try, the replay's too, saw the event's id: the mail's idempotency key.
    let ids: Vec<Option<String>> = [&first, &second]
        .iter()
        .flat_map(|app| app.get_object::<Shipping>().unwrap().ids.lock().unwrap().clone())
        .collect();
    assert_eq!(ids.len(), 3, "two tries and the replay: {ids:?}");
    assert!(ids.iter().all(|id| id.as_deref() == Some(letter.event_id.as_str())), "{ids:?}");
    // A replay's record is the cluster's: the event brought again is not mailed twice.
    let id = a.published()[0].id.clone();
    assert!(a.redeliver(&id));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(mailed(&[&first, &second]), [FAILS]);
    for app in [first, second] {
        app.shutdown().await.unwrap();
    }
}

/// A broker without shared subscriptions.
struct Fanout(MemoryBroker);

impl Broker for Fanout {
    fn receiver(&self) -> String {
        self.0.receiver()
    }

    fn publish<'a>(
        &'a self,
        event: Outgoing<'a>,
    ) -> tegu_core::futures::BoxFuture<'a, Result<(), tegu_core::error::BoxError>> {
        self.0.publish(event)
    }

    fn subscribe(
        &self,
    ) -> tegu_core::futures::BoxFuture<'_, Result<Box<dyn Subscription>, tegu_core::error::BoxError>> {
        self.0.subscribe()
    }
}

#[tokio::test]
async fn the_outbox_refuses_a_once_per_cluster_handler_beside_a_broker_that_cannot_share() {
    let fanout = Fanout(MemoryBroker::new());
    let proto = tegu_core::ProtoDef::singleton::<Fanout>(move |_| Ok(Fanout(fanout.0.clone())))
        .provides::<Fanout, dyn Broker>(|f| f);
    let built =
        App::builder().register(MemoryStore::new().proto()).register(proto).register(Outbox::proto()).build().await;
    let Err(error) = built else { panic!("built beside a broker that cannot share") };
    let error = error.to_string();
    assert!(error.contains(MAIL) && error.contains("no shared subscriptions"), "{error}");
}
