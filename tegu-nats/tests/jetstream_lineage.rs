//! An event's headers (the emitting request's lineage) on a real NATS server: `JetStream`
//! publishes them as message headers beside `Nats-Msg-Id`, and a subscription gives them back
//! without NATS' own. Through the outbox, a handler runs in a scope whose `ContextRef<Tenant>`
//! reads the tenant of the request that emitted the event; a forged tenant is refused; an
//! event published again after the server lost its store keeps its headers.

mod support;

use std::sync::Mutex;
use std::time::Duration;

use async_nats::HeaderMap;
use serde::{Deserialize, Serialize};
use support::{Server, next};
use tegu_core::lineage::Tenant;
use tegu_core::{App, AppBuilder, ContextRef, DiError, handlers, singleton_proto};
use tegu_nats::JetStream;
use tegu_outbox::testing::MemoryStore;
use tegu_outbox::{Broker, Outbox, Outgoing};
use tegu_test_support::servers::Own;
use tegu_test_support::until;

/// The external event.
#[derive(Debug, Serialize, Deserialize)]
pub struct Invoiced {
    /// The invoice.
    pub invoice: u32,
}

tegu_outbox::external_event!(Invoiced = "billing.invoiced");

/// What its handler saw: each invoice, with the tenant of the handler's scope, if it had one.
#[derive(Debug)]
#[singleton_proto]
pub struct Seen {
    #[inject]
    tenant: ContextRef<Tenant>,
    invoices: Mutex<Vec<(u32, Option<String>)>>,
}

#[handlers]
impl Seen {
    #[event_handler]
    async fn on_invoiced(&self, invoiced: &Invoiced) {
        let tenant = match self.tenant.try_get() {
            Ok(tenant) => Some(tenant.key().to_owned()),
            Err(DiError::NoTenant { .. }) => None,
            Err(error) => panic!("reading the tenant: {error}"),
        };
        self.invoices.lock().unwrap().push((invoiced.invoice, tenant));
    }
}

impl Seen {
    fn invoices(&self) -> Vec<(u32, Option<String>)> {
        self.invoices.lock().unwrap().clone()
    }
}

/// How long a wait of this file's lasts before it fails: a server that lost its store is
/// noticed after two missed heartbeats (10 s).
const WITHIN: Duration = Duration::from_secs(60);

/// `builder` (an App with `JetStream`) with `Tenant` as a lineage type and the outbox, in
/// memory, remembering `remember` ids; built and ready (subscribed).
async fn app(builder: AppBuilder, remember: i64) -> App {
    let app = builder
        .lineage::<Tenant>()
        .register(MemoryStore::new().proto())
        .register(Outbox::proto())
        .config_value("outbox.poll_ms", 50)
        .config_value("outbox.remember", remember)
        .build()
        .await
        .unwrap();
    until("the instance to subscribe", WITHIN, async || app.health().await.ready).await;
    app
}

/// Emits invoice `invoice` in a scope of tenant `key`.
async fn emit(app: &App, invoice: u32, key: &str) {
    let events = app.events();
    let scope = app.scope().tenant(key).unwrap();
    scope.try_run(async { events.emit(Invoiced { invoice }) }).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_are_message_headers_beside_the_id_and_come_back_without_nats_own() {
    let Some(server) = Server::new("headers").await else { return };
    let (app, broker) = server.broker("headers").await;
    let mut subscription = broker.subscribe().await.unwrap();
    let headers = [("tegu-tenant".to_owned(), "acme".to_owned()), ("x-request-id".to_owned(), "r-1".to_owned())];
    let event = Outgoing {
        id: "0f1e2d3c4b5a69788796a5b4c3d2e1f1",
        name: "billing.invoiced",
        payload: b"{}",
        headers: &headers,
    };
    assert_eq!(broker.refuses(event), None);
    broker.publish(event).await.unwrap();

    let stream = server.js.get_stream(&server.stream).await.unwrap();
    let stored =
        stream.get_last_raw_message_by_subject(&format!("{}.billing.invoiced", server.subjects)).await.unwrap();
    let header = |name: &str| stored.headers.get(name).map(|value| value.as_str().to_owned());
    assert_eq!(header("Nats-Msg-Id").as_deref(), Some(event.id));
    assert_eq!(header("tegu-tenant").as_deref(), Some("acme"));
    assert_eq!(header("x-request-id").as_deref(), Some("r-1"));

    let received = next(&mut subscription).await;
    let mut got = received.headers.clone();
    got.sort();
    assert_eq!(got, headers, "the event's headers, no `Nats-*`");
    received.ack.ack().await.unwrap();
    app.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handler_runs_with_the_tenant_of_the_emitting_request_and_a_forged_one_is_refused() {
    let Some(server) = Server::new("tenant").await else { return };
    let app = app(server.app("tenant"), 100_000).await;
    let seen = app.get_object::<Seen>().unwrap();
    emit(&app, 1, "acme").await;
    until("invoice 1 to be handled", WITHIN, async || seen.invoices().len() == 1).await;
    assert_eq!(seen.invoices(), [(1, Some("acme".to_owned()))]);

    // Someone else publishes on the stream's subjects, with a forged tenant.
    let mut headers = HeaderMap::new();
    headers.insert("Nats-Msg-Id", "forged-1");
    headers.insert("tegu-tenant", "acme user=admin");
    let subject = format!("{}.billing.invoiced", server.subjects);
    server.js.publish_with_headers(subject, headers, r#"{"invoice":2}"#.into()).await.unwrap().await.unwrap();
    until("invoice 2 to be handled", WITHIN, async || seen.invoices().len() == 2).await;
    assert_eq!(seen.invoices()[1], (2, None), "refused: no tenant");
    app.shutdown().await.unwrap();
}

/// A NATS server of this test's own comes back without its store after two events were
/// handled: the outbox subscribes again and publishes them once more (`outbox.keep_ms`),
/// headers and all. With the inbox's records purged (as after `outbox.inbox_keep_ms`) and this
/// instance remembering one id only (`outbox.remember = 1`), its handler gets both again, each
/// in a scope with its tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_published_again_after_the_server_lost_its_store_keep_their_headers() {
    let Ok(mut nats) = Own::nats("lineage") else { return };
    let builder = App::builder()
        .register(JetStream::proto())
        .config_value("nats.url", nats.url())
        .config_value("nats.consumer", "lineage");
    let app = app(builder, 1).await;
    let seen = app.get_object::<Seen>().unwrap();
    emit(&app, 1, "acme").await;
    until("invoice 1 to be handled", WITHIN, async || seen.invoices().len() == 1).await;
    emit(&app, 2, "globex").await;
    until("invoice 2 to be handled", WITHIN, async || seen.invoices().len() == 2).await;
    let store = app.get_object::<MemoryStore>().unwrap();
    until("both to be recorded", WITHIN, async || store.inbox().len() == 2).await;
    assert_eq!(tegu_outbox::OutboxStore::purge_handled(&*store, i64::MAX).await.unwrap(), 2);

    nats.lose_store();
    nats.start().unwrap();
    until("both to be handled again", WITHIN, async || seen.invoices().len() == 4).await;
    let (acme, globex) = ((1, Some("acme".to_owned())), (2, Some("globex".to_owned())));
    assert_eq!(seen.invoices(), [acme.clone(), globex.clone(), acme, globex]);
    assert_eq!(app.get_object::<Outbox>().unwrap().counts().republished, 2);
    app.shutdown().await.unwrap();
}
