//! `get_object`, named instances, fakes for tests, trait objects, generated graphs, graph export.

use std::sync::Arc;

use tegu_core::{
    App, AppBuilder, ContextRef, DiError, ProtoDef,
    registry::{Dependency, InjectKind},
};

trait Notifier: Send + Sync {
    fn channel(&self) -> String;
}

#[derive(Debug)]
struct Mail {
    from: String,
}
impl Notifier for Mail {
    fn channel(&self) -> String {
        format!("mail from {}", self.from)
    }
}

struct Sms;
impl Notifier for Sms {
    fn channel(&self) -> String {
        "sms".into()
    }
}

struct Alerts {
    primary: Arc<dyn Notifier>,
    all: Vec<Arc<dyn Notifier>>,
    audit: Option<Arc<Audit>>,
}

struct Audit;

fn builder() -> AppBuilder {
    App::builder()
        .without_inventory()
        .register(
            ProtoDef::singleton::<Mail>(|r| Ok(Mail { from: r.object_name().into() }))
                .name("ops")
                .provides::<Mail, dyn Notifier>(|m| m),
        )
        .register(
            ProtoDef::singleton::<Mail>(|r| Ok(Mail { from: r.object_name().into() }))
                .name("billing")
                .provides::<Mail, dyn Notifier>(|m| m),
        )
        .register(ProtoDef::singleton::<Sms>(|_| Ok(Sms)).provides::<Sms, dyn Notifier>(|s| s))
        .register(
            ProtoDef::singleton::<Alerts>(|r| Ok(Alerts { primary: r.arc(0)?, all: r.all(1)?, audit: r.optional(2)? }))
                .dep(Dependency::new::<dyn Notifier>(InjectKind::Arc, Some("ops")).field("primary"))
                .dep(Dependency::new::<dyn Notifier>(InjectKind::All, None).field("all"))
                .dep(Dependency::new::<Audit>(InjectKind::Optional, None).field("audit")),
        )
}

#[tokio::test]
async fn trait_objects_qualifiers_collections_and_optionals_are_injected() {
    let app = builder().build().await.unwrap();
    let alerts = app.get_object::<Alerts>().unwrap();
    assert_eq!(alerts.primary.channel(), "mail from ops");
    // Stable order: by object name, then type name.
    let channels: Vec<String> = alerts.all.iter().map(|n| n.channel()).collect();
    assert_eq!(channels, ["mail from billing", "mail from ops", "sms"]);
    assert!(alerts.audit.is_none());
}

#[tokio::test]
async fn optional_dependency_is_filled_when_present() {
    let app = builder().register(ProtoDef::singleton::<Audit>(|_| Ok(Audit))).build().await.unwrap();
    assert!(app.get_object::<Alerts>().unwrap().audit.is_some());
}

#[tokio::test]
async fn get_object_by_name_and_its_errors() {
    let app = builder().build().await.unwrap();
    assert_eq!(app.get_object_named::<Mail>("billing").unwrap().from, "billing");
    let err = app.get_object::<Mail>().unwrap_err();
    assert!(matches!(&err, DiError::Ambiguous { candidates, .. } if candidates.len() == 2), "{err:?}");
    let err = app.get_object_named::<Mail>("sales").unwrap_err();
    assert_eq!(err.to_string(), "no proto of type `app_objects::Mail` named \"sales\" is registered in this App");
    assert!(matches!(app.get_object::<Audit>(), Err(DiError::NotFound { .. })));
}

#[tokio::test]
async fn override_with_replaces_a_proto_for_everyone_who_injects_it() {
    let app = builder().override_named("ops", Mail { from: "fake".into() }).build().await.unwrap();
    assert_eq!(app.get_object::<Alerts>().unwrap().primary.channel(), "mail from fake");
    assert_eq!(app.get_object_named::<Mail>("billing").unwrap().from, "billing");
}

#[derive(Debug)]
struct Clock(u64);
struct Stamp {
    clock: ContextRef<Clock>,
}

#[tokio::test]
async fn override_of_a_context_proto_is_seen_in_every_scope() {
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::context::<Clock>(|_| Ok(Clock(1))))
        .register(
            ProtoDef::singleton::<Stamp>(|r| Ok(Stamp { clock: r.context_ref(0)? }))
                .dep(Dependency::new::<Clock>(InjectKind::ContextRef, None)),
        )
        .override_with(Clock(42))
        .build()
        .await
        .unwrap();
    let stamp = app.get_object::<Stamp>().unwrap();
    assert_eq!(app.run_in_context(async { stamp.clock.get().0 }).await, 42);
    assert_eq!(app.run_in_context(async { stamp.clock.with(|c| c.0) }).await, 42);
}

/// tegg's MultiInstanceProto: one Rust type, many named instances generated at run time.
struct Shard {
    index: usize,
}
struct Router {
    shards: Vec<Arc<Shard>>,
    last: Arc<Shard>,
}

#[tokio::test]
async fn ten_thousand_generated_instances_of_one_type() {
    let shards = (0..10_000).map(|i| {
        ProtoDef::singleton::<Shard>(|r| Ok(Shard { index: r.object_name()[5..].parse().unwrap() }))
            .name(format!("shard{i}"))
    });
    let app = App::builder()
        .without_inventory()
        .register_all(shards)
        .register(
            ProtoDef::singleton::<Router>(|r| Ok(Router { shards: r.all(0)?, last: r.arc(1)? }))
                .dep(Dependency::new::<Shard>(InjectKind::All, None))
                .dep(Dependency::named::<Shard>(InjectKind::Arc, format!("shard{}", 9_999))),
        )
        .build()
        .await
        .unwrap();
    let router = app.get_object::<Router>().unwrap();
    assert_eq!(router.shards.len(), 10_000);
    assert_eq!(router.last.index, 9_999);
    assert_eq!(app.get_object_named::<Shard>("shard1234").unwrap().index, 1234);
}

#[tokio::test]
async fn graph_exports_to_dot_and_mermaid() {
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::context::<Clock>(|_| Ok(Clock(1))))
        .register(
            ProtoDef::singleton::<Stamp>(|r| Ok(Stamp { clock: r.context_ref(0)? }))
                .dep(Dependency::new::<Clock>(InjectKind::ContextRef, None).field("clock")),
        )
        .build()
        .await
        .unwrap();
    let dot = app.to_dot();
    assert!(dot.starts_with("digraph di {"), "{dot}");
    assert!(dot.contains("n0 [label=\"Clock\\nclock\" shape=ellipse"), "{dot}");
    assert!(dot.contains("n1 [label=\"Stamp\\nstamp\" shape=box"), "{dot}");
    assert!(dot.contains("n1 -> n0 [label=\"clock\" style=dashed];"), "{dot}");
    let mermaid = app.to_mermaid();
    assert!(mermaid.starts_with("flowchart LR\n"), "{mermaid}");
    assert!(mermaid.contains("n0([\"Clock<br/>clock\"])"), "{mermaid}");
    assert!(mermaid.contains("n1 -.->|clock| n0"), "{mermaid}");
}

#[test]
fn public_types_and_futures_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: &T) {}
    send_sync::<App>();
    send_sync::<AppBuilder>();
    send_sync::<DiError>();
    send_sync::<ContextRef<Clock>>();
    send_sync::<ProtoDef>();
    let app_future = App::builder().build();
    send(&app_future);
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let app = rt.block_on(App::builder().without_inventory().build()).unwrap();
    send(&app.run_in_context(async {}));
    send(&app.shutdown());
}
