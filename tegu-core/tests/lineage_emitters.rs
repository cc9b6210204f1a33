//! `build()` and `check()` refuse a handler that reads a lineage type for an event that a job
//! emits outside any request (directly, or through another event's handler), naming the
//! handler, the event, the emitter and the type.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::sync::Arc;

use tegu_core::lineage::Tenant;
use tegu_core::registry::{AnyArc, Dependency, InjectKind, Lifetime, ProtoDescriptor};
use tegu_core::tenant::{TenantObjects, TenantRef};
use tegu_core::{
    App, ContextProto, ContextRef, DiError, Proto, ProtoDef, error::BoxError, events::EventBus, handlers,
    singleton_proto,
};

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

/// What a request gives a scope only as a seed (as tegu-http's `RequestHead`): its factory
/// fails everywhere else.
pub struct Head(&'static str);

/// A lineage type with a factory: in a request, built from its `Head`.
#[derive(Debug)]
pub struct Origin(String);

impl tegu_core::lineage::Travels for Origin {
    const HEADER: &'static str = "x-origin";
    fn encode(&self) -> String {
        self.0.clone()
    }
    fn decode(value: &str) -> Result<Self, BoxError> {
        Ok(Origin(value.to_owned()))
    }
}

/// A lineage type with a factory that needs nothing: built in any scope, a job's too.
#[derive(Debug)]
pub struct Locale(String);

impl tegu_core::lineage::Travels for Locale {
    const HEADER: &'static str = "x-locale";
    fn encode(&self) -> String {
        self.0.clone()
    }
    fn decode(value: &str) -> Result<Self, BoxError> {
        Ok(Locale(value.to_owned()))
    }
}

fn head() -> ProtoDef {
    ProtoDef::context::<Head>(|_| {
        Err(DiError::construction::<Head>(
            "head",
            "there is no request: a `Head` is given where a request's scope opens",
        ))
    })
    .seed_only()
}

fn origin() -> ProtoDef {
    ProtoDef::lineage_from::<Origin>(|r| Ok(Origin(r.arc::<Head>(0)?.0.to_owned())))
        .dep(Dependency::new::<Head>(InjectKind::Arc, None))
}

fn locale() -> ProtoDef {
    ProtoDef::lineage_from::<Locale>(|_| Ok(Locale("en".to_owned())))
}

/// A context object made of a lineage type `T`, as a handler's graph would read it.
pub struct Label<T>(std::marker::PhantomData<T>);

fn label<T: Send + Sync + 'static>(r: &tegu_core::Resolver<'_>) -> Result<AnyArc, DiError> {
    r.arc::<T>(0)?;
    Ok(Arc::new(Label::<T>(std::marker::PhantomData)))
}

impl<T: Send + Sync + 'static> Label<T> {
    const DEPS: &'static [Dependency] = &[Dependency::new::<T>(InjectKind::Arc, None)];
}

impl<T: Send + Sync + 'static> Proto for Label<T> {
    const DESCRIPTOR: ProtoDescriptor =
        ProtoDescriptor::new::<Label<T>>("", Lifetime::Context, label::<T>).deps(Self::DEPS);
}
impl<T: Send + Sync + 'static> ContextProto for Label<T> {}

/// Reads the origin: fails for a `Reminded` from the job, whose scope has no `Head`.
#[singleton_proto]
pub struct OriginLog {
    #[inject]
    origin: ContextRef<Label<Origin>>,
}

#[handlers]
impl OriginLog {
    #[event_handler]
    async fn on_reminded(&self, _: &Reminded) -> Result<(), DiError> {
        self.origin.try_get().map(|_| ())
    }
}

/// Reads the locale: built by its factory in the job's handler's scope too.
#[singleton_proto]
pub struct LocaleLog {
    #[inject]
    locale: ContextRef<Label<Locale>>,
    read: std::sync::atomic::AtomicUsize,
}

#[handlers]
impl LocaleLog {
    #[event_handler]
    async fn on_reminded(&self, _: &Reminded) -> Result<(), DiError> {
        self.locale.try_get()?;
        self.read.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

#[tokio::test]
async fn a_lineage_type_whose_factory_reads_what_only_a_request_gives_is_refused() {
    let builder = || app().register(head()).register(origin()).link::<Label<Origin>>().link::<OriginLog>();
    let error = builder().check().unwrap_err();
    let DiError::LineageUnmet { handler, wanted, through, .. } = &error else { panic!("{error}") };
    assert_eq!((handler.as_str(), *wanted), ("OriginLog::on_reminded", "Head"));
    assert_eq!(through.len(), 3, "{through:?}");
    assert!(through[1].contains("Label") && through[2].contains("Origin"), "{through:?}");
    assert!(matches!(builder().build().await, Err(DiError::LineageUnmet { .. })));
    // In a request's scope, seeded with its head, the factory builds it.
    let app = app().register(head()).register(origin()).without_schedules().build().await.unwrap();
    let slot = app.context_slot::<Head>().unwrap();
    let seen =
        app.scope().seed(slot, Arc::new(Head("web"))).run(async { app.get_object::<Origin>().map(|o| o.0.clone()) });
    assert_eq!(seen.await.unwrap(), "web");
    app.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_lineage_type_whose_factory_builds_in_any_scope_passes() {
    let app = app().register(locale()).link::<Label<Locale>>().link::<LocaleLog>().build().await.unwrap();
    // The job's handler builds it: what the check let through works.
    app.run_schedule::<Reminders>("remind").await.unwrap();
    app.shutdown().await.unwrap();
    assert_eq!(app.get_object::<LocaleLog>().unwrap().read.load(std::sync::atomic::Ordering::Relaxed), 1);
}
