//! `build()` and `check()` refuse a handler that reads a lineage type for an event that a job
//! emits outside any request (directly, or through another event's handler), naming the
//! handler, the event, the emitter and the type.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::sync::Arc;

use tegu_core::lineage::Tenant;
use tegu_core::tenant::{TenantObjects, TenantRef};
use tegu_core::{App, ContextRef, DiError, error::BoxError, events::EventBus, handlers, singleton_proto};

pub struct Reminded;
pub struct Digested;

/// Emits `Reminded` every hour, outside any request.
#[singleton_proto]
pub struct Reminders {
    #[inject]
    events: Arc<EventBus>,
}

#[handlers]
impl Reminders {
    #[schedule(every = "1h", emits(Reminded))]
    async fn remind(&self) {
        self.events.emit(Reminded);
    }
}

/// Reads the tenant: fails for a `Reminded` from the job.
#[singleton_proto]
pub struct Mailer {
    #[inject]
    tenant: ContextRef<Tenant>,
}

#[handlers]
impl Mailer {
    #[event_handler]
    async fn on_reminded(&self, _: &Reminded) -> Result<(), DiError> {
        self.tenant.try_get().map(|_| ())
    }
}

/// Needs nothing of a request: passes.
#[singleton_proto]
pub struct Counter {}

#[handlers]
impl Counter {
    #[event_handler]
    async fn on_reminded(&self, _: &Reminded) {}
}

/// Turns a `Reminded` into a `Digested`: the job's lack of lineage passes on.
#[singleton_proto]
pub struct Digests {
    #[inject]
    events: Arc<EventBus>,
}

#[handlers]
impl Digests {
    #[event_handler(emits(Digested))]
    async fn on_reminded(&self, _: &Reminded) {
        self.events.emit(Digested);
    }
}

#[singleton_proto]
pub struct Quotas {}

impl TenantObjects for Quotas {
    type Object = u32;
    async fn create(&self, _: &Tenant) -> Result<u32, BoxError> {
        Ok(10)
    }
}

/// Reads the tenant through a service that holds a `TenantRef`.
#[singleton_proto]
pub struct Billing {
    #[inject]
    quotas: TenantRef<Quotas>,
}

#[singleton_proto]
pub struct DigestSender {
    #[inject]
    billing: Arc<Billing>,
}

#[handlers]
impl DigestSender {
    #[event_handler(after_commit)]
    async fn on_digested(&self, _: &Digested) {
        let _ = &self.billing.quotas;
    }
}

fn app() -> tegu_core::AppBuilder {
    App::builder().without_inventory().link::<EventBus>().link::<Reminders>().link::<Quotas>().lineage::<Tenant>()
}

#[tokio::test]
async fn a_handler_that_reads_the_tenant_of_an_event_a_job_emits_is_refused() {
    let error = app().link::<Mailer>().link::<Counter>().check().unwrap_err();
    let DiError::LineageUnmet { handler, event, emitter, wanted, .. } = &error else { panic!("{error}") };
    assert_eq!(
        (handler.as_str(), *event, emitter.as_str(), *wanted),
        ("Mailer::on_reminded", "Reminded", "schedule `Reminders::remind`", "Tenant")
    );
    assert_eq!(
        error.to_string(),
        "`Mailer::on_reminded` handles `Reminded`, which schedule `Reminders::remind` emits outside any request, \
         but it reads `Tenant` (through `lineage_emitters::Mailer (\"mailer\")`): there it would fail at run time; \
         emit the event in a scope that has one (in the job: `app.scope().tenant(key)?.run(..)` for each tenant, \
         then drop `emits(..)` from it), or take `Tenant` out of the handler's graph"
    );
    // `build()` refuses it the same way, before building anything.
    let built = app().link::<Mailer>().build().await.unwrap_err();
    assert!(matches!(built, DiError::LineageUnmet { .. }), "{built}");
}

#[tokio::test]
async fn through_another_events_handler_and_a_services_tenant_ref() {
    let error = app().link::<Digests>().link::<DigestSender>().link::<Billing>().check().unwrap_err();
    let DiError::LineageUnmet { handler, event, emitter, through, .. } = &error else { panic!("{error}") };
    assert_eq!((handler.as_str(), *event), ("DigestSender::on_digested", "Digested"));
    assert_eq!(emitter, "`Digests::on_reminded` (a handler of `Reminded`, which schedule `Reminders::remind` emits)");
    assert_eq!(through.len(), 3, "{through:?}");
    assert!(through[1].contains("Billing") && through[2].contains("TenantRef"), "{through:?}");
}

#[tokio::test]
async fn handlers_that_need_no_lineage_pass() {
    app().link::<Counter>().link::<Digests>().check().unwrap();
    let app = app().link::<Counter>().without_schedules().build().await.unwrap();
    app.shutdown().await.unwrap();
}
