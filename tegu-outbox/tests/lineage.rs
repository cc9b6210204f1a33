//! The emitting request's lineage travels with an external event: the outbox stores its headers
//! with the row, the relay publishes them, and each instance's handlers run in scopes seeded
//! with them, so a handler's `ContextRef<Tenant>` reads the emitting request's tenant. A forged
//! value is refused (the handler sees no tenant); a relay that retries and an event published
//! again after the broker lost it keep the headers. With the in-memory broker and store of
//! `tegu_outbox::testing`.

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tegu_core::lineage::Tenant;
use tegu_core::{App, ContextRef, DiError, handlers, singleton_proto};
use tegu_outbox::testing::{MemoryBroker, MemoryStore};
use tegu_outbox::{Broker, Outbox, Outgoing};
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

/// How long a wait of this file's lasts before it fails.
const WITHIN: Duration = Duration::from_secs(10);

/// The headers of a request of tenant `key`.
fn tenant(key: &str) -> Vec<(String, String)> {
    vec![("tegu-tenant".to_owned(), key.to_owned())]
}

/// An App with `Tenant` as a lineage type, the outbox on `store` and `broker`, and
/// `[outbox]` `settings`; subscribed.
async fn app(store: &MemoryStore, broker: &MemoryBroker, settings: &[(&str, i64)]) -> App {
    let mut builder = App::builder()
        .lineage::<Tenant>()
        .register(store.proto())
        .register(broker.proto())
        .register(Outbox::proto())
        .config_value("outbox.poll_ms", 10);
    for (key, value) in settings {
        builder = builder.config_value(format!("outbox.{key}"), *value);
    }
    let app = builder.build().await.unwrap();
    // A new subscription starts with the events published from then on.
    until("the instance to subscribe", WITHIN, async || broker.subscriptions() > 0).await;
    app
}

/// Emits invoice `invoice` in a scope of tenant `key` (none: a scope without a tenant).
async fn emit(app: &App, invoice: u32, key: Option<&str>) {
    let events = app.events();
    let scope = match key {
        Some(key) => app.scope().tenant(key).unwrap(),
        None => app.scope(),
    };
    scope.try_run(async { events.emit(Invoiced { invoice }) }).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handler_runs_with_the_tenant_of_the_request_that_emitted_the_event() {
    let (store, broker) = (MemoryStore::new(), MemoryBroker::new());
    let app = app(&store, &broker, &[]).await;
    let seen = app.get_object::<Seen>().unwrap();
    emit(&app, 1, Some("acme")).await;
    emit(&app, 2, None).await;
    until("both invoices to be handled", WITHIN, async || seen.invoices().len() == 2).await;
    assert_eq!(seen.invoices(), [(1, Some("acme".to_owned())), (2, None)]);

    // Stored with the row, published with the event.
    let rows: Vec<_> = store.rows().into_iter().map(|row| row.event.headers).collect();
    assert_eq!(rows, [tenant("acme"), Vec::new()]);
    let published: Vec<_> = broker.published().into_iter().map(|event| event.headers).collect();
    assert_eq!(published, [tenant("acme"), Vec::new()]);
    app.shutdown().await.unwrap();
}

/// The headers come from the broker, where anyone may publish: a tenant key with a space (a
/// forged `user=admin` riding along) is no key, and the handler's scope gets no tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_tenant_header_is_refused_and_the_handler_sees_no_tenant() {
    let (store, broker) = (MemoryStore::new(), MemoryBroker::new());
    let app = app(&store, &broker, &[]).await;
    let seen = app.get_object::<Seen>().unwrap();
    let forged = tenant("acme user=admin");
    let event = |id, payload| Outgoing { id, name: "billing.invoiced", payload, headers: &forged };
    broker.publish(event("forged-1", br#"{"invoice":7}"#)).await.unwrap();
    // A header of no lineage type of the App is left out too; the tenant beside it is carried.
    let mixed = [("x-unknown".to_owned(), "ignored".to_owned()), ("Tegu-Tenant".to_owned(), "globex".to_owned())];
    broker
        .publish(Outgoing { id: "mixed-2", name: "billing.invoiced", payload: br#"{"invoice":8}"#, headers: &mixed })
        .await
        .unwrap();
    until("both to be handled", WITHIN, async || seen.invoices().len() == 2).await;
    assert_eq!(seen.invoices(), [(7, None), (8, Some("globex".to_owned()))]);
    app.shutdown().await.unwrap();
}

/// The broker fails twice: the relay publishes the row again from the outbox, headers and all.
/// Then the broker loses its store: the outbox publishes the events again (`keep_ms`), with
/// their headers. With the inbox's records purged (as after `outbox.inbox_keep_ms`) and this
/// instance remembering one id only (`remember = 1`), it hands both to its handler once more,
/// and the handler's scope has each one's tenant again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_and_a_republished_event_keep_their_headers() {
    let (store, broker) = (MemoryStore::new(), MemoryBroker::new());
    let app = app(&store, &broker, &[("remember", 1)]).await;
    let seen = app.get_object::<Seen>().unwrap();
    broker.fail_next(2);
    emit(&app, 1, Some("acme")).await;
    until("invoice 1 to be handled", WITHIN, async || seen.invoices().len() == 1).await;
    assert_eq!(broker.attempts(), 3, "two failures, then stored");
    emit(&app, 2, Some("globex")).await;
    until("invoice 2 to be handled", WITHIN, async || seen.invoices().len() == 2).await;
    until("both to be recorded", WITHIN, async || store.inbox().len() == 2).await;
    assert_eq!(tegu_outbox::OutboxStore::purge_handled(&store, i64::MAX).await.unwrap(), 2);

    broker.forget();
    until("both to be published again", WITHIN, async || broker.published().len() == 2).await;
    let published: Vec<_> = broker.published().into_iter().map(|event| event.headers).collect();
    assert_eq!(published, [tenant("acme"), tenant("globex")]);
    until("both to be handled again", WITHIN, async || seen.invoices().len() == 4).await;
    let (acme, globex) = ((1, Some("acme".to_owned())), (2, Some("globex".to_owned())));
    assert_eq!(seen.invoices(), [acme.clone(), globex.clone(), acme, globex]);
    app.shutdown().await.unwrap();
}
