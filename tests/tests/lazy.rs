//! Lazy singletons: validated at build, built on first use, once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use di_core::{App, Dependency, DiError, InjectKind, ProtoDef, context_proto, singleton_proto};

static GEO_BUILT: AtomicUsize = AtomicUsize::new(0);
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

fn counted() -> ProtoDef {
    ProtoDef::singleton::<Geo>(|_| {
        GEO_BUILT.fetch_add(1, Ordering::SeqCst);
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
    let before = (GEO_BUILT.load(Ordering::SeqCst), GEO_DESTROYED.load(Ordering::SeqCst));
    let app = App::builder().without_inventory().register(counted()).build().await.unwrap();
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
    let app = App::builder().without_inventory().register(counted()).build().await.unwrap();
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
        e.to_string()
            .starts_with("`lazy::Geo (\"geo\")` is declared lazy, but it is built on first use by a synchronous"),
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
