//! A handler that fails is tried again, alone, with back-off, up to its attempts; one that
//! still fails makes the event a dead letter for it, with the error, the tries and the
//! lineage; a replay after the fix hands it to that handler once, in a scope of the original
//! tenant and trace. Events that cannot be decoded, or of a type the instance does not know,
//! are dead letters too, and so are the broker's refusals: one place, one API. With the
//! in-memory broker and store of `tegu_outbox::testing`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tegu_core::lineage::{Lineage, Tenant, TraceContext};
use tegu_core::{App, ContextRef, handlers, singleton_proto};
use tegu_outbox::testing::{MemoryBroker, MemoryStore};
use tegu_outbox::{Broker, Outbox, Outgoing, Replayed, Why};
use tegu_test_support::until;

/// The external event.
#[derive(Debug, Serialize, Deserialize)]
pub struct Shipped {
    /// The parcel.
    pub parcel: u32,
}

tegu_outbox::external_event!(Shipped = "parcels.shipped");

/// A parcel mailed, with the tenant and the trace id of the handler's scope.
type Mailed = (u32, Option<String>, Option<String>);

/// Two handlers of `Shipped`: a mailer that fails its first `fail_first` tries of each parcel
/// (or every try while `broken`), and a ledger that always succeeds.
#[derive(Debug)]
#[singleton_proto]
pub struct Mailer {
    #[inject]
    tenant: ContextRef<Tenant>,
    fail_first: AtomicUsize,
    broken: AtomicBool,
    tries: AtomicUsize,
    /// What was mailed: the parcel, the tenant and the trace of the handler's scope.
    mailed: Mutex<Vec<Mailed>>,
    ledger: Mutex<Vec<u32>>,
}

#[handlers]
impl Mailer {
    #[event_handler]
    async fn mail(&self, shipped: &Shipped) -> Result<(), String> {
        let tries = self.tries.fetch_add(1, Ordering::SeqCst) + 1;
        if self.broken.load(Ordering::SeqCst) || tries <= self.fail_first.load(Ordering::SeqCst) {
            return Err(format!("the mail server said no to parcel {}", shipped.parcel));
        }
        let tenant = self.tenant.try_get().ok().map(|t| t.key().to_owned());
        let trace = Lineage::current().get::<TraceContext>().map(TraceContext::trace_id_hex);
        self.mailed.lock().unwrap().push((shipped.parcel, tenant, trace));
        Ok(())
    }

    #[event_handler]
    async fn record(&self, shipped: &Shipped) {
        self.ledger.lock().unwrap().push(shipped.parcel);
    }
}

impl Mailer {
    fn mailed(&self) -> Vec<Mailed> {
        self.mailed.lock().unwrap().clone()
    }

    fn ledger(&self) -> Vec<u32> {
        self.ledger.lock().unwrap().clone()
    }
}

const MAIL: &str = "dead_letters::Mailer::mail";

const WITHIN: Duration = Duration::from_secs(10);

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// The headers of a request of tenant `acme` in trace `TRACE`.
fn headers() -> Vec<(String, String)> {
    vec![
        ("tegu-tenant".to_owned(), "acme".to_owned()),
        ("traceparent".to_owned(), format!("00-{TRACE}-00f067aa0ba902b7-01")),
    ]
}

async fn app(store: &MemoryStore, broker: &MemoryBroker, settings: &[(&str, i64)]) -> App {
    let mut builder = App::builder()
        .lineage::<Tenant>()
        .lineage::<TraceContext>()
        .register(store.proto())
        .register(broker.proto())
        .register(Outbox::proto())
        .config_value("outbox.poll_ms", 10)
        .config_value("outbox.backoff_ms", 5);
    for (key, value) in settings {
        builder = builder.config_value(format!("outbox.{key}"), *value);
    }
    let app = builder.build().await.unwrap();
    until("the instance to subscribe", WITHIN, async || broker.subscriptions() > 0).await;
    app
}

/// Publishes parcel `parcel`'s event as the relay would, with `headers()`.
async fn publish(broker: &MemoryBroker, id: &str, name: &str, payload: &[u8]) {
    let headers = headers();
    broker.publish(Outgoing { id, name, payload, headers: &headers }).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_fails_twice_then_succeeds_has_its_effect_once() {
    let (store, broker) = (MemoryStore::new(), MemoryBroker::new());
    let app = app(&store, &broker, &[]).await;
    let mailer = app.get_object::<Mailer>().unwrap();
    mailer.fail_first.store(2, Ordering::SeqCst);
    publish(&broker, "p1", "parcels.shipped", br#"{"parcel":1}"#).await;
    until("the parcel to be mailed", WITHIN, async || !mailer.mailed().is_empty()).await;
    until("the event to be acknowledged", WITHIN, async || broker.acknowledged() == 1).await;
    assert_eq!(mailer.mailed(), [(1, Some("acme".to_owned()), Some(TRACE.to_owned()))]);
    // The other handler ran once: only the failing one was tried again.
    assert_eq!(mailer.ledger(), [1]);
    let counts = app.get_object::<Outbox>().unwrap().counts();
    assert_eq!((counts.retries, counts.dead_letters), (2, 0), "{counts:?}");
    assert!(store.dead().is_empty());
    app.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_always_fails_leaves_a_dead_letter_that_a_replay_applies_once() {
    let (store, broker) = (MemoryStore::new(), MemoryBroker::new());
    let app = app(&store, &broker, &[("attempts", 4)]).await;
    let mailer = app.get_object::<Mailer>().unwrap();
    mailer.broken.store(true, Ordering::SeqCst);
    publish(&broker, "p2", "parcels.shipped", br#"{"parcel":2}"#).await;
    until("a dead letter", WITHIN, async || !store.dead().is_empty()).await;
    until("the event to be acknowledged", WITHIN, async || broker.acknowledged() == 1).await;
    let dead = store.dead();
    assert_eq!(dead.len(), 1);
    let letter = &dead[0];
    assert_eq!(letter.why, Why::Failed { handler: MAIL.to_owned() });
    assert_eq!((letter.event_id.as_str(), letter.name.as_str(), letter.attempts), ("p2", "parcels.shipped", 4));
    assert_eq!(letter.error, "the mail server said no to parcel 2");
    assert_eq!(letter.headers, headers());
    assert_eq!(mailer.tries.load(Ordering::SeqCst), 4);
    assert_eq!(mailer.ledger(), [2], "the other handler ran once");
    assert!(mailer.mailed().is_empty());

    let outbox = app.get_object::<Outbox>().unwrap();
    assert_eq!(outbox.dead_letters(0, 10).await.unwrap(), dead);
    // Still broken: the replay fails, and a dead letter with one more try takes its place.
    let again = outbox.replay(letter.id).await.unwrap();
    let Replayed::FailedAgain(ids) = &again else { panic!("{again:?}") };
    let replaced = outbox.dead_letter(ids[0]).await.unwrap().expect("the new dead letter");
    assert_eq!(replaced.attempts, 5);
    assert_eq!(outbox.dead_letter(letter.id).await.unwrap(), None);
    // Fixed: applied once, as the original tenant, in the original trace.
    mailer.broken.store(false, Ordering::SeqCst);
    assert_eq!(outbox.replay(replaced.id).await.unwrap(), Replayed::Handled);
    assert_eq!(mailer.mailed(), [(2, Some("acme".to_owned()), Some(TRACE.to_owned()))]);
    assert_eq!(mailer.ledger(), [2], "a replay runs the failed handler alone");
    assert!(store.dead().is_empty());
    assert_eq!(outbox.replay(replaced.id).await.unwrap(), Replayed::NotFound);
    app.shutdown().await.unwrap();
}

/// Two replays of one dead letter at once (two operators): the handler gets the event once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replays_of_one_dead_letter_at_once_hand_it_over_once() {
    let (store, broker) = (MemoryStore::new(), MemoryBroker::new());
    let app = app(&store, &broker, &[("attempts", 1)]).await;
    let mailer = app.get_object::<Mailer>().unwrap();
    mailer.broken.store(true, Ordering::SeqCst);
    publish(&broker, "p7", "parcels.shipped", br#"{"parcel":7}"#).await;
    until("a dead letter", WITHIN, async || !store.dead().is_empty()).await;
    mailer.broken.store(false, Ordering::SeqCst);
    let outbox = app.get_object::<Outbox>().unwrap();
    let id = store.dead()[0].id;
    let (a, b) = tokio::join!(outbox.replay(id), outbox.replay(id));
    let mut answers = [a.unwrap(), b.unwrap()];
    answers.sort_by_key(|answer| format!("{answer:?}"));
    assert_eq!(answers, [Replayed::Handled, Replayed::NotFound]);
    assert_eq!(mailer.mailed().len(), 1);
    app.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_s_own_attempts_override_the_outbox_s() {
    let (store, broker) = (MemoryStore::new(), MemoryBroker::new());
    // A handler's name has `::`, no path of keys: its table is given as a value.
    let own = std::collections::HashMap::from([(MAIL, std::collections::HashMap::from([("attempts", 1)]))]);
    let app = App::builder()
        .register(store.proto())
        .register(broker.proto())
        .register(Outbox::proto())
        .config_value("outbox.poll_ms", 10)
        .config_value("outbox.handlers", own)
        .build()
        .await
        .unwrap();
    until("the instance to subscribe", WITHIN, async || broker.subscriptions() > 0).await;
    let mailer = app.get_object::<Mailer>().unwrap();
    mailer.broken.store(true, Ordering::SeqCst);
    publish(&broker, "p3", "parcels.shipped", br#"{"parcel":3}"#).await;
    until("a dead letter", WITHIN, async || !store.dead().is_empty()).await;
    assert_eq!(store.dead()[0].attempts, 1);
    assert_eq!(mailer.tries.load(Ordering::SeqCst), 1);
    app.shutdown().await.unwrap();
}

/// A misspelt handler's name is refused when the App is built, naming the handlers there are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_name_that_is_no_handler_is_refused_at_build() {
    let (store, broker) = (MemoryStore::new(), MemoryBroker::new());
    let typo = std::collections::HashMap::from([(
        "dead_letters::Mailer::mial",
        std::collections::HashMap::from([("attempts", 1)]),
    )]);
    let error = App::builder()
        .register(store.proto())
        .register(broker.proto())
        .register(Outbox::proto())
        .config_value("outbox.handlers", typo)
        .build()
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("\"dead_letters::Mailer::mial\", which is no `#[event_handler]`"), "{error}");
    assert!(error.contains(MAIL), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_events_and_unknown_types_are_dead_letters_not_log_lines() {
    let (store, broker) = (MemoryStore::new(), MemoryBroker::new());
    let app = app(&store, &broker, &[]).await;
    let mailer = app.get_object::<Mailer>().unwrap();
    publish(&broker, "bad", "parcels.shipped", br#"{"parcel":"four"}"#).await;
    publish(&broker, "new", "parcels.returned", br#"{"parcel":5}"#).await;
    until("two dead letters", WITHIN, async || store.dead().len() == 2).await;
    until("both acknowledged", WITHIN, async || broker.acknowledged() == 2).await;
    let dead = store.dead();
    assert_eq!((dead[0].why.clone(), dead[0].event_id.as_str()), (Why::Undecodable, "bad"));
    assert!(dead[0].error.contains("invalid type"), "{}", dead[0].error);
    assert_eq!((dead[1].why.clone(), dead[1].event_id.as_str()), (Why::Unknown, "new"));
    assert_eq!(dead[1].headers, headers());
    // A replay on an instance that still does not know the type is refused, and the letter
    // stays as it was (its number too).
    let outbox = app.get_object::<Outbox>().unwrap();
    let Replayed::Refused(why) = outbox.replay(dead[1].id).await.unwrap() else { panic!("refused") };
    assert!(why.contains("parcels.returned"), "{why}");
    let Replayed::Refused(why) = outbox.replay(dead[0].id).await.unwrap() else { panic!("refused") };
    assert!(why.contains("still undecodable"), "{why}");
    assert_eq!(store.dead(), dead);
    assert!(outbox.discard(dead[0].id).await.unwrap());
    assert!(!outbox.discard(dead[0].id).await.unwrap());
    assert_eq!(store.dead().len(), 1);
    assert!(mailer.ledger().is_empty());
    app.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_event_is_a_dead_letter_and_its_replay_publishes_it() {
    let (store, broker) = (MemoryStore::new(), MemoryBroker::new());
    broker.refuse("parcels.shipped", "no such subject");
    let app = app(&store, &broker, &[]).await;
    let mailer = app.get_object::<Mailer>().unwrap();
    let events = app.events();
    app.scope().tenant("acme").unwrap().try_run(async { events.emit(Shipped { parcel: 6 }) }).await.unwrap();
    until("a dead letter", WITHIN, async || !store.dead().is_empty()).await;
    let letter = store.dead().remove(0);
    assert_eq!(letter.why, Why::Refused);
    assert!(letter.error.contains("no such subject"), "{}", letter.error);
    // The subject exists now: the replay writes it to the outbox, and the relay publishes it.
    broker.accept("parcels.shipped");
    let outbox = app.get_object::<Outbox>().unwrap();
    assert_eq!(outbox.replay(letter.id).await.unwrap(), Replayed::Republished);
    until("the parcel to be recorded", WITHIN, async || mailer.ledger() == [6]).await;
    assert_eq!(mailer.mailed()[0].1.as_deref(), Some("acme"));
    assert!(store.dead().is_empty());
    // Purged by age: none is older than now.
    assert_eq!(outbox.purge_dead_letters(std::time::SystemTime::now()).await.unwrap(), 0);
    app.shutdown().await.unwrap();
}
