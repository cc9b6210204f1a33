//! Protos described statically and submitted through `inventory`, as the macros do, found by
//! `App::builder()` with no registration code.

use std::sync::Arc;

use tegu_core::registry::{ProtoDescriptor, Provide, UnitFuture};
use tegu_core::{
    App, ContextRef, DiError, Resolver,
    registry::{Dependency, InjectKind, Lifetime},
};

trait Greet: Send + Sync {
    fn greet(&self) -> String;
}

struct English;
impl Greet for English {
    fn greet(&self) -> String {
        "hello".into()
    }
}

struct Tracer {
    id: &'static str,
}

struct Greeter {
    greetings: Vec<Arc<dyn Greet>>,
    tracer: ContextRef<Tracer>,
}

fn english(_: &Resolver<'_>) -> Result<tegu_core::registry::AnyArc, DiError> {
    Ok(Arc::new(English))
}
fn english_as_greet(obj: tegu_core::registry::AnyArc, out: &mut dyn std::any::Any) {
    let english: Arc<dyn Greet> = obj.downcast::<English>().unwrap();
    tegu_core::registry::put(out, english);
}
fn tracer(_: &Resolver<'_>) -> Result<tegu_core::registry::AnyArc, DiError> {
    Ok(Arc::new(Tracer { id: "t-1" }))
}
fn greeter(r: &Resolver<'_>) -> Result<tegu_core::registry::AnyArc, DiError> {
    Ok(Arc::new(Greeter { greetings: r.all(0)?, tracer: r.context_ref(1)? }))
}
fn greeter_init(_: tegu_core::registry::AnyArc) -> UnitFuture {
    Box::pin(async { Ok(()) })
}

const GREETER_DEPS: &[Dependency] = &[
    Dependency::new::<dyn Greet>(InjectKind::All, None).field("greetings"),
    Dependency::new::<Tracer>(InjectKind::ContextRef, None).field("tracer"),
];
const ENGLISH_PROVIDES: &[Provide] = &[Provide::new::<dyn Greet>(english_as_greet)];

inventory::submit! {
    ProtoDescriptor::new::<English>("english", Lifetime::Singleton, english)
        .provides(ENGLISH_PROVIDES)
        .access(tegu_core::registry::Access::Public, module_path!())
}
inventory::submit! {
    ProtoDescriptor::new::<Tracer>("tracer", Lifetime::Context, tracer)
}
inventory::submit! {
    ProtoDescriptor::new::<Greeter>("greeter", Lifetime::Singleton, greeter)
        .deps(GREETER_DEPS)
        .init(greeter_init)
}

#[tokio::test]
async fn builder_finds_protos_submitted_through_inventory() {
    let app = App::builder().build().await.unwrap();
    // And tegu-core's own: `EventBus`, and the lineage types `Tenant`, `TraceContext` and
    // `TraceState`.
    assert_eq!(app.proto_count(), 7);
    let greeter = app.get_object::<Greeter>().unwrap();
    assert_eq!(greeter.greetings.len(), 1);
    assert_eq!(greeter.greetings[0].greet(), "hello");
    let id = app.run_in_context(async { greeter.tracer.get().id }).await;
    assert_eq!(id, "t-1");
}

#[tokio::test]
async fn without_inventory_ignores_them() {
    let app = App::builder().without_inventory().build().await.unwrap();
    assert_eq!(app.proto_count(), 0);
    assert!(matches!(app.get_object::<Greeter>(), Err(DiError::NotFound { .. })));
}
