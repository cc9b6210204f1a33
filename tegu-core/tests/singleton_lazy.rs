//! Lazy singletons: validated at build, built on first use, once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tegu_core::{
    App, DiError, ProtoDef, context_proto,
    registry::{Dependency, InjectKind},
    singleton_proto,
};

static GEO_DESTROYED: AtomicUsize = AtomicUsize::new(0);

/// Expensive to build; most runs never need it.
#[singleton_proto(lazy, destroy = close)]
struct Geo;

impl Geo {
    async fn close(&self) {
        GEO_DESTROYED.fetch_add(1, Ordering::SeqCst);
    }
}

/// A context proto that takes it by value: built when a scope builds this.
#[context_proto]
struct Lookup {
    #[inject]
    geo: Arc<Geo>,
}

/// `Geo`, lazy, counting its constructions in `built` (each test its own counter: they run
/// in parallel).
fn counted(built: &'static AtomicUsize) -> ProtoDef {
    ProtoDef::singleton::<Geo>(move |_| {
        built.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(20)); // let racing callers pile up
        Ok(Geo)
    })
    .lazy()
    .on_destroy(|g: Arc<Geo>| async move {
        g.close().await;
        Ok(())
    })
}

struct Eager {
    _geo: Arc<Geo>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lazy_singleton_is_built_once_on_first_use_and_destroyed_if_built() {
    static GEO_BUILT: AtomicUsize = AtomicUsize::new(0);
    let before = (GEO_BUILT.load(Ordering::SeqCst), GEO_DESTROYED.load(Ordering::SeqCst));
    let app = App::builder().without_inventory().register(counted(&GEO_BUILT)).build().await.unwrap();
    assert_eq!(GEO_BUILT.load(Ordering::SeqCst), before.0, "not built by build()");
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move { app.get_object::<Geo>().unwrap() })
        })
        .collect();
    let mut all = Vec::new();
    for r in racers {
        all.push(r.await.unwrap());
    }
    assert!(all.windows(2).all(|w| Arc::ptr_eq(&w[0], &w[1])), "one object");
    assert_eq!(GEO_BUILT.load(Ordering::SeqCst), before.0 + 1, "built once under a race");
    app.shutdown().await.unwrap();
    assert_eq!(GEO_DESTROYED.load(Ordering::SeqCst), before.1 + 1, "destroyed, being built");

    // Never used: never built, never destroyed.
    let app = App::builder().without_inventory().register(counted(&GEO_BUILT)).build().await.unwrap();
    app.shutdown().await.unwrap();
    assert_eq!(GEO_BUILT.load(Ordering::SeqCst), before.0 + 1);
    assert_eq!(GEO_DESTROYED.load(Ordering::SeqCst), before.1 + 1);
}

#[tokio::test]
async fn an_eager_dependent_builds_it_at_start_and_a_scope_on_first_use() {
    let app = App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<Geo>(|_| Ok(Geo)).lazy())
        .register(
            ProtoDef::singleton::<Eager>(|r| Ok(Eager { _geo: r.arc(0)? }))
                .dep(Dependency::new::<Geo>(InjectKind::Arc, None)),
        )
        .build()
        .await
        .unwrap();
    let eager = app.get_object::<Eager>().unwrap();
    assert!(Arc::ptr_eq(&eager._geo, &app.get_object::<Geo>().unwrap()));

    // Through the macros: `Lookup` (context) takes `Geo` (lazy) by value.
    let app = App::builder().without_inventory().link::<Geo>().link::<Lookup>().build().await.unwrap();
    let geo = app.run_in_context(async { app.get_object::<Lookup>().unwrap().geo.clone() }).await;
    assert!(Arc::ptr_eq(&geo, &app.get_object::<Geo>().unwrap()));
}

#[tokio::test]
async fn what_cannot_be_lazy_is_refused() {
    let e = App::builder()
        .without_inventory()
        .register(ProtoDef::singleton::<Geo>(|_| Ok(Geo)).lazy().on_init(|_: Arc<Geo>| async { Ok(()) }))
        .build()
        .await
        .err()
        .unwrap();
    assert!(
        e.to_string().starts_with(
            "`singleton_lazy::Geo (\"geo\")` is declared lazy, but it is built on first use by a synchronous"
        ),
        "{e}"
    );
    let e = App::builder()
        .without_inventory()
        .register(ProtoDef::context::<Geo>(|_| Ok(Geo)).lazy())
        .build()
        .await
        .err()
        .unwrap();
    assert!(matches!(e, DiError::Lazy { reason, .. } if reason.starts_with("only a singleton is lazy")), "{e}");
}

struct Looped {
    _tickets: tegu_core::Provider<Ticket>,
}
struct Ticket {
    _looped: Arc<Looped>,
}
struct Holder {
    _lookup: tegu_core::ContextRef<Lookup>,
}

#[tokio::test]
async fn a_lazy_singleton_asking_for_itself_fails_instead_of_hanging() {
    // Looped's factory builds a Ticket, which takes Looped: a cycle only the run time sees.
    let app = App::builder()
        .without_inventory()
        .register(
            ProtoDef::singleton::<Looped>(|r| {
                let tickets: tegu_core::Provider<Ticket> = r.provider(0)?;
                tickets.get()?;
                Ok(Looped { _tickets: tickets })
            })
            .lazy()
            .dep(Dependency::new::<Ticket>(InjectKind::Provider, None)),
        )
        .register(
            ProtoDef::transient::<Ticket>(|r| Ok(Ticket { _looped: r.arc(0)? }))
                .dep(Dependency::new::<Looped>(InjectKind::Arc, None)),
        )
        .build()
        .await
        .unwrap();
    let e = app.get_object::<Looped>().err().unwrap();
    assert!(matches!(e, DiError::EagerCycle { .. }), "{e}");
}

#[tokio::test]
async fn a_reference_does_not_make_a_lazy_singleton_eager_and_shutdown_ends_its_building() {
    static GEO_BUILT: AtomicUsize = AtomicUsize::new(0);
    let before = GEO_BUILT.load(Ordering::SeqCst);
    // Holder (eager) holds a ContextRef to Lookup, which takes Geo (lazy) by value: Geo waits
    // for a scope to build a Lookup.
    let app = App::builder()
        .without_inventory()
        .register(counted(&GEO_BUILT))
        .register(
            ProtoDef::context::<Lookup>(|r| Ok(Lookup { geo: r.arc(0)? }))
                .dep(Dependency::new::<Geo>(InjectKind::Arc, None)),
        )
        .register(ProtoDef::singleton::<Holder>(|r| Ok(Holder { _lookup: r.context_ref(0)? })).dep(Dependency::new::<
            Lookup,
        >(
            InjectKind::ContextRef,
            None,
        )))
        .build()
        .await
        .unwrap();
    assert_eq!(GEO_BUILT.load(Ordering::SeqCst), before, "not built at start");
    app.run_in_context(async { app.get_object::<Lookup>().unwrap().geo.clone() }).await;
    assert_eq!(GEO_BUILT.load(Ordering::SeqCst), before + 1, "built by the scope");

    let app = App::builder().without_inventory().register(counted(&GEO_BUILT)).build().await.unwrap();
    app.shutdown().await.unwrap();
    let e = app.get_object::<Geo>().err().unwrap();
    assert_eq!(e.to_string(), "the App has shut down, so `singleton_lazy::Geo` can no longer be built");
}
